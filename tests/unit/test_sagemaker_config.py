"""Reading, merging and applying SageMaker SDK defaults files (launchbay._sagemaker_config)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import launchbay
from launchbay import _sagemaker_config as smc
from launchbay.errors import ConfigurationError

ROLE = "arn:aws:iam::123456789012:role/FromConfigFile"


def write(path: Path, content: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(content))
    return path


def training(**keys) -> dict:
    return {"SchemaVersion": "1.0", "SageMaker": {"TrainingJob": keys}}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def point(admin: dict | None = None, user: dict | None = None) -> tuple[Path, Path]:
        a = write(tmp_path / "admin" / "config.yaml", admin or {})
        u = write(tmp_path / "user" / "config.yaml", user or {})
        monkeypatch.setenv(smc.ADMIN_ENV, str(a))
        monkeypatch.setenv(smc.USER_ENV, str(u))
        return a, u

    return point


def test_user_wins_key_by_key_and_origins_are_kept(files):
    admin, user = files(
        training(RoleArn=ROLE, Environment={"A": "admin", "B": "admin"}),
        training(Environment={"A": "user"}, Tags=[{"Key": "k", "Value": "v"}]),
    )
    config = smc.load()
    assert config.get(smc.ROLE_ARN) == ROLE
    assert config.get(smc.ENVIRONMENT) == {"A": "user", "B": "admin"}
    assert config.origin(smc.ROLE_ARN).location == str(admin)
    assert config.origin(smc.ROLE_ARN).kind == "admin"
    assert config.origin(smc.TAGS).kind == "user"
    assert config.origin("SageMaker.TrainingJob.Environment.A").kind == "user"
    assert [s.kind for s in config.sources] == ["admin", "user"]


def test_default_locations_follow_xdg_and_missing_ones_are_skipped(tmp_path, monkeypatch):
    monkeypatch.delenv(smc.ADMIN_ENV)
    monkeypatch.delenv(smc.USER_ENV)
    monkeypatch.setenv("XDG_CONFIG_DIRS", f"{tmp_path / 'etc'}{os.pathsep}/elsewhere")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home-config"))
    assert [s.location for s in smc.sources()] == [
        str(tmp_path / "etc" / "sagemaker" / "config.yaml"),
        str(tmp_path / "home-config" / "sagemaker" / "config.yaml"),
    ]
    assert not smc.load()  # neither exists: nothing, no error
    write(tmp_path / "home-config" / "sagemaker" / "config.yaml", training(RoleArn=ROLE))
    assert smc.load().get(smc.ROLE_ARN) == ROLE


def test_a_missing_override_is_an_error_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(smc.ADMIN_ENV, str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigurationError, match="SAGEMAKER_ADMIN_CONFIG_OVERRIDE") as caught:
        smc.load()
    assert "Accepted:" in str(caught.value)


def test_invalid_file_names_file_key_and_accepted(files):
    _, user = files(user=training(EnableNetworkIsolation="yes"))
    with pytest.raises(ConfigurationError) as caught:
        smc.load()
    message = str(caught.value)
    assert str(user) in message
    assert "SageMaker.TrainingJob.EnableNetworkIsolation = 'yes'" in message
    assert "Accepted: a value of type boolean" in message


def test_unknown_key_is_named_with_the_accepted_keys(files):
    files(user=training(RoleArm=ROLE))
    with pytest.raises(ConfigurationError, match=r"SageMaker\.TrainingJob\.RoleArm") as caught:
        smc.load()
    assert "RoleArn" in str(caught.value) and "VpcConfig" in str(caught.value)


def test_not_yaml_is_refused(tmp_path, monkeypatch):
    bad = tmp_path / "bad.yaml"
    bad.write_text("SchemaVersion: [1.0\n")
    monkeypatch.setenv(smc.USER_ENV, str(bad))
    with pytest.raises(ConfigurationError, match="not valid YAML"):
        smc.load()


def test_a_changed_file_is_read_again(files, tmp_path):
    files(user=training(RoleArn=ROLE))
    assert smc.load().get(smc.ROLE_ARN) == ROLE
    other = "arn:aws:iam::123456789012:role/Other"
    path = write(tmp_path / "user" / "config.yaml", training(RoleArn=other, Tags=[]))
    os.utime(path, ns=(1, 1))
    assert smc.load().get(smc.ROLE_ARN) == other


def test_session_takes_bucket_and_prefix_and_explicit_wins(files, caplog):
    files(
        user={
            "SchemaVersion": "1.0",
            "SageMaker": {
                "PythonSDK": {
                    "Modules": {
                        "Session": {
                            "DefaultS3Bucket": "org-bucket",
                            "DefaultS3ObjectKeyPrefix": "teams/a",
                        }
                    }
                }
            },
        }
    )
    with caplog.at_level(logging.INFO, logger="launchbay.config"):
        session = launchbay.Session(region_name="us-west-2")
    assert session.default_bucket_name() == "org-bucket"
    assert session.default_bucket_prefix == "teams/a"
    assert session.sagemaker_config["SageMaker"]["PythonSDK"]["Modules"]["Session"]
    applied = [r.getMessage() for r in caplog.records if "Applied" in r.getMessage()]
    assert len(applied) == 2
    assert applied[0].startswith(
        "Applied value from config key = SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket"
    )
    explicit = launchbay.Session(region_name="us-west-2", default_bucket="mine")
    assert explicit.default_bucket_name() == "mine"


def test_session_sagemaker_config_argument_is_checked_and_used():
    session = launchbay.Session(
        region_name="us-west-2",
        sagemaker_config={
            "SchemaVersion": "1.0",
            "SageMaker": {"PythonSDK": {"Modules": {"Session": {"DefaultS3Bucket": "given"}}}},
        },
    )
    assert session.default_bucket_name() == "given"
    with pytest.raises(ConfigurationError, match="sagemaker_config"):
        launchbay.Session(sagemaker_config={"SageMaker": {}})


def _estimator(**kwargs):
    options = dict(
        image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/img:1",
        instance_type="ml.m5.xlarge",
        instance_count=1,
        output_path="s3://out-bucket/x",
        sagemaker_session=launchbay.Session(region_name="us-west-2"),
    )
    options.update(kwargs)
    return launchbay.Estimator(**options)


def test_estimator_logs_one_info_line_per_applied_key(files, caplog):
    files(
        user=training(
            RoleArn=ROLE,
            Environment={"X": "1"},
            EnableNetworkIsolation=True,
            ResourceConfig={"VolumeKmsKeyId": "vol-key"},
            Tags=[{"Key": "t", "Value": "v"}],
        )
    )
    with caplog.at_level(logging.INFO, logger="launchbay.config"):
        request = _estimator().create_training_job_request(job_name="j1")
    lines = [r.getMessage() for r in caplog.records if r.name == "launchbay.config"]
    keys = [line.split(" = ", 1)[1].split(" (")[0] for line in lines if "Applied" in line]
    assert sorted(keys) == sorted(
        [
            smc.ROLE_ARN,
            smc.ENVIRONMENT,
            smc.NETWORK_ISOLATION,
            smc.VOLUME_KMS_KEY,
            smc.TAGS,
        ]
    )
    assert all(r.levelno == logging.INFO for r in caplog.records if "Applied" in r.getMessage())
    assert request["RoleArn"] == ROLE
    assert request["EnableNetworkIsolation"] is True
    assert request["ResourceConfig"]["VolumeKmsKeyId"] == "vol-key"


def test_explicit_arguments_win_and_are_not_logged(files, caplog):
    files(user=training(RoleArn=ROLE, EnableNetworkIsolation=True, Environment={"X": "1"}))
    other = "arn:aws:iam::123456789012:role/Mine"
    with caplog.at_level(logging.INFO, logger="launchbay.config"):
        request = _estimator(
            role=other, enable_network_isolation=False, environment={"Y": "2"}
        ).create_training_job_request(job_name="j2")
    assert request["RoleArn"] == other
    assert "EnableNetworkIsolation" not in request
    assert request["Environment"] == {"Y": "2"}
    assert not [r for r in caplog.records if "Applied" in r.getMessage()]


def test_a_vpc_half_in_the_file_is_refused(files):
    files(user=training(RoleArn=ROLE, VpcConfig={"Subnets": ["subnet-1"]}))
    with pytest.raises(ConfigurationError, match="SecurityGroupIds"):
        _estimator()


def test_too_many_tags_after_the_merge_are_refused(files):
    files(user=training(RoleArn=ROLE, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(30)]))
    estimator = _estimator(tags={f"mine{i}": "v" for i in range(30)})
    with pytest.raises(ConfigurationError, match="Tags"):
        estimator.create_training_job_request(job_name="j3")


@pytest.mark.parametrize(
    ("instance_type", "supported"),
    [
        ("ml.m5.xlarge", True),
        ("ml.p4d.24xlarge", False),
        ("ml.g4dn.xlarge", False),
        ("ml.c5d.2xlarge", False),
        ("ml.g5.xlarge", False),
        ("ml.g6.xlarge", False),
        ("ml.p5.48xlarge", False),
        ("ml.trn1.32xlarge", False),
        ("ml.p3.2xlarge", True),
        ("local", False),
        ("local_gpu", False),
    ],
)
def test_volume_kms_follows_instance_storage(instance_type, supported):
    assert smc.supports_volume_kms(instance_type) is supported


def test_job_spec_estimator_takes_the_files(files, tmp_path):
    files(user=training(RoleArn=ROLE, Tags=[{"Key": "team", "Value": "p"}]))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print(1)\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "framework: pytorch\nframework_version: '2.3'\npy_version: py311\n"
        "entry_point: train.py\nsource_dir: src\ninstance_type: ml.m5.xlarge\n"
        "instance_count: 1\noutput_path: s3://out-bucket/x\n"
    )
    estimator = launchbay.Estimator.from_yaml(
        spec, sagemaker_session=launchbay.Session(region_name="us-west-2")
    )
    request = estimator.create_training_job_request(job_name="spec-job")
    assert request["RoleArn"] == ROLE
    assert request["Tags"] == [{"Key": "team", "Value": "p"}]


def test_local_mode_file(tmp_path, monkeypatch):
    path = write(
        tmp_path / "local.yaml",
        {
            "local": {
                "local_code": True,
                "container_root": "/data",
                "container_config": {
                    "shm_size": "8g",
                    "ulimits": {"memlock": -1, "nofile": {"soft": 1024, "hard": 2048}},
                },
            }
        },
    )
    monkeypatch.setenv(smc.LOCAL_MODE_ENV, str(path))
    config = smc.load_local_mode()
    assert config.container_root == "/data" and config.local_code is True
    options = smc.docker_host_options(config.container_config, str(path))
    assert options["shm_size"] == "8g"
    ulimits = smc.host_options_for_docker(str(path), options)["ulimits"]
    assert {(u.name, u.soft, u.hard) for u in ulimits} == {
        ("memlock", -1, -1),
        ("nofile", 1024, 2048),
    }


def test_local_mode_file_refuses_what_docker_cannot_take(tmp_path, monkeypatch):
    path = write(tmp_path / "local.yaml", {"local": {"container_config": {"volumes": ["/x:/y"]}}})
    monkeypatch.setenv(smc.LOCAL_MODE_ENV, str(path))
    with pytest.raises(ConfigurationError) as caught:
        smc.load_local_mode()
    assert str(path) in str(caught.value)
    assert "local.container_config.volumes" in str(caught.value)
    assert "shm_size" in str(caught.value)  # what is accepted
    write(tmp_path / "local.yaml", {"local": {"local_code": "yes"}})
    os.utime(path, ns=(2, 2))
    with pytest.raises(ConfigurationError, match=r"local\.local_code = 'yes'"):
        smc.load_local_mode()


def test_import_reads_nothing_and_imports_no_yaml_or_jsonschema():
    code = (
        "import sys, launchbay; "
        "print(sorted(m for m in ('yaml', 'jsonschema', 'boto3') if m in sys.modules)); "
        "print('launchbay._sagemaker_config' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "False"
