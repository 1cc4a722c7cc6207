"""The SageMaker backend against a real moto server, with botocore's Stubber for lifecycles.

moto completes every training job at once and writes no CloudWatch logs, so:

* submission, listing, describing and S3 go to moto;
* log tailing reads moto's CloudWatch Logs, with streams seeded the way SageMaker
  writes them (group ``/aws/sagemaker/TrainingJobs``, stream ``<job>/algo-<n>-<epoch>``),
  events added between polls by the injected ``sleep``;
* job lifecycles (InProgress -> Completed/Failed/Stopped, throttling in between) are
  played by a Stubber on the real SageMaker client of the session.

Sleeps are injected (:class:`FakeTime`): no test waits for real.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os
import re
import time

import boto3
import pytest
from botocore.stub import Stubber

from factories import sagemaker_estimator
from launchbay import ConfigurationError, JobError, JobFailedError
from launchbay._logs import LogPrinter, show_logs
from launchbay.backends.plan import plan_request
from launchbay.backends.sagemaker import (
    LOG_GROUP,
    MAX_TRANSIENT_POLLS,
    SageMakerBackend,
    billing_summary,
    check_request,
    pick_failed_stream,
)
from launchbay.job import TrainingJob
from launchbay.pytorch import PyTorch
from terminal import read_pty

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3-cpu-py311"
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------- helpers


class FakeTime:
    """An injected clock: ``sleep`` advances it at once and runs the registered callbacks."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.callbacks: list = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for callback in list(self.callbacks):
            callback()

    def clock(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def make_backend(session, fake, stream=None, **kwargs) -> SageMakerBackend:
    kwargs.setdefault("status_interval", 0.0)
    return SageMakerBackend(session, stream=stream, sleep=fake.sleep, clock=fake.clock, **kwargs)


def transition(status: str, message: str, minute: int) -> dict:
    return {
        "Status": status,
        "StatusMessage": message,
        "StartTime": T0 + dt.timedelta(minutes=minute),
    }


STARTING = transition("Starting", "Preparing the instances for training", 0)
LAUNCHING = transition("Starting", "Launching requested ML instances", 0)
DOWNLOADING = transition("Downloading", "Downloading the training image", 2)
TRAINING = transition("Training", "Training image download completed. Training in progress.", 4)
UPLOADING = transition("Uploading", "Uploading generated training model", 9)
COMPLETED = transition("Completed", "Training job completed", 10)


def description(name: str, status: str, transitions: list[dict], hosts: int = 1, **extra) -> dict:
    """A DescribeTrainingJob response as SageMaker returns it at one point of a job's life."""
    response = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "TrainingJobStatus": status,
        "SecondaryStatus": transitions[-1]["Status"] if transitions else "Starting",
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {
            "InstanceType": "ml.m5.xlarge",
            "InstanceCount": hosts,
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": T0,
        "LastModifiedTime": T0 + dt.timedelta(minutes=len(transitions)),
        "SecondaryStatusTransitions": [dict(t) for t in transitions],
    }
    if status == "Completed":
        response["ModelArtifacts"] = {
            "S3ModelArtifacts": f"s3://bucket/out/{name}/output/model.tar.gz"
        }
    response.update(extra)
    return response


def stub_describes(stub: Stubber, name: str, *responses) -> None:
    for response in responses:
        if isinstance(response, str):  # an error code
            stub.add_client_error(
                "describe_training_job",
                service_error_code=response,
                service_message="Rate exceeded",
                http_status_code=400,
                expected_params={"TrainingJobName": name},
            )
        else:
            stub.add_response("describe_training_job", response, {"TrainingJobName": name})


class Logs:
    """Seeds moto's CloudWatch Logs the way SageMaker writes a training job's output."""

    def __init__(self, job: str) -> None:
        self.client = boto3.client("logs")
        self.job = job
        self.streams: dict[str, str] = {}
        self.written: list[tuple[int, str, str]] = []  # (timestamp, host, line)
        self.clock = int(time.time() * 1000) - 3_600_000
        try:
            self.client.create_log_group(logGroupName=LOG_GROUP)
        except self.client.exceptions.ResourceAlreadyExistsException:
            pass

    def stream(self, host: str) -> str:
        if host not in self.streams:
            name = f"{self.job}/{host}-{1714564800 + len(self.streams)}"
            self.client.create_log_stream(logGroupName=LOG_GROUP, logStreamName=name)
            self.streams[host] = name
        return self.streams[host]

    def write(self, host: str, *lines: str, at: int | None = None) -> None:
        stream = self.stream(host)
        events = []
        for line in lines:
            self.clock += 1
            stamp = self.clock if at is None else at
            events.append({"timestamp": stamp, "message": line})
            self.written.append((stamp, host, line))
        self.client.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)


