"""Every notebook in notebooks/ runs, cell by cell, in a real Jupyter kernel (nbclient).

Each notebook runs in its own temporary directory (its working directory, where it writes
its data and scripts) with ``LAUNCHBAY_HOME`` there too, and against the session's moto
server (``AWS_ENDPOINT_URL``, reset first) for the cells that talk to AWS. The checks read
the saved cell outputs, as a reader of the notebook would:

* no cell raised (nbclient stops at the first error; no ``error`` output anywhere), and no
  saved output holds a carriage return (progress redrawn in place belongs in a display);
* every job's ``model.tar.gz`` the notebook printed exists, and each run it reports
  (``<label>: loss A -> B``) ended with a lower loss than it started with; the runs
  listed in ``EXPECTED`` are all there;
* the dry run (``create_training_job_request``) comes before the first ``fit()``;
* the debugger notebook's trials list every worker for ``include_workers="all"`` and one
  for ``"one"``, and every rank of both jobs logged that smdebug built its hook from its own
  host's ``debughookconfig.json``; the Horovod notebook's VPC cell shows the subnets and security group
  ``launchbay.vpc.provision`` made;
* afterwards no process carrying this test's ``LAUNCHBAY_HOME`` in its environment (a rank,
  ``mpirun``, a host supervisor) and no container or network of its jobs is left.

Notebooks with local Docker mode steps carry the ``docker`` marker and need the training
images (built here when missing, reused otherwise; see docs/images.md).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
CELL_TIMEOUT = 900

# What each notebook must report. "runs": the labels of its "<label>: loss A -> B" lines.
EXPECTED: dict[str, dict[str, Any]] = {
    "smddp_pytorch_tensorflow.ipynb": {
        "runs": {"pytorch local_process", "tensorflow local_process"},
    },
    "pytorch_ddp_launcher.ipynb": {
        "runs": {"local_process", "local"},
        "images": ["pytorch"],
    },
    "horovod_tensorflow.ipynb": {
        "runs": {"local_process", "local"},
        "images": ["tensorflow"],
        "vpc": True,
    },
    "debugger_distributed.ipynb": {
        "runs": {"include_workers=all", "include_workers=one"},
        "workers": {"all": 4, "one": 1},
        # smdebug logs, in every rank of both jobs, the hook config it was built from
        "hook_reads": 8,
    },
}

LOSS_LINE = re.compile(r"^(?P<label>[^:\n]+): loss (?P<first>\d+\.\d+) -> (?P<last>\d+\.\d+)", re.M)
MODEL_URI = re.compile(r"file://\S+/model\.tar\.gz")
WORKERS_LINE = re.compile(r"^include_workers=(?P<mode>\w+): (?P<count>\d+) worker", re.M)
HOOK_READ = re.compile(
    r"(?P<host>algo-\d+)\S* \| \[rank (?P<rank>\d+)\] .*Creating hook from json_config at "
    r"\S+/(?P<config_host>algo-\d+)/input/config/debughookconfig\.json"
)
TORCH_VERSION = "2.13.0"
TF_VERSION = "2.21.0"


def _notebooks() -> list[Any]:
    params = []
    for path in sorted(NOTEBOOK_DIR.glob("*.ipynb")):
        images = EXPECTED.get(path.name, {}).get("images")
        marks = [pytest.mark.docker] if images else []
        params.append(pytest.param(path.name, marks=marks, id=path.stem))
    return params


def test_every_notebook_has_expectations() -> None:
    names = {p.name for p in NOTEBOOK_DIR.glob("*.ipynb")}
    assert names == set(EXPECTED), f"notebooks/ holds {sorted(names)}; EXPECTED {sorted(EXPECTED)}"


# -- what a notebook needs ----------------------------------------------------------------


def _images(names: list[str]) -> None:
    """Build (or reuse) the local training images the notebook's Docker steps run.

    With the wheelhouse .ci/run and tests/docker use (torch's wheel and Horovod's cached
    one), so the image's context hash matches theirs and the image is reused.
    """
    from image_wheels import image_wheelhouse
    from launchbay import images

    client = images.docker_client(feature="The notebook tests")
    try:
        base = os.environ.get("LAUNCHBAY_BASE_IMAGE") or images.build_base_image(
            client=client, stream=sys.stderr
        )
        wheelhouse = image_wheelhouse()
        versions = {"pytorch": TORCH_VERSION, "tensorflow": TF_VERSION}
        for name in names:
            images.build_image(
                name,
                versions[name],
                "cpu",
                base_image=base,
                wheelhouse=wheelhouse,
                reuse=True,
                client=client,
                stream=sys.stderr,
            )
    finally:
        client.close()


def _outputs(cell: Any) -> str:
    text = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            text.append(output["text"])
        elif output["output_type"] in ("execute_result", "display_data"):
            text.append(output.get("data", {}).get("text/plain", ""))
    return "".join(text)


def _leftover_processes(home: str) -> list[str]:
    """Processes (other than this one) whose environment has LAUNCHBAY_HOME=home."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get("LAUNCHBAY_HOME") == home:
                found.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])[:200]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _leftover_docker(home: str) -> list[str]:
    import docker

    client = docker.from_env()
    try:
        left = [
            f"container {c.name}"
            for c in client.containers.list(all=True)
            if any(str(v).startswith(home) for v in (c.labels or {}).values())
        ]
        jobs = {p.name for p in Path(home, "jobs").glob("*")}
        left += [
            f"network {n.name}"
            for n in client.networks.list()
            if n.name.startswith("launchbay-") and n.name[len("launchbay-") :] in jobs
        ]
        return left
    finally:
        client.close()


