"""Arguments the hosts would refuse (or misuse) are refused by the estimator first (issue 25).

Each rule is declared once on the runtime side and called by the client:

* the entry point's name (``launchbay.runtime.code.entry_point_problem``);
* channel names ``.`` and ``..`` and the checkpoint ``LocalPath``
  (``launchbay.runtime.contract``), also by the writer of a host's config;
* the grace period (``launchbay.runtime.settings.parse_grace_seconds``).
"""

from __future__ import annotations

import pytest

from factories import OMIT
from factories import estimator as make_estimator
from launchbay import ConfigurationError
from launchbay.estimator import Estimator
from launchbay.pytorch import PyTorch
from launchbay.runtime import code as runtime_code
from launchbay.runtime.contract import write_host_config
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.settings import RuntimeSettings

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

BAD_NAMES = ["my train.py", "-train.py", "$(touch pwned).py", "bin/run me.sh"]


def estimator(**kwargs) -> PyTorch:
    kwargs = {"role": "arn:aws:iam::123456789012:role/SageMakerRole", **kwargs}
    return make_estimator(kwargs.pop("entry_point", OMIT), **kwargs)


@pytest.fixture
def src(tmp_path):
    root = tmp_path / "src"
    (root / "bin").mkdir(parents=True)
    for name in [*BAD_NAMES, "train.py", "bin/train.sh"]:
        (root / name).write_text("print('hi')\n")
    return root


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("instance_type", ["local_process", "ml.m5.xlarge"])
def test_an_entry_point_the_hosts_would_refuse_is_refused_by_the_estimator(
    src, name, instance_type
):
    """Names with spaces, a leading '-' or shell syntax passed validation and fit(), and
    failed only on the host. The estimator now applies the runtime's own rule."""
    with pytest.raises(ConfigurationError) as caught:
        estimator(entry_point=name, source_dir=str(src), instance_type=instance_type)
    message = str(caught.value)
    assert f"Invalid entry_point={name!r}" in message, message
    assert "is not a plain relative path: the hosts would refuse to run it" in message
    assert f"Accepted: {runtime_code.ENTRY_POINT_ACCEPTED}" in message
    assert caught.value.argument == "entry_point"
    # The host's runtime refuses the same name with the same words.
    with pytest.raises(TrainingSetupError, match="is not a plain relative path. Accepted: a plain"):
        runtime_code.validate_entry_point_name(name)


def test_the_name_checked_is_the_one_the_hosts_run(src):
    """Without source_dir the script's file name is what runs: its directory may have spaces."""
    with pytest.raises(ConfigurationError, match=r"Its name \(run as '-train.py'\)"):
        estimator(entry_point=str(src / "-train.py"))
    spaced = src / "a dir"
    spaced.mkdir()
    (spaced / "train.py").write_text("")
    assert estimator(entry_point=str(spaced / "train.py")).entry_point.endswith("train.py")
    request = estimator(
        entry_point="bin/train.sh", source_dir=str(src)
    ).create_training_job_request(job_name="fine")
    assert request["HyperParameters"]["sagemaker_program"] == '"bin/train.sh"'


@pytest.mark.parametrize("name", [".", ".."])
def test_the_model_channel_cannot_be_named_dot_or_dotdot(name):
    with pytest.raises(ConfigurationError) as caught:
        Estimator(
            image_uri="img:1",
            role=None,
            instance_type="local_process",
            instance_count=1,
            model_channel_name=name,
        )
    assert f"Invalid model_channel_name={name!r}: it names no directory of its own" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"InputDataConfig": [{"ChannelName": ".."}]}, "Invalid channel name '..'"),
        ({"CheckpointConfig": {"LocalPath": "/opt/ml", "S3Uri": "s3://b/c"}}, "is /opt/ml"),
        (
            {"CheckpointConfig": {"LocalPath": "/opt/ml/../..", "S3Uri": "s3://b/c"}},
            "has '..' segments",
        ),
    ],
)
def test_the_host_config_writer_refuses_them_too_and_writes_nothing(tmp_path, change, expected):
    request = {"ResourceConfig": {"InstanceType": "local_process", "InstanceCount": 1}, **change}
    base = tmp_path / "algo-1"
    with pytest.raises(ValueError, match=expected):
        write_host_config(str(base), request, "algo-1", ["algo-1"])
    assert not base.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "3601", "ten"])
def test_the_runtime_refuses_the_grace_periods_the_client_refuses(value):
    with pytest.raises(TrainingSetupError) as caught:
        RuntimeSettings.from_environ({"LAUNCHBAY_GRACE_SECONDS": value})
    assert f"Invalid LAUNCHBAY_GRACE_SECONDS={value!r}" in str(caught.value)
    assert "Accepted: a finite number of seconds from 0 to 3600" in str(caught.value)
    assert RuntimeSettings.from_environ({"LAUNCHBAY_GRACE_SECONDS": "0"}).grace_seconds == 0.0


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_startup_timeout_must_be_finite(value):
    with pytest.raises(TrainingSetupError, match="Accepted: a finite number of seconds"):
        RuntimeSettings.from_environ({"LAUNCHBAY_STARTUP_TIMEOUT": value})
