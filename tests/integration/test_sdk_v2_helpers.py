"""SDK v2 helpers notebooks call: ``get_execution_role``, ``Session`` S3 helpers, names.

The role lookups run against moto's server (SageMaker notebook instances, STS,
IAM); the placeholder path makes no AWS call at all.
"""

from __future__ import annotations

import json
import re

import boto3
import pytest

import launchbay
from launchbay import ConfigurationError, _resolve
from launchbay import session as session_module
from launchbay.pytorch import PyTorch
from launchbay.utils import name_from_base, sagemaker_short_timestamp, sagemaker_timestamp

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

LOCAL_ROLE = "arn:aws:iam::000000000000:role/launchbay-local"


def _estimator(role, instance_type):
    return PyTorch(
        entry_point="train.py",
        source_dir="src",
        role=role,
        instance_type=instance_type,
        instance_count=1,
        framework_version="2.8.0",
        py_version="py312",
    )


@pytest.fixture
def off_aws(monkeypatch, tmp_path):
    """No SageMaker notebook here (no metadata file) and no LAUNCHBAY_EXECUTION_ROLE."""
    monkeypatch.setattr(session_module, "NOTEBOOK_METADATA_FILE", str(tmp_path / "absent.json"))
    monkeypatch.delenv("LAUNCHBAY_EXECUTION_ROLE", raising=False)


@pytest.fixture
def notebook(monkeypatch, tmp_path):
    """A SageMaker notebook's metadata file; returns a function that writes it."""
    path = tmp_path / "resource-metadata.json"
    monkeypatch.setattr(session_module, "NOTEBOOK_METADATA_FILE", str(path))
    monkeypatch.delenv("LAUNCHBAY_EXECUTION_ROLE", raising=False)
    return lambda document: path.write_text(json.dumps(document))


def test_off_aws_role_is_a_placeholder_local_jobs_run_with(off_aws, src):
    role = launchbay.get_execution_role()
    assert role == LOCAL_ROLE
    est = _estimator(role, "local_process")
    assert est.create_training_job_request()["RoleArn"] == LOCAL_ROLE


def test_placeholder_role_for_a_sagemaker_instance_type_is_a_clear_error(off_aws, src):
    role = launchbay.get_execution_role()
    with pytest.raises(ConfigurationError) as info:
        _estimator(role, "ml.m5.xlarge")
    assert str(info.value) == (
        f"role={LOCAL_ROLE!r} is the placeholder get_execution_role() returns outside a "
        "SageMaker notebook; instance_type='ml.m5.xlarge' runs on SageMaker, which needs a "
        "real role. Accepted: an IAM role ARN such as "
        "'arn:aws:iam::123456789012:role/SageMakerRole' (or set LAUNCHBAY_EXECUTION_ROLE), "
        "or a local instance type ('local', 'local_gpu', 'local_process')."
    )
    assert info.value.argument == "role"


def test_execution_role_from_the_environment(off_aws, monkeypatch, src):
    arn = "arn:aws:iam::123456789012:role/Mine"
    monkeypatch.setenv("LAUNCHBAY_EXECUTION_ROLE", arn)
    assert launchbay.get_execution_role() == arn
    assert _estimator(launchbay.get_execution_role(), "ml.m5.xlarge").role == arn


def test_use_default_is_refused_with_what_to_do(off_aws):
    with pytest.raises(ConfigurationError) as info:
        launchbay.get_execution_role(use_default=True)
    assert str(info.value) == (
        "Invalid use_default=True. Accepted: False (launchbay creates no IAM roles: "
        "pass role= an IAM role ARN instead)."
    )


def test_notebook_instance_role(session, notebook):
    arn = "arn:aws:iam::123456789012:role/service-role/NotebookRole"
    boto3.client("sagemaker").create_notebook_instance(
        NotebookInstanceName="nb", InstanceType="ml.t3.medium", RoleArn=arn
    )
    notebook({"ResourceName": "nb", "ResourceArn": "arn:aws:sagemaker:::notebook-instance/nb"})
    assert launchbay.get_execution_role(session) == arn


