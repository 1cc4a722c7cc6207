"""The compatibility matrix: every case here is accepted by sagemaker==2.257.7.

Each case is neutral data (see :mod:`.harness`). ``expect`` pins what SDK v2 puts in
the request for the feature the case is about, so a case that v2 silently ignores
shows up in ``test_v2_side`` instead of passing vacuously. v2's version rules are
exact-string: e.g. smdistributed dataparallel accepts PyTorch "2.2.0" but not "2.2"
or "2.3.0", torch_distributed on p4d accepts "2.3.0" but not "2.3".
"""

from __future__ import annotations

import logging
from typing import Any

from .framework_cases import FRAMEWORK_CASES
from .harness import ABSENT, ACCOUNT, Case

IMAGE = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/my-training:latest"
NEURONX_IMAGE = (
    "763104351884.dkr.ecr.us-west-2.amazonaws.com/"
    "pytorch-training-neuronx:2.1.2-neuronx-py310-sdk2.20.0-ubuntu20.04"
)
DLC = "763104351884.dkr.ecr.us-west-2.amazonaws.com"
TF_SMDDP_IMAGE = f"{DLC}/tensorflow-training:2.14.1-gpu-py310-cu118-ubuntu20.04-sagemaker"
BUCKET = f"sagemaker-us-west-2-{ACCOUNT}"

SOURCE = {"entry_point": "train.py", "source_dir": "<src>"}
PT = {
    **SOURCE,
    "framework_version": "2.3.0",
    "py_version": "py311",
    "instance_type": "ml.g5.xlarge",
    "instance_count": 1,
}
PT_P4D = {**PT, "instance_type": "ml.p4d.24xlarge", "instance_count": 2}
PT_SMDDP = {**PT_P4D, "framework_version": "2.2.0", "py_version": "py310"}
TF = {
    **SOURCE,
    "framework_version": "2.14.1",
    "py_version": "py310",
    "instance_type": "ml.p3.16xlarge",
    "instance_count": 2,
}
TF_CPU = {**TF, "instance_type": "ml.c5.2xlarge", "instance_count": 1}
VPC = {"subnets": ["subnet-0a1b2c3d", "subnet-4e5f6a7b"], "security_group_ids": ["sg-0123abcd"]}

MPI = {"mpi": {"enabled": True}}
SMDDP = {"smdistributed": {"dataparallel": {"enabled": True}}}
TORCH_DISTRIBUTED = {"torch_distributed": {"enabled": True}}

