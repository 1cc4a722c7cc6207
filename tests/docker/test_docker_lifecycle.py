"""``instance_type="local"`` when the client dies (issue 12, defect 4): real containers.

A SIGKILLed client cannot stop its containers; the job's watchdog must: the
containers get SIGTERM (their scripts checkpoint), the job ends Failed with a
reason saying the client went away, its logs hold every line the containers
printed, and no container or network is left.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from factories import checkpointing_job
from job_outputs import (
    assert_no_docker_leftovers,
    check_sigterm_checkpoints,
    docker_leftovers,
    file_uri,
    hosts_started,
)
from job_processes import fit_in_child

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def test_a_sigkilled_client_leaves_a_finished_job_and_no_container(
    home, tmp_path, docker_options, docker_client
):
    checkpoints = tmp_path / "checkpoints"
    name = "docker-client-sigkill"
    directory = home / "jobs" / name
    job = checkpointing_job(checkpoints, tmp_path / "out", "/opt/ml/model", **docker_options)
    with fit_in_child(job, name, lambda: hosts_started(directory), 120, dict(os.environ)) as child:
        child.kill()
        child.communicate(timeout=30)
    deadline = time.monotonic() + 90
    while True:  # read as a file: nobody but the watchdog finishes the job
        status = json.loads((directory / "status.json").read_text())
        if status["TrainingJobStatus"] != "InProgress":
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["TrainingJobStatus"] == "Failed"
    assert "went away before the job ended" in status["FailureReason"]
    check_sigterm_checkpoints(checkpoints)
    for host in ("algo-1", "algo-2"):
        log = (directory / "logs" / f"{host}.log").read_text()
        # What the watchdog did, should this fail again (CI saw it twice, under load only).
        watchdog = (directory / "artifacts" / "watchdog.log").read_text()
        assert "checkpoint written on SIGTERM" in log, (
            f"{host}.log:\n{log}\nwatchdog.log:\n{watchdog}"
        )
    assert_no_docker_leftovers(docker_client, directory)


def test_mpi_workers_over_ssh_learn_at_once_that_the_master_could_not_start(
    home, tmp_path, docker_pytorch, docker_client
):
    from launchbay import JobFailedError

    est = docker_pytorch(
        "mpi_check.py",
        distribution={"mpi": {"enabled": True, "processes_per_host": 1}},
        # Python and the runtime stay reachable; mpirun (/usr/bin) does not.
        environment={"PATH": "/opt/venv/bin"},
        output_path=file_uri(tmp_path / "out"),
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    assert "needs 'mpirun' on PATH" in caught.value.reason
    directory = home / "jobs" / est.latest_training_job.name
    worker_log = (directory / "logs" / "algo-2.log").read_text()
    assert "The MPI master algo-1 failed before starting the job" in worker_log, worker_log
    assert "needs 'mpirun' on PATH" in worker_log
    assert "No MPI job reached this host" not in worker_log
    containers, _ = docker_leftovers(docker_client, directory)
    assert not containers, containers


def test_a_process_that_runs_many_docker_jobs_keeps_its_open_descriptors(
    home, tmp_path, docker_pytorch
):
    """Every Docker job of a process goes through one engine client (``shared_client``).

    A client per job kept its idle connections open for as long as the job's handle lived:
    22 sockets for each 2-host job, until CI's Docker worker passed 1,024 descriptors and
    every local job it started failed in ``select`` ("filedescriptor out of range").
    """
    from launchbay._docker import SHARED_POOL_SIZE

    def open_descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    est = docker_pytorch("noop.py", out=tmp_path / "out")
    est.fit(logs=False)
    after_one = open_descriptors()
    for _ in range(5):
        est.fit(logs=False)
    assert open_descriptors() <= after_one + SHARED_POOL_SIZE // 2, (after_one, open_descriptors())
