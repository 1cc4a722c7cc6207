"""The one pure function that builds a CreateTrainingJob request.

Every backend receives what :func:`build_request` returns: the SageMaker service
(``create_training_job(**request)``) and the local backends alike. It does no
I/O: every value is resolved by the estimator beforehand.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from launchbay.arguments import put
from launchbay.errors import InputError
from launchbay.inputs import TrainingInput

__all__ = ["NETWORK_ISOLATION_CODE_PATH", "RequestSpec", "add_channel", "build_request"]


#: Where a network-isolated job finds its code: the ``code`` channel's archive.
NETWORK_ISOLATION_CODE_PATH = "/opt/ml/input/data/code/sourcedir.tar.gz"


@dataclass(frozen=True)
class RequestSpec:
    """Resolved values of one training job (what the estimator decided).

    ``fields`` are the request fields the estimator's arguments fill, by dotted
    path (:func:`launchbay.arguments.request_fields`); the rest are values the
    estimator resolves itself (names, the image, the role, the channels ...).
    """

    job_name: str
    role: str
    image_uri: str
    input_mode: str
    hyperparameters: dict[str, str]
    channels: list[dict[str, Any]] | None
    output_path: str
    fields: dict[str, Any] = field(default_factory=dict)
    enable_sagemaker_metrics: bool | None = None
    enable_network_isolation: bool = False
    debug_hook_config: dict[str, Any] | None = None
    profiler_config: dict[str, Any] | None = None
    debug_rule_configs: list[dict[str, Any]] | None = None
    profiler_rule_configs: list[dict[str, Any]] | None = None


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
    request: dict[str, Any] = {
        "AlgorithmSpecification": {
            "TrainingInputMode": spec.input_mode,
            "TrainingImage": spec.image_uri,
        },
        "OutputDataConfig": {"S3OutputPath": spec.output_path},
        "TrainingJobName": spec.job_name,
        "StoppingCondition": {},
        "ResourceConfig": {},
        "RoleArn": spec.role,
    }
    for path, value in spec.fields.items():
        put(request, path, copy.deepcopy(value))
    # Fields that exist only as a whole: a VPC needs both lists, checkpoints an S3 URI.
    vpc = request.get("VpcConfig")
    if vpc is not None and not ("Subnets" in vpc and "SecurityGroupIds" in vpc):
        del request["VpcConfig"]
    if "CheckpointConfig" in request and "S3Uri" not in request["CheckpointConfig"]:
        del request["CheckpointConfig"]
    if spec.enable_sagemaker_metrics is not None:
        request["AlgorithmSpecification"]["EnableSageMakerMetricsTimeSeries"] = (
            spec.enable_sagemaker_metrics
        )
    if spec.channels is not None:
        request["InputDataConfig"] = copy.deepcopy(spec.channels)
    if spec.hyperparameters:
        request["HyperParameters"] = dict(spec.hyperparameters)
    if spec.enable_network_isolation:
        request["EnableNetworkIsolation"] = True
    if spec.debug_hook_config is not None:
        request["DebugHookConfig"] = copy.deepcopy(spec.debug_hook_config)
    if spec.profiler_config is not None:
        request["ProfilerConfig"] = copy.deepcopy(spec.profiler_config)
    if spec.debug_rule_configs:
        request["DebugRuleConfigurations"] = copy.deepcopy(spec.debug_rule_configs)
    if spec.profiler_rule_configs:
        request["ProfilerRuleConfigurations"] = copy.deepcopy(spec.profiler_rule_configs)
    return request
