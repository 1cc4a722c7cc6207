"""The plan derives what the backends read of the request, once (issue 21).

``plan_request()`` turns the request's channels, outputs, checkpoints, TensorBoard
and debugger locations, environment, hyperparameters, stopping condition, image and
metric definitions into typed, frozen fields of the :class:`JobPlan`
(:func:`launchbay.backends.plan.request_fields`); the wire request stays as it is.
These tests hold the fields equal to what the request says, for local and ``ml.*``
jobs (instance groups, ``file://`` and ``s3://`` channels, checkpoints), and show
that the local wing takes them from the plan: a real ``local_process`` job run from
a plan whose channel and output fields were changed (the request left alone) reads
the plan's channel and writes where the plan says. A job read back from its record
gets its plan from the stored request by the same function.
"""

from __future__ import annotations

import dataclasses
import json
import runpy
from pathlib import Path

import pytest

from factories import OMIT, sagemaker_estimator
from launchbay.backends.local.container_hosts import ContainerHosts
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.record import LocalJob
from launchbay.backends.plan import Channel, JobFields, JobPlan, Synced, plan_request
from launchbay.backends.process import ProcessBackend
from launchbay.debugger import TensorBoardOutputConfig
from launchbay.inputs import InstanceGroup, TrainingInput
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"

SCRIPT = """\
import json, os
seen = sorted(os.listdir(os.environ["SM_CHANNEL_TRAINING"]))
with open(os.path.join(os.environ["SM_MODEL_DIR"], "seen.json"), "w") as f:
    json.dump({"files": seen, "env": os.environ.get("PLAN_FIELD")}, f)
print("done", seen)
"""


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    root.mkdir()
    (root / "train.py").write_text(SCRIPT)
    return root


def _data(tmp_path: Path, name: str, files: tuple[str, ...]) -> Path:
    root = tmp_path / name
    root.mkdir()
    for file in files:
        (root / file).write_text(file)
    return root


def _estimator(code: Path, **kwargs) -> PyTorch:
    """PyTorch 2.3 on py311 from ``code/train.py``; the callers give the role and the hosts."""
    hosts = {"instance_count": OMIT, "instance_type": OMIT}
    return sagemaker_estimator("train.py", code, **(hosts | kwargs))


def _assert_fields_say_what_the_request_says(plan: JobPlan) -> None:
    request = plan.request
    algorithm = request["AlgorithmSpecification"]
    assert plan.job_name == request["TrainingJobName"] == plan.name
    assert plan.image == algorithm["TrainingImage"]
    assert plan.input_mode == algorithm["TrainingInputMode"]
    assert list(plan.metric_definitions) == list(algorithm.get("MetricDefinitions") or [])
    channels = request.get("InputDataConfig") or []
    assert [c.name for c in plan.channels] == [c["ChannelName"] for c in channels]
    for field, channel in zip(plan.channels, channels, strict=True):
        source = channel["DataSource"]["S3DataSource"]
        assert field.uri == source["S3Uri"]
        assert field.sharded == (source["S3DataDistributionType"] == "ShardedByS3Key")
        assert field.data_type == source["S3DataType"]
        assert field.input_mode == channel.get("InputMode", algorithm["TrainingInputMode"])
    output = request["OutputDataConfig"]
    assert plan.output_path == output["S3OutputPath"]
    assert plan.output_kms_key == output.get("KmsKeyId")
    assert plan.compress_outputs == (output.get("CompressionType") != "NONE")
    checkpoint = request.get("CheckpointConfig")
    if checkpoint:
        assert plan.checkpoint is not None and plan.checkpoint.uri == checkpoint["S3Uri"]
        assert plan.checkpoint.given_path == checkpoint.get("LocalPath")
    else:
        assert plan.checkpoint is None
    assert dict(plan.environment) == (request.get("Environment") or {})
    assert dict(plan.hyperparameters) == request["HyperParameters"]
    assert plan.max_run == request["StoppingCondition"]["MaxRuntimeInSeconds"]
    assert plan.network_isolation == bool(request.get("EnableNetworkIsolation"))
    assert plan.submit_directory == json.loads(
        request["HyperParameters"]["sagemaker_submit_directory"]
    )
    tensorboard = request.get("TensorBoardOutputConfig")
    assert (plan.tensorboard is None) == (not tensorboard)
    if tensorboard:
        assert plan.tensorboard is not None
        assert plan.tensorboard.uri == tensorboard["S3OutputPath"]
        assert plan.tensorboard.given_path == tensorboard.get("LocalPath")
    # Derived, not copied: the fields are what the same function makes of the request.
    assert _same_fields(plan, request)


def _same_fields(plan: JobPlan, request) -> bool:
    derived = JobFields.of(dict(request))
    return all(
        getattr(plan, f.name) == getattr(derived, f.name) for f in dataclasses.fields(JobFields)
    )


