"""Progress bars, logs and live status in a real Jupyter kernel (nbclient + ipykernel).

Every kind of launchbay.display is drawn here once: transfers, job logs and status,
stack events, image builds and pushes.

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


STUCK_TEMPLATE = """
Resources:
  Vpc: {Type: AWS::EC2::VPC, Properties: {CidrBlock: 10.7.0.0/16}}
  A: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.7.0.0/24}}
  B: {Type: AWS::EC2::Subnet, Properties: {VpcId: !Ref Vpc, CidrBlock: 10.7.0.0/24}}
"""

BUILD_STREAM = [
    "Step 1/2 : FROM base\n",
    " ---> 1234\n",
    "Step 2/2 : RUN pip install torch\n",
    "Collecting torch\n",
    "Successfully built 5678\n",
]

PUSH_STREAM = [
    {"id": "aaa", "status": "Pushing", "progressDetail": {"current": 2**20, "total": 2**21}},
    {"id": "aaa", "status": "Pushed"},
]


def _display_cells(tmp_path) -> list[str]:
    return [
        f"""
        import os, pathlib, sys, time
        os.environ["LAUNCHBAY_HOME"] = {str(tmp_path / "home")!r}
        from launchbay import display
        print(display.environment(sys.stdout), display.environment(sys.stderr))
        """,
        """
        bar = display.Progress("copy", total_bytes=1000, total_files=10,
                               enabled=display.progress_enabled(None))
        with bar:
            for _ in range(10):
                bar.update(100, 1)
                time.sleep(0.05)
        """,
        f"""
        from launchbay import ProvisioningError, vpc
        template = pathlib.Path({str(tmp_path / "stuck.yaml")!r})
        template.write_text({STUCK_TEMPLATE!r})
        try:
            vpc.provision("nbstuck", "us-west-2", template=template, progress=False)
        except ProvisioningError:
            pass
        try:
            vpc.provision("nbstuck", "us-west-2", template=template, timeout=1, poll_interval=0.2)
        except ProvisioningError as exc:
            print("timed out:", exc.status)
        """,
        f"""
        from launchbay.images import _live
        with _live.BuildDisplay(_live.display_for(None, sys.stderr), "t") as build:
            for chunk in {BUILD_STREAM!r}:
                build.feed(chunk)
                time.sleep(0.15)
        push = _live._PushDisplay(_live.display_for(None, sys.stderr), "localhost:5000/x:v1")
        for chunk in {PUSH_STREAM!r}:
            push.feed(chunk)
            time.sleep(0.15)
        push.finish()
        """,
    ]


# moto reports EC2 errors raised inside CloudFormation with a shape botocore lacks.
@pytest.mark.filterwarnings("ignore:Exception\\(.*does not match an error shape")
def test_every_display_kind_in_a_kernel_is_a_display_updated_in_place(aws, tmp_path):
    """Transfers, stack events, builds and pushes (job logs: the test above) in a real kernel:
    live lines are displays updated in place, whole lines are stream output, and no saved
    output holds a carriage return or a cursor movement."""
    nb = nbformat.v4.new_notebook()
    cells = _display_cells(tmp_path)
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c).strip()) for c in cells]
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={}).execute()

    outputs = [(i, o) for i, cell in enumerate(nb.cells) for o in cell.outputs]
    assert not [o for _, o in outputs if o.output_type == "error"]
    texts = [(i, o.output_type, t) for i, o in outputs for t in _texts(o)]
    controls = [t for _, _, t in texts if "\r" in t or "\x1b[2K" in t or "\x1b[?25" in t]
    assert not controls, controls

    def shown(cell: int, kind: str) -> list[str]:
        return [t for i, o, t in texts if i == cell and (o == "stream") == (kind == "stream")]

    assert shown(0, "stream") == ["notebook notebook\n"]
    (bar,) = shown(1, "display")  # one display, in its last state
    assert bar.startswith("copy [########################] 100.0%") and "10/10 files" in bar
    events = "".join(shown(2, "stream"))
    assert "nbstuck" in events and "AWS::CloudFormation::Stack" in events
    assert "timed out: CREATE_IN_PROGRESS" in events
    assert shown(2, "display") == [""]  # the status line, erased when the wait ended
    lines = "".join(shown(3, "stream"))
    assert "[1/2] FROM base  " in lines and "[2/2] RUN pip install torch  " in lines
    assert shown(3, "display") == ["", ""]  # the running step and the push, erased
