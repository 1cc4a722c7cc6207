"""The job spec and the ``launchbay`` command honour the SageMaker SDK defaults files (issue 26).

Real ``launchbay`` processes; the files are named by ``SAGEMAKER_USER_CONFIG_OVERRIDE``
and ``SAGEMAKER_ADMIN_CONFIG_OVERRIDE`` in their environment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from factories import OMIT, job_spec
from hostile_yaml import HOSTILE, limited

ROLE = "arn:aws:iam::123456789012:role/FromConfigFile"
USER = {
    "SchemaVersion": "1.0",
    "SageMaker": {
        "TrainingJob": {
            "RoleArn": ROLE,
            "Tags": [{"Key": "team", "Value": "platform"}],
            "Environment": {"ORG": "1"},
            "VpcConfig": {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]},
        },
        "PythonSDK": {
            "Modules": {
                "Session": {"DefaultS3Bucket": "org-bucket", "DefaultS3ObjectKeyPrefix": "ml"}
            }
        },
        "ProcessingJob": {"RoleArn": ROLE},
    },
}
ADMIN = {
    "SchemaVersion": "1.0",
    "SageMaker": {"TrainingJob": {"EnableInterContainerTrafficEncryption": True}},
}

SPEC = job_spec(
    """
    tags:
      run: nightly
    """,
    role=OMIT,
)


def _files(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "config.yaml").write_text(yaml.safe_dump(USER))
    (tmp_path / "admin.yaml").write_text(yaml.safe_dump(ADMIN))
    (tmp_path / "local.yaml").write_text(
        yaml.safe_dump({"local": {"container_config": {"shm_size": "8g"}, "local_code": True}})
    )
    return {
        **env,
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(tmp_path / "user"),
        "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": str(tmp_path / "admin.yaml"),
        "LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG": str(tmp_path / "local.yaml"),
    }


def test_submit_dry_run_applies_the_files(run_cli, project, moto_env, tmp_path):
    env = _files(tmp_path, moto_env)
    spec = project.spec(SPEC)
    done = run_cli("submit", spec, "--dry-run", "--output", "json", env=env)
    assert done.returncode == 0, done.stderr
    request = json.loads(done.stdout)
    assert request["RoleArn"] == ROLE
    assert request["Tags"] == [
        {"Key": "run", "Value": "nightly"},
        {"Key": "team", "Value": "platform"},
    ]
    assert request["Environment"] == {"ORG": "1"}
    assert request["VpcConfig"] == {"Subnets": ["subnet-1"], "SecurityGroupIds": ["sg-1"]}
    assert request["EnableInterContainerTrafficEncryption"] is True
    assert request["OutputDataConfig"]["S3OutputPath"] == "s3://org-bucket/ml/"
    # one INFO line per applied key, on stderr (stdout is the JSON object)
    assert "Applied value from config key = SageMaker.TrainingJob.RoleArn" in done.stderr
    assert "Applied value(s) from config key = SageMaker.TrainingJob.Tags" in done.stderr


def test_validate_without_the_files_needs_a_role(run_cli, project, moto_env):
    spec = project.spec(SPEC)
    done = run_cli("validate", spec, env=moto_env)
    assert done.returncode == 2
    assert "role" in done.stderr


def test_validate_refuses_an_invalid_file(run_cli, project, moto_env, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("SchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    RoleArn: nope\n")
    spec = project.spec(SPEC)
    done = run_cli("validate", spec, env={**moto_env, "SAGEMAKER_USER_CONFIG_OVERRIDE": str(bad)})
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr
    assert "SageMaker.TrainingJob.RoleArn" in done.stderr
    assert "Accepted:" in done.stderr


def test_config_show_text(run_cli, cli_env, tmp_path):
    env = _files(tmp_path, cli_env)
    done = run_cli("config", "show", env=env)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"user  {tmp_path / 'user'} (from SAGEMAKER_USER_CONFIG_OVERRIDE): read" in out
    assert f"admin {tmp_path / 'admin.yaml'} (from SAGEMAKER_ADMIN_CONFIG_OVERRIDE): read" in out
    assert f"SageMaker.TrainingJob.RoleArn = {ROLE}  [user: {tmp_path / 'user'}]" in out
    assert (
        "SageMaker.TrainingJob.EnableInterContainerTrafficEncryption = true  "
        f"[admin: {tmp_path / 'admin.yaml'}]"
    ) in out
    assert "SageMaker.ProcessingJob.RoleArn" in out  # listed as not used
    assert f"SDK v2 local mode file: {tmp_path / 'local.yaml'}: read" in out
    assert 'local.container_config = {"shm_size": "8g"}' in out


def test_config_show_json(run_cli, cli_env, tmp_path):
    env = _files(tmp_path, cli_env)
    done = run_cli("config", "show", "--output", "json", env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    by_key = {d["key"]: d for d in shown["defaults"]}
    assert by_key["SageMaker.TrainingJob.RoleArn"]["kind"] == "user"
    assert by_key["SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket"]["value"] == "org-bucket"
    assert by_key["SageMaker.TrainingJob.EnableInterContainerTrafficEncryption"]["source"] == str(
        tmp_path / "admin.yaml"
    )
    assert [s["kind"] for s in shown["sources"]] == ["admin", "user"]
    assert shown["not_used_by_launchbay"] == ["SageMaker.ProcessingJob.RoleArn"]
    assert shown["local_mode"]["found"] is True


def test_config_show_with_no_files(run_cli, cli_env):
    done = run_cli("config", "show", "--output", "json", env=cli_env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["defaults"] == []
    assert all(not s["loaded"] for s in shown["sources"])
    assert shown["local_mode"]["found"] is False


# -- issue 31 item 4: hostile defaults files exit 2 naming the file, in bounded time ---------


def _refused(done, *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    for text in expected:
        assert text in done.stderr, done.stderr[-2000:]
    assert len(done.stderr) < 4000  # the value is never shown whole


@pytest.mark.parametrize(
    "variable", ["SAGEMAKER_USER_CONFIG_OVERRIDE", "SAGEMAKER_ADMIN_CONFIG_OVERRIDE"]
)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_validate_refuses_a_hostile_defaults_file_naming_it(
    run_cli, project, moto_env, tmp_path, case, variable
):
    make, expected = HOSTILE[case]
    path = make(tmp_path)
    spec = project.spec(SPEC)
    done = run_cli(
        "validate", spec, env={**moto_env, variable: path}, timeout=30, preexec_fn=limited
    )
    _refused(done, f"Invalid SageMaker config file {path}", f"(from {variable})", *expected)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_config_show_refuses_a_hostile_local_mode_file_naming_it(run_cli, cli_env, tmp_path, case):
    make, expected = HOSTILE[case]
    path = make(tmp_path)
    env = {**cli_env, "LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG": path}
    done = run_cli("config", "show", env=env, timeout=30, preexec_fn=limited)
    _refused(done, f"Invalid SageMaker local mode config file {path}", *expected)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"SchemaVersion: '1.0'\nSageMaker: {x: caf\xe9}\n", "is not UTF-8 text (byte 0xe9"),
        (b"SchemaVersion: '1.0'\n" + b"# padding\n" * 120_000, "is larger than 1048576 bytes"),
    ],
    ids=["not-utf8", "oversized"],
)
def test_validate_refuses_a_hostile_s3_defaults_object_naming_it(
    run_cli, project, moto_env, content, expected
):
    import boto3

    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(
        Bucket="org-config", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    s3.put_object(Bucket="org-config", Key="config.yaml", Body=content)
    env = {**moto_env, "SAGEMAKER_USER_CONFIG_OVERRIDE": "s3://org-config"}
    done = run_cli("validate", project.spec(SPEC), env=env, timeout=30, preexec_fn=limited)
    _refused(done, "Invalid SageMaker config file s3://org-config/config.yaml", expected)


def test_config_show_masks_secret_looking_values_unless_asked(run_cli, cli_env, tmp_path):
    user = json.loads(json.dumps(USER))
    user["SageMaker"]["TrainingJob"]["Environment"] = {
        "ORG": "1", "API_TOKEN": "t0psecret", "DB_PASSWORD": "hunter2", "AWS_SECRET_ACCESS_KEY": "k"
    }  # fmt: skip
    env = _files(tmp_path, cli_env)
    (tmp_path / "user" / "config.yaml").write_text(yaml.safe_dump(user))
    for output in ("text", "json"):
        done = run_cli("config", "show", "--output", output, env=env)
        assert done.returncode == 0, done.stderr
        assert "t0psecret" not in done.stdout and "hunter2" not in done.stdout
        assert '"API_TOKEN": "***"' in done.stdout and '"ORG": "1"' in done.stdout
        assert '"AWS_SECRET_ACCESS_KEY": "***"' in done.stdout
        shown = run_cli("config", "show", "--show-values", "--output", output, env=env)
        assert shown.returncode == 0, shown.stderr
        assert '"API_TOKEN": "t0psecret"' in shown.stdout and "hunter2" in shown.stdout
