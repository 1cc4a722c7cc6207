"""Spot interruptions rehearsed on Docker hosts (instance_type="local"): the same attempts as
local_process (tests/integration/test_local_rehearsal.py), with containers made afresh for
each attempt and the restored checkpoints watched through their bind mounts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from job_outputs import file_uri

#: 15 s of epochs: the first two attempts (5 s each, counted from the hosts' start, which
#: includes the script's imports) cannot finish them, so both interruptions always land.
EPOCHS = 60


@pytest.mark.parametrize("resume", [True, False])
def test_a_docker_job_interrupted_twice_restarts_with_its_checkpoints(
    home, tmp_path, docker_pytorch, resume
):
    est = docker_pytorch(
        "epochs_checkpointed.py",
        hyperparameters={"epochs": EPOCHS, "epoch-seconds": 0.25, "resume": str(resume).lower()},
        checkpoint_s3_uri=file_uri(tmp_path / "checkpoints"),
        output_path=file_uri(tmp_path / "out"),
        use_spot_instances=True,
        max_run=600,
        max_wait=900,
        environment={"LAUNCHBAY_REHEARSE_INTERRUPTIONS": "5s,5s", "LAUNCHBAY_GRACE_SECONDS": "5"},
    )
    est.fit(job_name=f"docker-spot-{str(resume).lower()}", logs=False)
    description = est.latest_training_job.describe()
    assert description["TrainingJobStatus"] == "Completed"
    transitions = [t["Status"] for t in description["SecondaryStatusTransitions"]]
    assert transitions.count("Interrupted") == 2 and transitions.count("Training") == 3
    attempts = description["LocalAttempts"]
    for attempt in attempts[1:]:
        assert attempt["RestoredCheckpointFiles"] == 2
        assert attempt["CheckpointFilesRead"] == (2 if resume else 0), attempts
    for host in ("algo-1", "algo-2"):
        log = (Path(description["LocalJobDir"]) / "logs" / f"{host}.log").read_text()
        done = [int(n) for n in re.findall(rf"epoch (\d+) done on {host}", log)]
        if resume:
            assert sorted(done) == list(range(1, EPOCHS + 1)), log
        else:
            assert log.count(f"starting at epoch 0 on {host}") == 3, log
    assert description["BillableTimeInSeconds"] <= description["TrainingTimeInSeconds"]
