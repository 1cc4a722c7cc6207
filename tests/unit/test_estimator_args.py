"""Estimator arguments: legacy names, typos, and every user mistake named in the error."""

from __future__ import annotations

import warnings

import pytest

from factories import sagemaker_estimator
from launchbay import ConfigurationError, Estimator, UnknownArgumentError
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def pytorch(**overrides):
    return sagemaker_estimator(**overrides)


def test_valid_estimator_builds(src):
    est = pytorch(hyperparameters={"lr": 0.1})
    assert est.hyperparameters() == {"lr": "0.1"}


def test_unknown_keyword_suggests_the_closest_name(src):
    with pytest.raises(UnknownArgumentError) as info:
        pytorch(distributon={"torch_distributed": {"enabled": True}})
    message = str(info.value)
    assert "'distributon'" in message and "Did you mean 'distribution'?" in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_unknown_keyword_without_close_match(src):
    with pytest.raises(UnknownArgumentError, match="unexpected keyword argument 'zzz'"):
        pytorch(zzz=1)


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("train_instance_count", "instance_count", 2),
        ("train_instance_type", "instance_type", "ml.c5.xlarge"),
        ("train_max_run", "max_run", 3600),
        ("train_volume_size", "volume_size", 50),
        ("train_volume_kms_key", "volume_kms_key", "key-1"),
        ("image_name", "image_uri", "123.dkr.ecr.us-west-2.amazonaws.com/x:1"),
        ("distributions", "distribution", {"mpi": {"enabled": True}}),
    ],
)
def test_legacy_names_warn_and_apply(src, old, new, value):
    overrides = {old: value}
    if old in ("train_instance_count", "train_instance_type"):
        overrides[new] = None
    with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated; use '{new}'"):
        est = pytorch(**overrides)
    if new == "distribution":
        assert est.distribution_config.to_hyperparameters()["sagemaker_mpi_enabled"] is True
    else:
        assert getattr(est, new) == value


def test_legacy_spot_names(src):
    with pytest.warns(DeprecationWarning) as record:
        est = pytorch(train_use_spot_instances=True, train_max_wait=90000)
    names = " ".join(str(w.message) for w in record)
    assert "train_use_spot_instances" in names and "train_max_wait" in names
    assert est.use_spot_instances and est.max_wait == 90000


def test_distributions_is_honoured_on_pytorch_and_tensorflow(src):
    with pytest.warns(DeprecationWarning):
        est = pytorch(instance_type="ml.p4d.24xlarge", framework_version="2.3.0",
                      distributions={"torch_distributed": {"enabled": True}})  # fmt: skip
    assert est.distribution_config.torch_distributed.enabled
    with pytest.warns(DeprecationWarning):
        tf = TensorFlow(entry_point="train.py", source_dir="src", role=ROLE, instance_count=2,
                        instance_type="ml.c5.xlarge", framework_version="2.14", py_version="py310",
                        distributions={"parameter_server": {"enabled": True}})  # fmt: skip
    assert tf.distribution_config.parameter_server.enabled


def test_script_mode_is_accepted_ignored_and_warned(src):
    with pytest.warns(DeprecationWarning, match="script_mode"):
        pytorch(script_mode=True)


def test_legacy_and_new_name_disagreeing_is_an_error(src):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ConfigurationError, match="'train_max_run'.*'max_run'"):
            pytorch(train_max_run=100, max_run=200)


