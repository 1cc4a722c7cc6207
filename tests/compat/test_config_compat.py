"""Under SageMaker SDK defaults files launchbay sends SDK v2's request, key for key (issue 26).

Both SDKs read the same admin and user files themselves (``SAGEMAKER_ADMIN_CONFIG_OVERRIDE``
/ ``SAGEMAKER_USER_CONFIG_OVERRIDE``, see :mod:`.config_harness`): each supported key
alone, all of them, explicit arguments winning, tags merging, admin and user
precedence, a file served from moto's S3, instance types without an EBS volume
(instance storage), and invalid files, which both refuse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

import launchbay
from launchbay.errors import ConfigurationError

from .config_harness import (
    CONFIG_ROLE,
    KMS,
    ROLE,
    ConfigCase,
    install,
    ours_config_estimator,
    ours_config_request,
    v2_config_request,
)
from .harness import ABSENT, SourceTree, assert_same_request, ensure_bucket, lookup

JOB = {
    "entry_point": "train.py",
    "source_dir": "<src>",
    "framework_version": "2.3.0",
    "py_version": "py311",
    "instance_type": "ml.m5.xlarge",
    "instance_count": 1,
}
WITH_ROLE = {**JOB, "role": ROLE}


def sm(training_job: dict[str, Any] | None = None, **modules: Any) -> dict[str, Any]:
    """A defaults file: ``SageMaker.TrainingJob`` and ``SageMaker.PythonSDK.Modules``."""
    body: dict[str, Any] = {}
    if training_job:
        body["TrainingJob"] = training_job
    if modules:
        body["PythonSDK"] = {"Modules": modules}
    return {"SchemaVersion": "1.0", "SageMaker": body}


VPC = {"Subnets": ["subnet-0a1b2c3d"], "SecurityGroupIds": ["sg-0a1b2c3d"]}
TAGS = [{"Key": "team", "Value": "platform"}, {"Key": "cost-center", "Value": "42"}]
EVERYTHING = sm(
    {
        "RoleArn": CONFIG_ROLE,
        "VpcConfig": VPC,
        "OutputDataConfig": {"KmsKeyId": KMS + "output"},
        "ResourceConfig": {"VolumeKmsKeyId": KMS + "volume"},
        "EnableNetworkIsolation": True,
        "EnableInterContainerTrafficEncryption": True,
        "Environment": {"ORG_DEFAULT": "1", "PIP_INDEX_URL": "https://pypi.example.com"},
        "ProfilerConfig": {"DisableProfiler": True},
        "Tags": TAGS,
    },
    Session={"DefaultS3Bucket": "org-ml-bucket", "DefaultS3ObjectKeyPrefix": "teams/vision"},
    Estimator={"DebugHookConfig": False},
)


def _explicit_false_encryption_wins(request: dict[str, Any]) -> dict[str, Any]:
    """docs/compatibility.md: an explicit encrypt_inter_container_traffic=False wins."""
    request.pop("EnableInterContainerTrafficEncryption")
    return request


CASES = [
    # -- each key alone
    ConfigCase("role", JOB, user=sm({"RoleArn": CONFIG_ROLE}), expect={"RoleArn": CONFIG_ROLE}),
    ConfigCase("vpc", WITH_ROLE, user=sm({"VpcConfig": VPC}), expect={"VpcConfig": VPC}),
    ConfigCase(
        "output-kms",
        WITH_ROLE,
        user=sm({"OutputDataConfig": {"KmsKeyId": KMS + "out"}}),
        expect={"OutputDataConfig.KmsKeyId": KMS + "out"},
    ),
    ConfigCase(
        "volume-kms",
        WITH_ROLE,
        user=sm({"ResourceConfig": {"VolumeKmsKeyId": KMS + "vol"}}),
        expect={"ResourceConfig.VolumeKmsKeyId": KMS + "vol"},
    ),
    ConfigCase(
        "network-isolation",
        WITH_ROLE,
        user=sm({"EnableNetworkIsolation": True}),
        expect={"EnableNetworkIsolation": True, "InputDataConfig.0.ChannelName": "code"},
    ),
    ConfigCase(
        "inter-container-encryption",
        WITH_ROLE,
        user=sm({"EnableInterContainerTrafficEncryption": True}),
        expect={"EnableInterContainerTrafficEncryption": True},
    ),
    ConfigCase(
        "environment",
        WITH_ROLE,
        user=sm({"Environment": {"ORG_DEFAULT": "1"}}),
        expect={"Environment": {"ORG_DEFAULT": "1"}},
    ),
    ConfigCase(
        "disable-profiler",
        WITH_ROLE,
        user=sm({"ProfilerConfig": {"DisableProfiler": True}}),
        expect={"ProfilerConfig": {"DisableProfiler": True}},
    ),
    ConfigCase("tags", WITH_ROLE, user=sm({"Tags": TAGS}), expect={"Tags": TAGS}),
    ConfigCase(
        "debug-hook-off",
        WITH_ROLE,
        user=sm(Estimator={"DebugHookConfig": False}),
        expect={"DebugHookConfig": ABSENT},
    ),
    ConfigCase(
        "default-bucket",
        WITH_ROLE,
        user=sm(Session={"DefaultS3Bucket": "org-ml-bucket"}),
        expect={"OutputDataConfig.S3OutputPath": "s3://org-ml-bucket/"},
    ),
    ConfigCase(
        "default-bucket-and-prefix",
        WITH_ROLE,
        user=sm(
            Session={"DefaultS3Bucket": "org-ml-bucket", "DefaultS3ObjectKeyPrefix": "teams/nlp"}
        ),
        expect={"OutputDataConfig.S3OutputPath": "s3://org-ml-bucket/teams/nlp/"},
    ),
    # -- everything from the files (the notebook: no role, no bucket given)
    ConfigCase(
        "everything",
        JOB,
        user=EVERYTHING,
        expect={
            "RoleArn": CONFIG_ROLE,
            "VpcConfig": VPC,
            "Tags": TAGS,
            "ResourceConfig.VolumeKmsKeyId": KMS + "volume",
            "OutputDataConfig.S3OutputPath": "s3://org-ml-bucket/teams/vision/",
        },
    ),
    # -- explicit arguments win
    ConfigCase(
        "explicit-wins",
        {
            **JOB,
            "role": ROLE,
            "subnets": ["subnet-explicit"],
            "security_group_ids": ["sg-explicit"],
            "output_kms_key": KMS + "explicit-out",
            "volume_kms_key": KMS + "explicit-vol",
            "enable_network_isolation": False,
            "encrypt_inter_container_traffic": False,
            "environment": {"MINE": "yes"},
            "disable_profiler": False,
            "debugger_hook_config": True,
            "output_path": "s3://explicit-bucket/out",
        },
        user=EVERYTHING,
        expect={
            "RoleArn": ROLE,
            "VpcConfig": {"Subnets": ["subnet-explicit"], "SecurityGroupIds": ["sg-explicit"]},
            "OutputDataConfig.KmsKeyId": KMS + "explicit-out",
            "ResourceConfig.VolumeKmsKeyId": KMS + "explicit-vol",
            "EnableNetworkIsolation": ABSENT,
            "Environment": {"MINE": "yes"},
            # v2 passes encrypt_inter_container_traffic on only when True, so its session
            # takes the file's True over the explicit False; launchbay keeps the False.
            "EnableInterContainerTrafficEncryption": True,
        },
        improvement=_explicit_false_encryption_wins,
    ),
    # -- tags merge: the job's tags first, the files' appended unless the Key is taken
    ConfigCase(
        "tags-merge",
        {**WITH_ROLE, "tags": [{"Key": "team", "Value": "mine"}, {"Key": "run", "Value": "7"}]},
        user=sm({"Tags": TAGS}),
        expect={
            "Tags": [
                {"Key": "team", "Value": "mine"},
                {"Key": "run", "Value": "7"},
                {"Key": "cost-center", "Value": "42"},
            ]
        },
    ),
    ConfigCase(
        "tags-dict-merge",
        {**WITH_ROLE, "tags": {"cost-center": "mine"}},
        user=sm({"Tags": TAGS}),
        expect={"Tags.0": {"Key": "cost-center", "Value": "mine"}, "Tags.1.Key": "team"},
    ),
    # -- admin and user: merged key by key, the user's value wins
    ConfigCase(
        "admin-and-user",
        JOB,
        admin=sm(
            {
                "RoleArn": CONFIG_ROLE,
                "Tags": [{"Key": "org", "Value": "admin"}],
                "Environment": {"FROM": "admin", "ADMIN_ONLY": "1"},
                "OutputDataConfig": {"KmsKeyId": KMS + "admin"},
            }
        ),
        user=sm(
            {
                "Tags": [{"Key": "me", "Value": "user"}],
                "Environment": {"FROM": "user"},
            }
        ),
        expect={
            "RoleArn": CONFIG_ROLE,
            "Tags": [{"Key": "me", "Value": "user"}],
            "Environment": {"FROM": "user", "ADMIN_ONLY": "1"},
            "OutputDataConfig.KmsKeyId": KMS + "admin",
        },
    ),
    ConfigCase(
        "admin-only",
        JOB,
        admin=sm({"RoleArn": CONFIG_ROLE, "EnableInterContainerTrafficEncryption": True}),
        expect={"RoleArn": CONFIG_ROLE, "EnableInterContainerTrafficEncryption": True},
    ),
    # -- instance types with instance storage (no EBS volume): no volume KMS key from the files
    ConfigCase(
        "instance-storage-p4d",
        {**WITH_ROLE, "instance_type": "ml.p4d.24xlarge"},
        user=sm({"ResourceConfig": {"VolumeKmsKeyId": KMS + "vol"}}),
        expect={"ResourceConfig.VolumeKmsKeyId": ABSENT},
    ),
    ConfigCase(
        "instance-storage-g5",
        {**WITH_ROLE, "instance_type": "ml.g5.2xlarge"},
        user=sm({"ResourceConfig": {"VolumeKmsKeyId": KMS + "vol"}}),
        expect={"ResourceConfig.VolumeKmsKeyId": ABSENT},
    ),
    ConfigCase(
        "instance-storage-explicit-key-kept",
        {**WITH_ROLE, "instance_type": "ml.c5d.xlarge", "volume_kms_key": KMS + "mine"},
        user=sm({"ResourceConfig": {"VolumeKmsKeyId": KMS + "vol"}}),
        expect={"ResourceConfig.VolumeKmsKeyId": KMS + "mine"},
    ),
]
IDS = [case.id for case in CASES]


def test_enough_cases() -> None:
    assert len(CASES) >= 10
    assert len(set(IDS)) == len(IDS)


def _check_expect(case: ConfigCase, request: dict[str, Any]) -> None:
    for path, expected in case.expect.items():
        assert lookup(request, path) == expected, (path, lookup(request, path))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_request_matches_sdk_v2_under_config_files(
    case: ConfigCase, source_tree: SourceTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(case, tmp_path, monkeypatch)
    v2 = v2_config_request(case, source_tree)
    _check_expect(case, v2)
    if case.improvement is not None:
        v2 = case.improvement(v2)
    ours = ours_config_request(case, source_tree)
    assert_same_request(v2, ours, case.case)


def test_config_from_moto_s3(
    source_tree: SourceTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user file is an s3:// prefix holding config.yaml; the admin file an s3:// object."""
    import boto3
    import yaml

    ensure_bucket("org-config", "us-west-2")
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.put_object(
        Bucket="org-config",
        Key="admin/defaults.yaml",
        Body=yaml.safe_dump(sm({"RoleArn": CONFIG_ROLE, "Tags": TAGS})).encode(),
    )
    s3.put_object(
        Bucket="org-config",
        Key="users/me/config.yaml",
        Body=yaml.safe_dump(sm({"VpcConfig": VPC, "Environment": {"S3": "yes"}})).encode(),
    )
    s3.put_object(Bucket="org-config", Key="users/me/notes.txt", Body=b"not a config")
    case = ConfigCase(
        "s3",
        JOB,
        admin="s3://org-config/admin/defaults.yaml",
        user="s3://org-config/users/me",
        expect={"RoleArn": CONFIG_ROLE, "VpcConfig": VPC, "Tags": TAGS},
    )
    install(case, tmp_path, monkeypatch)
    v2 = v2_config_request(case, source_tree)
    _check_expect(case, v2)
    assert_same_request(v2, ours_config_request(case, source_tree), case.case)


