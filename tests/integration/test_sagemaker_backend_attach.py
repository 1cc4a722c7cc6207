"""``Estimator.attach``: an estimator rebuilt from DescribeTrainingJob reproduces the job's request.

Each case builds an estimator, takes its CreateTrainingJob request, plays the
description SageMaker returns for that job (the request's fields plus status
fields) with botocore's Stubber, attaches, and checks that
``create_training_job_request(job_name=<same>)`` of the rebuilt estimator equals
the original request (tags excepted: a description has none). One case goes
through moto for real: fit(wait=False), then attach.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging

import pytest
from botocore.stub import Stubber

from factories import sagemaker_arguments
from launchbay import ConfigurationError, Estimator, JobError
from launchbay.debugger import CollectionConfig, DebuggerHookConfig
from launchbay.inputs import InstanceGroup, TrainingInput
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CUSTOM_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-trainer:1.4"
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
INPUTS = {
    "train": "s3://data/train",
    "test": TrainingInput("s3://data/test", distribution="ShardedByS3Key", content_type="text/csv"),
}


def described(request: dict, status: str = "InProgress") -> dict:
    """What DescribeTrainingJob returns for a job created with ``request``."""
    description = {k: copy.deepcopy(v) for k, v in request.items() if k != "Tags"}
    name = request["TrainingJobName"]
    output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
    description.update(
        {
            "TrainingJobArn": f"arn:aws:sagemaker:us-west-2:123456789012:training-job/{name}",
            "ModelArtifacts": {"S3ModelArtifacts": f"{output}/{name}/output/model.tar.gz"},
            "TrainingJobStatus": status,
            "SecondaryStatus": "Training",
            "CreationTime": T0,
            "SecondaryStatusTransitions": [
                {"Status": "Training", "StartTime": T0, "StatusMessage": "Training in progress."}
            ],
        }
    )
    return description


def attach_from(session, cls, request: dict, status: str = "InProgress"):
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response(
            "describe_training_job",
            described(request, status),
            {"TrainingJobName": request["TrainingJobName"]},
        )
        estimator = cls.attach(request["TrainingJobName"], sagemaker_session=session)
        stub.assert_no_pending_responses()
    return estimator


def torch_kwargs(**overrides):
    kwargs = dict(role=ROLE, instance_count=2, instance_type="ml.p4d.24xlarge")
    return sagemaker_arguments(framework=PyTorch, **kwargs | overrides)


def tf_kwargs(**overrides):
    kwargs = dict(role=ROLE, instance_count=2, instance_type="ml.c5.xlarge")
    return sagemaker_arguments(framework=TensorFlow, **kwargs | overrides)


HPS = {"epochs": 3, "name": "abc", "lr": 0.1, "layers": [64, 32], "opts": {"amp": True}, "x": None}

CASES = {
    "pytorch-torchrun-spot-vpc-everything": (
        PyTorch,
        torch_kwargs(
            distribution={"torch_distributed": {"enabled": True}},
            hyperparameters=HPS,
            use_spot_instances=True,
            max_run=3600,
            max_wait=7200,
            checkpoint_s3_uri="s3://ckpt/run-1",
            checkpoint_local_path="/opt/ml/checkpoints",
            subnets=["subnet-1", "subnet-2"],
            security_group_ids=["sg-1"],
            environment={"NCCL_DEBUG": "INFO"},
            max_retry_attempts=3,
            volume_size=200,
            volume_kms_key="kms-volume",
            output_path="s3://out-bucket/jobs",
            output_kms_key="kms-output",
            encrypt_inter_container_traffic=True,
            keep_alive_period_in_seconds=600,
            container_log_level=logging.DEBUG,
            base_job_name="mnist",
            tags={"team": "ml"},
        ),
    ),
    "pytorch-mpi-isolated-model-uri": (
        PyTorch,
        torch_kwargs(
            instance_type="ml.c5.xlarge",
            distribution={
                "mpi": {"enabled": True, "processes_per_host": 4, "custom_mpi_options": "-x A=1"}
            },
            enable_network_isolation=True,
            model_uri="s3://models/base/model.tar.gz",
            disable_profiler=True,
            debugger_hook_config=False,
            input_mode="FastFile",
            disable_output_compression=True,
            metric_definitions=[{"Name": "loss", "Regex": "loss=(\\S+)"}],
            enable_sagemaker_metrics=False,
        ),
    ),
    "pytorch-smddp": (
        PyTorch,
        torch_kwargs(
            framework_version="2.2.0",
            py_version="py310",
            distribution={"smdistributed": {"dataparallel": {"enabled": True}}},
        ),
    ),
    "pytorch-pytorchddp-alias": (
        PyTorch,
        torch_kwargs(
            framework_version="2.1.0",
            py_version="py310",
            distribution={"pytorchddp": {"enabled": True, "custom_mpi_options": "-v"}},
            hyperparameters={"batch": 32},
        ),
    ),
    "pytorch-modelparallel-mpi": (
        PyTorch,
        torch_kwargs(
            distribution={
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"partitions": 2}}
                },
                "mpi": {"enabled": True, "processes_per_host": 8},
            }
        ),
    ),
    "pytorch-custom-image": (
        PyTorch,
        torch_kwargs(image_uri=CUSTOM_IMAGE, hyperparameters={"a": 1}),
    ),
    "pytorch-full-dlc-tag": (
        PyTorch,
        torch_kwargs(
            instance_type="ml.g5.xlarge",
            image_uri=(
                "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:"
                "2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker"
            ),
        ),
    ),
    "pytorch-debugger-and-entrypoint": (
        PyTorch,
        torch_kwargs(
            instance_type="ml.g5.xlarge",
            instance_count=1,
            debugger_hook_config=DebuggerHookConfig(
                hook_parameters={"save_interval": "10"},
                collection_configs=[CollectionConfig("losses", {"save_interval": "5"})],
            ),
            container_entry_point=["python3"],
            container_arguments=["-u"],
        ),
    ),
    "tensorflow-parameter-server-default-model-dir": (
        TensorFlow,
        tf_kwargs(distribution={"parameter_server": {"enabled": True}}, hyperparameters={"b": 2}),
    ),
    "tensorflow-custom-model-dir": (
        TensorFlow,
        tf_kwargs(
            model_dir="s3://models/tf",
            distribution={"multi_worker_mirrored_strategy": {"enabled": True}},
        ),
    ),
    "tensorflow-no-model-dir": (TensorFlow, tf_kwargs(model_dir=False)),
    "tensorflow-mpi": (TensorFlow, tf_kwargs(distribution={"mpi": {"enabled": True}})),
    "generic-str-hyperparameters-instance-groups": (
        Estimator,
        dict(
            image_uri=CUSTOM_IMAGE,
            role=ROLE,
            instance_groups=[
                InstanceGroup("train", "ml.p4d.24xlarge", 2),
                InstanceGroup("data", "ml.c5.xlarge", 1),
            ],
            distribution={"instance_groups": ["train"], "mpi": {"enabled": True}},
            hyperparameters={"lr": 0.1, "flag": True, "name": "x", "big": "1e5"},
        ),
    ),
    "generic-script-mode": (
        Estimator,
        dict(
            image_uri=CUSTOM_IMAGE,
            role=ROLE,
            instance_count=1,
            instance_type="ml.m5.xlarge",
            entry_point="train.py",
            source_dir="src",
            hyperparameters={"lr": 0.1, "name": "x"},
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_attach_reproduces_the_request(session, src, case):
    cls, kwargs = CASES[case]
    job_name = (
        "mnist-2024-05-01-12-00-00-123" if kwargs.get("base_job_name") else f"job-{case}"[:63]
    )
    original = cls(sagemaker_session=session, **kwargs).create_training_job_request(
        INPUTS, job_name=job_name
    )
    attached = attach_from(session, cls, original)
    again = attached.create_training_job_request(INPUTS, job_name=job_name)
    assert again == {k: v for k, v in original.items() if k != "Tags"}
    assert attached.latest_training_job.name == job_name
    assert attached.base_job_name == kwargs.get("base_job_name")


def test_attach_a_pytorch_dlc_job_with_distribution(session, src):
    """A job as SageMaker describes it, written by hand (not built by launchbay)."""
    name = "pt-dlc-2024-05-01-12-00-00-000"
    code = "s3://sagemaker-us-west-2-123456789012/pt-dlc/source/sourcedir.tar.gz"
    request = {
        "TrainingJobName": name,
        "RoleArn": ROLE,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3-gpu-py311",
            "TrainingInputMode": "File",
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "HyperParameters": {
            "epochs": "10",
            "optimizer": '"adamw"',
            "sagemaker_program": '"train.py"',
            "sagemaker_submit_directory": json.dumps(code),
            "sagemaker_container_log_level": "20",
            "sagemaker_job_name": json.dumps(name),
            "sagemaker_region": '"us-west-2"',
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_instance_type": '"ml.p4d.24xlarge"',
        },
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": "s3://data/train",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
            }
        ],
        "OutputDataConfig": {"S3OutputPath": "s3://sagemaker-us-west-2-123456789012/"},
        "ResourceConfig": {
            "InstanceCount": 4,
            "InstanceType": "ml.p4d.24xlarge",
            "VolumeSizeInGB": 30,
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        "EnableManagedSpotTraining": False,
        "DebugHookConfig": {
            "S3OutputPath": "s3://sagemaker-us-west-2-123456789012/",
            "CollectionConfigurations": [],
        },
        "ProfilerConfig": {
            "S3OutputPath": "s3://sagemaker-us-west-2-123456789012/",
            "DisableProfiler": False,
        },
    }
    est = attach_from(session, PyTorch, request, status="Completed")
    assert (est.framework_version, est.py_version, est.image_uri) == ("2.3", "py311", None)
    assert est.distribution == {"torch_distributed": {"enabled": True}}
    assert (est.entry_point, est.source_dir) == ("train.py", code)
    assert est._hyperparameters == {"epochs": 10, "optimizer": "adamw"}
    assert (est.instance_count, est.instance_type, est.role) == (4, "ml.p4d.24xlarge", ROLE)
    assert est.base_job_name == "pt-dlc"
    again = est.create_training_job_request({"train": "s3://data/train"}, job_name=name)
    assert again == {k: v for k, v in request.items() if k != "EnableManagedSpotTraining"}
    # the handle works: model_data comes from the description
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response("describe_training_job", described(request, "Completed"))
        assert est.model_data == f"s3://sagemaker-us-west-2-123456789012/{name}/output/model.tar.gz"


def test_attach_after_fit_against_moto(session, src):
    kwargs = torch_kwargs(
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters=HPS,
        use_spot_instances=True,
        max_wait=90000,
        checkpoint_s3_uri="s3://ckpt/run-1",
        subnets=["subnet-1"],
        security_group_ids=["sg-1"],
        enable_network_isolation=True,
        encrypt_inter_container_traffic=True,
    )
    est = PyTorch(sagemaker_session=session, **kwargs)
    original = est.create_training_job_request(INPUTS, job_name="moto-attach-1")
    est.fit(INPUTS, wait=False, job_name="moto-attach-1")

    attached = PyTorch.attach("moto-attach-1", sagemaker_session=session)
    again = attached.create_training_job_request(INPUTS, job_name="moto-attach-1")
    # moto writes its own MetricDefinitions into every described job
    for request in (original, again):
        request["AlgorithmSpecification"].pop("MetricDefinitions", None)
    assert again == original
    job = attached.latest_training_job
    assert job.name == "moto-attach-1"
    assert attached.model_data == est.model_data
    assert attached.model_data.endswith("/moto-attach-1/output/model.tar.gz")
    assert job.wait(logs=False)["TrainingJobStatus"] == "Completed"  # moto: done at once


def test_attach_model_data_while_running_is_where_the_service_will_write(session, src):
    request = PyTorch(sagemaker_session=session, **torch_kwargs()).create_training_job_request(
        job_name="running-1"
    )
    est = attach_from(session, PyTorch, request)
    running = described(request)
    running["ModelArtifacts"]["S3ModelArtifacts"] = ""  # no artifact yet
    with Stubber(session.sagemaker_client) as stub:
        stub.add_response("describe_training_job", running)
        bucket = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        assert est.model_data == f"{bucket}/running-1/output/model.tar.gz"


def test_attach_refuses_another_frameworks_job_and_unknown_jobs(session, src):
    request = TensorFlow(sagemaker_session=session, **tf_kwargs()).create_training_job_request(
        job_name="tf-job"
    )
    with pytest.raises(ConfigurationError, match=r"tensorflow image.*TensorFlow.attach"):
        attach_from(session, PyTorch, request)
    generic = attach_from(session, Estimator, request)  # any image fits the generic estimator
    assert generic.image_uri == request["AlgorithmSpecification"]["TrainingImage"]
    with pytest.raises(JobError, match="'nope'"):
        PyTorch.attach("nope", sagemaker_session=session)
