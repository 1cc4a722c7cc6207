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
from job_outputs import archive_members, check_horovod_ranks, containers_left, rank_reports
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent.parent / "integration" / "local_process_scripts"


@pytest.mark.parametrize(
    ("framework", "image", "version", "model_file"),
    [
        ("torch", "pytorch_image", "2.13.0", "model.pt"),
        ("tensorflow", "tensorflow_image", "2.21.0", "model.keras"),
    ],
    ids=["torch", "tensorflow"],
)
def test_horovod_allreduce_2x2_in_two_containers(
    home, tmp_path, docker_client, request, framework, image, version, model_file
):
    out = tmp_path / "out"
    est = estimator(
        "hvd_allreduce.py",
        SCRIPTS,
        framework={"torch": PyTorch, "tensorflow": TensorFlow}[framework],
        instance_type="local",
        instance_count=2,
        framework_version=version,
        py_version="py311",
        image_uri=request.getfixturevalue(image),
        distribution=MPI,
        hyperparameters={"framework": framework},
        out=out,
    )
    est.fit(logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    assert model_file in archive_members(prefix / "model.tar.gz")
    # Each container is its own node: Horovod's local size is the processes per host.
    check_horovod_ranks(rank_reports(archive_members(prefix / "output.tar.gz")), local_size=2)
    if framework == "torch":
        log = (home / "jobs" / job.name / "logs" / "algo-1.log").read_text()
        assert "mpirun" in log
    leftovers = containers_left(docker_client, name=job.name)
    assert not leftovers, leftovers
