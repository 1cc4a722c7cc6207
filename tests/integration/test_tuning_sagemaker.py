"""The SageMaker side of HyperparameterTuner, against the moto server.

moto 5's server creates and describes tuning jobs (it reports each one Completed at
once, with a made-up best trial) and runs training jobs' Create/Describe; it has no
ListTrainingJobsForHyperParameterTuningJob nor StopHyperParameterTuningJob, and no
tuning job in progress. Those are answered by botocore's Stubber on the session's
real client. Nothing of launchbay is replaced.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import sys

import pytest
from botocore.stub import Stubber

from launchbay.errors import ConfigurationError, JobFailedError, MissingDependencyError
from launchbay.pytorch import PyTorch
from launchbay.tuner import (
    CategoricalParameter,
    ContinuousParameter,
    HyperparameterTuner,
    IntegerParameter,
    TuningJob,
)
from launchbay.tuning.engine import LocalTuningNotAvailable

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
METRICS = [{"Name": "validation:accuracy", "Regex": "val_acc=([0-9.]+)"}]
RANGES = {
    "lr": ContinuousParameter(1e-4, 0.1, "Logarithmic"),
    "epochs": IntegerParameter(1, 10),
    "optimizer": CategoricalParameter(["adam", "sgd"]),
}
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)


def _estimator(session, **extra):
    kwargs = dict(
        entry_point="train.py", source_dir="src", framework_version="2.3.0", py_version="py311",
        instance_type="ml.g5.xlarge", instance_count=1, role=ROLE, hyperparameters={"batch-size": 64},
    )  # fmt: skip
    kwargs.update(extra)
    return PyTorch(sagemaker_session=session, **kwargs)


def _tuner(session, **extra):
    return HyperparameterTuner(
        _estimator(session), "validation:accuracy", RANGES, metric_definitions=METRICS,
        max_jobs=4, max_parallel_jobs=2, **extra,
    )  # fmt: skip


def _described(name, status="InProgress", best=None, **counters):
    out = {
        "HyperParameterTuningJobName": name,
        "HyperParameterTuningJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:hyper-parameter-tuning-job/{name}",
        "HyperParameterTuningJobConfig": {
            "Strategy": "Bayesian",
            "ResourceLimits": {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2},
        },
        "HyperParameterTuningJobStatus": status,
        "CreationTime": NOW,
        "TrainingJobStatusCounters": {
            "Completed": counters.get("completed", 0), "InProgress": counters.get("running", 0),
            "RetryableError": 0, "NonRetryableError": counters.get("failed", 0), "Stopped": 0,
        },
        "ObjectiveStatusCounters": {"Succeeded": 0, "Pending": 0, "Failed": 0},
    }  # fmt: skip
    if status == "Failed":
        out["FailureReason"] = "every trial failed"
    if best:
        out["BestTrainingJob"] = {
            "TrainingJobName": best, "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{best}",
            "CreationTime": NOW, "TrainingJobStatus": "Completed", "TunedHyperParameters": {"lr": "0.01"},
            "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "validation:accuracy", "Value": 0.91},
        }  # fmt: skip
    return out


def test_fit_describe_attach_roundtrip_against_moto(session, src):
    tuner = _tuner(session, tags={"team": "vision"})
    expected = tuner.create_tuning_job_request(job_name="t-life")
    tuner.fit(job_name="t-life", wait=False)

    assert tuner.latest_tuning_job.name == "t-life"
    described = tuner.describe()
    assert described["HyperParameterTuningJobName"] == "t-life"
    assert described["TrainingJobDefinition"] == expected["TrainingJobDefinition"]
    assert described["HyperParameterTuningJobConfig"] == expected["HyperParameterTuningJobConfig"]
    # the code was staged where the static hyperparameters point
    code = json.loads(
        expected["TrainingJobDefinition"]["StaticHyperParameters"]["sagemaker_submit_directory"]
    )
    bucket, key = code[len("s3://") :].split("/", 1)
    assert (
        session.boto_session.client("s3").head_object(Bucket=bucket, Key=key)["ContentLength"] > 0
    )

    attached = HyperparameterTuner.attach("t-life", sagemaker_session=session)
    assert type(attached.estimator) is PyTorch
    assert attached.latest_tuning_job.name == "t-life"
    again = attached.create_tuning_job_request(job_name="t-life")
    again.pop("Tags", None)
    expected.pop("Tags")
    assert again == expected
    # moto reports it Completed at once: wait() returns its last description
    assert attached.wait()["HyperParameterTuningJobStatus"] == "Completed"


def test_attach_a_job_sdk_v2_made(session, src):
    """SDK v2's class metadata (sagemaker.pytorch.estimator.PyTorch) gives launchbay's PyTorch."""
    request = _tuner(session).create_tuning_job_request(job_name="t-from-v2")
    static = request["TrainingJobDefinition"]["StaticHyperParameters"]
    assert json.loads(static["sagemaker_estimator_module"]) == "sagemaker.pytorch.estimator"
    static["_tuning_objective_metric"] = '"validation:accuracy"'  # what SageMaker adds
    details = {**request, "HyperParameterTuningJobStatus": "InProgress"}
    attached = HyperparameterTuner.attach(
        "t-from-v2", sagemaker_session=session, job_details=details
    )
    assert type(attached.estimator) is PyTorch
    assert attached.estimator.hyperparameters() == {"batch-size": "64"}
    assert set(attached._hyperparameter_ranges) == set(RANGES)


def test_wait_shows_status_trial_counts_and_best_so_far(session, src):
    job = TuningJob(session, "t-wait", stream=io.StringIO(), sleep=lambda seconds: None)
    with Stubber(session.sagemaker_client) as stub:
        name = {"HyperParameterTuningJobName": "t-wait"}
        stub.add_response(
            "describe_hyper_parameter_tuning_job", _described("t-wait", running=2), name
        )
        stub.add_response(
            "describe_hyper_parameter_tuning_job",
            _described("t-wait", best="t-wait-001-0a1b2c3d", completed=1, running=1), name,
        )  # fmt: skip
        stub.add_response(
            "describe_hyper_parameter_tuning_job",
            _described("t-wait", "Completed", best="t-wait-001-0a1b2c3d", completed=3, failed=1), name,
        )  # fmt: skip
        final = job.wait()
        stub.assert_no_pending_responses()
    assert final["HyperParameterTuningJobStatus"] == "Completed"
    lines = job.stream.getvalue().splitlines()
    assert len(lines) == 3
    assert "t-wait InProgress | trials: 0 completed, 2 in progress, 0 failed, 0 stopped" in lines[0]
    assert "best: t-wait-001-0a1b2c3d validation:accuracy=0.91" in lines[1]
    assert "t-wait Completed | trials: 3 completed, 0 in progress, 1 failed, 0 stopped" in lines[2]


def test_wait_raises_when_the_tuning_job_failed(session):
    job = TuningJob(session, "t-failed", stream=io.StringIO(), sleep=lambda seconds: None)
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response(
            "describe_hyper_parameter_tuning_job", _described("t-failed", "Failed", failed=4),
            {"HyperParameterTuningJobName": "t-failed"},
        )  # fmt: skip
        with pytest.raises(JobFailedError, match="every trial failed") as caught:
            job.wait()
    assert caught.value.status == "Failed"


def test_best_training_job_best_estimator_analytics_and_stop(session, src):
    tuner = _tuner(session)
    plan = tuner.tuning_plan(job_name="t-best")
    tuner.fit(job_name="t-best", wait=False)
    # a trial as SageMaker would start it, made on moto from the plan
    trial = plan.trial_request(plan.encode({"lr": 0.01, "epochs": 3, "optimizer": "sgd"}), 2)
    session.sagemaker_client.create_training_job(**trial)
    name = trial["TrainingJobName"]

    with Stubber(session.sagemaker_client) as stub:
        stub.add_response(
            "describe_hyper_parameter_tuning_job", _described("t-best", "Completed", best=name, completed=2),
            {"HyperParameterTuningJobName": "t-best"},
        )  # fmt: skip
        assert tuner.best_training_job() == name
    best = tuner.best_estimator({"TrainingJobName": name})
    assert type(best) is PyTorch and best.latest_training_job.name == name
    assert best.hyperparameters()["optimizer"] == '"sgd"'

    start = NOW
    summaries = [
        {"TrainingJobName": name, "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/a",
         "CreationTime": start, "TrainingStartTime": start, "TrainingEndTime": start + dt.timedelta(seconds=90),
         "TrainingJobStatus": "Completed", "TunedHyperParameters": {"lr": "0.01", "epochs": "3", "optimizer": '"sgd"'},
         "FinalHyperParameterTuningJobObjectiveMetric": {"MetricName": "validation:accuracy", "Value": 0.91}},
        {"TrainingJobName": "t-best-001-00000000", "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/b",
         "CreationTime": start, "TrainingJobStatus": "Failed",
         "TunedHyperParameters": {"lr": "0.05", "epochs": "1", "optimizer": '"adam"'}},
    ]  # fmt: skip
    analytics = tuner.analytics()
    with Stubber(session.sagemaker_client) as stub:
        listed = {"HyperParameterTuningJobName": "t-best", "MaxResults": 100}
        stub.add_response(
            "list_training_jobs_for_hyper_parameter_tuning_job",
            {"TrainingJobSummaries": summaries[:1], "NextToken": "page-2"}, listed,
        )  # fmt: skip
        stub.add_response(
            "list_training_jobs_for_hyper_parameter_tuning_job",
            {"TrainingJobSummaries": summaries[1:]}, {**listed, "NextToken": "page-2"},
        )  # fmt: skip
        frame = analytics.dataframe()
        stub.add_response(
            "stop_hyper_parameter_tuning_job", {}, {"HyperParameterTuningJobName": "t-best"}
        )
        tuner.stop_tuning_job()
        stub.add_client_error(
            "stop_hyper_parameter_tuning_job", "ValidationException", "job is not running",
            expected_params={"HyperParameterTuningJobName": "t-best"},
        )  # fmt: skip
        tuner.stop_tuning_job()  # already stopped: logged, not raised
        stub.assert_no_pending_responses()
    assert list(frame.columns) == [
        "lr", "epochs", "optimizer", "TrainingJobName", "TrainingJobStatus", "FinalObjectiveValue",
        "TrainingStartTime", "TrainingEndTime", "TrainingElapsedTimeSeconds",
    ]  # fmt: skip
    assert frame.loc[0, "lr"] == 0.01 and frame.loc[0, "optimizer"] == '"sgd"'
    assert frame.loc[0, "TrainingElapsedTimeSeconds"] == 90.0
    assert frame.loc[0, "FinalObjectiveValue"] == 0.91


def test_analytics_of_several_estimators_and_without_pandas(session, monkeypatch):
    from launchbay.tuning.analytics import HyperparameterTuningJobAnalytics

    analytics = HyperparameterTuningJobAnalytics("t-multi", session)
    summary = {
        "TrainingJobName": "t-multi-001-0a1b2c3d", "TrainingJobDefinitionName": "pytorch",
        "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/t", "CreationTime": NOW,
        "TrainingJobStatus": "InProgress", "TunedHyperParameters": {"lr": "0.1"},
    }  # fmt: skip
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response(
            "list_training_jobs_for_hyper_parameter_tuning_job", {"TrainingJobSummaries": [summary]},
            {"HyperParameterTuningJobName": "t-multi", "MaxResults": 100},
        )  # fmt: skip
        rows = analytics.rows()
    assert rows[0]["TrainingJobDefinitionName"] == "pytorch"
    assert "TrainingElapsedTimeSeconds" not in rows[0]
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if pandas were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'launchbay\[analytics\]'"):
        analytics.dataframe()


def test_local_estimators_send_nothing_to_sagemaker(session, src, home):
    tuner = HyperparameterTuner(
        _estimator(session, instance_type="local_process"), "validation:accuracy", RANGES,
        metric_definitions=METRICS, max_jobs=2,
    )  # fmt: skip
    request = tuner.create_tuning_job_request(job_name="t-local")  # the dry run works locally
    assert (
        request["TrainingJobDefinition"]["HyperParameterTuningResourceConfig"]["InstanceType"]
        == "local_process"
    )
    with Stubber(session.sagemaker_client) as stub:  # no response queued: any call would fail
        # the trials run here (tests/integration/test_tuning_local.py); this train.py logs no
        # objective, so the tuning job fails, as SageMaker's would
        with pytest.raises(JobFailedError, match="No objective metric was found"):
            tuner.fit(job_name="t-local")
        stub.assert_no_pending_responses()
    assert tuner.describe()["TrainingJobStatusCounters"]["Completed"] == 2
    assert isinstance(LocalTuningNotAvailable("x"), NotImplementedError)


def test_trial_names_and_hyperparameters_are_sagemakers(session, src):
    plan = _tuner(session).tuning_plan(job_name="t-trials")
    assert re.fullmatch(r"t-trials-007-[0-9a-f]{8}", plan.trial_name(7))
    values = plan.encode({"lr": 0.001, "epochs": 4.0, "optimizer": '"adam"'})
    assert values == {"lr": "0.001", "epochs": "4", "optimizer": '"adam"'}
    trial = plan.trial_request(values, 1, token="0a1b2c3d")
    assert trial["TrainingJobName"] == "t-trials-001-0a1b2c3d"
    hyperparameters = trial["HyperParameters"]
    assert hyperparameters["_tuning_objective_metric"] == '"validation:accuracy"'
    assert hyperparameters["batch-size"] == "64" and hyperparameters["optimizer"] == '"adam"'
    assert trial["AlgorithmSpecification"]["MetricDefinitions"] == METRICS
    assert (
        plan.max_parallel_jobs == 2 and plan.definition().ranges["lr"].scaling_type == "Logarithmic"
    )
    with pytest.raises(ConfigurationError, match="values\\['lr'\\]"):
        plan.encode({"lr": 5.0, "epochs": 4, "optimizer": "adam"})
    with pytest.raises(ConfigurationError, match="exactly: lr, epochs, optimizer"):
        plan.encode({"lr": 0.01})
