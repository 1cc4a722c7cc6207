"""The one codec between a job's typed state and DescribeTrainingJob dicts (issue 33, item 1).

``JobState.from_description`` reads a local job's record or SageMaker's answer;
``to_description`` writes it back, losslessly: statuses SageMaker adds later and values
without their field's type come back as they went in. A local job's ``describe()``
goes through the codec and still returns v2's shapes.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from factories import local_job
from launchbay.backends.local.record import (
    LocalJob,
    billable_seconds,
    from_json,
    job_arn,
)
from launchbay.backends.state import (
    DESCRIPTION_KEYS,
    JobState,
    SecondaryStatus,
    Status,
    Transition,
    to_description,
)
from launchbay.runtime.names import JOB_STATUSES, TERMINAL_STATUSES

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

UTC = _dt.timezone.utc


@pytest.fixture
def sagemaker_description() -> dict:
    """A finished job as SageMaker (moto) describes it."""
    with mock_aws():
        client = boto3.client(
            "sagemaker", region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )  # fmt: skip
        client.create_training_job(
            TrainingJobName="codec-job",
            AlgorithmSpecification={"TrainingImage": "image:1", "TrainingInputMode": "File"},
            RoleArn="arn:aws:iam::123456789012:role/r",
            OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
            ResourceConfig={
                "InstanceType": "ml.m5.large",
                "InstanceCount": 2,
                "VolumeSizeInGB": 10,
            },
            StoppingCondition={"MaxRuntimeInSeconds": 60},
        )
        description = client.describe_training_job(TrainingJobName="codec-job")
    description.pop("ResponseMetadata")
    return description


def test_sagemakers_answer_round_trips_and_reads_typed(sagemaker_description):
    original = copy.deepcopy(sagemaker_description)
    state = JobState.from_description(sagemaker_description)
    assert to_description(state) == original
    assert sagemaker_description == original  # read, not changed
    assert state.status is Status.COMPLETED and state.terminal
    assert state.secondary == "Completed"
    assert state.name == "codec-job"
    assert state.model_artifacts == "s3://bucket/out/codec-job/output/model.tar.gz"
    assert isinstance(state.creation_time, _dt.datetime)
    assert state.transitions and state.transitions[0].status is SecondaryStatus.STARTING
    assert state.extra["ResourceConfig"]["InstanceCount"] == 2  # the request's echo, kept
    assert state.described("model_artifacts") == original["ModelArtifacts"]


def _local_job(tmp_path: Path, src: Path) -> tuple[LocalJob, dict]:
    return local_job(tmp_path, src, "codec-local")


def _v2_describe(job: LocalJob, request: dict, now: _dt.datetime) -> dict:
    """What LocalJob.describe wrote before the codec (the shape that must not change)."""
    described = {k: copy.deepcopy(v) for k, v in request.items() if k != "Tags"}
    described.update({
        "TrainingJobName": job.name, "TrainingJobArn": job_arn(job.name),
        "TrainingJobStatus": job.status, "SecondaryStatus": job.secondary,
        "CreationTime": job.creation_time, "LastModifiedTime": now,
        "SecondaryStatusTransitions": copy.deepcopy(job.transitions),
        "LocalJobDir": job.layout.job_dir, "LocalClient": job.client,
    })  # fmt: skip
    if job.start_time:
        described["TrainingStartTime"] = job.start_time
    if job.end_time:
        described["TrainingEndTime"] = job.end_time
        if job.start_time:
            seconds = int((job.end_time - job.start_time).total_seconds())
            described["TrainingTimeInSeconds"] = seconds
            described["BillableTimeInSeconds"] = billable_seconds(
                job.transitions, job.start_time, job.end_time
            )
    if job.failed_host:
        described["LocalFailedHost"] = job.failed_host
    if job.failure_reason:
        described["FailureReason"] = job.failure_reason
    if job.model_artifacts:
        described["ModelArtifacts"] = {"S3ModelArtifacts": job.model_artifacts}
    described.update(copy.deepcopy({k: v for k, v in job.rule_statuses.items() if v}))
    if job.attempt_log:
        described["LocalAttempts"] = copy.deepcopy(job.attempt_log)
    if job.ending is not None and job.status not in TERMINAL_STATUSES:
        described["LocalEnding"] = {"Status": job.ending[0], "FailureReason": job.ending[1]}
    return described


@pytest.mark.parametrize("ended", [False, True])
def test_a_local_jobs_description_keeps_v2s_shape_and_round_trips(tmp_path, ended):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('hi')\n")
    job, request = _local_job(tmp_path, src)
    job._set_secondary("Downloading", "Downloading input data")
    job._set_secondary("Training", "Training image download completed. Training in progress.")
    job.start_time = job.creation_time + _dt.timedelta(seconds=3)
    job.rule_statuses = {
        "DebugRuleEvaluationStatuses": [{"RuleConfigurationName": "d", "RuleEvaluationStatus": "NoIssuesFound"}],
        "ProfilerRuleEvaluationStatuses": [{"RuleConfigurationName": "p", "RuleEvaluationStatus": "InProgress"}],
    }  # fmt: skip
    job.attempt_log = [{"Attempt": 1, "Ended": "Interrupted"}]
    job.ending = ("Failed", "algo-2 exited 1")
    if ended:
        job.status, job.secondary = "Failed", "Failed"
        job.end_time = job.start_time + _dt.timedelta(seconds=90)
        job.failure_reason, job.failed_host = "AlgorithmError: exit 1", "algo-2"
        job.model_artifacts = f"file://{tmp_path}/out/model.tar.gz"
    job.save()
    described = job.describe()
    expected = _v2_describe(job, request, described["LastModifiedTime"])
    assert described == expected
    assert list(described) == list(expected)  # the same keys in the same order
    assert to_description(JobState.from_description(described)) == described
    # the record written and read back gives the same job again
    record = from_json(json.loads(Path(job.layout.status_file).read_text()))
    assert to_description(JobState.from_description(record)) == record
    again = LocalJob(dict(request), job.layout, None, 1.0, lambda _job: None, record=record)  # type: ignore[arg-type]
    state = again.state()
    assert state.status == job.status and state.secondary == job.secondary
    assert [t.to_dict() for t in state.transitions or ()] == job.transitions
    assert state.attempts == tuple(job.attempt_log)
    assert state.debug_rule_statuses == tuple(job.rule_statuses["DebugRuleEvaluationStatuses"])
    # a rule still running went with the client that ran it
    assert state.profiler_rule_statuses[0]["RuleEvaluationStatus"] == "Stopped"  # type: ignore[index]


def test_unknown_statuses_and_untyped_values_survive():
    created = "2026-01-01T00:00:00+00:00"  # a time that is no datetime
    description = {
        "TrainingJobStatus": "Paused",
        "SecondaryStatus": "Rebooting",
        "SecondaryStatusTransitions": [
            {"Status": "Rebooting", "StartTime": _dt.datetime(2026, 1, 1, tzinfo=UTC), "Extra": 1},
            {"StatusMessage": None, "Status": "Training"},
        ],
        "CreationTime": created,
        "TrainingTimeInSeconds": True,
        "ModelArtifacts": {"S3ModelArtifacts": "s3://b/m.tar.gz", "Other": 1},
        "FailureReason": None,
        "SomethingNew": {"Added": "later"},
    }
    original = copy.deepcopy(description)
    state = JobState.from_description(description)
    assert state.status == "Paused" and type(state.status) is str and not state.terminal
    assert state.secondary == "Rebooting" and type(state.secondary) is str
    assert state.creation_time is None and state.described("creation_time") == created
    assert state.training_seconds is None and state.described("training_seconds") is True
    assert state.model_artifacts is None
    assert state.failure_reason is None
    transitions = state.transitions or ()
    assert transitions[0].status == "Rebooting" and transitions[0].extra == {"Extra": 1}
    assert transitions[1].status is SecondaryStatus.TRAINING
    assert to_description(state) == original
    assert list(to_description(state)["SecondaryStatusTransitions"][1]) == [
        "StatusMessage",
        "Status",
    ]
    assert to_description(JobState()) == {}
    assert JobState.from_description({}).status is None


def test_the_enums_are_sagemakers_strings():
    assert [s.value for s in Status] == list(JOB_STATUSES)
    for member in [*Status, *SecondaryStatus]:
        value = member.value
        assert member == value and value == member
        assert str(member) == value and f"{member}" == value
        assert hash(member) == hash(value) and {value: 1}[member] == 1
        assert json.dumps(member) == json.dumps(value)
    assert Status("Completed") is Status.COMPLETED and Status.COMPLETED in TERMINAL_STATUSES
    assert {Status.FAILED, Status.STOPPED} == {"Failed", "Stopped"}
    assert Transition.from_dict({"Status": "Training"}).status is SecondaryStatus.TRAINING
    assert "TrainingJobStatus" in DESCRIPTION_KEYS