def host_lines(text: str) -> list[tuple[str, str]]:
    """``(host, line)`` of every ``algo-N | line`` printed."""
    found = []
    for raw in ANSI.sub("", text).split("\n"):
        match = re.match(r"^(algo-\d+)\s*\| (.*)$", raw.split("\r")[-1])
        if match:
            found.append((match.group(1), match.group(2)))
    return found


def count_calls(client, operation: str) -> list[dict]:
    calls: list[dict] = []
    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(
        f"provide-client-params.{service}.{operation}",
        lambda params, **_: calls.append(dict(params)),
    )
    return calls


@pytest.fixture(autouse=True)
def _colours(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)


def image_request(name: str, volume: int, max_run: int) -> dict:
    """A CreateTrainingJob request of job ``name``: ``IMAGE`` on one ml.m5.xlarge with a
    ``volume`` GB volume, at most ``max_run`` seconds, output to s3://bucket/out."""
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
        "ResourceConfig": {
            "InstanceType": "ml.m5.xlarge",
            "InstanceCount": 1,
            "VolumeSizeInGB": volume,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": max_run},
    }


def torch_estimator(session, **overrides):
    kwargs = dict(instance_count=2, instance_type="ml.c5.xlarge", sagemaker_session=session)
    return sagemaker_estimator(**{**kwargs, **overrides})


# --------------------------------------------------------------------------- submission (moto)


def test_fit_submits_to_moto_and_the_job_handle_works(session, src):
    est = torch_estimator(session)
    job = est.fit({"train": "s3://data/train"}, wait=False, job_name="submit-1")
    assert est.latest_training_job is job and job.job_name == "submit-1"
    described = job.describe()
    assert described["TrainingJobStatus"] == "Completed"  # moto completes at once
    assert described["ResourceConfig"]["InstanceType"] == "ml.c5.xlarge"
    assert est.model_data == described["ModelArtifacts"]["S3ModelArtifacts"]
    assert job.model_data.endswith("/submit-1/output/model.tar.gz")


def test_fit_wait_false_returns_at_once_without_polling(session, src, monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(
        "launchbay.backends.backend_for_plan", lambda _plan, s: make_backend(s, fake)
    )
    describes = count_calls(session.sagemaker_client, "DescribeTrainingJob")
    creates = count_calls(session.sagemaker_client, "CreateTrainingJob")
    started = time.monotonic()
    job = torch_estimator(session).fit(wait=False, job_name="nowait-1")
    assert time.monotonic() - started < 5
    assert job.name == "nowait-1" and len(creates) == 1
    assert describes == [] and fake.sleeps == []


def test_a_request_meant_for_local_runs_is_refused_before_any_call(session, src):
    request = torch_estimator(session).create_training_job_request(job_name="local-uris")
    check_request(request)
    local_output = dict(request, OutputDataConfig={"S3OutputPath": "file:///tmp/out"})
    with Stubber(session.sagemaker_client):  # no response queued: any call would fail
        # One check, where the plan is made, in the words every entry point uses:
        # the argument, then the request field.
        with pytest.raises(
            ConfigurationError,
            match=r"output_path='file:///tmp/out'.*local.*OutputDataConfig\.S3OutputPath",
        ):
            SageMakerBackend(session).run(plan_request(local_output))
    bad_type = dict(request, ResourceConfig={"InstanceType": "local_process", "InstanceCount": 1})
    with pytest.raises(ConfigurationError, match="ResourceConfig.InstanceType"):
        check_request(bad_type)
    bad_hp = dict(request, HyperParameters={"epochs": 3})
    with pytest.raises(ConfigurationError, match=r"HyperParameters\['epochs'\]"):
        check_request(bad_hp)


def test_bad_logs_value_fails_before_submission(session, src):
    creates = count_calls(session.sagemaker_client, "CreateTrainingJob")
    with pytest.raises(ConfigurationError, match="logs='Everything'"):
        torch_estimator(session).fit(logs="Everything", job_name="bad-logs")
    assert creates == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [("All", True), (True, True), ("Rules", True), ("Training", True), ("all", True),
     ("None", False), (False, False), (None, False)],
)  # fmt: skip
def test_logs_values_of_sdk_v2(value, shown):
    assert show_logs(value) is shown