GPU_GROUP = (
    "InstanceGroup",
    {"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
)
CPU_GROUP = (
    "InstanceGroup",
    {"instance_group_name": "cpu", "instance_type": "ml.c5.18xlarge", "instance_count": 2},
)
NO_INSTANCE = {k: v for k, v in PT.items() if k not in ("instance_type", "instance_count")}

EVERY_JSON_TYPE: dict[str, Any] = {
    "lr": 0.001,
    "epochs": 10,
    "model_name": "resnet50",
    "use_amp": True,
    "resume": False,
    "layers": [64, 128, 256],
    "optimizer": {"type": "adamw", "betas": [0.9, 0.999], "fused": True},
    "seed": None,
    "quoted": 'say "hi"',
    "unicode": "héllo wörld",
}

DEBUGGER_FULL = (
    "DebuggerHookConfig",
    {
        "s3_output_path": "s3://debug-bucket/tensors",
        "container_local_output_path": "/opt/ml/output/tensors",
        "hook_parameters": {"include_workers": "all", "save_interval": "100"},
        "collection_configs": [
            ("CollectionConfig", {"name": "weights", "parameters": {"save_interval": "50"}}),
            ("CollectionConfig", {"name": "gradients"}),
            ("CollectionConfig", {"name": "losses", "parameters": {"save_interval": "10"}}),
            # an exact duplicate: SDK v2 de-duplicates collection configs
            ("CollectionConfig", {"name": "gradients"}),
        ],
    },
)

SHARDED_MANIFEST = (
    "TrainingInput",
    {
        "s3_data": "s3://data-bucket/train/train.manifest",
        "distribution": "ShardedByS3Key",
        "content_type": "application/x-recordio",
        "s3_data_type": "ManifestFile",
        "input_mode": "Pipe",
        "compression": "Gzip",
        "record_wrapping": "RecordIO",
    },
)
AUGMENTED_MANIFEST = (
    "TrainingInput",
    {
        "s3_data": "s3://data-bucket/train/augmented.manifest",
        "s3_data_type": "AugmentedManifestFile",
        "attribute_names": ["source-ref", "class"],
        "target_attribute_name": "class",
        "input_mode": "Pipe",
        "content_type": "application/x-image",
    },
)
EFS = (
    "FileSystemInput",
    {
        "file_system_id": "fs-0123456789abcdef0",
        "file_system_type": "EFS",
        "directory_path": "/data/train",
        "file_system_access_mode": "ro",
    },
)
FSX = (
    "FileSystemInput",
    {
        "file_system_id": "fs-0fedcba9876543210",
        "file_system_type": "FSxLustre",
        "directory_path": "/abcdefgh/train",
        "file_system_access_mode": "rw",
        "content_type": "text/csv",
    },
)


def hp(name: str) -> str:
    return f"HyperParameters.{name}"


CASES: list[Case] = [
    # ---------------------------------------------------------------- PyTorch distribution
    Case(
        "pytorch-minimal",
        "PyTorch",
        PT,
        expect={
            "AlgorithmSpecification.TrainingImage": f"{DLC}/pytorch-training:2.3.0-gpu-py311",
            "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": True,
            hp("sagemaker_program"): '"train.py"',
            hp("sagemaker_region"): '"us-west-2"',
            "InputDataConfig": ABSENT,
            "DebugHookConfig.S3OutputPath": f"s3://{BUCKET}/",
            "ProfilerConfig": {"S3OutputPath": f"s3://{BUCKET}/", "DisableProfiler": False},
        },
    ),
    Case(
        "pytorch-mpi",
        "PyTorch",
        {**PT, "instance_type": "ml.g5.12xlarge", "instance_count": 2, "distribution": MPI},
        expect={
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_custom_mpi_options"): '""',
            hp("sagemaker_mpi_num_of_processes_per_host"): ABSENT,
        },
    ),
    Case(
        "pytorch-mpi-processes-per-host-custom-options",
        "PyTorch",
        {
            **PT_P4D,
            "distribution": {
                "mpi": {
                    "enabled": True,
                    "processes_per_host": 8,
                    "custom_mpi_options": "-verbose -x NCCL_DEBUG=INFO",
                }
            },
        },
        expect={
            hp("sagemaker_mpi_num_of_processes_per_host"): "8",
            hp("sagemaker_mpi_custom_mpi_options"): '"-verbose -x NCCL_DEBUG=INFO"',
        },
    ),
    Case(
        "pytorch-mpi-disabled",
        "PyTorch",
        {**PT, "distribution": {"mpi": {"enabled": False}}},
        expect={hp("sagemaker_mpi_enabled"): "false", hp("sagemaker_mpi_custom_mpi_options"): '""'},
    ),
    Case(
        "pytorch-smddp-p4d-2.2.0-custom-mpi-options",
        "PyTorch",
        {
            **PT_SMDDP,
            "distribution": {
                "smdistributed": {
                    "dataparallel": {"enabled": True, "custom_mpi_options": "-verbose"}
                }
            },
        },
        expect={
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_distributed_dataparallel_custom_mpi_options"): '"-verbose"',
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
            # SDK v2 keeps Debugger and profiler on under smdistributed
            "DebugHookConfig.S3OutputPath": f"s3://{BUCKET}/",
            "ProfilerConfig.DisableProfiler": False,
        },
    ),
    Case(
        "pytorch-smddp-p3.16xlarge-2.1.0",
        "PyTorch",
        {
            **PT,
            "instance_type": "ml.p3.16xlarge",
            "instance_count": 2,
            "framework_version": "2.1.0",
            "py_version": "py310",
            "distribution": SMDDP,
        },
        expect={
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_distributed_dataparallel_custom_mpi_options"): '""',
            hp("sagemaker_instance_type"): '"ml.p3.16xlarge"',
            "AlgorithmSpecification.TrainingImage": f"{DLC}/pytorch-training:2.1.0-gpu-py310",
        },
    ),
    Case(
        "pytorch-smmp-parameters-with-mpi",
        "PyTorch",
        {
            **PT_P4D,
            "distribution": {
                "smdistributed": {
                    "modelparallel": {
                        "enabled": True,
                        "parameters": {"partitions": 2, "microbatches": 4, "ddp": True},
                    }
                },
                "mpi": {"enabled": True, "processes_per_host": 8},
            },
        },
        expect={
            hp("mp_parameters"): '{"partitions": 2, "microbatches": 4, "ddp": true}',
            hp("sagemaker_distributed_dataparallel_enabled"): "false",
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_num_of_processes_per_host"): "8",
        },
    ),
    Case(
        "pytorch-torch-distributed-p4d-2.3.0",
        "PyTorch",
        {**PT_P4D, "distribution": TORCH_DISTRIBUTED},
        expect={
            hp("sagemaker_torch_distributed_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
        },
    ),
    Case(
        "pytorch-torch-distributed-g5-multi-node",
        "PyTorch",
        {
            **PT,
            "instance_type": "ml.g5.12xlarge",
            "instance_count": 4,
            "distribution": TORCH_DISTRIBUTED,
        },
        expect={
            hp("sagemaker_torch_distributed_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.g5.12xlarge"',
            "ResourceConfig.InstanceCount": 4,
        },
    ),
    Case(
        "pytorch-torch-distributed-trn1-1.11.0",
        "PyTorch",
        {
            **PT,
            "instance_type": "ml.trn1.32xlarge",
            "instance_count": 2,
            "framework_version": "1.11.0",
            "py_version": "py38",
            "distribution": TORCH_DISTRIBUTED,
        },
        expect={
            "AlgorithmSpecification.TrainingImage": (
                f"{DLC}/pytorch-training-neuron:1.11.0-neuron-py38-sdk2.4.0-ubuntu20.04"
            ),
            hp("sagemaker_torch_distributed_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.trn1.32xlarge"',
            # SDK v2 turns the profiler off on Trainium
            "ProfilerConfig": {"DisableProfiler": True},
        },
    ),
    Case(
        "pytorch-torch-distributed-trn1-neuronx-image-uri",
        "PyTorch",
        {
            **PT,
            "instance_type": "ml.trn1.32xlarge",
            "instance_count": 2,
            "framework_version": "2.0.0",
            "py_version": "py310",
            "image_uri": NEURONX_IMAGE,
            "distribution": TORCH_DISTRIBUTED,
        },
        expect={
            "AlgorithmSpecification.TrainingImage": NEURONX_IMAGE,
            hp("sagemaker_torch_distributed_enabled"): "true",
            "ProfilerConfig": {"DisableProfiler": True},
        },
    ),
    Case(
        "pytorch-pytorchddp-p4d-2.1.0",
        "PyTorch",
        {
            **PT_P4D,
            "framework_version": "2.1.0",
            "py_version": "py310",
            "distribution": {"pytorchddp": {"enabled": True}},
        },
        expect={
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_distributed_dataparallel_custom_mpi_options"): '""',
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
        },
    ),
    Case(
        "pytorch-p5-smddp-with-torch-distributed",
        "PyTorch",
        {
            **PT_SMDDP,
            "instance_type": "ml.p5.48xlarge",
            "distribution": {**SMDDP, **TORCH_DISTRIBUTED},
        },
        expect={
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_torch_distributed_enabled"): "true",
            hp("sagemaker_instance_type"): '"ml.p5.48xlarge"',
        },
    ),
    Case(
        "pytorch-instance-groups-mpi",
        "PyTorch",
        {
            **NO_INSTANCE,
            "instance_groups": [GPU_GROUP, CPU_GROUP],
            "distribution": {**MPI, "instance_groups": [GPU_GROUP]},
        },
        inputs={
            "train": (
                "TrainingInput",
                {"s3_data": "s3://data-bucket/t", "instance_groups": ["gpu"]},
            )
        },
        expect={
            "ResourceConfig.InstanceGroups.0.InstanceGroupName": "gpu",
            "ResourceConfig.InstanceGroups.1.InstanceType": "ml.c5.18xlarge",
            "ResourceConfig.InstanceType": ABSENT,
            hp("sagemaker_distribution_instance_groups"): '["gpu"]',
            hp("sagemaker_mpi_enabled"): "true",
            "InputDataConfig.0.DataSource.S3DataSource.InstanceGroupNames": ["gpu"],
            "AlgorithmSpecification.TrainingImage": f"{DLC}/pytorch-training:2.3.0-gpu-py311",
        },
    ),
    Case(
        "pytorch-instance-groups-smddp",
        "PyTorch",
        {
            **NO_INSTANCE,
            "framework_version": "2.2.0",
            "py_version": "py310",
            "instance_groups": [GPU_GROUP, CPU_GROUP],
            "distribution": {**SMDDP, "instance_groups": [GPU_GROUP]},
        },
        expect={
            hp("sagemaker_distribution_instance_groups"): '["gpu"]',
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            # SDK v2 sends the estimator's instance_type, which is None with instance groups
            hp("sagemaker_instance_type"): "null",
        },
    ),
    # ------------------------------------------------------------- TensorFlow distribution
    Case(
        "tensorflow-minimal-cpu",
        "TensorFlow",
        TF_CPU,
        expect={
            "AlgorithmSpecification.TrainingImage": f"{DLC}/tensorflow-training:2.14.1-cpu-py310",
            hp("model_dir"): f'"s3://{BUCKET}/compat-tensorflow-minimal-cpu/model"',
        },
    ),
    Case(
        "tensorflow-mpi",
        "TensorFlow",
        {**TF, "distribution": {"mpi": {"enabled": True, "processes_per_host": 8}}},
        expect={
            hp("sagemaker_mpi_enabled"): "true",
            hp("sagemaker_mpi_num_of_processes_per_host"): "8",
            hp("model_dir"): '"/opt/ml/model"',
        },
    ),
    Case(
        "tensorflow-parameter-server",
        "TensorFlow",
        {**TF, "distribution": {"parameter_server": {"enabled": True}}},
        expect={
            hp("sagemaker_parameter_server_enabled"): "true",
            # smdebug does not support parameter server: SDK v2 drops the hook config
            "DebugHookConfig": ABSENT,
            "ProfilerConfig.DisableProfiler": False,
        },
    ),
    Case(
        "tensorflow-multi-worker-mirrored-strategy-2.14.1",
        "TensorFlow",
        {**TF, "distribution": {"multi_worker_mirrored_strategy": {"enabled": True}}},
        expect={hp("sagemaker_multi_worker_mirrored_strategy_enabled"): "true"},
    ),
    Case(
        # Without image_uri SDK v2 accepts smdistributed dataparallel on TensorFlow only up
        # to 2.11.0; with an explicit image it skips that version check.
        "tensorflow-smddp-p4d-image-uri-2.14.1",
        "TensorFlow",
        {
            **TF,
            "instance_type": "ml.p4d.24xlarge",
            "image_uri": TF_SMDDP_IMAGE,
            "distribution": SMDDP,
        },
        expect={
            "AlgorithmSpecification.TrainingImage": TF_SMDDP_IMAGE,
            hp("sagemaker_distributed_dataparallel_enabled"): "true",
            hp("sagemaker_distributed_dataparallel_custom_mpi_options"): '""',
            hp("sagemaker_instance_type"): '"ml.p4d.24xlarge"',
            hp("model_dir"): f'"s3://{BUCKET}/compat-tensorflow-smddp-p4d-image-uri-2-14-1/model"',
        },
    ),
    Case(
        "tensorflow-smmp-parameters-with-mpi",
        "TensorFlow",
        {
            **TF,
            "distribution": {
                "smdistributed": {
                    "modelparallel": {"enabled": True, "parameters": {"partitions": 2}}
                },
                "mpi": {"enabled": True, "processes_per_host": 8},
            },
        },
        expect={
            hp("mp_parameters"): '{"partitions": 2}',
            hp("sagemaker_distributed_dataparallel_enabled"): "false",
            hp("model_dir"): '"/opt/ml/model"',
        },
    ),
    Case(
        "tensorflow-instance-groups-mpi",
        "TensorFlow",
        {
            **{k: v for k, v in TF.items() if k not in ("instance_type", "instance_count")},
            "instance_groups": [GPU_GROUP, CPU_GROUP],
            "distribution": {**MPI, "instance_groups": [GPU_GROUP]},
        },
        expect={
            hp("sagemaker_distribution_instance_groups"): '["gpu"]',
            "ResourceConfig.InstanceGroups.1.InstanceGroupName": "cpu",
        },
    ),
    # --------------------------------------------------------------------- generic Estimator
    Case(
        "estimator-image-uri-no-source",
        "Estimator",
        {
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "hyperparameters": EVERY_JSON_TYPE,
        },
        inputs="s3://data-bucket/train",
        expect={
            # without source_dir SDK v2 sends str(value), not JSON
            hp("model_name"): "resnet50",
            hp("use_amp"): "True",
            hp("seed"): "None",
            hp("layers"): "[64, 128, 256]",
            hp("sagemaker_program"): ABSENT,
            "AlgorithmSpecification.EnableSageMakerMetricsTimeSeries": ABSENT,
        },
    ),
    Case(
        "estimator-image-uri-source-dir-dependencies",
        "Estimator",
        {
            **SOURCE,
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "dependencies": ["<lib>/mylib"],
            "hyperparameters": {"epochs": 3, "model_name": "resnet50"},
        },
        expect={hp("model_name"): '"resnet50"', hp("sagemaker_program"): '"train.py"'},
    ),
    Case(
        "estimator-image-uri-entry-point-without-source-dir",
        "Estimator",
        {
            "entry_point": "<src>/train.py",
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "hyperparameters": {"epochs": 3, "model_name": "resnet50"},
        },
        expect={
            # no source_dir: user values str()'d while the sagemaker_* keys are JSON
            hp("model_name"): "resnet50",
            hp("sagemaker_program"): '"train.py"',
        },
    ),
    # ------------------------------------------------------------------------ legacy names
    Case(
        "legacy-estimator-train-names",
        "Estimator",
        {
            "image_uri": IMAGE,
            "train_instance_type": "ml.m5.xlarge",
            "train_instance_count": 2,
            "train_max_run": 3600,
            "train_volume_size": 50,
            "train_volume_kms_key": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/vol",
            "train_use_spot_instances": True,
            "train_max_wait": 7200,
        },
        expect={
            "ResourceConfig": {
                "VolumeSizeInGB": 50,
                "VolumeKmsKeyId": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/vol",
                "InstanceCount": 2,
                "InstanceType": "ml.m5.xlarge",
            },
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
            "EnableManagedSpotTraining": True,
        },
    ),
    Case(
        "legacy-pytorch-train-names-image-name",
        "PyTorch",
        {
            **SOURCE,
            "framework_version": "2.3.0",
            "py_version": "py311",
            "train_instance_type": "ml.g5.2xlarge",
            "train_instance_count": 2,
            "train_max_run": 7200,
            "train_volume_size": 100,
            "image_name": f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/custom-pytorch:1",
        },
        expect={
            "AlgorithmSpecification.TrainingImage": (
                f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/custom-pytorch:1"
            ),
            "ResourceConfig.InstanceType": "ml.g5.2xlarge",
            "ResourceConfig.VolumeSizeInGB": 100,
            "StoppingCondition.MaxRuntimeInSeconds": 7200,
        },
    ),
    Case(
        "legacy-tensorflow-distributions-train-instance-type",
        "TensorFlow",
        {
            **SOURCE,
            "framework_version": "2.14.1",
            "py_version": "py310",
            "train_instance_type": "ml.p3.16xlarge",
            "train_instance_count": 2,
            "distributions": {"parameter_server": {"enabled": True}},
        },
        expect={
            hp("sagemaker_parameter_server_enabled"): "true",
            "ResourceConfig.InstanceType": "ml.p3.16xlarge",
            "AlgorithmSpecification.TrainingImage": f"{DLC}/tensorflow-training:2.14.1-gpu-py310",
        },
    ),
    Case(
        "legacy-tensorflow-script-mode",
        "TensorFlow",
        {**TF_CPU, "script_mode": True},
        expect={hp("sagemaker_program"): '"train.py"'},
    ),
    Case(
        "legacy-pytorch-distributions",
        "PyTorch",
        {**PT, "instance_count": 2, "distributions": MPI},
        improvements=("distributions-honoured-on-pytorch",),
        # v2 is run with distribution= (see the improvement); with distributions= it
        # would send no sagemaker_mpi_* keys at all.
        expect={hp("sagemaker_mpi_enabled"): "true"},
    ),
    # ---------------------------------------------------------------- job-level settings
    Case(
        "vpc-encrypt-inter-container-traffic",
        "PyTorch",
        {**PT_P4D, **VPC, "encrypt_inter_container_traffic": True, "distribution": MPI},
        expect={
            "VpcConfig": {
                "Subnets": ["subnet-0a1b2c3d", "subnet-4e5f6a7b"],
                "SecurityGroupIds": ["sg-0123abcd"],
            },
            "EnableInterContainerTrafficEncryption": True,
        },
    ),
    Case(
        "spot-max-wait-checkpoints",
        "PyTorch",
        {
            **PT,
            "use_spot_instances": True,
            "max_run": 3600,
            "max_wait": 7200,
            "checkpoint_s3_uri": "s3://ckpt-bucket/run-1",
            "checkpoint_local_path": "/opt/ml/checkpoints",
        },
        expect={
            "EnableManagedSpotTraining": True,
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200},
            "CheckpointConfig": {
                "S3Uri": "s3://ckpt-bucket/run-1",
                "LocalPath": "/opt/ml/checkpoints",
            },
            # SDK v2 drops Debugger when both checkpoint settings are given on PyTorch or
            # TensorFlow, even for one instance (their `distribution` defaults to {}).
            "DebugHookConfig": ABSENT,
        },
    ),
    Case(
        "spot-checkpoint-s3-uri-only-multi-instance",
        "TensorFlow",
        {
            **TF,
            "use_spot_instances": True,
            "max_wait": 90000,
            "checkpoint_s3_uri": "s3://ckpt-bucket/run-2",
        },
        expect={
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400, "MaxWaitTimeInSeconds": 90000},
            "CheckpointConfig": {"S3Uri": "s3://ckpt-bucket/run-2"},
            "DebugHookConfig.S3OutputPath": f"s3://{BUCKET}/",
        },
    ),
    Case(
        "max-retry-attempts",
        "PyTorch",
        {**PT, "max_retry_attempts": 3},
        expect={"RetryStrategy": {"MaximumRetryAttempts": 3}},
    ),
    Case(
        "debugger-hook-config-include-workers-collections",
        "PyTorch",
        {**PT_P4D, "distribution": TORCH_DISTRIBUTED, "debugger_hook_config": DEBUGGER_FULL},
        expect={
            "DebugHookConfig.S3OutputPath": "s3://debug-bucket/tensors",
            "DebugHookConfig.LocalPath": "/opt/ml/output/tensors",
            "DebugHookConfig.HookParameters": {"include_workers": "all", "save_interval": "100"},
        },
    ),
    Case(
        "debugger-hook-config-default-s3-output-path",
        "TensorFlow",
        {
            **TF_CPU,
            "debugger_hook_config": (
                "DebuggerHookConfig",
                {"hook_parameters": {"include_workers": "one", "save_interval": "500"}},
            ),
        },
        expect={
            "DebugHookConfig": {
                "S3OutputPath": f"s3://{BUCKET}/",
                "HookParameters": {"include_workers": "one", "save_interval": "500"},
                "CollectionConfigurations": [],
            }
        },
    ),
    Case(
        "debugger-hook-config-false",
        "PyTorch",
        {**PT, "debugger_hook_config": False},
        expect={"DebugHookConfig": ABSENT, "ProfilerConfig.DisableProfiler": False},
    ),
    Case(
        "tensorboard-output-config-local-path",
        "PyTorch",
        {
            **PT_P4D,
            "distribution": TORCH_DISTRIBUTED,
            "tensorboard_output_config": (
                "TensorBoardOutputConfig",
                {
                    "s3_output_path": "s3://tb-bucket/runs",
                    "container_local_output_path": "/opt/tensorboard/logs",
                },
            ),
        },
        expect={
            "TensorBoardOutputConfig": {
                "S3OutputPath": "s3://tb-bucket/runs",
                "LocalPath": "/opt/tensorboard/logs",
            },
            "DebugHookConfig.S3OutputPath": f"s3://{BUCKET}/",
        },
    ),
    Case(
        "tensorboard-output-config-default-local-path",
        "TensorFlow",
        {
            **TF_CPU,
            "debugger_hook_config": False,
            "tensorboard_output_config": (
                "TensorBoardOutputConfig",
                {"s3_output_path": "s3://tb-bucket/"},
            ),
        },
        # v2 sends no LocalPath when container_local_output_path is not given: the
        # service's default, /opt/ml/output/tensorboard, applies.
        expect={
            "TensorBoardOutputConfig": {"S3OutputPath": "s3://tb-bucket/"},
            "DebugHookConfig": ABSENT,
        },
    ),
    Case(
        "disable-profiler",
        "PyTorch",
        {**PT, "disable_profiler": True},
        expect={
            "ProfilerConfig": {"DisableProfiler": True},
            "DebugHookConfig.S3OutputPath": f"s3://{BUCKET}/",
        },
    ),
    Case(
        "debugger-false-and-disable-profiler-estimator",
        "Estimator",
        {
            **SOURCE,
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "debugger_hook_config": False,
            "disable_profiler": True,
        },
        expect={"DebugHookConfig": ABSENT, "ProfilerConfig": {"DisableProfiler": True}},
    ),
    Case(
        "network-isolation-code-channel",
        "PyTorch",
        {**PT, "enable_network_isolation": True},
        inputs="s3://data-bucket/train",
        expect={
            "EnableNetworkIsolation": True,
            hp("sagemaker_submit_directory"): '"/opt/ml/input/data/code/sourcedir.tar.gz"',
            "InputDataConfig.0.ChannelName": "training",
            "InputDataConfig.1.ChannelName": "code",
        },
    ),
    Case(
        "environment-tags-metric-definitions",
        "PyTorch",
        {
            **PT,
            "environment": {"NCCL_DEBUG": "INFO", "MY_FLAG": "1"},
            "tags": [{"Key": "team", "Value": "ml"}, {"Key": "project", "Value": "launchbay"}],
            "metric_definitions": [
                {"Name": "train:loss", "Regex": "loss: ([0-9\\.]+)"},
                {"Name": "val:acc", "Regex": "acc=([0-9\\.]+)"},
            ],
        },
        expect={
            "Environment": {"NCCL_DEBUG": "INFO", "MY_FLAG": "1"},
            "Tags.1": {"Key": "project", "Value": "launchbay"},
            "AlgorithmSpecification.MetricDefinitions.0.Name": "train:loss",
        },
    ),
    Case(
        "tags-as-dict",
        "Estimator",
        {
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "tags": {"team": "ml", "cost-center": "42"},
        },
        expect={"Tags": [{"Key": "team", "Value": "ml"}, {"Key": "cost-center", "Value": "42"}]},
    ),
    Case(
        "output-path-code-location-kms-log-level",
        "PyTorch",
        {
            **PT,
            "output_path": "s3://out-bucket/jobs/output",
            "code_location": "s3://code-bucket/code/prefix",
            "output_kms_key": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/out",
            "volume_kms_key": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/vol",
            "container_log_level": logging.DEBUG,
        },
        expect={
            "OutputDataConfig": {
                "S3OutputPath": "s3://out-bucket/jobs/output",
                "KmsKeyId": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/out",
            },
            "ResourceConfig.VolumeKmsKeyId": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/vol",
            hp("sagemaker_container_log_level"): "10",
            "DebugHookConfig.S3OutputPath": "s3://out-bucket/jobs/output",
            "ProfilerConfig.S3OutputPath": "s3://out-bucket/jobs/output",
        },
    ),
    Case(
        "output-path-without-code-location",
        "TensorFlow",
        {**TF_CPU, "output_path": "s3://out-bucket/some/prefix/"},
        expect={
            "OutputDataConfig.S3OutputPath": "s3://out-bucket/some/prefix/",
            # the code goes to the output bucket, without the output prefix
            hp("sagemaker_submit_directory"): (
                '"s3://out-bucket/compat-output-path-without-code-location/source/sourcedir.tar.gz"'
            ),
            hp("model_dir"): (
                '"s3://out-bucket/some/prefix/compat-output-path-without-code-location/model"'
            ),
        },
    ),
    Case(
        "input-mode-pipe",
        "PyTorch",
        {**PT, "input_mode": "Pipe"},
        inputs="s3://data-bucket/train",
        expect={
            "AlgorithmSpecification.TrainingInputMode": "Pipe",
            "InputDataConfig.0.InputMode": ABSENT,
        },
    ),
    Case(
        "input-mode-fastfile",
        "TensorFlow",
        {**TF_CPU, "input_mode": "FastFile"},
        inputs={
            "train": ("TrainingInput", {"s3_data": "s3://data-bucket/train", "input_mode": "File"}),
            "val": "s3://data-bucket/val",
        },
        expect={
            "AlgorithmSpecification.TrainingInputMode": "FastFile",
            "InputDataConfig.0.InputMode": "File",
        },
    ),
    Case(
        "hyperparameters-every-json-type-pytorch",
        "PyTorch",
        {**PT, "hyperparameters": EVERY_JSON_TYPE},
        expect={
            hp("lr"): "0.001",
            hp("epochs"): "10",
            hp("model_name"): '"resnet50"',
            hp("use_amp"): "true",
            hp("resume"): "false",
            hp("layers"): "[64, 128, 256]",
            hp("optimizer"): '{"type": "adamw", "betas": [0.9, 0.999], "fused": true}',
            hp("seed"): "null",
            hp("quoted"): '"say \\"hi\\""',
            hp("unicode"): '"h\\u00e9llo w\\u00f6rld"',
        },
    ),
    Case(
        "hyperparameters-every-json-type-tensorflow",
        "TensorFlow",
        {**TF_CPU, "hyperparameters": EVERY_JSON_TYPE},
        expect={hp("seed"): "null", hp("use_amp"): "true"},
    ),
    # ------------------------------------------------------------------------------- regions
    Case(
        "region-eu-west-1",
        "PyTorch",
        PT,
        inputs="s3://data-bucket-eu/train",
        region="eu-west-1",
        expect={
            "AlgorithmSpecification.TrainingImage": (
                "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
            ),
            "OutputDataConfig.S3OutputPath": f"s3://sagemaker-eu-west-1-{ACCOUNT}/",
            hp("sagemaker_region"): '"eu-west-1"',
        },
    ),
    Case(
        "region-us-east-1",
        "TensorFlow",
        TF_CPU,
        region="us-east-1",
        expect={
            "AlgorithmSpecification.TrainingImage": (
                "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14.1-cpu-py310"
            ),
            "OutputDataConfig.S3OutputPath": f"s3://sagemaker-us-east-1-{ACCOUNT}/",
        },
    ),
    Case(
        "region-eu-central-2-without-debugger",
        "PyTorch",
        PT,
        region="eu-central-2",
        expect={
            "AlgorithmSpecification.TrainingImage": (
                "380420809688.dkr.ecr.eu-central-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
            ),
            # SDK v2: Debugger and profiler are unsupported in this region
            "DebugHookConfig": ABSENT,
            "ProfilerConfig": {"DisableProfiler": True},
        },
    ),
    # -------------------------------------------------------------------------------- inputs
    Case(
        "inputs-single-s3-uri",
        "PyTorch",
        PT,
        inputs="s3://data-bucket/train/",
        expect={
            "InputDataConfig": [
                {
                    "DataSource": {
                        "S3DataSource": {
                            "S3DataType": "S3Prefix",
                            "S3Uri": "s3://data-bucket/train/",
                            "S3DataDistributionType": "FullyReplicated",
                        }
                    },
                    "ChannelName": "training",
                }
            ]
        },
    ),
    Case(
        "inputs-dict-of-s3-uris",
        "PyTorch",
        PT,
        inputs={"train": "s3://data-bucket/train", "test": "s3://data-bucket/test"},
        expect={"InputDataConfig.0.ChannelName": "train", "InputDataConfig.1.ChannelName": "test"},
    ),
    Case(
        "inputs-training-input-sharded-manifest-pipe-gzip-recordio",
        "PyTorch",
        PT,
        inputs=SHARDED_MANIFEST,
        expect={
            "InputDataConfig.0": {
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "ManifestFile",
                        "S3Uri": "s3://data-bucket/train/train.manifest",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
                "CompressionType": "Gzip",
                "ContentType": "application/x-recordio",
                "RecordWrapperType": "RecordIO",
                "InputMode": "Pipe",
                "ChannelName": "training",
            }
        },
    ),
    Case(
        "inputs-training-input-augmented-manifest-attributes",
        "TensorFlow",
        TF_CPU,
        inputs={"train": AUGMENTED_MANIFEST},
        expect={
            "InputDataConfig.0.DataSource.S3DataSource.AttributeNames": ["source-ref", "class"],
            "InputDataConfig.0.DataSource.S3DataSource.S3DataDistributionType": ABSENT,
            "InputDataConfig.0.TargetAttributeName": "class",
        },
    ),
    Case(
        "inputs-file-system-efs",
        "PyTorch",
        {**PT, **VPC},
        inputs=EFS,
        expect={
            "InputDataConfig.0.DataSource.FileSystemDataSource": {
                "FileSystemId": "fs-0123456789abcdef0",
                "FileSystemType": "EFS",
                "DirectoryPath": "/data/train",
                "FileSystemAccessMode": "ro",
            },
            "InputDataConfig.0.ChannelName": "training",
        },
    ),
    Case(
        "inputs-file-system-fsx-lustre",
        "TensorFlow",
        {**TF_CPU, **VPC},
        inputs={"train": FSX},
        expect={
            "InputDataConfig.0.DataSource.FileSystemDataSource.FileSystemType": "FSxLustre",
            "InputDataConfig.0.ContentType": "text/csv",
        },
    ),
    Case(
        "inputs-dict-mixing-training-input-file-system-str",
        "PyTorch",
        {**PT, **VPC},
        inputs={
            "train": (
                "TrainingInput",
                {"s3_data": "s3://data-bucket/train", "distribution": "ShardedByS3Key"},
            ),
            "fsx": FSX,
            "validation": "s3://data-bucket/validation",
            "efs": EFS,
        },
        expect={
            "InputDataConfig.0.DataSource.S3DataSource.S3DataDistributionType": "ShardedByS3Key",
            "InputDataConfig.1.DataSource.FileSystemDataSource.FileSystemType": "FSxLustre",
            "InputDataConfig.2.ChannelName": "validation",
            "InputDataConfig.3.ChannelName": "efs",
        },
    ),
]


# --------------------------------------------------------------------------------------------
# The seed notebooks' own estimator calls (SDK v2 code, only the import line changed).
# --------------------------------------------------------------------------------------------

NOTEBOOK_CASES: list[Case] = [
    Case(
        "dependencies-repeating-a-source-dir-file",
        "PyTorch",
        {**PT, "dependencies": ["<src>/helper.py", "<lib>/mylib"]},
        expect={hp("sagemaker_program"): '"train.py"'},
    ),
    Case(
        "notebook-horovod-tensorflow-1.15.2-v1-names",
        "TensorFlow",
        {
            **SOURCE,
            "framework_version": "1.15.2",
            "py_version": "py3",
            "train_instance_count": 2,
            "train_instance_type": "ml.p3.16xlarge",
            "distributions": {
                "mpi": {
                    "enabled": True,
                    "processes_per_host": 8,
                    "custom_mpi_options": "-verbose --NCCL_DEBUG=INFO -x OMPI_MCA_btl_vader_single_copy_mechanism=none",
                }
            },
            "hyperparameters": {"epochs": 3, "batch-size": 64},
        },
        inputs="s3://data-bucket/mnist",
        expect={
            "AlgorithmSpecification.TrainingImage": f"{DLC}/tensorflow-training:1.15.2-gpu-py3",
            "HyperParameters.sagemaker_mpi_num_of_processes_per_host": "8",
            "HyperParameters.model_dir": '"/opt/ml/model"',
            "ResourceConfig.InstanceCount": 2,
        },
    ),
    Case(
        "notebook-pytorch-ddp-1.9-p2-no-profiler-no-debugger",
        "PyTorch",
        {
            **SOURCE,
            "framework_version": "1.9",
            "py_version": "py38",
            "instance_type": "ml.p2.xlarge",
            "instance_count": 2,
            "disable_profiler": True,
            "debugger_hook_config": False,
            "hyperparameters": {"backend": "gloo", "epochs": 2},
        },
        inputs={"training": "s3://data-bucket/images"},
        expect={
            "AlgorithmSpecification.TrainingImage": f"{DLC}/pytorch-training:1.9-gpu-py38",
            "DebugHookConfig": ABSENT,
            "ProfilerConfig.DisableProfiler": True,
        },
    ),
    Case(
        "notebook-smddp-tensorflow-2.11-p4d",
        "TensorFlow",
        {
            **SOURCE,
            "framework_version": "2.11",
            "py_version": "py39",
            "instance_type": "ml.p4d.24xlarge",
            "instance_count": 2,
            "distribution": SMDDP,
        },
        inputs="s3://data-bucket/mnist",
        expect={
            "AlgorithmSpecification.TrainingImage": f"{DLC}/tensorflow-training:2.11-gpu-py39",
            "HyperParameters.sagemaker_distributed_dataparallel_enabled": "true",
            "HyperParameters.sagemaker_instance_type": '"ml.p4d.24xlarge"',
        },
    ),
]


def _version_sweep() -> list[Case]:
    """One job per framework version SDK v2 knows (and accepts in script mode), CPU and GPU.

    Built from v2's image config, so that the request's version-dependent parts
    (image, metrics, model_dir, debugger and profiler defaults) are compared for every
    version, not only for the ones the cases above name.
    """
    import json
    from pathlib import Path

    import sagemaker

    config_dir = Path(sagemaker.__file__).parent / "image_uri_config"
    cases = []
    for estimator, framework in (("PyTorch", "pytorch"), ("TensorFlow", "tensorflow")):
        config = json.loads((config_dir / f"{framework}.json").read_text())["training"]
        for index, (version, entry) in enumerate(config["versions"].items()):
            if framework == "tensorflow" and [int(p) for p in version.split(".")] <= [1, 10, 0]:
                continue  # legacy mode only: both SDKs refuse it without image_uri
            pythons = entry.get("py_versions") or list(entry)
            py = next((p for p in reversed(pythons) if p != "py2"), pythons[0])
            instance_type = ("ml.c5.xlarge", "ml.g4dn.xlarge")[index % 2]
            cases.append(
                Case(
                    f"version-{framework}-{version}-{py}-{instance_type}",
                    estimator,
                    {
                        **SOURCE,
                        "framework_version": version,
                        "py_version": py,
                        "instance_type": instance_type,
                        "instance_count": 1,
                    },
                    inputs="s3://data-bucket/train",
                )
            )
    return cases


CASES += NOTEBOOK_CASES + _version_sweep() + FRAMEWORK_CASES


# ---------------------------------------------------------------- Debugger rules and profiler
# rules=, profiler_config= and disable_profiler (docs/debugger.md): DebugRuleConfigurations,
# ProfilerRuleConfigurations, ProfilerConfig and the hook's collections, as v2 fills them.

RULES_IMAGE = "895741380848.dkr.ecr.us-west-2.amazonaws.com/sagemaker-debugger-rules:latest"
RULES_IMAGE_EU_WEST_1 = (
    "929884845733.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-debugger-rules:latest"
)
DEFAULT_PROFILER = {"S3OutputPath": f"s3://{BUCKET}/", "DisableProfiler": False}


def builtin(rule: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    """``Rule.sagemaker(rule_configs.<rule>(), **kwargs)`` as neutral data."""
    return ("Rule.sagemaker", {"base_config": (f"rule_configs.{rule}", {}), **kwargs})


ACTIONS = (
    "rule_configs.ActionList",
    {
        "*": [
            ("rule_configs.StopTraining", {}),
            ("rule_configs.Email", {"email_address": "mlops@example.com"}),
            ("rule_configs.SMS", {"phone_number": "+14155550123"}),
        ]
    },
)
CUSTOM_RULE = (
    "Rule.custom",
    {
        "name": "CustomGradientRule",
        "image_uri": f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/my-rules:1",
        "instance_type": "ml.t3.medium",
        "volume_size_in_gb": 30,
        "source": "s3://rules-bucket/custom/gradient_rule.py",
        "rule_to_invoke": "GradientRule",
        "rule_parameters": {"threshold": "20.0"},
        "collections_to_save": [("CollectionConfig", {"name": "gradients"})],
    },
)
PROFILER_REPORT = (
    "ProfilerRule.sagemaker",
    {"base_config": ("rule_configs.ProfilerReport", {"CPUBottleneck_threshold": 90})},
)

RULE_CASES: list[Case] = [
    Case(
        "rules-vanishing-gradient-pytorch",
        "PyTorch",
        {**PT, "rules": [builtin("vanishing_gradient")]},
        expect={
            "DebugRuleConfigurations": [
                {
                    "RuleConfigurationName": "VanishingGradient",
                    "RuleEvaluatorImage": RULES_IMAGE,
                    "RuleParameters": {"rule_to_invoke": "VanishingGradient"},
                }
            ],
            "DebugHookConfig.CollectionConfigurations": [
                {"CollectionName": "gradients", "CollectionParameters": {"save_interval": "500"}}
            ],
            # v2 2.257.7 adds no default ProfilerReport rule
            "ProfilerRuleConfigurations": ABSENT,
            "ProfilerConfig": DEFAULT_PROFILER,
        },
    ),
    Case(
        "rules-loss-not-decreasing-parameters-tensorflow",
        "TensorFlow",
        {
            **TF_CPU,
            "rules": [
                builtin(
                    "loss_not_decreasing",
                    rule_parameters={"tensor_regex": ".*loss.*", "num_steps": "20"},
                    collections_to_save=[
                        (
                            "CollectionConfig",
                            {"name": "losses", "parameters": {"save_interval": "10"}},
                        )
                    ],
                )
            ],
        },
        expect={
            "DebugRuleConfigurations.0.RuleParameters": {
                "rule_to_invoke": "LossNotDecreasing",
                "tensor_regex": ".*loss.*",
                "num_steps": "20",
            },
            "DebugHookConfig.CollectionConfigurations": [
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}}
            ],
        },
    ),
    Case(
        "rules-overfit-exploding-tensor-estimator",
        "Estimator",
        {
            **SOURCE,
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "rules": [
                builtin("overfit", rule_parameters={"patience_train": "5"}),
                builtin(
                    "exploding_tensor",
                    name="ExplodingWeights",
                    rule_parameters={"collection_names": "weights", "only_nan": "True"},
                    s3_output_path="s3://rules-bucket/output",
                ),
            ],
        },
        expect={
            "DebugRuleConfigurations.1.RuleConfigurationName": "ExplodingWeights",
            "DebugRuleConfigurations.1.S3OutputPath": "s3://rules-bucket/output",
            "DebugRuleConfigurations.0.RuleEvaluatorImage": RULES_IMAGE,
            "DebugHookConfig.CollectionConfigurations": [],
        },
    ),
    Case(
        "rules-actions-stop-training-email-sms",
        "PyTorch",
        {**PT, "rules": [builtin("overfit", actions=ACTIONS)]},
        expect={
            "DebugRuleConfigurations.0.RuleParameters.action_json": (
                '[{\\"name\\": \\"stoptraining\\", \\"training_job_prefix\\": '
                '\\"compat-rules-actions-stop-training-email-sms\\"}, '
                '{\\"endpoint\\": \\"mlops@example.com\\", \\"name\\": \\"email\\"}, '
                '{\\"endpoint\\": \\"+14155550123\\", \\"name\\": \\"sms\\"}]'
            ),
        },
    ),
    Case(
        "rules-stop-training-with-prefix-tensorflow",
        "TensorFlow",
        {
            **TF_CPU,
            "rules": [
                builtin(
                    "stalled_training_rule",
                    rule_parameters={"threshold": "1800"},
                    actions=("rule_configs.StopTraining", {"training_job_prefix": "nightly-run"}),
                )
            ],
        },
        expect={
            "DebugRuleConfigurations.0.RuleParameters.action_json": (
                '{\\"training_job_prefix\\": \\"nightly-run\\", \\"name\\": \\"stoptraining\\"}'
            ),
        },
    ),
    Case(
        "rules-custom-rule-s3-source",
        "PyTorch",
        {**PT, "rules": [CUSTOM_RULE]},
        expect={
            "DebugRuleConfigurations": [
                {
                    "RuleConfigurationName": "CustomGradientRule",
                    "RuleEvaluatorImage": f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/my-rules:1",
                    "InstanceType": "ml.t3.medium",
                    "VolumeSizeInGB": 30,
                    "RuleParameters": {
                        "source_s3_uri": "s3://rules-bucket/custom/gradient_rule.py",
                        "rule_to_invoke": "GradientRule",
                        "threshold": "20.0",
                    },
                }
            ],
            "DebugHookConfig.CollectionConfigurations": [{"CollectionName": "gradients"}],
        },
    ),
    Case(
        "rules-profiler-report-and-exploding-tensor-tensorflow",
        "TensorFlow",
        {**TF_CPU, "rules": [PROFILER_REPORT, builtin("exploding_tensor")]},
        expect={
            "ProfilerRuleConfigurations": [
                {
                    "RuleConfigurationName": "ProfilerReport",
                    "RuleEvaluatorImage": RULES_IMAGE,
                    "RuleParameters": {
                        "CPUBottleneck_threshold": "90",
                        "rule_to_invoke": "ProfilerReport",
                    },
                }
            ],
            "DebugRuleConfigurations.0.RuleConfigurationName": "ExplodingTensor",
        },
    ),
    Case(
        "profiler-config-framework-profile-pytorch",
        "PyTorch",
        {
            **PT,
            "profiler_config": (
                "ProfilerConfig",
                {
                    "system_monitor_interval_millis": 500,
                    "framework_profile_params": (
                        "FrameworkProfile",
                        {"start_step": 5, "num_steps": 2},
                    ),
                },
            ),
        },
        expect={
            "ProfilerConfig.ProfilingIntervalInMilliseconds": 500,
            "ProfilerConfig.ProfilingParameters.DetailedProfilingConfig": (
                '{"StartStep": 5, "NumSteps": 2, }'
            ),
            "ProfilerRuleConfigurations": ABSENT,
        },
    ),
    Case(
        "profiler-config-framework-options-tensorflow",
        "TensorFlow",
        {
            **TF_CPU,
            "profiler_config": (
                "ProfilerConfig",
                {
                    "s3_output_path": "s3://profiler-bucket/runs",
                    "framework_profile_params": (
                        "FrameworkProfile",
                        {
                            "file_close_interval": 30,
                            "detailed_profiling_config": (
                                "DetailedProfilingConfig",
                                {"start_step": 3},
                            ),
                            "dataloader_profiling_config": (
                                "DataloaderProfilingConfig",
                                {"start_unix_time": 1700000000, "duration": 60},
                            ),
                            "python_profiling_config": ("PythonProfilingConfig", {"num_steps": 2}),
                        },
                    ),
                },
            ),
        },
        expect={
            "ProfilerConfig.S3OutputPath": "s3://profiler-bucket/runs",
            "ProfilerConfig.ProfilingParameters.PythonProfilingConfig": (
                '{"StartStep": 0, "NumSteps": 2, "ProfilerName": "cprofile", '
                '"cProfileTimer": "total_time", }'
            ),
        },
    ),
    Case(
        "profiler-config-default-framework-profile-estimator",
        "Estimator",
        {
            **SOURCE,
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "profiler_config": (
                "ProfilerConfig",
                {"framework_profile_params": ("FrameworkProfile", {})},
            ),
        },
        expect={
            "ProfilerConfig.ProfilingParameters.PythonProfilingConfig": (
                '{"StartStep": 9, "NumSteps": 3, "ProfilerName": "cprofile", '
                '"cProfileTimer": "default", }'
            ),
        },
    ),
    Case(
        "rules-disable-profiler-pytorch",
        "PyTorch",
        {**PT, "disable_profiler": True, "rules": [builtin("vanishing_gradient")]},
        expect={
            "ProfilerConfig": {"DisableProfiler": True},
            "ProfilerRuleConfigurations": ABSENT,
            "DebugRuleConfigurations.0.RuleConfigurationName": "VanishingGradient",
        },
    ),
    Case(
        "rules-region-eu-west-1-tensorflow",
        "TensorFlow",
        {**TF_CPU, "rules": [builtin("vanishing_gradient"), PROFILER_REPORT]},
        region="eu-west-1",
        expect={
            "DebugRuleConfigurations.0.RuleEvaluatorImage": RULES_IMAGE_EU_WEST_1,
            "ProfilerRuleConfigurations.0.RuleEvaluatorImage": RULES_IMAGE_EU_WEST_1,
        },
    ),
    Case(
        "rules-with-hook-collections-merged",
        "PyTorch",
        {
            **PT_P4D,
            "distribution": TORCH_DISTRIBUTED,
            "debugger_hook_config": DEBUGGER_FULL,
            "rules": [builtin("loss_not_decreasing"), builtin("vanishing_gradient")],
        },
        expect={"DebugHookConfig.S3OutputPath": "s3://debug-bucket/tensors"},
    ),
    Case(
        "rules-with-debugger-hook-false-estimator",
        "Estimator",
        {
            **SOURCE,
            "image_uri": IMAGE,
            "instance_type": "ml.m5.xlarge",
            "instance_count": 1,
            "debugger_hook_config": False,
            "rules": [builtin("dead_relu")],
        },
        expect={
            "DebugHookConfig": ABSENT,
            "DebugRuleConfigurations.0.RuleConfigurationName": "DeadRelu",
        },
    ),
    Case(
        "profiler-profile-params-detailed-profiler-rule",
        "PyTorch",
        {
            **PT,
            "profiler_config": (
                "ProfilerConfig",
                {"profile_params": ("Profiler", {"cpu_profiling_duration": 100})},
            ),
        },
        expect={
            "ProfilerConfig.ProfilingParameters": {
                "CPUProfilingDuration": "100",
                "SMPFileRotationSecs": "600",
            },
            "ProfilerRuleConfigurations.0.RuleEvaluatorImage": (
                "895741380848.dkr.ecr.us-west-2.amazonaws.com/detailed-profiler-processing:latest"
            ),
            "ProfilerRuleConfigurations.0.InstanceType": "ml.m5.4xlarge",
            "ProfilerRuleConfigurations.0.VolumeSizeInGB": 128,
        },
    ),
    Case(
        "profiler-profile-params-with-empty-rules",
        "PyTorch",
        {
            **PT,
            "rules": [],
            "profiler_config": ("ProfilerConfig", {"profile_params": ("Profiler", {})}),
        },
        # v2: rules=[] keeps its profiling rules empty, so no detailed-profiler rule is added
        expect={"ProfilerRuleConfigurations": ABSENT, "DebugRuleConfigurations": ABSENT},
    ),
]
CASES += RULE_CASES