# -- the test ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _notebooks())
def test_notebook_runs(
    name: str, aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbclient
    import nbformat

    expected = EXPECTED[name]
    if expected.get("images"):
        _images(expected["images"])
    workdir = tmp_path / "work"
    workdir.mkdir()
    home = str(tmp_path / "launchbay-home")
    monkeypatch.setenv("LAUNCHBAY_HOME", home)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    # The kernel ("python3": ``python -m ipykernel_launcher``) is this Python.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # A role ARN for the SageMaker (ml.*) dry runs; local jobs would run without one.
    monkeypatch.setenv("LAUNCHBAY_EXECUTION_ROLE", "arn:aws:iam::123456789012:role/SageMakerRole")

    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    executed = tmp_path / name
    try:
        client.execute()
    finally:
        nbformat.write(nb, executed)  # kept for reading when a check fails
        print(f"executed notebook: {executed}")

    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code_cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{name}: a cell raised: {errors[0]['ename']}: {errors[0]['evalue']}"

    # The dry run is shown before the first job starts.
    sources = [c.source for c in code_cells]
    first_fit = next(i for i, s in enumerate(sources) if ".fit(" in s)
    assert any("create_training_job_request(" in s for s in sources[:first_fit]), name

    text = "\n".join(_outputs(c) for c in code_cells)
    assert "\r" not in text, f"{name}: a saved output holds a carriage return (a redrawn line)"
    runs = {
        m["label"].strip(): (float(m["first"]), float(m["last"])) for m in LOSS_LINE.finditer(text)
    }
    assert set(runs) >= expected["runs"], f"{name}: runs reported {sorted(runs)}"
    for label, (first, last) in runs.items():
        assert last < first, f"{name}: {label}: the loss went from {first} to {last}"
    models = set(MODEL_URI.findall(text))
    assert len(models) >= len(expected["runs"]), f"{name}: model.tar.gz printed: {models}"
    for uri in models:
        assert Path(uri.removeprefix("file://")).is_file(), uri
        assert uri.removeprefix("file://").startswith(home), uri

    if "workers" in expected:
        workers = {m["mode"]: int(m["count"]) for m in WORKERS_LINE.finditer(text)}
        assert workers == expected["workers"], f"{name}: trial workers {workers}"
    if "hook_reads" in expected:
        reads = [m.groupdict() for m in HOOK_READ.finditer(text)]
        assert len(reads) == expected["hook_reads"], f"{name}: hook configs read: {reads}"
        assert all(r["host"] == r["config_host"] for r in reads), reads  # each host's own

    if expected.get("vpc"):
        shown = [json.loads(m) for m in re.findall(r'^\{\s*"Subnets".*?^\}', text, re.M | re.S)]
        assert shown, f"{name}: no VpcConfig printed"
        vpc = shown[-1]
        assert vpc["Subnets"] and all(s.startswith("subnet-") for s in vpc["Subnets"]), vpc
        assert vpc["SecurityGroupIds"] and vpc["SecurityGroupIds"][0].startswith("sg-"), vpc

    # Nothing of the jobs is left running.
    deadline = time.monotonic() + 15
    while (left := _leftover_processes(home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"{name}: processes left after the notebook:\n" + "\n".join(left)
    if expected.get("images"):
        assert not _leftover_docker(home), f"{name}: Docker leftovers: {_leftover_docker(home)}"
