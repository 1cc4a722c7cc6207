"""The one pure function that builds a CreateTrainingJob request.

Every backend receives what :func:`build_request` returns: the SageMaker service
(``create_training_job(**request)``) and the local backends alike. It does no
I/O: every value is resolved by the estimator beforehand.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from launchbay.errors import InputError
from launchbay.inputs import TrainingInput

__all__ = ["RequestSpec", "build_request", "add_channel"]


@dataclass(frozen=True)
class RequestSpec:
    """Resolved values of one training job (what the estimator decided)."""

    job_name: str
    role: str
    image_uri: str
    input_mode: str
    hyperparameters: dict[str, str]
    channels: list[dict[str, Any]] | None
    output_path: str
    instance_count: int | None
    instance_type: str | None
    volume_size: int
    max_run: int
    output_kms_key: str | None = None
    disable_output_compression: bool = False
    instance_groups: list[dict[str, Any]] | None = None
    volume_kms_key: str | None = None
    keep_alive_period_in_seconds: int | None = None
    max_wait: int | None = None
    subnets: list[str] | None = None
    security_group_ids: list[str] | None = None
    environment: dict[str, str] | None = None
    tags: list[dict[str, str]] | None = None
    metric_definitions: list[dict[str, str]] | None = None
    enable_sagemaker_metrics: bool | None = None
    enable_network_isolation: bool = False
    encrypt_inter_container_traffic: bool = False
    use_spot_instances: bool = False
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None
    debug_hook_config: dict[str, Any] | None = None
    profiler_config: dict[str, Any] | None = None
    max_retry_attempts: int | None = None
    container_entry_point: list[str] | None = None
    container_arguments: list[str] | None = None


def add_channel(
    channels: list[dict[str, Any]] | None,
    name: str,
    uri: str,
    content_type: str | None = None,
    input_mode: str | None = None,
) -> list[dict[str, Any]]:
    """A copy of ``channels`` with one more S3/file channel; a duplicate name is an error."""
    channels = list(channels or [])
    if any(c["ChannelName"] == name for c in channels):
        raise InputError(
            f"Duplicate channel {name!r}: the estimator adds this channel itself (model_uri or "
            "the code channel of a network-isolated job). Accepted: another channel name in "
            "inputs.",
            argument="inputs",
            value=name,
        )
    config = TrainingInput(uri, content_type=content_type, input_mode=input_mode).config
    config["ChannelName"] = name
    channels.append(config)
    return channels


def build_request(spec: RequestSpec) -> dict[str, Any]:
    """The CreateTrainingJob request for ``spec``, key for key as SageMaker SDK v2 sends it."""
    algorithm: dict[str, Any] = {
        "TrainingInputMode": spec.input_mode,
        "TrainingImage": spec.image_uri,
    }
    if spec.container_entry_point is not None:
        algorithm["ContainerEntrypoint"] = list(spec.container_entry_point)
    if spec.container_arguments is not None:
        algorithm["ContainerArguments"] = list(spec.container_arguments)
    if spec.metric_definitions is not None:
        algorithm["MetricDefinitions"] = copy.deepcopy(spec.metric_definitions)
    if spec.enable_sagemaker_metrics is not None:
        algorithm["EnableSageMakerMetricsTimeSeries"] = spec.enable_sagemaker_metrics

    output: dict[str, Any] = {"S3OutputPath": spec.output_path}
    if spec.output_kms_key is not None:
        output["KmsKeyId"] = spec.output_kms_key
    if spec.disable_output_compression:
        output["CompressionType"] = "NONE"

    resources: dict[str, Any] = {"VolumeSizeInGB": spec.volume_size}
    if spec.volume_kms_key is not None:
        resources["VolumeKmsKeyId"] = spec.volume_kms_key
    if spec.keep_alive_period_in_seconds is not None:
        resources["KeepAlivePeriodInSeconds"] = spec.keep_alive_period_in_seconds
    if spec.instance_groups:
        resources["InstanceGroups"] = copy.deepcopy(spec.instance_groups)
    else:
        resources["InstanceCount"] = spec.instance_count
        resources["InstanceType"] = spec.instance_type

    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": spec.max_run}
    if spec.max_wait:
        stopping["MaxWaitTimeInSeconds"] = spec.max_wait

    request: dict[str, Any] = {
        "AlgorithmSpecification": algorithm,
        "OutputDataConfig": output,
        "TrainingJobName": spec.job_name,
        "StoppingCondition": stopping,
        "ResourceConfig": resources,
        "RoleArn": spec.role,
    }
    if spec.channels is not None:
        request["InputDataConfig"] = copy.deepcopy(spec.channels)
    if spec.hyperparameters:
        request["HyperParameters"] = dict(spec.hyperparameters)
    if spec.environment is not None:
        request["Environment"] = dict(spec.environment)
    if spec.tags is not None:
        request["Tags"] = copy.deepcopy(spec.tags)
    if spec.subnets is not None and spec.security_group_ids is not None:
        request["VpcConfig"] = {
            "Subnets": list(spec.subnets),
            "SecurityGroupIds": list(spec.security_group_ids),
        }
    if spec.enable_network_isolation:
        request["EnableNetworkIsolation"] = True
    if spec.encrypt_inter_container_traffic:
        request["EnableInterContainerTrafficEncryption"] = True
    if spec.use_spot_instances:
        request["EnableManagedSpotTraining"] = True
    if spec.checkpoint_s3_uri:
        checkpoint = {"S3Uri": spec.checkpoint_s3_uri}
        if spec.checkpoint_local_path:
            checkpoint["LocalPath"] = spec.checkpoint_local_path
        request["CheckpointConfig"] = checkpoint
    if spec.debug_hook_config is not None:
        request["DebugHookConfig"] = copy.deepcopy(spec.debug_hook_config)
    if spec.profiler_config is not None:
        request["ProfilerConfig"] = copy.deepcopy(spec.profiler_config)
    if spec.max_retry_attempts is not None:
        request["RetryStrategy"] = {"MaximumRetryAttempts": spec.max_retry_attempts}
    return request
