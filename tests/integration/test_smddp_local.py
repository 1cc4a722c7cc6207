"""smdistributed.dataparallel scripts in ``local_process`` mode, through the local stand-in.

2 hosts x 2 processes: PyTorch scripts started by one torchrun (the stand-in runs on
``torch.distributed``; no MPI needed), TensorFlow ones by one ``mpirun``, as SageMaker
starts the library's ranks. The scripts are the library guides' shape: PyTorch's current API
(``torch_smddp`` + ``init_process_group(backend="smddp")``), its legacy API, and
TensorFlow 2.x (``DistributedGradientTape``, ``broadcast_variables``). Each test
checks that every rank ends with the same parameters, equal to single-process
training on the concatenated batches (tests/smddp_checks.py).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import job_venv
from factories import estimator
from job_outputs import archive_members, check_ranks, file_uri, rank_reports
from launchbay import JobFailedError
from launchbay.tensorflow import TensorFlow
from smddp_checks import check_training

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 2}}}


def pytorch(entry_point, out, **kwargs):
    # 2.2.0 on py310: a version SDK v2 accepts with smdistributed dataparallel
    options = dict(framework_version="2.2.0", py_version="py310", distribution=SMDDP)
    return estimator(entry_point, SCRIPTS, out=out, instance_count=2, **{**options, **kwargs})


def leftovers(directory) -> list:
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["pid"] == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            text = " ".join(proc.cmdline()) + " " + " ".join(proc.environ().values())
        except psutil.Error:
            continue
        if str(directory) in text:
            found.append(proc)
    return found


def reports_of(est, out) -> dict[int, dict]:
    prefix = out / est.latest_training_job.name / "output"
    return rank_reports(archive_members(prefix / "output.tar.gz"))


@pytest.mark.parametrize("entry_point", ["smddp_torch.py", "smddp_torch_legacy.py"])
def test_pytorch_scripts_train_2x2_like_one_process(home, tmp_path, entry_point):
    out = tmp_path / "out"
    est = pytorch(entry_point, out)
    est.fit(logs=False)
    reports = reports_of(est, out)
    check_ranks(reports)
    check_training(reports, torch_layout=True)
    log = (home / "jobs" / est.latest_training_job.name / "logs" / "algo-1.log").read_text()
    assert "smdistributed on algo-1: " in log
    assert "-m torch.distributed.run --nnodes 1 --nproc_per_node 4" in log
    assert "mpirun" not in log
    if entry_point == "smddp_torch.py":
        import torch

        assert {r["backend"] for r in reports.values()} == {"smddp"}
        model = archive_members(out / est.latest_training_job.name / "output" / "model.tar.gz")
        state = torch.load(io.BytesIO(model["model.pt"]))
        assert state["out.weight"].tolist() == reports[0]["params"]["out.weight"]
    else:
        for report in reports.values():
            assert report["gathered"] == [0.0, 1.0, 2.0, 3.0]
            assert report["broadcast"] == 100.0
            assert report["local_size"] == 2
    assert not leftovers(home / "jobs" / est.latest_training_job.name)


NO_MPI_DRIVER = """
import json, sys
from launchbay.pytorch import PyTorch

scripts, out, entry_point = sys.argv[1:4]
est = PyTorch(entry_point=entry_point, source_dir=scripts, role=None,
              instance_type="local_process", instance_count=2,
              framework_version="2.2.0", py_version="py310",
              distribution={"smdistributed": {"dataparallel": {"enabled": True,
                                                               "processes_per_host": 2}}},
              output_path="file://" + out)
try:
    est.fit(logs=False)
finally:
    job = est.latest_training_job
    print(json.dumps({"job": job.name if job else None}))
"""


def _path_without_mpi(bin_dir: Path) -> str:
    """A PATH with every program of this one except OpenMPI's (mpirun, mpiexec, orterun...)."""
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            mpi_program = name.startswith(("mpi", "orte", "prte", "ompi", "oshrun", "shmemrun"))
            if mpi_program or (bin_dir / name).exists() or not os.access(path, os.X_OK):
                continue
            (bin_dir / name).symlink_to(path)
    return str(bin_dir)


@pytest.mark.parametrize("entry_point", ["smddp_torch.py", "smddp_torch_legacy.py"])
def test_pytorch_scripts_run_without_mpi4py_or_mpirun(home, tmp_path, entry_point):
    """``pip install launchbay[torch]``: no mpi4py, no OpenMPI. The ranks start with torchrun."""
    python = job_venv.make(tmp_path / "venv", without=["mpi4py"])
    path = _path_without_mpi(tmp_path / "bin")
    env = dict(os.environ, PATH=path, LAUNCHBAY_HOME=str(home))
    assert shutil.which("mpirun", path=path) is None and shutil.which("mpiexec", path=path) is None
    probe = subprocess.run(
        [str(python), "-c", "import mpi4py"], capture_output=True, text=True, env=env
    )
    assert "No module named 'mpi4py'" in probe.stderr
    out = tmp_path / "out"
    result = subprocess.run(
        [str(python), "-c", NO_MPI_DRIVER, str(SCRIPTS), str(out), entry_point],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    job = json.loads(result.stdout.strip().splitlines()[-1])["job"]
    log = (home / "jobs" / job / "logs" / "algo-1.log").read_text()
    assert result.returncode == 0, result.stderr + log
    reports = rank_reports(archive_members(out / job / "output" / "output.tar.gz"))
    check_ranks(reports)  # 4 ranks, world size 4, each on its host with its local rank
    check_training(reports, torch_layout=True)
    assert "-m torch.distributed.run --nnodes 1 --nproc_per_node 4" in log
    assert not leftovers(home / "jobs" / job)


def test_tensorflow_script_trains_2x2_like_one_process(home, tmp_path):
    out = tmp_path / "out"
    est = estimator(
        "smddp_tf.py",
        SCRIPTS,
        framework=TensorFlow,
        instance_count=2,
        framework_version="2.11.0",  # a version SDK v2 accepts with smdistributed dataparallel
        py_version="py39",
        distribution=SMDDP,
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    reports = reports_of(est, out)
    check_ranks(reports)
    check_training(reports, torch_layout=False)
    for report in reports.values():
        assert report["max"] == 3.0
        assert report["broadcast"] == 101.0  # root_rank=1's value
        assert report["local_size"] == 2
    assert len({r["mean_loss"] for r in reports.values()}) == 1
    log = (home / "jobs" / est.latest_training_job.name / "logs" / "algo-1.log").read_text()
    assert "smdistributed on algo-1: mpirun -np 4" in log  # TensorFlow keeps MPI
    assert not leftovers(home / "jobs" / est.latest_training_job.name)


def test_a_rank_raising_is_reported_with_its_host_and_traceback(home, tmp_path):
    est = pytorch("smddp_torch.py", tmp_path / "out", hyperparameters={"fail-rank": 3})
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    head = caught.value.reason[:1024]
    assert "Rank 3" in head and "algo-2" in head
    assert "ValueError: boom from rank 3" in head
    assert 'smddp_torch.py", line' in caught.value.reason + str(caught.value)
    assert not leftovers(home / "jobs" / caught.value.job_name)


def test_plain_python_cannot_import_smdistributed():
    result = subprocess.run(
        [sys.executable, "-c", "import smdistributed"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "No module named 'smdistributed'" in result.stderr
