"""smdistributed.dataparallel PyTorch scripts in local Docker mode, through the stand-in.

The same two scripts as tests/integration/test_smddp_local.py, unchanged, on 2
containers x 2 processes of the CPU PyTorch image built from this tree: ``mpirun``
on algo-1 reaches algo-2 over SSH, and the ``smddp`` process group is gloo.
"""

from __future__ import annotations

import pytest

from job_outputs import (
    archive_members,
    assert_no_docker_leftovers,
    check_ranks,
    docker_leftovers,
    file_uri,
    rank_reports,
)
from launchbay import JobFailedError
from smddp_checks import check_training

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


@pytest.mark.parametrize("entry_point", ["smddp_torch.py", "smddp_torch_legacy.py"])
def test_pytorch_scripts_train_2x2_in_two_containers(
    home, tmp_path, docker_pytorch, docker_client, entry_point
):
    out = tmp_path / "out"
    est = docker_pytorch(
        entry_point,
        distribution={"pytorchddp": {"enabled": True, "processes_per_host": 2}},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    job = est.latest_training_job
    reports = rank_reports(archive_members(out / job.name / "output" / "output.tar.gz"))
    check_ranks(reports)
    check_training(reports, torch_layout=True)
    log = (home / "jobs" / job.name / "logs" / "algo-1.log").read_text()
    assert "smdistributed on algo-1: mpirun --host" in log  # over SSH, one rank per slot
    assert_no_docker_leftovers(docker_client, home / "jobs" / job.name)


def test_a_rank_raising_in_algo_2_is_reported_and_nothing_is_left(
    home, tmp_path, docker_pytorch, docker_client
):
    est = docker_pytorch(
        "smddp_torch.py",
        distribution={"pytorchddp": {"enabled": True, "processes_per_host": 2}},
        hyperparameters={"fail-rank": 3},
        output_path=file_uri(tmp_path / "out"),
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    head = caught.value.reason[:1024]
    assert "Rank 3" in head and "algo-2" in head
    assert "ValueError: boom from rank 3" in head
    left, _ = docker_leftovers(docker_client, home / "jobs" / caught.value.job_name)
    assert not left, left
