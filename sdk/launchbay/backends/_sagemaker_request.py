"""What must never reach CreateTrainingJob: the SageMaker backend's request check.

The estimator checks its arguments; this checks the finished request itself, as
job specs and ``--set`` overrides can change it, and a request meant for a local
backend (``file://`` URIs, ``local*`` instance types) must be refused here rather
than half-way in the service (moto accepts anything). The backend's
``check(plan)`` calls :func:`check_request`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay import _request_rules
from launchbay._request_rules import INSTANCE_TYPE_RE, JOB_NAME_RE
from launchbay.errors import ConfigurationError

__all__ = ["check_request"]


def _bad(field: str, value: Any, accepted: str, reason: str = "") -> ConfigurationError:
    return ConfigurationError.invalid(field, value, accepted, reason=reason)


def _check_s3(field: str, uri: Any) -> None:
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        reason = (
            "file:// URIs run only with the local instance types (local_process, local, local_gpu)"
            if isinstance(uri, str) and uri.startswith("file://")
            else "SageMaker reads and writes S3 only"
        )
        raise _bad(field, uri, "an s3://bucket/key URI", reason)


def check_request(request: Mapping[str, Any]) -> None:
    """Refuse a CreateTrainingJob request SageMaker must not get.

    The estimator validates its arguments; this checks the request itself, as
    the job spec and ``--set`` overrides can change it, and a request meant for
    a local backend (``file://`` URIs, ``local*`` instance types) must fail here
    rather than half-way in the service (moto accepts anything).

    Raises:
        ConfigurationError: naming the request field, the value and what is accepted.
    """
    name = request.get("TrainingJobName")
    if not isinstance(name, str) or not JOB_NAME_RE.match(name):
        raise _bad(
            "TrainingJobName",
            name,
            "1-63 letters, digits and hyphens, starting with a letter or digit",
        )
    role = request.get("RoleArn")
    if not isinstance(role, str) or not role.startswith("arn:") or ":role/" not in role:
        raise _bad("RoleArn", role, "an IAM role ARN such as arn:aws:iam::123456789012:role/Name")
    algorithm = request.get("AlgorithmSpecification") or {}
    image = algorithm.get("TrainingImage")
    if not isinstance(image, str) or not image:
        raise _bad("AlgorithmSpecification.TrainingImage", image, "a Docker image URI in ECR")
    mode = algorithm.get("TrainingInputMode")
    if mode not in ("File", "Pipe", "FastFile"):
        raise _bad("AlgorithmSpecification.TrainingInputMode", mode, "File, Pipe or FastFile")
    resources = request.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups")
    fleet = (
        [(f"ResourceConfig.InstanceGroups[{i}]", g) for i, g in enumerate(groups)]
        if groups
        else [("ResourceConfig", resources)]
    )
    for where, entry in fleet:
        instance_type = entry.get("InstanceType")
        if not isinstance(instance_type, str) or not INSTANCE_TYPE_RE.match(instance_type):
            raise _bad(
                f"{where}.InstanceType",
                instance_type,
                "an ml.* instance type such as ml.m5.xlarge",
                "local instance types run on this machine, not on SageMaker"
                if isinstance(instance_type, str) and instance_type.startswith("local")
                else "",
            )
        count = entry.get("InstanceCount")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise _bad(f"{where}.InstanceCount", count, "an integer 1 or more")
    _check_s3(
        "OutputDataConfig.S3OutputPath", (request.get("OutputDataConfig") or {}).get("S3OutputPath")
    )
    for index, channel in enumerate(request.get("InputDataConfig") or []):
        source = (channel.get("DataSource") or {}).get("S3DataSource")
        if source is not None:
            where = f"InputDataConfig[{index}] ({channel.get('ChannelName')}).S3Uri"
            _check_s3(where, source.get("S3Uri"))
    checkpoint = request.get("CheckpointConfig")
    if checkpoint:
        _check_s3("CheckpointConfig.S3Uri", checkpoint.get("S3Uri"))
    for field in ("HyperParameters", "Environment"):
        for key, value in (request.get(field) or {}).items():
            if not isinstance(value, str):
                raise _bad(f"{field}[{key!r}]", value, "a string (SageMaker takes strings only)")
    max_run = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    if isinstance(max_run, bool) or not isinstance(max_run, int) or max_run < 1:
        raise _bad("StoppingCondition.MaxRuntimeInSeconds", max_run, "a positive integer")
    # Every field's type, length, range, pattern and enum (botocore's model of the API).
    _request_rules.check_request(request, local=False)