def test_assumed_role_identity_becomes_the_roles_arn(aws, notebook, monkeypatch):
    iam = boto3.client("iam")
    trust = json.dumps({"Version": "2012-10-17", "Statement": []})
    created = iam.create_role(
        RoleName="Studio", Path="/service-role/", AssumeRolePolicyDocument=trust
    )
    creds = boto3.client("sts").assume_role(
        RoleArn=created["Role"]["Arn"], RoleSessionName="SageMaker"
    )["Credentials"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"])
    notebook({})
    assert launchbay.get_execution_role() == created["Role"]["Arn"]


def test_a_user_identity_in_a_notebook_is_not_a_role(aws, notebook):
    notebook({})
    identity = boto3.client("sts").get_caller_identity()["Arn"]
    with pytest.raises(ConfigurationError) as info:
        launchbay.get_execution_role()
    assert str(info.value) == (
        f"The AWS identity of this notebook is not a role ({identity}), so it cannot be a "
        "SageMaker execution role. Pass role= an IAM role ARN, or set LAUNCHBAY_EXECUTION_ROLE."
    )


def test_default_bucket_and_upload_data_as_sdk_v2_calls_them(session, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("1,2\n")
    bucket = session.default_bucket()
    assert bucket == f"sagemaker-{session.boto_region_name}-{session.account_id()}"
    seen = []
    # v2's positional order: path, bucket, key_prefix, callback, extra_args
    uri = session.upload_data(str(data), bucket, "notebook/data", seen.append, None)
    assert uri == f"s3://{bucket}/notebook/data"
    assert sum(seen) == 4
    assert session.upload_data(str(data), key_prefix="p") == f"s3://{bucket}/p"


def test_a_session_takes_the_clients_sdk_v2_takes_for_other_services(aws):
    """Clarify and Feature Store notebooks pass SDK v2's other clients to the session."""
    import boto3

    import launchbay

    runtime = boto3.client("sagemaker-runtime", region_name="us-west-2")
    session = launchbay.Session(
        boto_session=boto3.Session(region_name="us-west-2"),
        sagemaker_runtime_client=runtime,
        sagemaker_featurestore_runtime_client="fs-client",
        sagemaker_metrics_client="metrics-client",
        settings="settings",
    )
    assert session.sagemaker_runtime_client is runtime
    assert session.sagemaker_featurestore_runtime_client == "fs-client"
    assert (session.sagemaker_metrics_client, session.settings) == ("metrics-client", "settings")
    assert session.boto_region_name == "us-west-2"


def test_timestamps_and_names_have_sdk_v2_formats():
    from sagemaker import utils as v2

    pattern = re.compile(r"^\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}$")
    assert pattern.match(sagemaker_timestamp())
    assert pattern.match(v2.sagemaker_timestamp())
    assert re.match(r"^\d{6}-\d{4}$", sagemaker_short_timestamp())
    assert sagemaker_short_timestamp()[:6] == v2.sagemaker_short_timestamp()[:6]
    for base, kwargs in (
        ("x" * 80, {}),
        ("job", {}),
        ("y" * 70, {"short": True}),
        ("z", {"max_length": 30}),
    ):
        ours, theirs = name_from_base(base, **kwargs), v2.name_from_base(base, **kwargs)
        assert len(ours) == len(theirs)
        stamp_len = len(
            sagemaker_short_timestamp() if kwargs.get("short") else sagemaker_timestamp()
        )
        assert ours[:-stamp_len] == theirs[:-stamp_len]


def test_job_names_use_the_same_stamp(off_aws, src):
    name = _resolve.job_name(_estimator(launchbay.get_execution_role(), "local_process"), None)
    assert re.match(r"^pytorch-training-\d{4}(-\d{2}){5}-\d{3}$", name)


# -- issue 32, item 5: names notebooks import around the estimator ---------------------------


@pytest.mark.parametrize(
    ("base", "kwargs"),
    [("job", {}), ("x" * 80, {}), ("tuning", {"max_length": 32}), ("abc", {"max_length": 16})],
)
def test_unique_name_from_base_has_v2s_format_and_length(base, kwargs):
    from sagemaker import utils as v2

    from launchbay.utils import unique_name_from_base

    ours, theirs = unique_name_from_base(base, **kwargs), v2.unique_name_from_base(base, **kwargs)
    stamp = re.compile(r"-\d{10}-[0-9a-f]{4}$")
    assert stamp.search(ours) and stamp.search(theirs)
    assert len(ours) == len(theirs) <= kwargs.get("max_length", 63)
    assert stamp.sub("", ours) == stamp.sub("", theirs)
    assert len({unique_name_from_base(base, **kwargs) for _ in range(20)}) > 1


def test_session_training_input_and_the_deprecated_s3_input():
    import sagemaker.session as v2_session

    from launchbay.session import TrainingInput, s3_input

    arguments = {"s3_data": "s3://bucket/train", "content_type": "text/csv",
                 "distribution": "ShardedByS3Key", "input_mode": "Pipe"}  # fmt: skip
    assert TrainingInput(**arguments).config == v2_session.TrainingInput(**arguments).config
    with pytest.warns(DeprecationWarning, match="renamed"):
        theirs = v2_session.s3_input(**arguments)
    with pytest.warns(DeprecationWarning, match=r"s3_input is SDK v1's name of TrainingInput"):
        made = s3_input(**arguments)
    assert isinstance(made, TrainingInput) and made.config == theirs.config


def test_estimator_logs_prints_the_latest_jobs_logs(off_aws, home, src, capfd):
    (src / "train.py").write_text("print('hello from the training script', flush=True)\n")
    est = _estimator(launchbay.get_execution_role(), "local_process")
    with pytest.raises(ConfigurationError, match="a job started by fit"):
        est.logs()
    est.fit(wait=False, job_name="logs-of-the-latest-job")
    capfd.readouterr()
    est.logs()  # follows until the job ends, as v2's logs() does
    assert "hello from the training script" in capfd.readouterr().out
    assert est.latest_training_job.status == "Completed"
