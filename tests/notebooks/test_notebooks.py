"""Every notebook in notebooks/ runs, cell by cell, in a real Jupyter kernel (nbclient).

Against the session's moto server (``AWS_ENDPOINT_URL``, reset first) for the cells that
talk to AWS, with ``LAUNCHBAY_HOME`` in the test's temporary directory, in place
(``test_notebooks_run_in_place_one_after_another``): all of them in notebooks/ itself, as a
user opens them, one after another in an order that used to break (the Horovod notebook
left ``data/train/train.npz``, where the DDP notebook's image folder then failed with
``NotADirectoryError``), over planted leftovers of an earlier run. Each must write only
under the folder named after it; whatever the run added to notebooks/ is removed
afterwards, and the notebooks themselves are never saved (executed copies go to the
temporary directory). Each notebook's checks below run on its own run in that sequence.
(Until issue 33 each notebook also ran once more, alone in an empty directory, with the
same checks: 7 more minutes of CI for nothing the in-place run does not show, since
notebooks/ holds nothing but the notebooks and what they write under their own folders.)

The checks read the saved cell outputs, as a reader of the notebook would:

* no cell raised (nbclient stops at the first error; no ``error`` output anywhere), and no
  saved output holds a carriage return (progress redrawn in place belongs in a display);
* every job's ``model.tar.gz`` the notebook printed exists, and each run it reports
  (``<label>: loss A -> B``) ended with a lower loss than it started with; the runs
  listed in ``EXPECTED`` are all there;
* the dry run (``create_training_job_request``) comes before the first ``fit()``; a
  notebook whose ``EXPECTED`` names ``"dry_run": "last"`` ends with it instead (the tuning
  notebook's ``create_tuning_job_request`` for SageMaker);
* the tuning notebook's job ended with every trial completed (its progress line) and its
  analytics table and plot show one row per trial;
* the debugger notebook's trials list every worker for ``include_workers="all"`` and one
  for ``"one"``, and every rank of both jobs logged that smdebug built its hook from its own
  host's ``debughookconfig.json``; the Horovod notebook's VPC cell shows the subnets and security group
  ``launchbay.vpc.provision`` made;
* afterwards no process carrying this test's ``LAUNCHBAY_HOME`` in its environment (a rank,
  ``mpirun``, a host supervisor) and no container or network of its jobs is left.

Notebooks with local Docker mode steps carry the ``docker`` marker and need the training
images: built here first when missing (reused otherwise; see docs/images.md), with the
inputs .ci/run uses, so the notebooks' own ``launchbay.images.ensure_image`` finds them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from job_outputs import left_after

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
    "hyperparameter_tuning.ipynb": {
        "runs": {"best estimator"},
        "dry_run": "last",
        "tuning": {"trials": 8},
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


def test_every_notebook_has_expectations() -> None:
    names = {p.name for p in NOTEBOOK_DIR.glob("*.ipynb")}
    assert names == set(EXPECTED), f"notebooks/ holds {sorted(names)}; EXPECTED {sorted(EXPECTED)}"
    # Nothing a notebook could lean on beside it: running in place shows what running in
    # an empty directory would.
    tracked = subprocess.run(
        ["git", "ls-files", "notebooks"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(tracked) == sorted(["notebooks/.gitignore", *(f"notebooks/{n}" for n in names)])


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


# -- running and checking one notebook ------------------------------------------------


def _kernel_environment(monkeypatch: pytest.MonkeyPatch, home: str) -> None:
    monkeypatch.setenv("LAUNCHBAY_HOME", home)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")
    # The kernel ("python3": ``python -m ipykernel_launcher``) is this Python.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # A role ARN for the SageMaker (ml.*) dry runs; local jobs would run without one.
    monkeypatch.setenv("LAUNCHBAY_EXECUTION_ROLE", "arn:aws:iam::123456789012:role/SageMakerRole")


def _execute(name: str, workdir: Path, keep: Path) -> Any:
    """Run notebook ``name`` with ``workdir`` as its working directory; return it executed.

    The notebook file is only read: the executed copy is written to ``keep`` (for reading
    when a check fails), never over the original.
    """
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(workdir)}},
    )
    executed = keep / name
    try:
        client.execute()
    finally:
        nbformat.write(nb, executed)  # kept for reading when a check fails
        print(f"executed notebook: {executed}")
    return nb


def _check(name: str, nb: Any, home: str) -> None:
    """What the executed notebook ``nb`` shows, and that its jobs left nothing behind."""
    expected = EXPECTED[name]
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code_cells for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, f"{name}: a cell raised: {errors[0]['ename']}: {errors[0]['evalue']}"

    # The dry run is shown before the first job starts (or, "last", ends the notebook).
    sources = [c.source for c in code_cells]
    if expected.get("dry_run") == "last":
        assert "create_tuning_job_request(" in sources[-1], name
        request = json.loads(re.search(r"^\{.*^\}", _outputs(code_cells[-1]), re.M | re.S)[0])
        assert request["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"][
            "InstanceType"
        ].startswith("ml."), request
    else:
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

    if "tuning" in expected:
        trials = expected["tuning"]["trials"]
        assert f"Completed | trials: {trials} completed, 0 in progress, 0 failed" in text, name
        plotted = re.findall(r"^trial (\d+)  \d+\.\d+  #+", text, re.M)
        assert plotted == [str(n) for n in range(1, trials + 1)], f"{name}: plot rows {plotted}"

    if expected.get("vpc"):
        shown = [json.loads(m) for m in re.findall(r'^\{\s*"Subnets".*?^\}', text, re.M | re.S)]
        assert shown, f"{name}: no VpcConfig printed"
        vpc = shown[-1]
        assert vpc["Subnets"] and all(s.startswith("subnet-") for s in vpc["Subnets"]), vpc
        assert vpc["SecurityGroupIds"] and vpc["SecurityGroupIds"][0].startswith("sg-"), vpc

    if expected.get("images"):
        # The Docker cell made sure of its image (the images were built before the run).
        assert re.search(r"launchbay/\S+-training:\S+: on this Docker engine", text), name

    # Nothing of the jobs is left running.
    deadline = time.monotonic() + 15
    while (left := _leftover_processes(home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"{name}: processes left after the notebook:\n" + "\n".join(left)
    if expected.get("images"):
        left = left_after(10, lambda: _leftover_docker(home))  # removed in the background
        assert not left, f"{name}: Docker leftovers: {left}"


# -- the tests -----------------------------------------------------------------------------


#: The in-place order: the Horovod notebook first, whose data/train/train.npz broke the DDP
#: notebook's image folder when they shared notebooks/data (NotADirectoryError).
IN_PLACE_ORDER = [
    "horovod_tensorflow.ipynb",
    "pytorch_ddp_launcher.ipynb",
    "smddp_pytorch_tensorflow.ipynb",
    "debugger_distributed.ipynb",
    "hyperparameter_tuning.ipynb",
]
#: What an earlier run of any notebook could have left in a notebook's own folder; the
#: image-folder notebook fails on a file among its class directories unless it starts over.
LEFTOVERS = ["data/train/train.npz", "data/train/horizontal/000.pgm", "model/local/model.pt"]


def _tree(root: Path) -> set[str]:
    """Every path under ``root`` (relative; directories end in "/"), links not followed."""
    found = set()
    for directory, dirs, files in os.walk(root):
        rel = Path(directory).relative_to(root)
        found.update(f"{rel / d}/" for d in dirs)
        found.update(str(rel / f) for f in files)
    return found


def _remove_added(root: Path, before: set[str]) -> list[str]:
    """Remove what is under ``root`` now and was not in ``before``; return what was removed."""
    removed = []
    for path in sorted(_tree(root) - before, key=len):  # parents before their children
        target = root / path.rstrip("/")
        if not os.path.lexists(target):
            continue  # inside a directory removed above
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()
        removed.append(path)
    return removed


@contextlib.contextmanager
def _in_place_lock() -> Iterator[None]:
    """One in-place run at a time on this machine (they would share notebooks/)."""
    with open(
        Path(os.environ.get("TMPDIR", "/tmp")) / "launchbay-notebooks-in-place.lock", "w"
    ) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.mark.docker
def test_notebooks_run_in_place_one_after_another(
    aws: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert sorted(IN_PLACE_ORDER) == sorted(EXPECTED), "every notebook runs in place"
    _images(sorted({i for n in IN_PLACE_ORDER for i in EXPECTED[n].get("images", [])}))
    home = str(tmp_path / "launchbay-home")
    _kernel_environment(monkeypatch, home)
    notebooks = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in NOTEBOOK_DIR.glob("*.ipynb")
    }
    own = {Path(n).stem for n in IN_PLACE_ORDER}
    took: dict[str, float] = {}
    with _in_place_lock():
        before = _tree(NOTEBOOK_DIR)
        try:
            for stem in sorted(own):  # an earlier run's leftovers (a folder of the user's: kept)
                if (NOTEBOOK_DIR / stem).exists():
                    continue
                for leftover in LEFTOVERS:
                    path = NOTEBOOK_DIR / stem / leftover
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(b"left by an earlier run")
            for name in IN_PLACE_ORDER:
                started = time.monotonic()
                nb = _execute(name, NOTEBOOK_DIR, tmp_path)
                took[name] = time.monotonic() - started
                _check(name, nb, home)
            added = {p.split("/")[0] for p in _tree(NOTEBOOK_DIR) - before}
            assert added <= own, f"written outside the notebooks' own folders: {added - own}"
        finally:
            removed = _remove_added(NOTEBOOK_DIR, before)
            print(f"removed from {NOTEBOOK_DIR}: {len(removed)} paths")
            print("in place: " + ", ".join(f"{n} {s:.0f} s" for n, s in took.items())
                  + f"; {sum(took.values()):.0f} s in all")  # fmt: skip
    assert _tree(NOTEBOOK_DIR) == before, "notebooks/ is as it was"
    after = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in NOTEBOOK_DIR.glob("*.ipynb")
    }
    assert after == notebooks, "the notebooks were not saved over"
