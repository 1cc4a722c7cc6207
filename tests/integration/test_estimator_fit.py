"""Dry run and fit() against a real moto server: the dry run uploads nothing, fit() sends it."""

from __future__ import annotations

import json
import re

import boto3
import pytest

from factories import sagemaker_estimator
from launchbay import ConfigurationError, Estimator, JobFailedError
from launchbay.inputs import FileSystemInput, TrainingInput
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BUCKET = "sagemaker-us-west-2-123456789012"


def torch_estimator(session, **overrides):
    kwargs = dict(
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"epochs": 3, "name": "abc"},
        sagemaker_session=session,
    )
    return sagemaker_estimator(**{**kwargs, **overrides})


def record_create_calls(session):
    sent = []

    def capture(params, **_):
        sent.append(json.loads(json.dumps(params)))

    session.sagemaker_client.meta.events.register(
        "provide-client-params.sagemaker.CreateTrainingJob", capture
    )
    return sent


def test_dry_run_uploads_nothing_and_creates_no_bucket(session, src):
    est = torch_estimator(session)
    request = est.create_training_job_request({"train": "s3://data/mnist"}, job_name="job-1")
    assert request["TrainingJobName"] == "job-1"
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith(
        "/pytorch-training:2.3-gpu-py311"
    )
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert re.fullmatch(rf"s3://{BUCKET}/source/[0-9a-f]{{64}}/sourcedir.tar.gz", submit)
    s3 = boto3.client("s3")
    assert s3.list_buckets()["Buckets"] == []


