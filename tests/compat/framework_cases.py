"""Compatibility cases of the HuggingFace, SKLearn, XGBoost and MXNet estimators (issue 32).

Hand-written cases pin what each framework adds to the request (its distribution keys,
metrics, debugger defaults, image region); the sweeps build one job per version SDK v2's
image config knows, so every image and version-dependent default is compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .harness import ABSENT, Case

SOURCE = {"entry_point": "train.py", "source_dir": "<src>"}
DLC = "763104351884.dkr.ecr.us-west-2.amazonaws.com"
SKLEARN_XGB = "246618743249.dkr.ecr.us-west-2.amazonaws.com"
CHECKPOINTS = {
    "checkpoint_s3_uri": "s3://ckpt-bucket/run",
    "checkpoint_local_path": "/opt/ml/checkpoints",
}
HPS: dict[str, Any] = {"lr": 0.01, "epochs": 3, "name": "tiny", "flags": [1, 2], "on": True}

HF = {
    **SOURCE,
    "py_version": "py310",
    "transformers_version": "4.36.0",
    "pytorch_version": "2.1.0",
    "instance_type": "ml.p4d.24xlarge",
    "instance_count": 2,
}
SK = {**SOURCE, "framework_version": "1.2-1", "instance_type": "ml.m5.xlarge"}
XGB = {
    **SOURCE,
    "framework_version": "1.7-1",
    "instance_type": "ml.m5.2xlarge",
    "instance_count": 1,
}
MX = {
    **SOURCE,
    "framework_version": "1.9.0",
    "py_version": "py38",
    "instance_type": "ml.p3.16xlarge",
    "instance_count": 2,
}


def hp(name: str) -> str:
    return f"HyperParameters.{name}"


FRAMEWORK_CASES = [
    # -- HuggingFace
    Case(
        "hf-pytorchddp-p4d",
        "HuggingFace",
        {**HF, "distribution": {"pytorchddp": {"enabled": True}}},
        inputs="s3://data-bucket/train",
        expect={
            hp("sagemaker_pytorch_ddp_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
            hp("sagemaker_distributed_dataparallel_enabled"): ABSENT,
            "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": True,
        },
    ),
    Case(
        "hf-torch-distributed-g5",
        "HuggingFace",
        {
            **HF,
            "instance_type": "ml.g5.12xlarge",
            "distribution": {"torch_distributed": {"enabled": True}},
        },
        expect={
            hp("sagemaker_torch_distributed_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.g5.12xlarge"',
        },
    ),
    Case(
        "hf-smddp-pytorch-1.10",
        "HuggingFace",
        {
            **HF,
            "transformers_version": "4.17.0",
            "pytorch_version": "1.10.2",
            "py_version": "py38",
            "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}},
        },
        expect={
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_distributed_dataparallel_custom_mpi_options"): '""',
        },
    ),
    Case(
        "hf-mpi-per-host-options",
        "HuggingFace",
        {
            **HF,
            "distribution": {
                "mpi": {
                    "enabled": True,
                    "processes_per_host": 8,
                    "custom_mpi_options": "-x NCCL_DEBUG=INFO",
                }
            },
        },
        expect={
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_num_of_processes_per_host"): "8",
            hp("sagemaker_mpi_custom_mpi_options"): '"-x NCCL_DEBUG=INFO"',
        },
    ),
    Case(
        "hf-tensorflow-mpi",
        "HuggingFace",
        {
            **SOURCE,
            "py_version": "py38",
            "transformers_version": "4.17.0",
            "tensorflow_version": "2.6.3",
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "distribution": {"mpi": {"enabled": True}},
        },
        expect={hp("sagemaker_mpi_custom_mpi_options"): '""', "HyperParameters.model_dir": ABSENT},
    ),
    Case(
        "hf-pytorchddp-disabled-mpi",
        "HuggingFace",
        {**HF, "distribution": {"pytorchddp": {"enabled": False}, "mpi": {"enabled": True}}},
        expect={hp("sagemaker_pytorch_ddp_enabled"): ABSENT, hp("sagemaker_mpi_enabled"): "true"},
    ),
    Case(
        "hf-short-versions-metrics-off",
        "HuggingFace",
        {
            **HF,
            "transformers_version": "4.36",
            "pytorch_version": "2.1",
            "instance_type": "ml.g4dn.xlarge",
            "instance_count": 1,
            "enable_sagemaker_metrics": False,
            "hyperparameters": HPS,
        },
        expect={"AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": False},
    ),
    Case(
        "hf-checkpoints-keep-debugger",
        "HuggingFace",
        {**HF, **CHECKPOINTS, "distribution": {"torch_distributed": {"enabled": True}}},
        expect={
            "CheckpointConfig.S3Uri": "s3://ckpt-bucket/run",
            "DebugHookConfig.S3OutputPath": "s3://sagemaker-us-west-2-123456789012/",
        },
    ),
    Case(
        "hf-custom-image",
        "HuggingFace",
        {
            **SOURCE,
            "py_version": "py310",
            "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-hf:1",
            "instance_type": "ml.g5.xlarge",
            "instance_count": 1,
        },
        expect={
            "AlgorithmSpecification.TrainingImage": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-hf:1"
        },
    ),
    # -- SKLearn
    Case(
        "sklearn-no-instance-count-hyperparameters",
        "SKLearn",
        {**SK, "hyperparameters": HPS},
        inputs={"train": "s3://data-bucket/train", "test": "s3://data-bucket/test"},
        expect={
            "ResourceConfig.InstanceCount": 1,
            "AlgorithmSpecification.TrainingImage": f"{SKLEARN_XGB}/sagemaker-scikit-learn:1.2-1-cpu-py3",
            "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": ABSENT,
        },
    ),
    Case(
        "sklearn-image-region-metrics-on",
        "SKLearn",
        {
            **SK,
            "instance_count": 1,
            "image_uri_region": "eu-west-1",
            "enable_sagemaker_metrics": True,
        },
        expect={
            "AlgorithmSpecification.TrainingImage": (
                "141502667606.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-scikit-learn:1.2-1-cpu-py3"
            ),
            "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": True,
        },
    ),
    Case(
        "sklearn-checkpoints-spot",
        "SKLearn",
        {
            **SK,
            **CHECKPOINTS,
            "instance_type": "ml.c5.2xlarge",
            "use_spot_instances": True,
            "max_wait": 7200,
            "max_run": 3600,
        },
        expect={
            "EnableManagedSpotTraining": True,
            "DebugHookConfig.S3OutputPath": "s3://sagemaker-us-west-2-123456789012/",
        },
    ),
    # -- XGBoost (framework mode)
    Case(
        "xgboost-two-instances",
        "XGBoost",
        {**XGB, "instance_count": 2, "hyperparameters": {"num_round": 10, "max_depth": 3}},
        inputs={"train": "s3://data-bucket/train", "validation": "s3://data-bucket/validation"},
        expect={
            "AlgorithmSpecification.TrainingImage": f"{SKLEARN_XGB}/sagemaker-xgboost:1.7-1",
            "ResourceConfig.InstanceCount": 2,
            hp("num_round"): "10",
        },
    ),
    Case(
        "xgboost-image-region-checkpoints",
        "XGBoost",
        {**XGB, **CHECKPOINTS, "image_uri_region": "us-east-1", "volume_size": 50},
        expect={
            "AlgorithmSpecification.TrainingImage": "683313688378.dkr.ecr.us-east-1.amazonaws.com/sagemaker-xgboost:1.7-1"
        },
    ),
    Case(
        "xgboost-custom-image-no-debugger",
        "XGBoost",
        {
            **XGB,
            "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/my-xgb:2",
            "debugger_hook_config": False,
            "disable_profiler": True,
        },
        expect={"DebugHookConfig": ABSENT, "ProfilerConfig": {"DisableProfiler": True}},
    ),
    # -- MXNet
    Case(
        "mxnet-parameter-server",
        "MXNet",
        {**MX, "distribution": {"parameter_server": {"enabled": True}}},
        expect={
            hp("sagemaker_parameter_server_enabled"): "true",
            hp("sagemaker_mpi_enabled"): ABSENT,
        },
    ),
    Case(
        "mxnet-mpi-per-host-options",
        "MXNet",
        {
            **MX,
            "distribution": {
                "mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-verbose"}
            },
        },
        expect={
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_num_of_processes_per_host"): "8",
            hp("sagemaker_mpi_custom_mpi_options"): '"-verbose"',
        },
    ),
    Case(
        "mxnet-mpi-no-options",
        "MXNet",
        {**MX, "instance_type": "ml.c5.4xlarge", "distribution": {"mpi": {"enabled": True}}},
        expect={
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_custom_mpi_options"): ABSENT,
        },
    ),
    Case(
        "mxnet-checkpoints-two-instances-no-debugger",
        "MXNet",
        {**MX, **CHECKPOINTS},
        expect={"DebugHookConfig": ABSENT},
    ),
    Case(
        "mxnet-checkpoints-one-instance-debugger",
        "MXNet",
        {**MX, **CHECKPOINTS, "instance_count": 1, "instance_type": "ml.p3.2xlarge"},
        expect={"DebugHookConfig.S3OutputPath": "s3://sagemaker-us-west-2-123456789012/"},
    ),
    Case(
        "mxnet-1.4-no-metrics",
        "MXNet",
        {**MX, "framework_version": "1.4.1", "py_version": "py3", "instance_count": 1},
        expect={"AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": ABSENT},
    ),
]


def _sweep() -> list[Case]:
    """One job per version SDK v2's image config knows for each of the four frameworks."""
    import sagemaker

    config_dir = Path(sagemaker.__file__).parent / "image_uri_config"

    def training(name: str) -> dict[str, Any]:
        config: dict[str, Any] = json.loads((config_dir / f"{name}.json").read_text())["training"]
        return config

    cases = []
    gpu = ("ml.g4dn.xlarge", "ml.p3.2xlarge", "ml.g5.2xlarge")
    for index, (version, entry) in enumerate(training("huggingface")["versions"].items()):
        for base, image in entry.items():
            if base == "version_aliases":
                continue
            framework = "pytorch" if base.startswith("pytorch") else "tensorflow"
            py = image["py_versions"][-1]
            itype = gpu[index % len(gpu)]
            cases.append(
                Case(
                    f"version-huggingface-{version}-{base}-{py}-{itype}",
                    "HuggingFace",
                    {
                        **SOURCE,
                        "py_version": py,
                        "transformers_version": version,
                        f"{framework}_version": base[len(framework) :],
                        "instance_type": itype,
                        "instance_count": 1,
                    },
                    inputs="s3://data-bucket/train",
                )
            )
    cpu = ("ml.m5.xlarge", "ml.c5.2xlarge", "ml.m5.4xlarge")
    for index, version in enumerate(training("sklearn")["versions"]):
        itype = cpu[index % len(cpu)]
        cases.append(
            Case(
                f"version-sklearn-{version}-{itype}",
                "SKLearn",
                {**SOURCE, "framework_version": version, "instance_type": itype},
                inputs="s3://data-bucket/train",
            )
        )
    for index, version in enumerate(training("xgboost")["versions"]):
        itype = cpu[index % len(cpu)]
        cases.append(
            Case(
                f"version-xgboost-{version}-{itype}",
                "XGBoost",
                {
                    **SOURCE,
                    "framework_version": version,
                    "instance_type": itype,
                    "instance_count": 1,
                },
                inputs="s3://data-bucket/train",
            )
        )
    for index, (version, entry) in enumerate(training("mxnet")["versions"].items()):
        pythons = entry.get("py_versions") or ["py3"]
        py = next((p for p in reversed(pythons) if p != "py2"), pythons[0])
        itype = ("ml.c5.xlarge", "ml.p3.2xlarge")[index % 2]
        cases.append(
            Case(
                f"version-mxnet-{version}-{py}-{itype}",
                "MXNet",
                {
                    **SOURCE,
                    "framework_version": version,
                    "py_version": py,
                    "instance_type": itype,
                    "instance_count": 1,
                },
                inputs="s3://data-bucket/train",
            )
        )
    return cases


FRAMEWORK_CASES += _sweep()
