"""Horovod (built by .ci/horovod.sh, docs/horovod.md) in a 2 hosts x 2 processes ``mpi`` job.

``instance_type="local_process"``: launchbay's MPI launcher starts the ranks with mpirun,
and ``hvd.allreduce`` averages (and sums) across all four, for PyTorch and TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import estimator as make_estimator
from job_outputs import HOROVOD_MPI as MPI
from job_outputs import archive_members, check_horovod_ranks, file_uri, rank_reports
from launchbay.tensorflow import TensorFlow

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"


def test_horovod_torch_allreduce_2x2(home, tmp_path):
    out = tmp_path / "out"
    est = make_estimator(
        "hvd_allreduce.py",
        SCRIPTS,
        instance_count=2,
        distribution=MPI,
        hyperparameters={"framework": "torch"},
        out=out,
    )
    est.fit(logs=False)
    prefix = out / est.latest_training_job.name / "output"
    assert "model.pt" in archive_members(prefix / "model.tar.gz")
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))


def test_horovod_tensorflow_allreduce_2x2(home, tmp_path):
    out = tmp_path / "out"
    est = make_estimator(
        "hvd_allreduce.py",
        SCRIPTS,
        framework=TensorFlow,
        instance_count=2,
        distribution=MPI,
        hyperparameters={"framework": "tensorflow"},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    prefix = out / est.latest_training_job.name / "output"
    assert "model.keras" in archive_members(prefix / "model.tar.gz")
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")))
