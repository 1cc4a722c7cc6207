"""A SageMaker job's metrics from CloudWatch: SDK v2's table, and the follower's metric line.

Jobs are created on the moto server and their metrics put into moto's CloudWatch
the way SageMaker publishes them (namespace ``/aws/sagemaker/TrainingJobs``,
dimension ``TrainingJobName``). The table is compared with SDK v2's own
``sagemaker.analytics.TrainingJobAnalytics`` for the same job and data. moto
reports jobs Completed at once, so the follow tests play the job's life with a
Stubber on the SageMaker client, while the metrics come from moto.
"""

from __future__ import annotations

import datetime as dt
import io
import logging

import boto3
import pytest
from botocore.stub import Stubber
from test_sagemaker_backend import (
    ANSI,
    COMPLETED,
    TRAINING,
    FakeTime,
    Terminal,
    description,
    make_backend,
    stub_describes,
    torch_estimator,
)

from launchbay import JobError
from launchbay.analytics import TrainingJobAnalytics
from launchbay.backends.cloudwatch_metrics import NAMESPACE, datapoints
from launchbay.job import TrainingJob

pd = pytest.importorskip("pandas")

DEFINITIONS = [
    {"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
    {"Name": "validation:accuracy", "Regex": "acc=([0-9.]+)"},
]


def put(job: str, name: str, points: list[tuple[dt.datetime, float]]) -> None:
    """Put datapoints as SageMaker does: one metric, the job's name as the only dimension."""
    boto3.client("cloudwatch").put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": "TrainingJobName", "Value": job}],
                "Timestamp": stamp,
                "Value": value,
            }
            for stamp, value in points
        ],
    )


def v2_analytics(name: str, **kwargs):
    import sagemaker
    from sagemaker.analytics import TrainingJobAnalytics as V2Analytics

    v2_session = sagemaker.Session(boto_session=boto3.Session(region_name="us-west-2"))
    return V2Analytics(name, sagemaker_session=v2_session, **kwargs)


@pytest.fixture
def job(session, src):
    """A job on moto with metrics in CloudWatch: (name, TrainingStartTime)."""
    est = torch_estimator(session, metric_definitions=DEFINITIONS, instance_count=1)
    name = "metrics-1"
    est.fit(wait=False, job_name=name)
    start = est.latest_training_job.describe()["TrainingStartTime"]
    # moto replaces the job's definitions with one of its own: that one is the default
    put(name, "test:dcg", [(start + dt.timedelta(seconds=s), v) for s, v in [(5, 0.5), (9, 0.7)]])
    put(
        name,
        "train:loss",
        [(start + dt.timedelta(seconds=20 * i + 3), 2.0 - 0.1 * i) for i in range(15)],
    )
    put(
        name,
        "validation:accuracy",
        [(start + dt.timedelta(seconds=60 * i + 30), 0.5 + 0.05 * i) for i in range(4)],
    )
    put("another-job", "train:loss", [(start + dt.timedelta(seconds=10), 99.0)])
    return name, start


def test_sagemaker_job_dataframe_is_sdk_v2s_for_the_same_data(session, job, tmp_path):
    name, start = job
    window = {"start_time": start - dt.timedelta(minutes=1), "end_time": start + dt.timedelta(minutes=10)}  # fmt: skip
    cases = [
        {},  # the job's metric definitions, its own window
        {"metric_names": ["validation:accuracy", "train:loss"], **window},
        {"metric_names": ["train:loss"], "period": 120, **window},
        {"metric_names": ["train:loss", "no:such"], "end_time": start + dt.timedelta(minutes=2)},
    ]
    for kwargs in cases:
        ours = TrainingJobAnalytics(name, sagemaker_session=session, **kwargs).dataframe()
        theirs = v2_analytics(name, **kwargs).dataframe()
        assert len(ours) > 0, kwargs
        pd.testing.assert_frame_equal(ours, theirs)
    # what the default looked at: moto's definition, in the job's first minute
    frame = TrainingJobAnalytics(name, sagemaker_session=session).dataframe()
    assert frame.to_dict("list") == {
        "timestamp": [0.0],
        "metric_name": ["test:dcg"],
        "value": [pytest.approx(0.6)],
    }
    ours_csv, theirs_csv = tmp_path / "ours.csv", tmp_path / "theirs.csv"
    TrainingJobAnalytics(name, ["train:loss"], session, **window).export_csv(str(ours_csv))
    v2_analytics(name, metric_names=["train:loss"], **window).export_csv(str(theirs_csv))
    assert ours_csv.read_text() == theirs_csv.read_text()
    assert ours_csv.read_text().startswith(",timestamp,metric_name,value\n0,0.0,train:loss,")