INVALID = {
    "role-not-an-arn": (
        sm({"RoleArn": "SageMakerRole-not-an-arn"}),
        "SageMaker.TrainingJob.RoleArn",
    ),
    "unknown-key": (sm({"RoleArm": CONFIG_ROLE}), "SageMaker.TrainingJob.RoleArm"),
    "no-schema-version": (
        {"SageMaker": {"TrainingJob": {"RoleArn": CONFIG_ROLE}}},
        "SchemaVersion",
    ),
    "bool-as-string": (
        sm({"EnableNetworkIsolation": "yes"}),
        "SageMaker.TrainingJob.EnableNetworkIsolation",
    ),
    "tag-without-value": (sm({"Tags": [{"Key": "team"}]}), "SageMaker.TrainingJob.Tags.0"),
    "bad-bucket": (sm(Session={"DefaultS3Bucket": "Org_Bucket"}), "DefaultS3Bucket"),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_file_refused_by_both(
    name: str, source_tree: SourceTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    content, key_path = INVALID[name]
    case = ConfigCase(f"invalid-{name}", WITH_ROLE, user=content)
    _, user = install(case, tmp_path, monkeypatch)
    with pytest.raises(jsonschema.ValidationError):
        v2_config_request(case, source_tree)
    with pytest.raises(ConfigurationError) as caught:
        ours_config_estimator(case, source_tree)
    message = str(caught.value)
    assert str(Path(user) / "config.yaml") in message
    assert key_path in message
    assert "Accepted:" in message


def test_missing_override_refused_by_both(
    source_tree: SourceTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-config.yaml")
    case = ConfigCase("missing", WITH_ROLE, user=missing)
    install(case, tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="Unable to load the config file"):
        v2_config_request(case, source_tree)
    with pytest.raises(ConfigurationError, match="SAGEMAKER_USER_CONFIG_OVERRIDE") as caught:
        launchbay.Session(region_name="us-west-2")
    assert missing in str(caught.value)