def test_list_jobs_newest_first_with_status_filter(session):
    client = session.sagemaker_client
    backend = SageMakerBackend(session)
    for name in ("list-a", "list-b", "list-c"):
        backend.run(plan_request(image_request(name, volume=30, max_run=3600)))
        time.sleep(0.01)  # distinct CreationTime
    listed = [j["TrainingJobName"] for j in backend.list_jobs()]
    assert listed == ["list-c", "list-b", "list-a"]
    # moto ignores SortBy/SortOrder (the service sorts); the result is sorted all the same
    two = backend.list_jobs(max_results=2)
    assert len(two) == 2 and two[0]["CreationTime"] >= two[1]["CreationTime"]
    assert len(backend.list_jobs(status="Completed")) == 3
    assert backend.list_jobs(status="Failed") == []
    with pytest.raises(ConfigurationError, match="status='Running'"):
        backend.list_jobs(status="Running")
    with pytest.raises(ConfigurationError, match="max_results=0"):
        backend.list_jobs(max_results=0)
    assert client.meta.config.retries["mode"] == "standard"


def test_botocore_errors_become_job_errors_with_the_next_step(session):
    backend = SageMakerBackend(session)
    with pytest.raises(JobError, match=r"'no-such-job'.*launchbay list") as info:
        backend.describe("no-such-job")
    assert info.value.__cause__ is not None
    with Stubber(session.sagemaker_client) as stub:
        stub.add_client_error("create_training_job", "ResourceInUse", "Job already exists")
        with pytest.raises(JobError, match=r"'dup-1'.*already exists.*another job_name"):
            backend.run(plan_request(image_request("dup-1", volume=1, max_run=60)))
        stub.add_client_error("stop_training_job", "AccessDeniedException", "not allowed")
        with pytest.raises(JobError, match=r"sagemaker:StopTrainingJob"):
            backend.stop("dup-1")


def test_stop_of_a_finished_job_does_nothing(session):
    backend = SageMakerBackend(session)
    with Stubber(session.sagemaker_client) as stub:
        stub.add_client_error(
            "stop_training_job", "ValidationException", "The job status is Completed"
        )
        stub_describes(stub, "done-1", description("done-1", "Completed", [STARTING, COMPLETED]))
        backend.stop("done-1")
        stub.add_response("stop_training_job", {}, {"TrainingJobName": "run-1"})
        backend.stop("run-1")
        stub.assert_no_pending_responses()


def test_clients_use_botocore_retry_modes_and_a_throttled_call_is_retried(session, src):
    for client in (session.sagemaker_client, session.logs_client):
        assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 8}
    torch_estimator(session).fit(wait=False, job_name="retried-1")
    from botocore.awsrequest import AWSResponse

    class Raw:
        def stream(self, **_):
            yield json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode()

    sent = []

    def throttle_first(request, **_):
        sent.append(request.url)
        if len(sent) == 1:
            return AWSResponse(
                request.url, 400, {"Content-Type": "application/x-amz-json-1.1"}, Raw()
            )
        return None

    session.sagemaker_client.meta.events.register(
        "before-send.sagemaker.DescribeTrainingJob", throttle_first
    )
    assert SageMakerBackend(session).describe("retried-1")["TrainingJobStatus"] == "Completed"
    assert len(sent) == 2  # botocore retried the throttled call itself


# --------------------------------------------------------------------------- log tailing (moto logs)


