"""Job specs in process: to_yaml/from_yaml round trips, ${VAR} rules, locations of problems."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from factories import job_spec
from launchbay import Estimator, Session
from launchbay.debugger import CollectionConfig, DebuggerHookConfig
from launchbay.inputs import FileSystemInput, TrainingInput
from launchbay.jobspec import JobSpecError, load, loads, substitute
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture
def offline_session() -> Session:
    """A session that needs no AWS call (region and bucket given, full role ARNs)."""
    return Session(region_name="us-west-2", default_bucket="my-bucket")


@pytest.fixture
def src(tmp_path: Path) -> Path:
    directory = tmp_path / "code" / "src"
    directory.mkdir(parents=True)
    (directory / "train.py").write_text("print('hi')\n")
    (tmp_path / "code" / "helpers").mkdir()
    (tmp_path / "code" / "helpers" / "util.py").write_text("X = 1\n")
    return directory


def round_trip(estimator, path: Path, session: Session):
    estimator.to_yaml(path)
    again = Estimator.from_yaml(path, sagemaker_session=session)
    assert type(again) is type(estimator)
    name = "round-trip-job"
    inputs = getattr(estimator, "spec_inputs", None)
    assert again.create_training_job_request(
        again.spec_inputs, job_name=name
    ) == estimator.create_training_job_request(inputs, job_name=name)
    return again


def test_pytorch_round_trip_with_everything(tmp_path, src, offline_session):
    estimator = PyTorch(
        entry_point="train.py",
        source_dir=str(src),
        dependencies=[str(src.parent / "helpers")],
        framework_version="2.3",
        py_version="py311",
        role=ROLE,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"epochs": 3, "lr": 0.01, "name": "a $dollar", "flags": [1, 2]},
        output_path="s3://out-bucket/jobs",
        code_location="s3://code-bucket/code",
        base_job_name="nightly",
        subnets=["subnet-1", "subnet-2"],
        security_group_ids=["sg-1"],
        use_spot_instances=True,
        max_run=3600,
        max_wait=7200,
        checkpoint_s3_uri="s3://out-bucket/ckpt",
        checkpoint_local_path="/opt/ml/checkpoints",
        environment={"MODE": "fast", "TOKEN": "${not-a-reference}"},
        tags=[{"Key": "team", "Value": "ml"}],
        volume_size=100,
        max_retry_attempts=3,
        enable_network_isolation=True,
        encrypt_inter_container_traffic=True,
        metric_definitions=[{"Name": "loss", "Regex": "loss=(\\S+)"}],
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": "10"},
            collection_configs=[CollectionConfig("losses", {"save_interval": "5"})],
        ),
        keep_alive_period_in_seconds=600,
        container_log_level=10,
        sagemaker_session=offline_session,
    )
    estimator.spec_inputs = {
        "train": "s3://data/train",
        "test": TrainingInput(
            "s3://data/test", distribution="ShardedByS3Key", input_mode="FastFile"
        ),
        "fsx": FileSystemInput("fs-0123456789abcdef0", "FSxLustre", "/fsx/data", "rw"),
    }
    again = round_trip(estimator, tmp_path / "code" / "job.yaml", offline_session)
    text = (tmp_path / "code" / "job.yaml").read_text()
    assert "source_dir: src\n" in text and "- helpers\n" in text  # relative to the spec
    assert "a $$dollar" in text and "$${not-a-reference}" in text
    assert again.environment["TOKEN"] == "${not-a-reference}"
    assert again.spec_inputs["train"] == "s3://data/train"


def test_generic_and_tensorflow_round_trips(tmp_path, src, offline_session):
    generic = Estimator(
        image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/mine:1",
        role=ROLE,
        instance_type="ml.m5.xlarge",
        instance_count=1,
        hyperparameters={"alpha": True, "beta": 2},
        debugger_hook_config=False,
        disable_profiler=True,
        sagemaker_session=offline_session,
    )
    round_trip(generic, tmp_path / "generic.yaml", offline_session)
    tensorflow = TensorFlow(
        entry_point=str(src / "train.py"),
        framework_version="2.16",
        py_version="py310",
        role=ROLE,
        instance_type="ml.m5.xlarge",
        instance_count=2,
        model_dir=False,
        distribution={"parameter_server": {"enabled": True}},
        sagemaker_session=offline_session,
    )
    tensorflow.spec_inputs = "s3://data/train"
    tensorflow.spec_job_name = "tf-job"
    again = round_trip(tensorflow, tmp_path / "tf.yaml", offline_session)
    assert again.spec_job_name == "tf-job" and again.model_dir is False


def test_from_yaml_resolves_paths_and_keeps_inputs(tmp_path, src, offline_session, monkeypatch):
    spec = tmp_path / "code" / "job.yaml"
    spec.write_text(
        job_spec(
            """
            inputs:
              train: s3://data/train
              test: {s3_data: s3://data/test, content_type: text/csv}
            tags: {team: ml, nightly: true}
            """,
            role="${LB_ROLE}",
            instance_count="${LB_COUNT:-3}",
        )
    )
    monkeypatch.setenv("LB_ROLE", ROLE)
    monkeypatch.chdir(tmp_path)  # relative paths resolve against the spec, not the cwd
    est = PyTorch.from_yaml(spec, sagemaker_session=offline_session, max_run=600)
    assert est.source_dir == str(src) and est.role == ROLE
    assert est.instance_count == 3 and est.max_run == 600
    assert est.tags == [{"Key": "team", "Value": "ml"}, {"Key": "nightly", "Value": "true"}]
    request = est.create_training_job_request(est.spec_inputs, job_name="j")
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert channels["test"]["ContentType"] == "text/csv"
    with pytest.raises(JobSpecError, match="TensorFlow.from_yaml cannot build framework: pytorch"):
        TensorFlow.from_yaml(spec)


def test_substitution_rules():
    env = {"A": "1", "EMPTY": ""}
    assert substitute("x${A}y$${A}$$", env) == "x1y${A}$"
    assert substitute("${B:-dflt}/${EMPTY:-e}/${EMPTY-e}", env) == "dflt/e/"
    with pytest.raises(ValueError, match="B is not set: give me B"):
        substitute("${B:?give me B}", env)
    with pytest.raises(ValueError, match="is not closed"):
        substitute("${A", env)
    with pytest.raises(ValueError, match="invalid reference"):
        substitute("${1A}", env)

    text = """
    image_uri: img
    instance_type: local_process
    instance_count: ${N}
    output_path: ${OUT:-}
    hyperparameters:
      a: "${N}"
      b: ${N}
      c: x${N}
      d: ${T}
    environment:
      N: ${N}
    """
    spec = loads(textwrap.dedent(text), environ={"N": "2", "T": "true"})
    assert spec.data["instance_count"] == 2
    assert "output_path" not in spec.data  # empty at the top level: not given
    assert spec.data["hyperparameters"] == {"a": "2", "b": 2, "c": "x2", "d": True}
    assert spec.data["environment"] == {"N": "2"}  # the schema wants a string there


def test_problems_carry_lines_and_all_are_reported(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "image_uri: img\ninstance_type: local_process\nvolume_size: -1\nfoo: 1\nfoo: 2\n"
    )
    with pytest.raises(JobSpecError) as info:
        load(path)
    assert [str(p).split(": ", 1)[0] for p in info.value.problems] == [f"{path}:5"]
    assert "duplicate key (first given on line 4)" in str(info.value)
    path.write_text("image_uri: img\ninstance_type: local_process\nvolume_size: -1\nfoo: 1\n")
    with pytest.raises(JobSpecError) as info:
        load(path)
    assert [(p.line, p.key) for p in info.value.problems] == [(3, "volume_size"), (4, "foo")]
    assert info.value.argument == "volume_size"
    assert isinstance(info.value, ValueError)


def test_cwd_is_the_base_for_text_specs(src, monkeypatch):
    monkeypatch.chdir(src.parent)
    spec = loads("image_uri: img\ninstance_type: local_process\nentry_point: src/train.py\n")
    assert spec.data["entry_point"] == str(src / "train.py")


def test_extension_keys_hold_anchors(monkeypatch):
    text = """
    x-defaults: &defaults
      role: ${LB_ROLE}
      instance_type: local_process
    x-unused: ${LB_NOT_SET}
    <<: *defaults
    image_uri: img
    """
    monkeypatch.setenv("LB_ROLE", ROLE)
    spec = loads(textwrap.dedent(text))
    estimator = Estimator.from_spec(spec)
    assert estimator.role == ROLE and estimator.instance_type == "local_process"


def test_the_distribution_dict_is_checked_by_its_schema_at_its_line():
    text = textwrap.dedent(
        """\
        image_uri: img
        instance_type: local_process
        distribution:
          mpi:
            enabled: 3
          torch_distributd: {enabled: true}
        """
    )
    with pytest.raises(JobSpecError) as info:
        loads(text)
    message = str(info.value)
    assert "<spec>:5: distribution.mpi.enabled: expected true or false, got the number 3" in message
    assert (
        "distribution.torch_distributd: unknown key. Did you mean 'torch_distributed'?" in message
    )
