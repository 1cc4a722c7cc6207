"""What CreateTrainingJob accepts, checked before a request is sent or run.

The facts (type, length, range, pattern, enum, required members of every
request field) are botocore's service model, written out by
``tools/gen_request_shapes.py`` into ``schemas/create_training_job.json``.
:func:`check_request` walks a request against that tree; :func:`check_value`
checks one estimator argument against the shape of the field it fills. Every
error is a :class:`~launchbay.errors.ConfigurationError` that names the
estimator argument (``volume_kms_key``, ``tags[3]['Key']``), the value, what is
accepted and the request field.

Reading the model the way the service does:

* ``integer`` fields are 32-bit and ``long`` fields 64-bit signed integers;
  ``bool`` is not an integer and ``"false"`` is not a boolean;
* patterns match the whole value (as the service's validation does). They are
  Java regular expressions: ``\\p{Alnum}`` is ASCII letters and digits,
  ``\\w``/``\\d``/``\\s`` are ASCII, ``\\p{L}``/``\\p{Z}``/``\\p{N}`` are Unicode
  letters, separators and numbers; ``.`` is taken to match any character;
* instance types are checked by the estimator (the model's list lags behind new
  types, and local types are not in it), so that enum is not applied here.

Local jobs (``local_process``, ``local``, ``local_gpu``) run the same request
with two extensions: ``file://`` URIs where S3 URIs go, and any role string.

Two rules go beyond the model, for every instance type, because a host's tree
cannot take what the model admits (the rules are the runtime's,
:mod:`launchbay.runtime.contract`): a ChannelName of ``.`` or ``..``, and a
``CheckpointConfig.LocalPath`` that is relative, has ``..`` segments, or is or
overlaps ``/opt/ml`` and the contract's own directories.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from launchbay import arguments
from launchbay._patterns import INSTANCE_TYPE_RE, JOB_NAME_RE  # re-exported
from launchbay.errors import ConfigurationError
from launchbay.runtime.contract import (
    CHANNEL_NAME_ACCEPTED,
    CHECKPOINT_PATH_ACCEPTED,
    channel_name_problem,
    check_request_paths,
    checkpoint_path_problem,
)

__all__ = [
    "check_request",
    "check_value",
    "shape",
    "INSTANCE_TYPE_RE",
    "JOB_NAME_RE",
]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

#: Request fields that no estimator argument declares: ``fit()``'s own arguments.
_FIT_ARGUMENTS: dict[tuple[str, ...], str] = {
    ("TrainingJobName",): "job_name",
    ("InputDataConfig",): "inputs",
}


def _field_arguments() -> dict[tuple[str, ...], str]:
    """Request field -> the argument that fills it: the argument table's ``request``
    paths (:data:`launchbay.arguments.ARGUMENTS`) and ``fit()``'s own (the longest
    prefix wins). Read from the table on each call: it is the only source."""
    fields = {tuple(a.request.split(".")): a.name for a in arguments.ARGUMENTS if a.request}
    return {**fields, **_FIT_ARGUMENTS}


#: Words for the shapes people meet most; the rest are described by their constraints.
_DESCRIPTIONS = {
    "KmsKeyId": "a KMS key ID, alias or ARN ('1234abcd-...', 'alias/my-key', "
    "'arn:aws:kms:us-west-2:123456789012:key/...')",
    "RoleArn": "an IAM role ARN such as 'arn:aws:iam::123456789012:role/SageMakerRole'",
    "S3Uri": "an s3://bucket/key URI",
    "SubnetId": "a subnet ID such as 'subnet-0123456789abcdef0'",
    "SecurityGroupId": "a security group ID such as 'sg-0123456789abcdef0'",
    "TagKey": "a tag key of letters, digits, spaces and _ . : / = + - @",
    "TagValue": "a tag value of letters, digits, spaces and _ . : / = + - @",
    "TrainingEnvironmentKey": "an environment variable name (letters, digits and _, "
    "not starting with a digit)",
    "TrainingJobName": "letters, digits and hyphens, starting with a letter or digit",
    "ChannelName": "a channel name of letters, digits and . - _",
    "AlgorithmImage": "a Docker image URI",
}
_LOCAL_FREE = {"RoleArn"}  # any role string runs locally
_SKIP_ENUM = {"TrainingInstanceType"}
_LIMIT_REPR = 120


@lru_cache(maxsize=1)
def _tree() -> dict[str, Any]:
    text = resources.files("launchbay").joinpath("schemas/create_training_job.json").read_text()
    return json.loads(text)["request"]


def shape(*path: str) -> dict[str, Any]:
    """The model node of a request field: ``shape("ResourceConfig", "VolumeKmsKeyId")``."""
    node = _tree()
    for part in path:
        if part == "[]":
            node = node["member"]
        elif part in ("<key>", "<value>"):
            node = node[part.strip("<>")]
        else:
            node = node["members"][part]
    return node


def _short(value: Any) -> str:
    text = repr(value)
    return (
        text if len(text) <= _LIMIT_REPR else text[: _LIMIT_REPR - 15] + f"... ({len(text)} chars)"
    )


# --------------------------------------------------------------------------- patterns

_UNICODE_CLASS = re.compile(r"^\(?\[((?:\\p\{[A-Za-z]+\}|\\.|[^\]\\])*)\]\*\)?$")


@cache
def _matcher(pattern: str) -> Callable[[str], bool] | None:
    """A whole-value test for a Java pattern of the model, or None if it cannot be read here."""
    if "\\p{L}" in pattern or "\\p{N}" in pattern or "\\p{Z}" in pattern:
        match = _UNICODE_CLASS.match(pattern)
        if not match:
            return None
        body = match.group(1)
        categories = set(re.findall(r"\\p\{([A-Za-z]+)\}", body))
        literal = re.sub(r"\\p\{[A-Za-z]+\}", "", body).replace("\\", "")
        if not categories <= {"L", "N", "Z"}:
            return None
        allowed = set(literal)

        def test(value: str) -> bool:
            return all(c in allowed or unicodedata.category(c)[0] in categories for c in value)

        return test
    translated = pattern.replace("\\p{Alnum}", "A-Za-z0-9")
    if "\\p{" in translated:
        return None
    try:
        compiled = re.compile(translated, re.ASCII | re.DOTALL)
    except re.error:
        return None
    return lambda value: compiled.fullmatch(value) is not None


# --------------------------------------------------------------------------- the walk


def _argument(path: Sequence[Any], base: str | None) -> str:
    """``("Tags", 3, "Key")`` -> ``tags[3]['Key']`` (the estimator argument, then the rest)."""
    names = tuple(p for p in path if isinstance(p, str) and not p.startswith("\0"))
    fields = _field_arguments()
    for end in range(len(names), 0, -1):
        if names[:end] in fields:
            argument, consumed = fields[names[:end]], end
            break
    else:
        argument, consumed = base or "request", 0
    rest = ""
    seen = 0
    for part in path:
        if isinstance(part, str) and not part.startswith("\0"):
            seen += 1
            if seen <= consumed:
                continue
            rest += f"[{part!r}]"
        elif isinstance(part, int):
            if seen >= consumed:
                rest += f"[{part}]"
        else:  # a map key, marked with a leading NUL
            rest += f"[{part[1:]!r}]"
    return argument + rest


def _field(path: Sequence[Any]) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.startswith("\0"):
            text += f"[{part[1:]!r}]"
        else:
            text += ("." if text else "") + part
    return text


class _Walk:
    def __init__(self, *, local: bool, argument: str | None, field: str | None) -> None:
        self.local = local
        self.argument = argument  # a fixed argument name (check_value), else from the path
        self.field = field

    def fail(
        self, path: Sequence[Any], value: Any, reason: str, accepted: str, *, key: bool = False
    ) -> None:
        if self.argument is not None:
            argument = self.argument + _argument(path, None)[len("request") :]
        else:
            argument = _argument(path, None)
        inner = _field(path)
        field = ".".join(p for p in (self.field, inner) if p).replace(".[", "[") or "request"
        raise ConfigurationError(
            f"Invalid {argument}={_short(value)}: {reason}. Accepted: {accepted} "
            f"(CreateTrainingJob {field}{' key' if key else ''}).",
            argument=argument,
            value=value,
        )

    def check(self, node: Mapping[str, Any], value: Any, path: list[Any]) -> None:
        kind = node["type"]
        name = node.get("shape", "")
        if kind == "structure":
            self._structure(node, value, path)
        elif kind == "list":
            self._list(node, value, path)
        elif kind == "map":
            self._map(node, value, path)
        elif kind == "string":
            self._string(node, value, path, name)
        elif kind in ("integer", "long"):
            low, high = INT32 if kind == "integer" else INT64
            low = max(low, node.get("min", low))
            high = min(high, node.get("max", high))
            if isinstance(value, bool) or not isinstance(value, int):
                self.fail(path, value, f"expected an integer, got {type(value).__name__}",
                          f"an integer from {low} to {high}")  # fmt: skip
            if not low <= value <= high:
                self.fail(path, value, "out of range", f"an integer from {low} to {high}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                self.fail(path, value, f"expected True or False, got {type(value).__name__}",
                          "True or False (a bool; the string 'false' is not False)")  # fmt: skip
        elif kind in ("float", "double"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(path, value, "expected a number", "a finite number")
            if not math.isfinite(value):
                self.fail(path, value, "not finite", "a finite number")
        # timestamps and blobs are never in a training job request

    def _bounds(self, node: Mapping[str, Any], unit: str) -> str:
        low, high = node.get("min", 0), node.get("max")
        if high is None:
            return f"at least {low} {unit}" if low else f"any number of {unit}"
        return f"{low} to {high} {unit}" if low else f"at most {high} {unit}"

    def _size(self, node: Mapping[str, Any], value: Any, path: list[Any], unit: str) -> None:
        low, high = node.get("min", 0), node.get("max")
        if len(value) < low or (high is not None and len(value) > high):
            self.fail(path, value, f"{len(value)} {unit}", self._bounds(node, unit))

    def _structure(self, node: Mapping[str, Any], value: Any, path: list[Any]) -> None:
        members = node["members"]
        if not isinstance(value, Mapping):
            self.fail(path, value, f"expected a mapping, got {type(value).__name__}",
                      f"a dict with keys from {sorted(members)}")  # fmt: skip
        for key in node.get("required", ()):
            if key not in value:
                self.fail(path, value, f"{key!r} is missing", f"a dict with {key!r}")
        for key, item in value.items():
            # A field the model does not list is left alone: SDK v2 still sends some
            # (TargetAttributeName) and the service, not launchbay, decides on them.
            if key in members:
                self.check(members[key], item, [*path, key])

    def _list(self, node: Mapping[str, Any], value: Any, path: list[Any]) -> None:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            self.fail(path, value, f"expected a list, got {type(value).__name__}",
                      "a list of " + self._bounds(node, "items"))  # fmt: skip
        self._size(node, value, path, "items")
        for index, item in enumerate(value):
            self.check(node["member"], item, [*path, index])

    def _map(self, node: Mapping[str, Any], value: Any, path: list[Any]) -> None:
        if not isinstance(value, Mapping):
            self.fail(path, value, f"expected a dict, got {type(value).__name__}",
                      "a dict of " + self._bounds(node, "entries"))  # fmt: skip
        self._size(node, value, path, "entries")
        for key, item in value.items():
            key_path = [*path, "\0" + str(key)]
            self._string(node["key"], key, key_path, node["key"].get("shape", ""), key=True)
            self.check(node["value"], item, key_path)

    def _string(
        self, node: Mapping[str, Any], value: Any, path: list[Any], name: str, key: bool = False
    ) -> None:
        described = _DESCRIPTIONS.get(name, "a string")
        subject = "the key" if key else "it"

        def fail(reason: str, accepted: str) -> None:
            self.fail(path, value, f"{subject} {reason}", accepted, key=key)

        if not isinstance(value, str):
            fail(f"is {type(value).__name__}, not a string", described + self._constraints(node))
        if self.local and (
            name in _LOCAL_FREE or (name == "S3Uri" and value.startswith("file://"))
        ):
            return
        if name == "S3Uri" and value.startswith("file://"):
            fail(f"is a file:// URI, and {_FILE_URIS_ARE_LOCAL}", described)
        low, high = node.get("min", 0), node.get("max")
        if len(value) < low or (high is not None and len(value) > high):
            fail(f"has {len(value)} characters", described + self._constraints(node))
        enum = node.get("enum")
        if enum and name not in _SKIP_ENUM and value not in enum:
            fail("is not one of the accepted values", "one of " + ", ".join(map(repr, enum)))
        pattern = node.get("pattern")
        if pattern and pattern not in (".*", "[\\S\\s]*"):
            test = _matcher(pattern)
            if test is not None and not test(value):
                fail(f"does not match {pattern}", described + self._constraints(node))
        # What the pattern admits but a host's tree cannot take (launchbay.runtime.contract).
        if name == "ChannelName" and not key:
            problem = channel_name_problem(value)
            if problem:
                fail(problem, CHANNEL_NAME_ACCEPTED)
        if self._field_of(path).endswith("CheckpointConfig.LocalPath") and value:
            problem = checkpoint_path_problem(value)
            if problem:
                fail(problem, CHECKPOINT_PATH_ACCEPTED)

    def _field_of(self, path: Sequence[Any]) -> str:
        return ".".join(p for p in (self.field, _field(path)) if p)

    def _constraints(self, node: Mapping[str, Any]) -> str:
        parts = []
        low, high = node.get("min", 0), node.get("max")
        if high is not None:
            parts.append(f"{low} to {high} characters" if low else f"at most {high} characters")
        elif low:
            parts.append(f"at least {low} characters")
        pattern = node.get("pattern")
        if pattern and pattern not in (".*", "[\\S\\s]*"):
            parts.append(f"matching {pattern}")
        return f" ({', '.join(parts)})" if parts else ""


def check_request(request: Mapping[str, Any], *, local: bool = False) -> None:
    """Refuse a CreateTrainingJob request the service would refuse (or that only runs locally).

    The one check of a finished request: :func:`launchbay.backends.plan.plan_request`
    calls it for every plan (the dry run, ``fit()``, ``launchbay validate``/``submit``,
    the tuner), with ``local`` from the plan's placement. For SageMaker
    (``local=False``) it adds what the model does not say but the service needs:
    a training image, ``ml.*`` instance types (a local type is named as such), an
    instance count of 1 or more and a ``MaxRuntimeInSeconds``; ``file://`` URIs are
    refused as local-only.

    Raises:
        ConfigurationError: naming the estimator argument (``tags[3]['Key']``), the
            value, what is accepted and the request field.
    """
    try:  # what no host's tree can take, in the words the local backends use (the runtime's)
        check_request_paths(request)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    walk = _Walk(local=local, argument=None, field=None)
    walk.check(_tree(), request, [])
    if not local:
        _check_for_sagemaker(walk, request)


#: Why a ``file://`` URI is refused where SageMaker reads or writes.
_FILE_URIS_ARE_LOCAL = (
    "file:// URIs run only with the local instance types (local_process, local, local_gpu)"
)


def _check_for_sagemaker(walk: _Walk, request: Mapping[str, Any]) -> None:
    """What SageMaker needs of a request that its model leaves open (the walk has run)."""
    algorithm = request.get("AlgorithmSpecification") or {}
    image = algorithm.get("TrainingImage")
    if not isinstance(image, str) or not image:
        walk.fail(["AlgorithmSpecification", "TrainingImage"], image,
                  "no training image", "a Docker image URI in ECR")  # fmt: skip
    resources = request.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups")
    fleet: list[tuple[list[Any], Any]] = (
        [(["ResourceConfig", "InstanceGroups", i], g) for i, g in enumerate(groups)]
        if groups
        else [(["ResourceConfig"], resources)]
    )
    for where, entry in fleet:
        instance_type = entry.get("InstanceType")
        if not isinstance(instance_type, str) or not INSTANCE_TYPE_RE.match(instance_type):
            local_type = isinstance(instance_type, str) and instance_type.startswith("local")
            walk.fail(
                [*where, "InstanceType"],
                instance_type,
                "local instance types run on this machine, not on SageMaker"
                if local_type
                else "it is not an ml.* instance type",
                "an ml.* instance type such as ml.m5.xlarge",
            )
        count = entry.get("InstanceCount")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            walk.fail([*where, "InstanceCount"], count, "not a number of instances",
                      "an integer 1 or more")  # fmt: skip
    max_run = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    if max_run is None:
        walk.fail(["StoppingCondition", "MaxRuntimeInSeconds"], max_run, "it is missing",
                  "an integer from 1 to 2147483647 (seconds)")  # fmt: skip


def check_value(argument: str, value: Any, *path: str, local: bool = False) -> None:
    """Check one argument against the request field at ``path``.

    ``check_value("volume_kms_key", 5, "ResourceConfig", "VolumeKmsKeyId")``
    raises ``Invalid volume_kms_key=5: ...``. ``"[]"`` steps into a list's items,
    ``"<key>"``/``"<value>"`` into a map's.
    """
    field = _field([p for p in path if p not in ("[]", "<key>", "<value>")])
    _Walk(local=local, argument=argument, field=field).check(shape(*path), value, [])
