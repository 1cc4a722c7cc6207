"""Progress bars, logs and live status in a real Jupyter kernel (nbclient + ipykernel).

A carriage return redraws a line on a terminal, but a notebook keeps every
``\\r`` in the saved cell output. The notebook below uploads to S3 (moto) with a
progress bar, runs a ``local_process`` job whose script redraws a line with
``\\r``, and shows a live status; no saved output may hold a ``\\r``.
"""

from __future__ import annotations

import textwrap

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPT = """\
import sys
for step in range(1, 4):
    sys.stdout.write(f"\\rstep {step}/3")
    sys.stdout.flush()
print()
print("done")
"""


def _cells(tmp_path) -> list[str]:
    return [
        f"""
        import os, pathlib
        os.environ["LAUNCHBAY_HOME"] = {str(tmp_path / "home")!r}
        work = pathlib.Path({str(tmp_path)!r})
        (work / "data").mkdir()
        for i in range(20):
            (work / "data" / f"part-{{i}}.bin").write_bytes(os.urandom(50_000))
        (work / "src").mkdir()
        (work / "src" / "train.py").write_text({SCRIPT!r})
        """,
        """
        import launchbay
        uri = launchbay.Session().upload_data(str(work / "data"), key_prefix="notebook")
        print(uri)
        """,
        """
        from launchbay.pytorch import PyTorch
        est = PyTorch(entry_point="train.py", source_dir=str(work / "src"),
                      role=launchbay.get_execution_role(), instance_type="local_process",
                      instance_count=1, framework_version="2.8.0", py_version="py312",
                      output_path="file://" + str(work / "out"))
        est.fit()
        """,
        """
        from launchbay._logs import LogPrinter
        printer = LogPrinter(["algo-1"])
        for second in range(3):
            printer.status(f"Training job x is InProgress ({second} s)")
            printer.print([("algo-1", f"line {second}")])
        printer.close()
        """,
    ]


def _texts(output) -> list[str]:
    if output.output_type == "stream":
        return [output.text]
    if output.output_type in ("display_data", "execute_result"):
        return [str(v) for v in output.get("data", {}).values()]
    return [str(output)]


def test_saved_outputs_hold_no_carriage_returns(aws, tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c).strip()) for c in _cells(tmp_path)]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={}).execute()

    outputs = [(i, o) for i, cell in enumerate(nb.cells) for o in cell.outputs]
    assert not [o for _, o in outputs if o.output_type == "error"]
    with_cr = [(i, t) for i, o in outputs for t in _texts(o) if "\r" in t]
    assert not with_cr, with_cr

    upload = "".join(t for i, o in outputs if i == 1 for t in _texts(o))
    assert "s3://" in upload and "notebook" in upload
    assert "100.0%" in upload and "20/20 files" in upload  # the bar's last state only
    assert upload.count("%") == 1

    logs = "".join(t for i, o in outputs if i == 2 for t in _texts(o))
    assert "step 3/3" in logs and "step 1/3" not in logs  # what a terminal would show
    assert "done" in logs

    status = [t for i, o in outputs if i == 3 for t in _texts(o)]
    joined = "".join(status)
    assert joined.count("InProgress") == 1 and "(2 s)" in joined  # updated in place
    assert all(f"line {n}" in joined for n in range(3))