def test_a_local_job_of_instance_groups_with_file_channels_and_checkpoints(code, tmp_path, home):
    train = _data(tmp_path, "train", ("a.csv", "b.csv"))
    est = _estimator(
        code, role=None, output_path=f"file://{tmp_path}/out",
        instance_groups=[InstanceGroup("first", "local_process", 1),
                         InstanceGroup("second", "local_process", 2)],
        checkpoint_s3_uri=f"file://{tmp_path}/ckpt", checkpoint_local_path="/opt/ml/ckpt/",
        environment={"PLAN_FIELD": "from-the-plan"}, max_run=1234,
        tensorboard_output_config=TensorBoardOutputConfig(f"file://{tmp_path}/tb", "/opt/tb"),
        metric_definitions=[{"Name": "loss", "Regex": "loss=(\\S+)"}],
    )  # fmt: skip
    request = est.create_training_job_request(
        {"train": TrainingInput(f"file://{train}", distribution="ShardedByS3Key"),
         "extra": f"file://{train}"},
        job_name="fields-local",
    )  # fmt: skip
    plan = plan_request(request)
    assert plan.hosts == ("algo-1", "algo-2", "algo-3")
    assert plan.host_types == ("local_process",) * 3
    _assert_fields_say_what_the_request_says(plan)
    assert plan.channels == (
        Channel("train", f"file://{train}", "File", sharded=True),
        Channel("extra", f"file://{train}", "File", sharded=False),
    )
    assert plan.checkpoint == Synced(f"file://{tmp_path}/ckpt", "/opt/ml/ckpt", "/opt/ml/ckpt/")
    assert plan.tensorboard == Synced(f"file://{tmp_path}/tb", "/opt/tb", "/opt/tb")
    assert plan.environment["PLAN_FIELD"] == "from-the-plan" and plan.max_run == 1234
    # A container's hosts see each LocalPath mounted from its default place.
    view = plan.host_view()
    assert view.checkpoint == Synced(f"file://{tmp_path}/ckpt", "/opt/ml/checkpoints")
    assert view.tensorboard == Synced(f"file://{tmp_path}/tb", "/opt/ml/output/tensorboard")
    assert view.request is plan.request and view.hosts == plan.hosts
    # Frozen: a backend cannot change what it was given.
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.output_path = "elsewhere"  # type: ignore[misc]


