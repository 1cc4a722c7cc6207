"""smdistributed.dataparallel scripts in ``local_process`` mode, through the local stand-in.

2 hosts x 2 processes, started by ``mpirun`` as SageMaker starts the library's
ranks. The scripts are the library guides' shape: PyTorch's current API
(``torch_smddp`` + ``init_process_group(backend="smddp")``), its legacy API, and
TensorFlow 2.x (``DistributedGradientTape``, ``broadcast_variables``). Each test
checks that every rank ends with the same parameters, equal to single-process
training on the concatenated batches (tests/smddp_checks.py).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from job_outputs import archive_members, check_ranks, file_uri, rank_reports
from launchbay import JobFailedError
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow
from smddp_checks import check_training

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True, "processes_per_host": 2}}}


def pytorch(entry_point, out, **kwargs):
    options = dict(
        entry_point=entry_point,
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local_process",
        instance_count=2,
        framework_version="2.2.0",  # a version SDK v2 accepts with smdistributed dataparallel
        py_version="py310",
        distribution=SMDDP,
        output_path=file_uri(out),
    )
    options.update(kwargs)
    return PyTorch(**options)


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
    assert "smdistributed on algo-1: mpirun -np 4" in log
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


def test_tensorflow_script_trains_2x2_like_one_process(home, tmp_path):
    out = tmp_path / "out"
    est = TensorFlow(
        entry_point="smddp_tf.py",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local_process",
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