def test_tailer_reads_every_line_once_across_pages_polls_and_late_hosts(session):
    """Three hosts, pages of 5 events, lines arriving between polls and after the end."""
    name = "tail-1"
    logs = Logs(name)
    for index in range(12):  # more than two pages each before the first poll
        logs.write("algo-1", f"a1 line {index}")
        logs.write("algo-2", f"a2 line {index}")
    fake = FakeTime()
    polls = {"n": 0}

    def arrive():
        polls["n"] += 1
        n = polls["n"]
        logs.write("algo-1", *[f"a1 poll {n} #{i}" for i in range(7)])
        logs.write("algo-2", f"a2 poll {n}")
        if n >= 2:  # algo-3 starts writing late
            logs.write("algo-3", *[f"a3 poll {n} #{i}" for i in range(6)])

    fake.callbacks.append(arrive)
    running = [STARTING, DOWNLOADING, TRAINING]
    out = io.StringIO()
    backend = make_backend(session, fake, out, log_page_size=5)
    calls = count_calls(session.logs_client, "GetLogEvents")
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(
            stub, name,
            description(name, "InProgress", running[:1], hosts=3),
            description(name, "InProgress", running[:2], hosts=3),
            description(name, "InProgress", running, hosts=3),
            description(name, "InProgress", running, hosts=3),
            description(name, "Completed", [*running, UPLOADING, COMPLETED], hosts=3,
                        TrainingTimeInSeconds=600, BillableTimeInSeconds=600),
        )  # fmt: skip
        final = backend.wait(name, logs="All")
        stub.assert_no_pending_responses()
    assert final["TrainingJobStatus"] == "Completed"
    text = out.getvalue()
    printed = host_lines(text)
    expected = [(host, line) for _, host, line in sorted(logs.written)]
    assert printed == expected  # every line, once, interleaved in time order
    assert {host for host, _ in printed} == {"algo-1", "algo-2", "algo-3"}
    assert polls["n"] >= 5 and any(line.startswith("a1 poll 5") for _, line in printed)
    assert max(c.get("limit", 0) for c in calls) == 5 and len(calls) > 3 * polls["n"]
    assert "\r" not in text and "\x1b" not in text


def test_print_logs_prints_all_hosts_and_follows_until_the_end(session):
    name = "print-1"
    logs = Logs(name)
    logs.write("algo-2", "second host starts")
    logs.write("algo-1", *[f"first {i}" for i in range(3)])
    out = io.StringIO()
    fake = FakeTime()
    backend = make_backend(session, fake, log_page_size=2)
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, description(name, "Completed", [STARTING, COMPLETED], hosts=2))
        backend.print_logs(name, stream=out)
    assert out.getvalue().splitlines() == [
        "algo-2 | second host starts",
        "algo-1 | first 0",
        "algo-1 | first 1",
        "algo-1 | first 2",
    ]
    assert fake.sleeps == []

    out = io.StringIO()
    fake.callbacks.append(lambda: logs.write("algo-2", f"tick {len(fake.sleeps)}"))
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(
            stub, name,
            description(name, "InProgress", [STARTING, TRAINING], hosts=2),
            description(name, "InProgress", [STARTING, TRAINING], hosts=2),
            description(name, "Completed", [STARTING, TRAINING, COMPLETED], hosts=2),
        )  # fmt: skip
        backend.print_logs(name, follow=True, stream=out)
        stub.assert_no_pending_responses()
    printed = host_lines(out.getvalue())
    assert printed[:4] == [("algo-2", "second host starts")] + [
        ("algo-1", f"first {i}") for i in range(3)
    ]
    ticks = [line for host, line in printed if line.startswith("tick")]
    assert ticks == [f"tick {i}" for i in range(1, len(fake.sleeps) + 1)]
    assert "Training" not in out.getvalue()  # logs only, no status lines


# --------------------------------------------------------------------------- lifecycles (Stubber)