def test_unsupported_v2_argument_says_so(src):
    with pytest.raises(
        ConfigurationError, match="does not support SageMaker SDK v2's 'git_config'"
    ):
        pytorch(git_config={"repo": "https://example.com/r.git"})


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (
            {"instance_type": "p3.2xlarge"},
            ["instance_type='p3.2xlarge'", "ml.m5.xlarge", "local_process"],
        ),
        ({"instance_type": None}, ["instance_type is required"]),
        ({"instance_count": 0}, ["instance_count=0", "1 or more"]),
        ({"instance_count": "2"}, ["instance_count='2'", "integer"]),
        ({"instance_count": True}, ["instance_count=True"]),
        ({"volume_size": -5}, ["volume_size=-5"]),
        ({"max_run": 0}, ["max_run=0"]),
        ({"subnets": ["subnet-1"]}, ["subnets is set but security_group_ids is not"]),
        ({"security_group_ids": ["sg-1"]}, ["security_group_ids is set but subnets is not"]),
        (
            {"subnets": "subnet-1", "security_group_ids": ["sg-1"]},
            ["subnets='subnet-1'", "list of strings"],
        ),
        ({"use_spot_instances": True}, ["max_wait=None", "max_wait >= max_run"]),
        (
            {"use_spot_instances": True, "max_wait": 100, "max_run": 200},
            ["max_wait=100", "max_run (200 seconds)"],
        ),
        ({"max_wait": 100}, ["max_wait=100", "spot"]),
        (
            {"base_job_name": "bad_name"},
            ["base_job_name='bad_name'", "letters, digits and hyphens"],
        ),
        ({"base_job_name": "x" * 64}, ["base_job_name=", "1-63 characters"]),
        ({"output_path": "bucket/prefix"}, ["output_path='bucket/prefix'", "s3://"]),
        ({"output_path": "file:///tmp/out"}, ["output_path='file:///tmp/out'"]),
        ({"checkpoint_s3_uri": "s3:/x"}, ["checkpoint_s3_uri='s3:/x'"]),
        (
            {"code_location": "s3://Bad_Bucket/x"},
            ["code_location='s3://Bad_Bucket/x'", "bucket name"],
        ),
        ({"input_mode": "Stream"}, ["input_mode='Stream'", "FastFile"]),
        ({"hyperparameters": {"f": object()}}, ["hyperparameters['f']", "JSON"]),
        ({"hyperparameters": {"nan": float("nan")}}, ["hyperparameters['nan']", "finite"]),
        ({"hyperparameters": {1: 2}}, ["hyperparameters key=1"]),
        ({"hyperparameters": ["lr", 1]}, ["hyperparameters=['lr', 1]", "a dict"]),
        ({"environment": {"A": 1}}, ["environment={'A': 1}", "str to str"]),
        ({"tags": ["x"]}, ["tags=['x']", "Key"]),
        ({"max_retry_attempts": 31}, ["max_retry_attempts=31", "from 1 to 30"]),
        ({"role": None}, ["role is required"]),
        ({"framework_version": None}, ["framework_version is required", "2.3.0"]),
        ({"py_version": None}, ["py_version is required"]),
        ({"entry_point": "s3://b/train.py"}, ["entry_point='s3://b/train.py'"]),
        ({"entry_point": None}, ["entry_point"]),
        ({"debugger_hook_config": "yes"}, ["debugger_hook_config='yes'", "DebuggerHookConfig"]),
        ({"metric_definitions": [{"Name": "loss"}]}, ["metric_definitions=", "Regex"]),
        ({"checkpoint_local_path": "ckpt"}, ["checkpoint_local_path='ckpt'", "absolute path"]),
        ({"container_log_level": "INFO"}, ["container_log_level='INFO'"]),
    ],
)
def test_user_mistakes_raise_configuration_errors(src, overrides, fragments):
    with pytest.raises(ConfigurationError) as info:
        pytorch(**overrides)
    assert isinstance(info.value, ValueError)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"entry_point": "missing.py"}, "missing.py"),
        ({"source_dir": "nowhere"}, "nowhere"),
        ({"entry_point": "../outside.py"}, "../outside.py"),
        ({"dependencies": ["no-such-lib"]}, "no-such-lib"),
    ],
)
def test_code_mistakes_name_the_path(src, overrides, fragment):
    (src.parent / "outside.py").write_text("")
    with pytest.raises(ConfigurationError) as info:
        pytorch(**overrides)
    assert fragment in str(info.value)


def test_torch_distributed_needs_a_python_entry_point(src):
    with pytest.raises(ConfigurationError, match="entry_point='run.sh'"):
        pytorch(entry_point="run.sh", instance_type="ml.p4d.24xlarge", framework_version="2.3.0",
                distribution={"torch_distributed": {"enabled": True}})  # fmt: skip


def test_generic_estimator_needs_an_image():
    with pytest.raises(ConfigurationError, match="image_uri is required"):
        Estimator(role=ROLE, instance_count=1, instance_type="ml.m5.xlarge")


def test_local_types_need_no_role(src):
    est = pytorch(role=None, instance_type="local_process", instance_count=2,
                  distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}})  # fmt: skip
    assert est.is_local
    assert (
        est.distribution_config.to_hyperparameters()["sagemaker_mpi_num_of_processes_per_host"] == 2
    )


def test_caller_hyperparameters_are_copied(src):
    mine = {"nested": {"a": [1, 2]}}
    est = pytorch(hyperparameters=mine)
    est.set_hyperparameters(extra=True)
    mine["nested"]["a"].append(3)
    assert mine == {"nested": {"a": [1, 2, 3]}}
    assert est.hyperparameters() == {"nested": '{"a": [1, 2]}', "extra": "true"}


def test_local_process_finds_tensorflow_installed_as_tensorflow_cpu(tmp_path):
    # PyPI's CPU build is the tensorflow-cpu distribution (the test extra installs it);
    # the check used to look for a "tensorflow" distribution only and said it was missing.
    import importlib.metadata
    import warnings

    from launchbay.tensorflow import TensorFlow

    installed = importlib.metadata.version("tensorflow-cpu")
    options = dict(
        entry_point="train.py",
        source_dir=str(tmp_path),
        role=None,
        instance_type="local_process",
        instance_count=1,
    )
    (tmp_path / "train.py").write_text("")
    older = TensorFlow(framework_version="2.11.0", py_version="py39", **options)
    with pytest.warns(UserWarning, match=f"this Python has tensorflow {installed}"):
        older._check_installed_framework()
    same = TensorFlow(framework_version=installed, py_version="py312", **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same._check_installed_framework()