def test_fit_sends_exactly_the_dry_run_request_and_stages_code_once(session, src):
    est = torch_estimator(session)
    inputs = {"train": "s3://data/mnist"}
    expected = est.create_training_job_request(inputs, job_name="job-1")
    sent = record_create_calls(session)
    job = est.fit(inputs, wait=False, job_name="job-1")
    assert job.name == "job-1" and est.latest_training_job is job
    assert sent == [expected]

    code_uri = json.loads(expected["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = code_uri[5:].split("/", 1)
    s3 = boto3.client("s3")
    first = s3.head_object(Bucket=bucket, Key=key)["ETag"]

    # Same code, another job: same key, and the object is not uploaded again.
    puts = []
    session.s3_client.meta.events.register(
        "before-call.s3.PutObject", lambda **kw: puts.append(kw["params"]["Key"])
    )
    again = est.fit(inputs, wait=False, job_name="job-2")
    assert again.name == "job-2"
    assert sent[1]["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(code_uri)
    assert puts == []
    assert s3.head_object(Bucket=bucket, Key=key)["ETag"] == first


def test_fit_waits_and_reports_model_data(session, src):
    est = torch_estimator(session)
    job = est.fit("s3://data/mnist", job_name="job-wait")
    assert job.status == "Completed"  # moto completes jobs at once
    assert est.model_data is not None and est.model_data.startswith("s3://")


def test_generated_job_names_follow_the_image(session, src):
    request = torch_estimator(session).create_training_job_request()
    assert re.fullmatch(
        r"pytorch-training-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d-\d{3}", request["TrainingJobName"]
    )
    named = torch_estimator(session, base_job_name="mnist").create_training_job_request()
    assert named["TrainingJobName"].startswith("mnist-")


@pytest.mark.parametrize("bad", ["bad_name", "x" * 64, "-leading", ""])
def test_invalid_job_names(session, src, bad):
    with pytest.raises(ConfigurationError, match="job_name="):
        torch_estimator(session).create_training_job_request(job_name=bad)


def test_input_forms(session, src):
    est = torch_estimator(session)
    request = est.create_training_job_request(
        {
            "train": "s3://data/train",
            "test": TrainingInput(
                "s3://data/test", distribution="ShardedByS3Key", content_type="text/csv"
            ),
            "fsx": FileSystemInput("fs-0123456789abcdef0", "FSxLustre", "/fsx/data"),
        },
        job_name="job-1",
    )
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert channels["train"]["DataSource"]["S3DataSource"] == {
        "S3DataType": "S3Prefix",
        "S3Uri": "s3://data/train",
        "S3DataDistributionType": "FullyReplicated",
    }
    assert channels["test"]["ContentType"] == "text/csv"
    assert channels["fsx"]["DataSource"]["FileSystemDataSource"]["FileSystemType"] == "FSxLustre"
    single = est.create_training_job_request(
        TrainingInput("s3://data/x", input_mode="Pipe"), job_name="j"
    )
    assert single["InputDataConfig"][0]["ChannelName"] == "training"
    assert single["AlgorithmSpecification"]["TrainingInputMode"] == "Pipe"


@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [
        ("file:///data/train", "file:// inputs run only with the local instance types"),
        ({"train": "http://x/y"}, "inputs['train']='http://x/y'"),
        ({"bad name": "s3://data/x"}, "channel name 'bad name'"),
        ({"train": 3}, "inputs['train']=3"),
        (["s3://a/b"], "inputs=['s3://a/b']"),
        ({"model": "s3://data/m"}, "Duplicate channel 'model'"),
    ],
)
def test_bad_inputs(session, src, inputs, fragment):
    est = torch_estimator(session, model_uri="s3://data/model.tar.gz")
    with pytest.raises(ConfigurationError) as info:
        est.create_training_job_request(inputs, job_name="job-1")
    assert fragment in str(info.value)


def test_network_isolation_ships_code_as_a_channel(session, src):
    request = torch_estimator(session, enable_network_isolation=True).create_training_job_request(
        job_name="job-1"
    )
    assert request["EnableNetworkIsolation"] is True
    assert request["HyperParameters"]["sagemaker_submit_directory"] == json.dumps(
        "/opt/ml/input/data/code/sourcedir.tar.gz"
    )
    code = [c for c in request["InputDataConfig"] if c["ChannelName"] == "code"]
    assert code and code[0]["DataSource"]["S3DataSource"]["S3Uri"].endswith("sourcedir.tar.gz")


def test_tensorflow_model_dir(session, src):
    kwargs = dict(entry_point="train.py", source_dir="src", role=ROLE, instance_count=2,
                  instance_type="ml.c5.xlarge", framework_version="2.14", py_version="py310",
                  sagemaker_session=session)  # fmt: skip
    plain = TensorFlow(**kwargs).create_training_job_request(job_name="tf-1")
    assert json.loads(plain["HyperParameters"]["model_dir"]) == f"s3://{BUCKET}/tf-1/model"
    mpi = TensorFlow(distribution={"mpi": {"enabled": True}}, **kwargs).create_training_job_request(
        job_name="tf-2"
    )
    assert json.loads(mpi["HyperParameters"]["model_dir"]) == "/opt/ml/model"
    none = TensorFlow(model_dir=False, **kwargs).create_training_job_request(job_name="tf-3")
    assert "model_dir" not in none["HyperParameters"]


def test_generic_estimator_sends_str_hyperparameters(session):
    est = Estimator(
        image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/algo:1",
        role=ROLE,
        instance_count=1,
        instance_type="ml.m5.xlarge",
        hyperparameters={"lr": 0.1, "flag": True, "name": "x"},
        sagemaker_session=session,
    )
    request = est.create_training_job_request(job_name="algo-1")
    assert request["HyperParameters"] == {"lr": "0.1", "flag": "True", "name": "x"}
    assert request["TrainingJobName"] == "algo-1"


def test_role_name_is_expanded_through_iam(session, src):
    iam = boto3.client("iam")
    iam.create_role(RoleName="TrainRole", AssumeRolePolicyDocument="{}")
    request = torch_estimator(session, role="TrainRole").create_training_job_request(job_name="j")
    assert request["RoleArn"].endswith(":role/TrainRole")


def test_failed_job_raises_with_reason(session, src):
    from datetime import datetime, timezone

    from botocore.stub import Stubber

    est = torch_estimator(session)
    job = est.fit(wait=False, job_name="job-fail")
    # moto completes every job at once; botocore's Stubber plays the failure SageMaker reports.
    description = {
        "TrainingJobName": "job-fail",
        "TrainingJobArn": "arn:aws:sagemaker:us-west-2:123456789012:training-job/job-fail",
        "ModelArtifacts": {"S3ModelArtifacts": ""},
        "TrainingJobStatus": "Failed",
        "SecondaryStatus": "Failed",
        "FailureReason": "AlgorithmError: boom",
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "ResourceConfig": {"VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "CreationTime": datetime.now(timezone.utc),
    }
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response("describe_training_job", description, {"TrainingJobName": "job-fail"})
        with pytest.raises(
            JobFailedError, match="job-fail ended with status Failed: AlgorithmError: boom"
        ) as info:
            job.wait()
    assert info.value.reason == "AlgorithmError: boom" and info.value.status == "Failed"