def test_in_progress_to_completed_shows_transitions_in_order_as_plain_lines(session, caplog):
    name = "life-1"
    out = io.StringIO()
    fake = FakeTime()
    backend = make_backend(session, fake, out)
    caplog.set_level(logging.INFO, logger="launchbay.backends.sagemaker")
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(
            stub, name,
            description(name, "InProgress", [STARTING]),
            description(name, "InProgress", [STARTING]),
            description(name, "InProgress", [LAUNCHING]),
            description(name, "InProgress", [LAUNCHING, DOWNLOADING]),
            description(name, "InProgress", [LAUNCHING, DOWNLOADING, TRAINING]),
            description(name, "InProgress", [LAUNCHING, DOWNLOADING, TRAINING, UPLOADING]),
            description(name, "Completed", [LAUNCHING, DOWNLOADING, TRAINING, UPLOADING, COMPLETED],
                        TrainingTimeInSeconds=610, BillableTimeInSeconds=610),
        )  # fmt: skip
        job = TrainingJob(name, backend)
        final = job.wait(logs=False)
        stub.assert_no_pending_responses()
    assert final["TrainingJobStatus"] == "Completed"
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text.splitlines() == [
        "2024-05-01 12:00:00 Starting - Preparing the instances for training",
        "2024-05-01 12:00:00 Starting - Launching requested ML instances",
        "2024-05-01 12:02:00 Downloading - Downloading the training image",
        "2024-05-01 12:04:00 Training - Training image download completed. Training in progress.",
        "2024-05-01 12:09:00 Uploading - Uploading generated training model",
        "2024-05-01 12:10:00 Completed - Training job completed",
    ]  # logs=False: status only, and the billing line only in the log
    assert "Training job life-1: training seconds 610, billable seconds 610" in caplog.text
    # backoff: 1 s, doubling while nothing changes, back to 1 s on each change
    assert fake.sleeps == [1.0, 2.0, 1.0, 1.0, 1.0, 1.0]


def test_polling_backs_off_to_the_maximum_and_resets_when_logs_arrive(session):
    name = "backoff-1"
    logs = Logs(name)
    fake = FakeTime()
    fake.callbacks.append(lambda: len(fake.sleeps) == 8 and logs.write("algo-1", "finally"))
    out = io.StringIO()
    backend = make_backend(session, fake, out)
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, *[description(name, "InProgress", [TRAINING])] * 10)
        stub_describes(stub, name, description(name, "Completed", [TRAINING, COMPLETED]))
        backend.wait(name, logs=True)
    assert fake.sleeps[:9] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 1.0]
    assert host_lines(out.getvalue()) == [("algo-1", "finally")]


def test_fit_of_a_failing_job_raises_with_reason_and_failing_host_traceback(
    session, src, monkeypatch
):
    name = "fail-1"
    logs = Logs(name)
    logs.write("algo-1", "epoch 1 loss 0.9", "epoch 2 loss 0.8")
    logs.write("algo-2", "epoch 1 loss 0.9")
    noise = [f"batch {i}" for i in range(30)]
    logs.write("algo-2", *noise)
    traceback = [
        "Traceback (most recent call last):",
        '  File "/opt/ml/code/train.py", line 42, in <module>',
        "    main()",
        '  File "/opt/ml/code/train.py", line 30, in main',
        "    raise ValueError('bad batch shape (3, 5)')",
        "ValueError: bad batch shape (3, 5)",
    ]
    logs.write("algo-2", *traceback)
    # algo-1 fails later, as a consequence of algo-2's death
    logs.write("algo-1", "[rank0]: RuntimeError: NCCL communicator was aborted on rank 0")
    fake = FakeTime()
    out = io.StringIO()
    monkeypatch.setattr(
        "launchbay.backends.backend_for_plan", lambda _plan, s: make_backend(s, fake, out)
    )
    reason = "AlgorithmError: ExecuteUserScriptError: exit code 1"
    est = torch_estimator(session)
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response(
            "create_training_job",
            {"TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{name}"},
        )
        stub_describes(
            stub, name,
            description(name, "InProgress", [STARTING, TRAINING], hosts=2),
            description(name, "Failed", [STARTING, TRAINING, transition("Failed", reason, 6)],
                        hosts=2, FailureReason=reason),
        )  # fmt: skip
        with pytest.raises(JobFailedError) as info:
            est.fit(job_name=name)
    error = info.value
    assert (error.job_name, error.status, error.reason) == (name, "Failed", reason)
    assert error.log_host == "algo-2"
    assert error.log_tail[-6:] == traceback and len(error.log_tail) == 20
    message = str(error)
    assert message.startswith(f"Training job {name} ended with status Failed: {reason}")
    assert "Last 20 log line(s) of algo-2 (CloudWatch Logs /aws/sagemaker/TrainingJobs" in message
    assert "    ValueError: bad batch shape (3, 5)" in message
    assert ("algo-2", "ValueError: bad batch shape (3, 5)") in host_lines(out.getvalue())
    assert est.latest_training_job.name == name


