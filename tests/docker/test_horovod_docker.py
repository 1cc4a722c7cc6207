"""Horovod in local Docker mode: a 2 hosts x 2 processes ``mpi`` job in two containers.

The PyTorch image carries the Horovod wheel ``.ci/horovod.sh`` built (the ``wheelhouse``
fixture passes it with torch's); launchbay's MPI launcher runs mpirun over SSH between the
containers and ``hvd.allreduce`` averages across all four ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from factories import estimator
from job_outputs import HOROVOD_MPI as MPI
from job_outputs import archive_members, check_horovod_ranks, file_uri, rank_reports
from launchbay.tensorflow import TensorFlow

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

SCRIPTS = Path(__file__).parent.parent / "integration" / "local_process_scripts"


def test_horovod_torch_allreduce_2x2_in_two_containers(
    home, tmp_path, pytorch_image, docker_client
):
    out = tmp_path / "out"
    est = estimator(
        "hvd_allreduce.py",
        SCRIPTS,
        instance_type="local",
        instance_count=2,
        framework_version="2.13.0",
        py_version="py311",
        image_uri=pytorch_image,
        distribution=MPI,
        hyperparameters={"framework": "torch"},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    assert "model.pt" in archive_members(prefix / "model.tar.gz")
    # Each container is its own node: Horovod's local size is the processes per host.
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")), local_size=2)
    log = (home / "jobs" / job.name / "logs" / "algo-1.log").read_text()
    assert "mpirun" in log
    leftovers = docker_client.containers.list(all=True, filters={"name": job.name})
    assert not leftovers, [c.name for c in leftovers]


def test_horovod_tensorflow_allreduce_2x2_in_two_containers(
    home, tmp_path, tensorflow_image, docker_client
):
    out = tmp_path / "out"
    est = estimator(
        "hvd_allreduce.py",
        SCRIPTS,
        framework=TensorFlow,
        instance_type="local",
        instance_count=2,
        framework_version="2.21.0",
        py_version="py311",
        image_uri=tensorflow_image,
        distribution=MPI,
        hyperparameters={"framework": "tensorflow"},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    assert "model.keras" in archive_members(prefix / "model.tar.gz")
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")), local_size=2)
    leftovers = docker_client.containers.list(all=True, filters={"name": job.name})
    assert not leftovers, [c.name for c in leftovers]