def test_estimator_training_job_analytics_reads_cloudwatch_for_its_sagemaker_job(session, src):
    est = torch_estimator(session, metric_definitions=DEFINITIONS, instance_count=1)
    est.fit(wait=False, job_name="metrics-est")
    start = est.latest_training_job.describe()["TrainingStartTime"]
    put("metrics-est", "test:dcg", [(start + dt.timedelta(seconds=1), 3.0)])
    frame = est.training_job_analytics.dataframe()
    assert list(frame.columns) == ["timestamp", "metric_name", "value"]
    assert frame.to_dict("records") == [{"timestamp": 0.0, "metric_name": "test:dcg", "value": 3.0}]


def test_cloudwatch_refusing_is_a_job_error_naming_the_permission(session, job):
    name, _ = job
    with Stubber(session.cloudwatch_client) as stub:
        stub.add_client_error("get_metric_statistics", "AccessDenied", "not allowed")
        with pytest.raises(JobError, match=r"cloudwatch:GetMetricStatistics"):
            TrainingJobAnalytics(name, ["train:loss"], session).rows()


def test_a_window_longer_than_1440_periods_is_read_in_pieces_of_whole_periods(session):
    start = dt.datetime(2024, 5, 1, 0, 0, 30, tzinfo=dt.timezone.utc)
    end = start + dt.timedelta(days=2, minutes=1)
    calls = []

    class Client:
        def get_metric_statistics(self, **kwargs):
            calls.append((kwargs["StartTime"], kwargs["EndTime"]))
            # the same datapoint at a piece's edge comes once
            return {"Datapoints": [{"Timestamp": start, "Average": 1.0}]}

    assert datapoints(Client(), "j", "m", start, end, 60) == [(start, 1.0)]
    assert calls == [
        (start, start + dt.timedelta(days=1)),
        (start + dt.timedelta(days=1), start + dt.timedelta(days=2)),
        (start + dt.timedelta(days=2), end),
    ]


# --------------------------------------------------------------------------- following


def running(name: str, start: dt.datetime, status: str = "InProgress", transitions=None):
    return description(
        name,
        status,
        transitions or [TRAINING],
        TrainingStartTime=start,
        AlgorithmSpecification={
            "TrainingImage": "img",
            "TrainingInputMode": "File",
            "MetricDefinitions": DEFINITIONS,
        },
    )


def follow_with_metrics(session, name: str, out, polls: int, feed, **kwargs) -> FakeTime:
    """Follow a job InProgress for ``polls`` polls, then Completed; ``feed(n)`` runs at sleep n."""
    now = dt.datetime.now(dt.timezone.utc)
    start = now - dt.timedelta(minutes=10)
    fake = FakeTime()
    fake.callbacks.append(lambda: feed(len(fake.sleeps), now))
    backend = make_backend(session, fake, out, **kwargs)
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, *[running(name, start)] * polls)
        stub_describes(stub, name, running(name, start, "Completed", [TRAINING, COMPLETED]))
        final = TrainingJob(name, backend).wait(logs=False)
    assert final["TrainingJobStatus"] == "Completed"
    return fake