def test_wait_later_and_from_attach_raise_the_same_failure(session):
    name = "fail-2"
    logs = Logs(name)
    logs.write("algo-1", "starting", "Traceback (most recent call last):", "KeyError: 'label'")
    script = {
        "sagemaker_program": json.dumps("train.py"),
        "sagemaker_submit_directory": json.dumps("s3://bucket/source/abc/sourcedir.tar.gz"),
    }
    failed = description(name, "Failed", [STARTING, transition("Failed", "boom", 3)],
                         FailureReason="AlgorithmError: boom", HyperParameters=script)  # fmt: skip
    fake = FakeTime()
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, failed, failed)
        job = TrainingJob(name, make_backend(session, fake, io.StringIO()))
        with pytest.raises(JobFailedError, match="KeyError: 'label'") as later:
            job.wait(logs="None")
        attached = PyTorch.attach(name, sagemaker_session=session)
    assert later.value.log_host == "algo-1" and later.value.reason == "AlgorithmError: boom"
    assert attached.latest_training_job.name == name
    attached.latest_training_job.backend.stream = io.StringIO()
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, failed, failed)
        with pytest.raises(JobFailedError, match="KeyError: 'label'") as info:
            attached.latest_training_job.wait()
    assert info.value.log_tail == [
        "starting",
        "Traceback (most recent call last):",
        "KeyError: 'label'",
    ]


def test_stopped_job_raises_with_status_stopped(session):
    name = "stop-1"
    logs = Logs(name)
    logs.write("algo-1", "epoch 1", "epoch 2")
    reason = "MaxRuntimeExceeded: Training job exceeded MaxRuntimeInSeconds"
    fake = FakeTime()
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(
            stub, name,
            description(name, "InProgress", [TRAINING]),
            description(name, "Stopping", [TRAINING, transition("Stopping", "Stopping the job", 5)]),
            description(name, "Stopped", [TRAINING, transition("MaxRuntimeExceeded", reason, 6)],
                        FailureReason=reason),
        )  # fmt: skip
        job = TrainingJob(name, make_backend(session, fake, io.StringIO()))
        with pytest.raises(JobFailedError, match="ended with status Stopped: MaxRuntime") as info:
            job.wait()
    assert info.value.status == "Stopped" and info.value.log_tail == ["epoch 1", "epoch 2"]


def test_throttling_between_polls_does_not_fail_the_wait(session):
    name = "throttle-1"
    fake = FakeTime()
    out = io.StringIO()
    stream = f"{name}/algo-1-1714564800"
    group = {"logGroupName": LOG_GROUP}
    read = {**group, "logStreamName": stream, "startFromHead": True}

    def event(i):
        return {"timestamp": 1714564800000 + i, "message": f"line {i}", "ingestionTime": 1}

    with Stubber(session.sagemaker_client) as sm, Stubber(session.logs_client) as cw:
        stub_describes(
            sm, name,
            description(name, "InProgress", [TRAINING]),
            "ThrottlingException",
            description(name, "InProgress", [TRAINING]),
            "ThrottlingException",
            "ThrottlingException",
            description(name, "Completed", [TRAINING, COMPLETED]),
        )  # fmt: skip
        streams = {"logStreams": [{"logStreamName": stream}]}
        # poll 1: discovering the streams is throttled
        cw.add_client_error("describe_log_streams", "ThrottlingException", http_status_code=400)
        # poll 2: found; a first page, then the next page is throttled
        cw.add_response("describe_log_streams", streams)
        cw.add_response(
            "get_log_events", {"events": [event(0), event(1)], "nextForwardToken": "f/1"}, read
        )
        cw.add_client_error("get_log_events", "ThrottlingException", http_status_code=400)
        # poll 3: the next page, from the token that was kept, then the end of the stream
        cw.add_response("get_log_events", {"events": [event(2)], "nextForwardToken": "f/2"},
                        {**read, "nextToken": "f/1"})  # fmt: skip
        at_end = ({"events": [], "nextForwardToken": "f/2"}, {**read, "nextToken": "f/2"})
        cw.add_response("get_log_events", *at_end)
        # polls 4 and 5 (DescribeTrainingJob throttled twice): nothing new
        cw.add_response("get_log_events", *at_end)
        cw.add_response("get_log_events", *at_end)
        # the end: status changed, so streams are looked up again; one last read after a pause
        cw.add_response("describe_log_streams", streams)
        cw.add_response("get_log_events", *at_end)
        cw.add_response("get_log_events", *at_end)
        final = make_backend(session, fake, out).wait(name)
        sm.assert_no_pending_responses()
        cw.assert_no_pending_responses()
    assert final["TrainingJobStatus"] == "Completed"
    assert host_lines(out.getvalue()) == [
        ("algo-1", "line 0"),
        ("algo-1", "line 1"),
        ("algo-1", "line 2"),
    ]


