"""After training: deploy(), create_model(), transformer(), register() (docs/compatibility.md).

A SageMaker job (on the moto server) is handed over to SageMaker SDK v2: the v2 estimator
attached to the same job makes the model, endpoint config and endpoint on moto, and v2's
return value comes back. Without SDK v2, and for local jobs, a HostingNotAvailableError
says where the model is and what to do.
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import pytest

from launchbay import Estimator
from launchbay.errors import ConfigurationError, HostingNotAvailableError

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:1.4"


@pytest.fixture
def no_v2_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDK v2 sends a telemetry GET to a real S3 endpoint from deploy(): keep it here."""
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    from sagemaker.telemetry import telemetry_logging

    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *a, **k: None)


def trained(session, name: str) -> Estimator:
    est = Estimator(
        image_uri=IMAGE, role=ROLE, instance_count=1, instance_type="ml.m5.xlarge",
        sagemaker_session=session, output_path="s3://after-training/out",
        # SageMaker always describes OutputDataConfig.KmsKeyId ("" when unset) and SDK v2's
        # attach reads it; moto describes it only when the request had one.
        output_kms_key="arn:aws:kms:us-west-2:123456789012:key/out",
    )  # fmt: skip
    boto3.client("s3", region_name="us-west-2").create_bucket(
        Bucket="after-training", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    est.fit({"train": "s3://after-training/data"}, wait=False, job_name=name)
    return est


def test_deploy_hands_over_to_sdk_v2_on_the_same_job(
    session, no_v2_telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sagemaker
    import sagemaker.session

    # SDK v2 sleeps its poll (30 s for an endpoint) before it first asks: polled at 0.1 s,
    # its waiting code runs unchanged without 30 s of the suite's wall time.
    wait_until = sagemaker.session._wait_until
    monkeypatch.setattr(sagemaker.session, "_wait_until", lambda fn, poll=5: wait_until(fn, 0.1))
    est = trained(session, "after-deploy-1")
    predictor = est.deploy(
        initial_instance_count=1, instance_type="ml.m5.large", endpoint_name="after-deploy-ep"
    )
    assert isinstance(predictor, sagemaker.predictor.Predictor)
    assert predictor.endpoint_name == "after-deploy-ep"
    client = boto3.client("sagemaker", region_name="us-west-2")
    endpoint = client.describe_endpoint(EndpointName="after-deploy-ep")
    config = client.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model = client.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    assert model["PrimaryContainer"]["Image"] == IMAGE
    assert model["PrimaryContainer"]["ModelDataUrl"] == est.model_data
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.m5.large"


def test_create_model_and_transformer_return_sdk_v2_objects(session, no_v2_telemetry) -> None:
    import sagemaker

    est = trained(session, "after-model-1")
    model = est.create_model()
    assert isinstance(model, sagemaker.model.Model)
    assert model.model_data == est.model_data and model.image_uri == IMAGE
    transformer = est.transformer(instance_count=1, instance_type="ml.m5.large")
    assert isinstance(transformer, sagemaker.transformer.Transformer)
    assert transformer.instance_type == "ml.m5.large"
    # The same attached v2 estimator serves every call on the same job.
    assert est.__dict__["_v2_estimator"][0] == "after-model-1"


def test_without_sdk_v2_the_error_says_where_the_model_is(
    session, monkeypatch: pytest.MonkeyPatch
) -> None:
    est = trained(session, "after-nosdk-1")
    for name in [m for m in sys.modules if m == "sagemaker" or m.startswith("sagemaker.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sagemaker", None)  # as if not installed
    with pytest.raises(HostingNotAvailableError) as caught:
        est.deploy(initial_instance_count=1, instance_type="ml.m5.large")
    message = str(caught.value)
    assert est.model_data and est.model_data in message
    assert "pip install 'sagemaker>=2,<3'" in message
    assert "sagemaker.estimator.Estimator.attach('after-nosdk-1'" in message
    assert isinstance(caught.value, NotImplementedError)


def test_before_any_job_names_the_missing_job(session) -> None:
    est = Estimator(image_uri=IMAGE, role=ROLE, instance_count=1, instance_type="ml.m5.xlarge",
                    sagemaker_session=session)  # fmt: skip
    with pytest.raises(ConfigurationError, match="latest_training_job"):
        est.register()


def test_local_job_says_where_the_model_is(home: Path, tmp_path: Path) -> None:
    src = tmp_path / "code"
    src.mkdir()
    (src / "train.py").write_text(
        "import os\nopen(os.path.join(os.environ['SM_MODEL_DIR'], 'm.txt'), 'w').write('x')\n"
    )
    est = Estimator(
        image_uri=IMAGE, entry_point="train.py", source_dir=str(src), instance_count=1,
        instance_type="local_process", output_path=f"file://{tmp_path}/out",
    )  # fmt: skip
    est.fit(logs=False)
    with pytest.raises(HostingNotAvailableError) as caught:
        est.deploy(initial_instance_count=1, instance_type="local")
    message = str(caught.value)
    path = est.model_data.removeprefix("file://")
    assert Path(path).is_file() and path in message and "file://" not in message
    assert "launchbay trains models, it does not host them" in message