def test_an_ml_job_of_instance_groups_with_s3_channels_and_checkpoints(code, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    est = _estimator(
        code, role=ROLE, output_path="s3://fields-bucket/out", output_kms_key="alias/out",
        instance_groups=[InstanceGroup("first", "ml.m5.xlarge", 1),
                         InstanceGroup("second", "ml.c5.xlarge", 2)],
        checkpoint_s3_uri="s3://fields-bucket/ckpt", max_run=3600,
        disable_output_compression=True, environment={"A": "1"},
    )  # fmt: skip
    request = est.create_training_job_request(
        {"train": "s3://fields-bucket/train",
         "test": TrainingInput("s3://fields-bucket/test", input_mode="FastFile")},
        job_name="fields-ml",
    )  # fmt: skip
    plan = plan_request(request)
    assert (plan.backend, plan.local, plan.gpus) == ("sagemaker", False, None)
    assert plan.host_types == ("ml.m5.xlarge", "ml.c5.xlarge", "ml.c5.xlarge")
    _assert_fields_say_what_the_request_says(plan)
    assert [c.uri for c in plan.channels] == ["s3://fields-bucket/train", "s3://fields-bucket/test"]
    assert [c.input_mode for c in plan.channels] == ["File", "FastFile"]
    assert plan.checkpoint == Synced("s3://fields-bucket/ckpt", "/opt/ml/checkpoints", None)
    assert plan.output_kms_key == "alias/out" and plan.compress_outputs is False
    assert plan.request == request  # the wire request is untouched (SDK v2 parity)


def test_a_job_read_back_from_its_record_gets_the_same_fields(code, tmp_path, home):
    train = _data(tmp_path, "train", ("a.csv",))
    est = _estimator(code, role=None, instance_type="local_process", instance_count=2,
                     output_path=f"file://{tmp_path}/out", max_run=99,
                     checkpoint_s3_uri=f"file://{tmp_path}/ckpt")  # fmt: skip
    request = est.create_training_job_request(f"file://{train}", job_name="fields-stored")
    fresh = plan_request(request)
    stored = plan_request(json.loads(json.dumps(request)), stored=True)
    assert (stored.hosts, stored.host_types, stored.placement) == (
        fresh.hosts,
        fresh.host_types,
        fresh.placement,
    )
    assert _same_fields(stored, request) and stored.max_run == 99
    # LocalJob (a detached job, finish_orphan) makes its plan this way when given none.
    layout = JobLayout.create(str(tmp_path / "jobs"), "fields-stored", list(fresh.hosts))
    job = LocalJob(dict(request), layout, None, 1.0, lambda _job: None)  # type: ignore[arg-type]
    assert job.plan.channels == fresh.channels and job.plan.checkpoint == fresh.checkpoint
    assert job.host_plan is job.plan and job.name == "fields-stored"


def test_the_local_wing_takes_channels_and_outputs_from_the_plan(code, tmp_path, home, monkeypatch):
    """A real local_process job: its plan's channel and output path were changed
    after planning, its request left alone; the host reads the plan's channel and
    the model is written where the plan says."""
    in_request = _data(tmp_path, "in-request", ("request.csv",))
    in_plan = _data(tmp_path, "in-plan", ("plan-1.csv", "plan-2.csv"))
    est = _estimator(code, role=None, instance_type="local_process", instance_count=1,
                     output_path=f"file://{tmp_path}/request-out",
                     environment={"PLAN_FIELD": "from-the-plan"},
                     disable_output_compression=True)  # fmt: skip
    request = est.create_training_job_request(f"file://{in_request}", job_name="fields-run")
    # The dry run packages the code in memory only: the hosts take the folder itself.
    request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(f"file://{code}")
    plan = plan_request(request)
    (channel,) = plan.channels
    moved = dataclasses.replace(
        plan,
        channels=(dataclasses.replace(channel, uri=f"file://{in_plan}"),),
        output_path=f"file://{tmp_path}/plan-out",
    )
    assert moved.request is plan.request  # the wire request is the same
    staged: list[object] = []
    from launchbay.backends.local.staging import LocalStager

    real = LocalStager.stage_channels

    def spy(self, source, layout, **kwargs):
        staged.append(source)
        return real(self, source, layout, **kwargs)

    monkeypatch.setattr(LocalStager, "stage_channels", spy)
    backend = ProcessBackend(job_root=str(home / "jobs"))
    job = backend.run(moved)
    description = job.wait(logs=False)
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")
    assert staged and all(isinstance(s, JobFields) for s in staged)
    model = tmp_path / "plan-out" / "fields-run" / "output" / "model" / "seen.json"
    seen = json.loads(model.read_text())
    assert seen == {"files": ["plan-1.csv", "plan-2.csv"], "env": "from-the-plan"}
    assert not (tmp_path / "request-out").exists()
    assert description["ModelArtifacts"]["S3ModelArtifacts"] == (
        f"file://{tmp_path}/plan-out/fields-run/output/model/"
    )


def test_container_specs_take_mounts_and_environment_from_the_plan(code, tmp_path, home):
    train = _data(tmp_path, "train", ("a.csv",))
    est = _estimator(code, role=None, instance_type="local", instance_count=2,
                     output_path=f"file://{tmp_path}/out",
                     checkpoint_s3_uri=f"file://{tmp_path}/ckpt", checkpoint_local_path="/ckpt",
                     environment={"FROM": "request"})  # fmt: skip
    request = est.create_training_job_request(f"file://{train}", job_name="fields-docker")
    plan = dataclasses.replace(
        plan_request(request),
        environment={"FROM": "plan"},
        checkpoint=Synced(f"file://{tmp_path}/ckpt", "/plan/ckpt", "/plan/ckpt"),
    )
    job_dir = str(tmp_path / "job")
    specs = ContainerHosts(gpu=False).host_specs(
        plan, job_dir, list(plan.hosts), local_code=True, grace=5.0
    )
    assert [s.host for s in specs] == ["algo-1", "algo-2"]
    for spec in specs:
        assert spec.environment["FROM"] == "plan"
        assert spec.environment["TRAINING_JOB_NAME"] == "fields-docker"
        targets = {bind["bind"] for bind in spec.binds.values()}
        assert "/plan/ckpt" in targets and "/opt/ml/input/data/training" in targets


def test_the_local_wing_reads_no_request_key_on_the_way_down():
    """``tools/request_reads.py``: the stager, the host runners, outputs, TensorBoard and
    the control loop take what they need from the plan (98 reads in 24 modules before
    issue 21's plan fields; what is left reads job descriptions, stored records and
    tuning requests)."""
    tool = runpy.run_path(str(Path(__file__).parents[2] / "tools" / "request_reads.py"))
    counts = tool["count"]()
    for module in (
        "backends/local/staging.py",
        "backends/local/container_hosts.py",
        "backends/local/process_hosts.py",
        "backends/local/outputs.py",
        "backends/local/tensorboard.py",
        "backends/local/control.py",
        "backends/local/running.py",
        "backends/local/recovery.py",
        "backends/local/elsewhere.py",
        "backends/local/finish.py",
        "backends/local/hosts.py",
    ):
        assert module not in counts, (module, counts)


def test_a_plan_for_another_request_derives_its_fields_again(code, tmp_path, home):
    """A tuning trial runs its own request on its definition's resources."""
    est = _estimator(code, role=None, instance_type="local_process", instance_count=2,
                     output_path=f"file://{tmp_path}/out", environment={"A": "1"})  # fmt: skip
    base = plan_request(est.create_training_job_request(job_name="fields-base"))
    trial = json.loads(json.dumps(dict(base.request)))
    trial["TrainingJobName"] = "fields-base-001"
    trial["HyperParameters"]["lr"] = "0.1"
    trial["Environment"] = {"A": "2"}
    plan = base.with_request(trial, gpus=None)
    assert (plan.name, plan.job_name) == ("fields-base-001", "fields-base-001")
    assert plan.hyperparameters["lr"] == "0.1" and plan.environment == {"A": "2"}
    assert (plan.hosts, plan.placement) == (base.hosts, base.placement)
    assert _same_fields(plan, trial)