def test_throttling_that_never_ends_gives_up_with_the_next_step(session):
    name = "throttle-2"
    fake = FakeTime()
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(stub, name, description(name, "InProgress", [TRAINING]))
        stub_describes(stub, name, *["ThrottlingException"] * MAX_TRANSIENT_POLLS)
        with pytest.raises(
            JobError, match=r"keeps running on SageMaker.*launchbay logs throttle-2"
        ):
            make_backend(session, fake, io.StringIO()).wait(name, logs=False)
    assert max(fake.sleeps) == 30.0


def test_unreadable_logs_leave_the_status(session):
    name = "denied-1"
    out = io.StringIO()
    with Stubber(session.sagemaker_client) as sm, Stubber(session.logs_client) as cw:
        stub_describes(sm, name, description(name, "InProgress", [TRAINING]),
                       description(name, "Completed", [TRAINING, COMPLETED]))  # fmt: skip
        cw.add_client_error("describe_log_streams", "AccessDeniedException", "no logs for you")
        final = make_backend(session, FakeTime(), out).wait(name)
    assert final["TrainingJobStatus"] == "Completed"
    assert "CloudWatch logs of denied-1 cannot be read" in out.getvalue()
    assert out.getvalue().splitlines()[-1].endswith("Completed - Training job completed")


def test_ctrl_c_stops_following_but_not_the_job(session):
    name = "interrupt-1"
    fake = FakeTime()

    def interrupt():
        raise KeyboardInterrupt

    fake.callbacks.append(interrupt)
    out = io.StringIO()
    with Stubber(session.sagemaker_client) as stub:  # no stop_training_job queued
        stub_describes(stub, name, description(name, "InProgress", [TRAINING]))
        with pytest.raises(KeyboardInterrupt):
            make_backend(session, fake, out).wait(name, logs=False)
    assert "it keeps running on SageMaker" in out.getvalue()
    assert f"launchbay stop {name}" in out.getvalue()


# --------------------------------------------------------------------------- output forms


def test_terminal_output_has_a_live_status_line_and_coloured_hosts(session):
    name = "tty-1"
    logs = Logs(name)
    fake = FakeTime()
    fake.callbacks.append(lambda: logs.write(f"algo-{len(fake.sleeps) % 2 + 1}", "hello"))
    out = Terminal()
    with Stubber(session.sagemaker_client) as stub:
        stub_describes(
            stub, name,
            description(name, "InProgress", [STARTING], hosts=2),
            description(name, "InProgress", [STARTING, TRAINING], hosts=2),
            description(name, "Completed", [STARTING, TRAINING, COMPLETED], hosts=2,
                        TrainingTimeInSeconds=100, BillableTimeInSeconds=40,
                        EnableManagedSpotTraining=True),
        )  # fmt: skip
        make_backend(session, fake, out).wait(name)
    text = out.getvalue()
    assert f"{name} | InProgress | Starting: Preparing the instances for training" in text
    assert "\r\x1b[2K" in text  # the live line is cleared before log lines
    assert "\x1b[36malgo-1\x1b[0m | hello" in text and "\x1b[33malgo-2\x1b[0m | hello" in text
    last_status = ANSI.sub("", text).rsplit("\r", 1)[1]
    assert last_status.startswith(f"{name} | Completed | Completed: Training job completed")
    assert "Managed Spot savings 60.0%" in text
    # outside the live line, each line is whole: a status never splits a log line
    assert all(host_lines(line) for line in ANSI.sub("", text).split("\n") if " | hello" in line)


