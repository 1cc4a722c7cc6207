"""SageMaker's spot interruptions and retries, rehearsed on local_process jobs (issue 35 items 1-2).

Real 2-host jobs interrupted by ``LAUNCHBAY_REHEARSE_INTERRUPTIONS``: every host gets
SIGTERM, the checkpoints go to ``checkpoint_s3_uri`` and come back on fresh hosts.
The grace period is short here (``LAUNCHBAY_GRACE_SECONDS``); each epoch is a quarter
of a second.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from factories import estimator as local_estimator
from job_outputs import file_uri
from launchbay import JobError
from launchbay.cli.output import print_summary, summarize
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
EPOCHS = 40


def estimator(tmp_path: Path, rehearse: str, **kwargs) -> PyTorch:
    hyperparameters = {"epochs": EPOCHS, "epoch-seconds": 0.25}
    hyperparameters.update(kwargs.pop("hyperparameters", {}))
    options = dict(
        instance_count=2,
        hyperparameters=hyperparameters,
        checkpoint_s3_uri=file_uri(tmp_path / "checkpoints"),
        output_path=file_uri(tmp_path / "out"),
        environment={"LAUNCHBAY_REHEARSE_INTERRUPTIONS": rehearse, "LAUNCHBAY_GRACE_SECONDS": "5"},
    )
    return local_estimator("epochs_checkpointed.py", SCRIPTS, **(options | kwargs))


def run(est: PyTorch, name: str) -> dict:
    try:
        est.fit(job_name=name, logs=False)
    except JobError:
        pass
    return est.latest_training_job.describe()


def host_log(description: dict, host: str) -> str:
    return (Path(description["LocalJobDir"]) / "logs" / f"{host}.log").read_text()


def statuses(description: dict) -> list[str]:
    return [t["Status"] for t in description["SecondaryStatusTransitions"]]


def check_times(description: dict) -> None:
    """TrainingTimeInSeconds and BillableTimeInSeconds as SageMaker counts them."""
    transitions = description["SecondaryStatusTransitions"]
    start, end = description["TrainingStartTime"], description["TrainingEndTime"]
    assert start == next(t["StartTime"] for t in transitions if t["Status"] == "Training")
    assert end == transitions[-1]["StartTime"]
    training = description["TrainingTimeInSeconds"]
    assert training == int((end - start).total_seconds())
    waited = sum(
        (t["EndTime"] - t["StartTime"]).total_seconds()
        for t in transitions
        if t["Status"] == "Starting" and t["StartTime"] >= start
    )
    billable = description["BillableTimeInSeconds"]
    assert billable == int((end - start).total_seconds() - waited)
    assert billable <= training
    trained = sum(
        (t["EndTime"] - t["StartTime"]).total_seconds()
        for t in transitions
        if t["Status"] == "Training"
    )
    assert billable >= int(trained)


SPOT_RESTARTS = [
    "Starting", "Downloading", "Training", "Interrupted",
    "Starting", "Downloading", "Training", "Interrupted",
    "Starting", "Downloading", "Training", "Uploading", "Completed",
]  # fmt: skip


def spot(tmp_path: Path, resume: bool) -> PyTorch:
    return estimator(
        tmp_path,
        "5s,5s",
        hyperparameters={"resume": "true" if resume else "false"},
        use_spot_instances=True,
        max_run=600,
        max_wait=900,
    )


def test_a_script_that_restores_its_checkpoints_counts_each_epoch_once(home, tmp_path):
    description = run(spot(tmp_path, resume=True), "spot-resume")
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert statuses(description) == SPOT_RESTARTS
    interrupted = [
        t for t in description["SecondaryStatusTransitions"] if t["Status"] == "Interrupted"
    ]
    assert "SIGTERM to every host, SIGKILL after 5 s" in interrupted[0]["StatusMessage"]
    for host in ("algo-1", "algo-2"):
        log = host_log(description, host)
        done = [int(n) for n in re.findall(rf"epoch (\d+) done on {host}", log)]
        assert sorted(done) == list(range(1, EPOCHS + 1)), log  # every epoch once
        assert log.count(f"starting at epoch 0 on {host}") == 1, log
        assert log.count(f"SIGTERM on {host}") == 2, log
    attempts = description["LocalAttempts"]
    assert [a["EndedWith"] for a in attempts] == ["Interrupted", "Interrupted", "Completed"]
    assert [a["StartedAfter"] for a in attempts] == [None, "SpotInterruption", "SpotInterruption"]
    for attempt in attempts[1:]:
        assert attempt["RestoredCheckpointFiles"] == 2  # each host's file, on every host
        assert attempt["CheckpointFilesRead"] == 2, attempts
    saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert saved == ["epochs-algo-1.json", "epochs-algo-2.json"]
    check_times(description)


def test_a_script_that_ignores_its_checkpoints_starts_from_zero_and_is_named(home, tmp_path):
    description = run(spot(tmp_path, resume=False), "spot-ignore")
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert statuses(description) == SPOT_RESTARTS
    for host in ("algo-1", "algo-2"):
        log = host_log(description, host)
        assert log.count(f"starting at epoch 0 on {host}") == 3, log  # from scratch each time
    attempts = description["LocalAttempts"]
    for attempt in attempts[1:]:
        assert attempt["RestoredCheckpointFiles"] == 2
        assert attempt["CheckpointFilesRead"] == 0, attempts
    check_times(description)
    summary = summarize(description, "local_process")  # what launchbay submit/status print
    assert summary["attempts"]["interruptions"] == 2
    text = io.StringIO()
    print_summary(summary, text)
    expected = (
        "2 interruptions; after each restart the script opened none of the restored "
        "checkpoint files"
    )
    assert f"Attempts:  {expected}" in text.getvalue(), text.getvalue()


def test_max_wait_counts_every_attempt_and_ends_the_job_stopped(home, tmp_path):
    est = estimator(
        tmp_path,
        "3s,3s,3s,3s",
        use_spot_instances=True,
        max_run=5,
        max_wait=5,
        hyperparameters={"epochs": 400},
    )
    description = run(est, "spot-max-wait")
    assert description["TrainingJobStatus"] == "Stopped", description
    assert description["SecondaryStatus"] == "MaxWaitTimeExceeded"
    assert "Interrupted" in statuses(description)
    assert description["FailureReason"].startswith("MaxWaitTimeExceeded: "), description
    created = description["CreationTime"]
    waited = (description["TrainingEndTime"] - created).total_seconds()
    assert 5 <= waited < 60
    check_times(description)


def test_a_lost_host_is_retried_with_the_checkpoints_restored(home, tmp_path):
    est = estimator(tmp_path, "host-loss:4s", max_retry_attempts=2)
    description = run(est, "retry-host-loss")
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert statuses(description) == [
        "Starting", "Downloading", "Training",
        "Starting", "Downloading", "Training", "Uploading", "Completed",
    ]  # fmt: skip
    retry = description["SecondaryStatusTransitions"][3]["StatusMessage"]
    assert retry.startswith("Retrying after InternalServerError (retry 1 of 2, attempt 2)"), retry
    attempts = description["LocalAttempts"]
    assert attempts[0]["EndedWith"] == "Failed"
    assert attempts[0]["Reason"].startswith("InternalServerError: host algo-2 was lost")
    assert attempts[1]["StartedAfter"] == "Retry"
    # what the lost attempt saved (each host's file, unless it was lost before its script
    # started) was restored, and the retried script read all of it
    assert attempts[1].get("CheckpointFilesRead", 0) == attempts[1]["RestoredCheckpointFiles"]
    for host in ("algo-1", "algo-2"):  # the retry went on from the restored checkpoint
        done = [
            int(n) for n in re.findall(rf"epoch (\d+) done on {host}", host_log(description, host))
        ]
        assert len(done) == len(set(done)) and max(done) == EPOCHS, done
    check_times(description)


def test_a_lost_host_without_retries_fails_the_job(home, tmp_path):
    description = run(estimator(tmp_path, "host-loss:2s@algo-1"), "host-loss-no-retry")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("InternalServerError: host algo-1 was lost")
    assert statuses(description).count("Training") == 1


def test_an_algorithm_error_is_not_retried(home, tmp_path):
    est = estimator(tmp_path, "", max_retry_attempts=3, hyperparameters={"fail": "true"})
    description = run(est, "algorithm-error")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("AlgorithmError: "), description
    assert "the script failed on algo-" in description["FailureReason"]
    assert statuses(description).count("Training") == 1
    assert statuses(description).count("Starting") == 1
    assert len(description["LocalAttempts"]) == 1
