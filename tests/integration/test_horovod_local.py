"""Horovod (built by .ci/horovod.sh, docs/horovod.md) in a 2 hosts x 2 processes ``mpi`` job.

``instance_type="local_process"``: launchbay's MPI launcher starts the ranks with mpirun,
and ``hvd.allreduce`` averages (and sums) across all four, for PyTorch and TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from job_outputs import archive_members, file_uri, rank_reports
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(root))
    monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", "5")
    return root


def check_horovod_ranks(reports: dict[int, dict], local_size: int = 4) -> None:
    """Ranks 0-3 on algo-1/algo-2; the average of (r+1, 10(r+1)) is (2.5, 25), the sum (10, 100).

    Horovod's MPI controller counts as "local" the ranks that share memory: in
    ``local_process`` every host is on this one machine (local size 4), in Docker each
    container is its own node (local size 2), as on SageMaker.
    """
    assert sorted(reports) == [0, 1, 2, 3]
    for rank, report in reports.items():
        assert report["world"] == 4
        assert report["local_size"] == local_size
        assert report["local_rank"] == rank % local_size
        assert report["host"] == f"algo-{rank // 2 + 1}"
        assert report["mpi"] is True
        assert report["average"] == pytest.approx([2.5, 25.0])
        assert report["sum"] == pytest.approx([10.0, 100.0])
        # Broadcast start plus averaged gradients: every rank ends with the same weights.
        assert report["same_weights"] is True


MPI = {
    "mpi": {
        "enabled": True,
        "processes_per_host": 2,
        "custom_mpi_options": "-x HOROVOD_LOG_LEVEL=warning",
    }
}


def test_horovod_torch_allreduce_2x2(home, tmp_path):
    out = tmp_path / "out"
    est = PyTorch(
        entry_point="hvd_allreduce.py",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local_process",
        instance_count=2,
        framework_version="2.8.0",
        py_version="py312",
        distribution=MPI,
        hyperparameters={"framework": "torch"},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    prefix = out / est.latest_training_job.name / "output"
    assert "model.pt" in archive_members(prefix / "model.tar.gz")
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))


def test_horovod_tensorflow_allreduce_2x2(home, tmp_path):
    out = tmp_path / "out"
    est = TensorFlow(
        entry_point="hvd_allreduce.py",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local_process",
        instance_count=2,
        framework_version="2.19.0",
        py_version="py312",
        distribution=MPI,
        hyperparameters={"framework": "tensorflow"},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    prefix = out / est.latest_training_job.name / "output"
    assert "model.keras" in archive_members(prefix / "model.tar.gz")
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))