def test_a_pseudo_terminal_gets_the_live_line(session):
    name = "pty-1"
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=True) as tty, Stubber(session.sagemaker_client) as stub:
            assert tty.isatty()
            stub_describes(stub, name, description(name, "InProgress", [TRAINING]),
                           description(name, "Completed", [TRAINING, COMPLETED]))  # fmt: skip
            make_backend(session, FakeTime(), tty).wait(name, logs=False)
        text = read_pty(master)
    finally:
        os.close(master)
    assert f"{name} | InProgress | Training" in text
    assert f"\r\x1b[2K{name} | Completed | Completed" in text  # redrawn in place


def test_in_a_notebook_the_status_is_a_display_not_carriage_returns(monkeypatch, capsys):
    """Jupyter keeps every "\\r" in a saved output, so there the status is a display updated
    in place (tests/integration/test_notebook_output.py runs it in a real kernel)."""
    monkeypatch.setattr("launchbay.display.in_notebook", lambda: True)
    printer = LogPrinter(["algo-1"])  # sys.stdout of a Jupyter kernel is no TTY
    assert printer.live and printer.colour and not printer.terminal
    printer.status("job | InProgress | Training")
    printer.print([("algo-1", "hi")])
    printer.close()
    text = capsys.readouterr().out
    assert "\r" not in text
    assert "\x1b[36malgo-1\x1b[0m | hi\n" in text


def test_backends_print_nothing_the_one_follower_prints_for_all():
    """Backends yield events; only launchbay.backends.follow holds a printer."""
    from launchbay.backends import base, docker, follow, process, sagemaker
    from launchbay.backends.local import control, logs

    assert follow.LogPrinter is LogPrinter
    for module in (base, control, logs, process, docker, sagemaker):
        assert not any(
            isinstance(value, type) and value.__name__.endswith(("Printer", "StatusView"))
            for value in vars(module).values()
        ), module.__name__
        assert "print_logs" not in vars(getattr(module, "SageMakerBackend", object))
    assert "wait" not in vars(control.LocalBackend) and "wait" not in vars(
        sagemaker.SageMakerBackend
    )
    plain = io.StringIO()
    LogPrinter(["algo-1", "algo-10"], plain).print([("algo-1", "x"), ("algo-10", "y")])
    assert plain.getvalue() == "algo-1  | x\nalgo-10 | y\n"


# --------------------------------------------------------------------------- pieces


def test_billing_summary_counts_every_instance_and_spot_savings():
    d = description("bill-1", "Completed", [COMPLETED], hosts=4, TrainingTimeInSeconds=100,
                    BillableTimeInSeconds=25, EnableManagedSpotTraining=True)  # fmt: skip
    assert billing_summary("bill-1", d) == (
        "Training job bill-1: training seconds 400, billable seconds 100 (4 instances); "
        "Managed Spot savings 75.0%"
    )
    assert billing_summary("bill-1", description("bill-1", "InProgress", [TRAINING])) is None


def test_failed_host_heuristic():
    hosts = {"j/algo-1-1": "algo-1", "j/algo-2-1": "algo-2", "j/algo-3-1": "algo-3"}
    quiet = {
        "j/algo-1-1": [(10, "step"), (30, "step")],
        "j/algo-2-1": [(10, "step"), (20, "step")],  # went silent first
        "j/algo-3-1": [(10, "step"), (30, "step")],
    }
    assert pick_failed_stream(quiet, hosts) == "j/algo-2-1"
    assert pick_failed_stream(quiet, hosts, "AlgorithmError: host algo-3 exited") == "j/algo-3-1"
    marked = dict(quiet)
    marked["j/algo-3-1"] = [(12, "[rank5]: torch.OutOfMemoryError: CUDA out of memory"), (40, "x")]
    marked["j/algo-1-1"] = [(15, "Traceback (most recent call last):"), (16, "RuntimeError: x")]
    assert pick_failed_stream(marked, hosts) == "j/algo-3-1"
    assert pick_failed_stream({"j/algo-1-1": []}, hosts) is None
