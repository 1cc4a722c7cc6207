"""Reading, merging and applying SageMaker SDK defaults files (launchbay._sagemaker_config)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import yaml

import launchbay
from fresh_interpreter import loaded_after
from hostile_yaml import HOSTILE, billion_laughs, run_limited
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
    names = ("yaml", "jsonschema", "boto3", "launchbay._sagemaker_config")
    loaded = loaded_after("import launchbay", f"m in {names!r}")
    assert [m for m in loaded if m != "launchbay._sagemaker_config"] == []
    assert "launchbay._sagemaker_config" not in loaded


# -- issue 31 item 4: every defaults file goes through the one bounded YAML reader -----------

_CONSTRUCT = """
import sys
import launchbay
from launchbay.errors import ConfigurationError
try:
    launchbay.Estimator(
        image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/img:1", role="{role}",
        instance_type="ml.m5.xlarge", instance_count=1, output_path="s3://out-bucket/x",
    )
except ConfigurationError as exc:
    print(exc)
    sys.exit(3)
"""


@pytest.mark.parametrize("kind", ["user", "admin"])
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_defaults_file_is_refused_by_the_estimator_naming_it(
    tmp_path, moto_server, case, kind
):
    make, expected = HOSTILE[case]
    path = make(tmp_path)
    env = {
        **os.environ,
        smc.USER_ENV if kind == "user" else smc.ADMIN_ENV: path,
    }
    done = run_limited([sys.executable, "-c", _CONSTRUCT.format(role=ROLE)], env, timeout=30)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    message = done.stdout
    assert f"Invalid SageMaker config file {path}" in message, message
    for text in expected:
        assert text in message, message
    assert len(message) < 2000  # the value is never shown whole


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_local_mode_file_is_refused_naming_it(tmp_path, case):
    make, expected = HOSTILE[case]
    path = make(tmp_path)
    code = (
        "import sys\n"
        "from launchbay.backends.local.container_config import container_options\n"
        "from launchbay.errors import ConfigurationError\n"
        "try:\n    container_options()\n"
        "except ConfigurationError as exc:\n    print(exc); sys.exit(3)\n"
    )
    env = {**os.environ, smc.LOCAL_MODE_ENV: path}
    done = run_limited([sys.executable, "-c", code], env, timeout=30)
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert f"Invalid SageMaker local mode config file {path}" in done.stdout, done.stdout
    for text in expected:
        assert text in done.stdout, done.stdout


def test_a_missing_local_mode_file_or_a_dangling_link_is_nothing_to_apply(tmp_path, monkeypatch):
    monkeypatch.setenv(smc.LOCAL_MODE_ENV, str(tmp_path / "none.yaml"))
    assert smc.load_local_mode() is None
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere")
    monkeypatch.setenv(smc.LOCAL_MODE_ENV, str(tmp_path / "dangling.yaml"))
    assert smc.load_local_mode() is None


def _s3(aws):
    import boto3

    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(
        Bucket="org-config", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    return s3


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"SchemaVersion: '1.0'\n" + b"# padding\n" * 120_000, "is larger than 1048576 bytes"),
        (b"SchemaVersion: '1.0'\nSageMaker: {x: caf\xe9}\n", "is not UTF-8 text (byte 0xe9"),
        (billion_laughs().encode(), "expands to more than 100000 values"),
        (b"SageMaker: " + b"[" * 10_000 + b"]" * 10_000, "nest more than 64 levels"),
    ],
    ids=["oversized", "not-utf8", "billion-laughs", "deep"],
)
def test_a_hostile_s3_defaults_object_is_refused_naming_it(aws, monkeypatch, content, expected):
    s3 = _s3(aws)
    s3.put_object(Bucket="org-config", Key="team/config.yaml", Body=content)
    monkeypatch.setenv(smc.USER_ENV, "s3://org-config/team")
    smc.clear_cache()
    with pytest.raises(ConfigurationError) as caught:
        _estimator(role=ROLE)
    message = str(caught.value)
    assert "Invalid SageMaker config file s3://org-config/team/config.yaml" in message, message
    assert f"(from {smc.USER_ENV})" in message
    assert expected in message, message
    assert len(message) < 2000


def test_an_s3_object_is_read_at_most_one_byte_past_the_limit():
    from launchbay import _yamlfile

    class Body:
        asked: list[int | None] = []

        def read(self, amount=None):
            self.asked.append(amount)
            return b"x" * (amount or 10 * _yamlfile.MAX_BYTES)

    body = Body()
    with pytest.raises(_yamlfile.YamlFileError, match="larger than 1048576 bytes"):
        _yamlfile.read_stream(body, "s3://b/k", what="the file")
    assert body.asked == [_yamlfile.MAX_BYTES + 1]
    with pytest.raises(_yamlfile.YamlFileError, match="larger than 1048576 bytes"):
        _yamlfile.read_stream(body, "s3://b/k", what="the file", size=50 * 1024 * 1024)
    assert body.asked == [_yamlfile.MAX_BYTES + 1]  # refused by its size, nothing read


def test_an_s3_prefix_with_more_than_1000_keys_before_config_yaml_is_read(aws, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    s3 = _s3(aws)
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: s3.put_object(Bucket="org-config", Key=f"team/a{i:04d}.txt", Body=b"x"),
                range(1001),
            )
        )
    s3.put_object(
        Bucket="org-config", Key="team/config.yaml", Body=yaml.safe_dump(training(RoleArn=ROLE))
    )
    monkeypatch.setenv(smc.USER_ENV, "s3://org-config/team")
    smc.clear_cache()
    estimator = _estimator()
    assert estimator.role == ROLE
    # the object itself, and a prefix with neither, as before
    monkeypatch.setenv(smc.USER_ENV, "s3://org-config/team/config.yaml")
    smc.clear_cache()
    assert smc.load().get(smc.ROLE_ARN) == ROLE
    monkeypatch.setenv(smc.USER_ENV, "s3://org-config/other")
    smc.clear_cache()
    with pytest.raises(ConfigurationError, match="no S3 object has that key or prefix"):
        smc.load()
    monkeypatch.setenv(smc.USER_ENV, "s3://org-config/team/a")
    smc.clear_cache()
    with pytest.raises(ConfigurationError, match="neither an object nor a prefix holding"):
        smc.load()


def test_config_show_masks_values_whose_names_look_secret_as_sdk_v2_logs_them(files):
    files(
        user=training(
            Environment={"API_TOKEN": "t0psecret", "DB_Password": "hunter2", "ORG": "1"},
            RoleArn=ROLE,
        )
    )
    shown = smc.describe()
    by_key = {d["key"]: d["value"] for d in shown["defaults"]}
    assert by_key[smc.ENVIRONMENT] == {"API_TOKEN": "***", "DB_Password": "***", "ORG": "1"}
    assert by_key[smc.ROLE_ARN] == ROLE
    text = "\n".join(smc.describe_text(shown))
    assert "t0psecret" not in text and "hunter2" not in text
    revealed = smc.describe(show_values=True)
    by_key = {d["key"]: d["value"] for d in revealed["defaults"]}
    assert by_key[smc.ENVIRONMENT]["API_TOKEN"] == "t0psecret"