def test_follower_prints_a_metrics_line_when_the_newest_values_change(session):
    name = "follow-metrics-1"
    calls = []
    session.cloudwatch_client.meta.events.register(
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: calls.append(1)
    )

    def feed(n, now):
        if n == 1:
            put(name, "train:loss", [(now - dt.timedelta(minutes=3), 0.9)])
        if n == 3:
            put(name, "train:loss", [(now - dt.timedelta(minutes=1), 0.5)])
            put(name, "validation:accuracy", [(now - dt.timedelta(minutes=1), 0.75)])

    out = io.StringIO()
    follow_with_metrics(session, name, out, 6, feed, metrics_interval=1.0)
    lines = out.getvalue().splitlines()
    metrics = [line.split(" ", 2)[2] for line in lines if " Metrics - " in line]
    assert metrics == [
        "Metrics - train:loss=0.9",
        "Metrics - train:loss=0.5, validation:accuracy=0.75",
    ]  # one line per change, none while the values stay
    assert lines[-1].endswith("Completed - Training job completed")
    assert "\r" not in out.getvalue()
    assert len(calls) == 6  # one GetMetricData per poll while InProgress (interval 1 s here)


def test_metrics_are_read_at_most_once_per_interval(session):
    name = "follow-metrics-2"
    calls = []
    session.cloudwatch_client.meta.events.register(
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: calls.append(params)
    )
    fake = follow_with_metrics(session, name, io.StringIO(), 8, lambda n, now: None)
    # polls at 0, 1, 3, 7, 15, 31, 61 and 91 s (backing off): read at 0 and at 61 s
    assert fake.sleeps[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert len(calls) == 2
    (query,) = calls[0]["MetricDataQueries"][:1]
    assert query["MetricStat"]["Metric"] == {
        "Namespace": "/aws/sagemaker/TrainingJobs",
        "MetricName": "train:loss",
        "Dimensions": [{"Name": "TrainingJobName", "Value": name}],
    }
    assert len(calls[0]["MetricDataQueries"]) == 2  # every metric in the one call


def test_the_live_status_line_ends_with_the_newest_metric_values(session):
    name = "follow-metrics-3"

    def feed(n, now):
        if n == 1:
            put(name, "train:loss", [(now - dt.timedelta(minutes=2), 0.25)])

    out = Terminal()
    follow_with_metrics(session, name, out, 3, feed, metrics_interval=1.0)
    last = ANSI.sub("", out.getvalue()).rsplit("\r", 1)[1]
    # the values come before the message, which a narrow terminal cuts first
    assert last.startswith(f"{name} | Completed | train:loss=0.25 | Completed: Training job")


def test_a_cloudwatch_error_warns_once_and_following_goes_on(session, caplog):
    name = "follow-metrics-4"
    caplog.set_level(logging.WARNING, logger="launchbay.backends.sagemaker")
    out = io.StringIO()
    with Stubber(session.cloudwatch_client) as cw:
        cw.add_client_error("get_metric_data", "AccessDenied", "no metrics for you")
        follow_with_metrics(session, name, out, 5, lambda n, now: None, metrics_interval=1.0)
        cw.assert_no_pending_responses()
    warnings = [r for r in caplog.records if "CloudWatch metrics" in r.getMessage()]
    assert len(warnings) == 1 and "no metrics for you" in warnings[0].getMessage()
    assert out.getvalue().splitlines()[-1].endswith("Completed - Training job completed")


def test_throttled_metric_reads_are_skipped_silently(session, caplog):
    name = "follow-metrics-5"
    caplog.set_level(logging.WARNING, logger="launchbay.backends.sagemaker")
    with Stubber(session.cloudwatch_client) as cw:
        for _ in range(3):
            cw.add_client_error("get_metric_data", "Throttling", "Rate exceeded", 400)
        cw.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {
                        "Id": "m0",
                        "Label": "train:loss",
                        "Timestamps": [dt.datetime(2024, 5, 1, 12, 5, tzinfo=dt.timezone.utc)],
                        "Values": [1.5],
                        "StatusCode": "Complete",
                    }
                ]
            },
        )
        out = io.StringIO()
        follow_with_metrics(session, name, out, 4, lambda n, now: None, metrics_interval=1.0)
    assert not [r for r in caplog.records if "CloudWatch metrics" in r.getMessage()]
    assert "2024-05-01 12:05:00 Metrics - train:loss=1.5" in out.getvalue().splitlines()
