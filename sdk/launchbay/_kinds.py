"""What an estimator argument's value may be: the kinds, the value checkers and the value forms.

A *kind* gives both the check the constructor runs on a value (the stored value,
or a :class:`~launchbay.errors.ConfigurationError` naming the argument, the value
and what is accepted), the JSON Schema of the job-spec key of the same name, and
the type of the stored value (``type``: the annotation the estimator classes
carry for it, kept equal by ``tests/unit/test_arguments.py``). The checkers of
the structured arguments, and the job-spec and request forms of their values,
are here too. The table that uses them is :mod:`launchbay.arguments`.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay._patterns import INSTANCE_TYPE_RE, JOB_NAME_RE
from launchbay.debugger import CollectionConfig, DebuggerHookConfig, TensorBoardOutputConfig
from launchbay.errors import ConfigurationError
from launchbay.inputs import InstanceGroup, check_uri
from launchbay.runtime.contract import CHECKPOINT_PATH_ACCEPTED, checkpoint_path_problem
from launchbay.runtime.names import LOCAL_INSTANCE_TYPES

__all__ = [
    "Bool",
    "Context",
    "Custom",
    "Enum",
    "INSTANCE_TYPE_ACCEPTED",
    "Int",
    "JOB_NAME_ACCEPTED",
    "JOB_NAME_PATTERN",
    "Kind",
    "LOCAL_OR_ML_INSTANCE_TYPE_PATTERN",
    "LOG_LEVELS",
    "MISSING",
    "Path",
    "SpecContext",
    "Str",
    "StrList",
    "URI_ACCEPTED",
    "Uri",
    "attach_set",
    "attach_true",
    "attach_truthy",
    "check_checkpoint_local_path",
    "check_debugger",
    "check_dependencies",
    "check_environment",
    "check_hyperparameters",
    "check_instance_groups",
    "check_instance_type",
    "check_json",
    "check_log_level",
    "check_metric_definitions",
    "check_model_dir",
    "check_role",
    "check_tensorboard",
    "check_version",
    "debugger_from_description",
    "debugger_from_spec",
    "debugger_to_spec",
    "dependencies_to_spec",
    "entry_point_to_spec",
    "environment_from_spec",
    "format_tags",
    "groups_from_request",
    "groups_from_spec",
    "groups_to_request",
    "groups_to_spec",
    "is_uri",
    "log_level_from_spec",
    "positive_int",
    "relative",
    "source_dir_to_spec",
    "str_list",
    "tags_from_spec",
    "tags_to_spec",
    "tensorboard_from_description",
    "tensorboard_from_spec",
    "tensorboard_to_spec",
    "true_only",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: "No value": the argument is absent from a spec or a job description.
MISSING: Any = _Missing()


#: CreateTrainingJob's TrainingJobName pattern (also a base_job_name's).
JOB_NAME_PATTERN = JOB_NAME_RE.pattern
#: An ml.* instance type, or one of the local types.
LOCAL_OR_ML_INSTANCE_TYPE_PATTERN = (
    "^(" + INSTANCE_TYPE_RE.pattern.strip("^$") + "|" + "|".join(LOCAL_INSTANCE_TYPES) + ")$"
)
LOG_LEVELS = {"CRITICAL": 50, "ERROR": 40, "WARNING": 30, "INFO": 20, "DEBUG": 10, "NOTSET": 0}
URI_ACCEPTED = "an s3://bucket/prefix URI (or file:///path for local runs)"
INSTANCE_TYPE_ACCEPTED = (
    "an ml.* instance type such as 'ml.m5.xlarge' or 'ml.p4d.24xlarge', or one of the local "
    "types 'local_process', 'local', 'local_gpu', or 'ray' (a Ray cluster)"
)
JOB_NAME_ACCEPTED = (
    "1-63 characters: letters, digits and hyphens, starting with a letter or digit "
    "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
)


class Context:
    """What a check may depend on besides the value: whether the job runs on this machine."""

    __slots__ = ("local",)

    def __init__(self, local: bool) -> None:
        self.local = local


# --------------------------------------------------------------------------- kinds
# A kind is what a value may be: ``check`` (Python value -> stored value, or a
# ConfigurationError) and ``schema`` (the job-spec form of the same rule).


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Kind:
    """A value rule: the constructor's check and the job spec's JSON Schema (``schema``)."""

    __slots__ = ()

    @property
    def schema(self) -> dict[str, Any]:
        return {}

    @property
    def type(self) -> str:
        """The stored value's type, as the estimator classes annotate it."""
        return "Any"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        return value


class Int(Kind):
    """An integer from ``minimum`` (to ``maximum``)."""

    __slots__ = ("maximum", "minimum")

    def __init__(self, minimum: int = 1, maximum: int | None = None) -> None:
        self.minimum, self.maximum = minimum, maximum

    @property
    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer", "minimum": self.minimum}
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema

    @property
    def type(self) -> str:
        return "int | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value is None:
            return None
        return positive_int(name, value, minimum=self.minimum, maximum=self.maximum)


def positive_int(argument: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` if it is an integer in range, else the standard error."""
    if not _is_int(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        raise ConfigurationError.invalid(argument, value, f"an integer {bound}")
    return value


class Bool(Kind):
    """True or False; ``unset`` is what None (not given) is stored as."""

    __slots__ = ("allow_none", "unset")

    def __init__(self, unset: bool | None = False, allow_none: bool = True) -> None:
        self.unset, self.allow_none = unset, allow_none

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    @property
    def type(self) -> str:
        return "bool" if self.unset is not None or not self.allow_none else "bool | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value is None and self.allow_none:
            return self.unset
        if not isinstance(value, bool):
            raise ConfigurationError.invalid(
                name,
                value,
                "True or False" + (" (or None)" if self.allow_none else ""),
                reason=(
                    "A string would be sent as True whatever it says"
                    if isinstance(value, str)
                    else f"It is {type(value).__name__}, not a bool"
                ),
            )
        return value


class Str(Kind):
    """A non-empty string (optionally matching ``pattern``)."""

    __slots__ = ("accepted", "min_length", "pattern")

    def __init__(
        self, accepted: str = "a non-empty string", pattern: str | None = None, min_length: int = 1
    ) -> None:
        self.accepted, self.pattern, self.min_length = accepted, pattern, min_length

    @property
    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string"}
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.pattern:
            schema["pattern"] = self.pattern
            schema["x-accepted"] = self.accepted
        return schema

    @property
    def type(self) -> str:
        return "str | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value is None:
            return None
        if (
            not isinstance(value, str)
            or len(value) < self.min_length
            or (self.pattern and not re.match(self.pattern, value))
        ):
            raise ConfigurationError.invalid(name, value, self.accepted)
        return str(value)


class Enum(Kind):
    """One of ``values``."""

    __slots__ = ("values",)

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = tuple(values)

    @property
    def schema(self) -> dict[str, Any]:
        return {"enum": list(self.values)}

    @property
    def type(self) -> str:
        return "str"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value not in self.values:
            raise ConfigurationError.invalid(name, value, ", ".join(self.values))
        return value


class Uri(Kind):
    """An ``s3://`` URI, or a ``file://`` one for jobs on this machine."""

    __slots__ = ("accepted",)

    def __init__(self, accepted: str = URI_ACCEPTED) -> None:
        self.accepted = accepted

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "string", "pattern": "^(s3|file)://.", "x-accepted": self.accepted}

    @property
    def type(self) -> str:
        return "str | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value is None:
            return None
        return check_uri(value, name, allow_file=ctx.local)


class Path(Kind):
    """A local path (str or os.PathLike), stored as str."""

    __slots__ = ("accepted",)

    def __init__(self, accepted: str = "a path") -> None:
        self.accepted = accepted

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1}

    @property
    def type(self) -> str:
        return "str | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        if value is None:
            return None
        if isinstance(value, os.PathLike):
            text = os.fspath(value)
            if isinstance(text, str):
                return text
        if not isinstance(value, str) or not value:
            raise ConfigurationError.invalid(name, value, self.accepted)
        return value


class StrList(Kind):
    """A list of strings (empty strings allowed with ``allow_empty``)."""

    __slots__ = ("allow_empty",)

    def __init__(self, allow_empty: bool = False) -> None:
        self.allow_empty = allow_empty

    @property
    def schema(self) -> dict[str, Any]:
        items: dict[str, Any] = {"type": "string"}
        if not self.allow_empty:
            items["minLength"] = 1
        return {"type": "array", "items": items}

    @property
    def type(self) -> str:
        return "list[str] | None"

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        return str_list(name, value, allow_empty=self.allow_empty)


def str_list(argument: str, value: Any, *, allow_empty: bool = False) -> list[str] | None:
    """``value`` as a list of strings (None stays None), else the standard error."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ConfigurationError.invalid(argument, value, "a list of strings")
    for item in value:
        if not isinstance(item, str):
            raise ConfigurationError.invalid(argument, value, "a list of strings")
        if not item and not allow_empty:
            raise ConfigurationError.invalid(argument, value, "a list of non-empty strings")
    return list(value)


class Custom(Kind):
    """A rule written as a function (objects such as DebuggerHookConfig), with its schema."""

    __slots__ = ("_type", "checker", "spec")

    def __init__(
        self,
        spec: Mapping[str, Any] | None = None,
        checker: Callable[[str, Any, Context], Any] | None = None,
        *,
        type: str,
    ) -> None:
        self.spec, self.checker, self._type = dict(spec or {}), checker, type

    @property
    def schema(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.spec))

    @property
    def type(self) -> str:
        return self._type

    def check(self, name: str, value: Any, ctx: Context) -> Any:
        return value if self.checker is None else self.checker(name, value, ctx)


# --------------------------------------------------------------------------- custom checks


def check_instance_type(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if value in LOCAL_INSTANCE_TYPES or (
        isinstance(value, str) and re.match(LOCAL_OR_ML_INSTANCE_TYPE_PATTERN, value)
    ):
        return value
    raise ConfigurationError.invalid(name, value, INSTANCE_TYPE_ACCEPTED)


def check_role(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigurationError.invalid(name, value, "an IAM role ARN or role name")
    return value  # kept as given: a LocalExecutionRole is checked by the rules, then str()ed


def check_instance_groups(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if (
        isinstance(value, (str, bytes))
        or not isinstance(value, Sequence)
        or not value
        or not all(isinstance(g, InstanceGroup) for g in value)
    ):
        raise ConfigurationError.invalid(name, value, "a non-empty list of InstanceGroup objects")
    for group in value:
        check_instance_type("InstanceGroup.instance_type", group.instance_type, ctx)
        positive_int("InstanceGroup.instance_count", group.instance_count)
    return list(value)


def check_checkpoint_local_path(name: str, value: Any, ctx: Context) -> Any:
    """The runtime's rule for a checkpoint directory (every instance type; see contract)."""
    if value is None or value == "":
        return value
    problem = checkpoint_path_problem(value)
    if problem:
        raise ConfigurationError.invalid(
            name, value, CHECKPOINT_PATH_ACCEPTED, reason=f"It {problem}"
        )
    return value


def check_environment(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigurationError.invalid(name, value, "a dict of str to str")
    return dict(value)


def format_tags(name: str, tags: Any, ctx: Context | None = None) -> list[dict[str, str]] | None:
    """SDK v2's tags (a dict, or a list of ``{"Key", "Value"}``) as the request's list."""
    accepted = "a dict, or a list of {'Key': ..., 'Value': ...} dicts"
    if tags is None:
        return None
    if isinstance(tags, Mapping):
        return [{"Key": str(k), "Value": str(v)} for k, v in tags.items()]
    if isinstance(tags, Sequence) and not isinstance(tags, (str, bytes)):
        out = []
        for tag in tags:
            if not isinstance(tag, Mapping) or set(tag) != {"Key", "Value"}:
                raise ConfigurationError.invalid(name, tags, accepted)
            out.append(dict(tag))
        return out
    raise ConfigurationError.invalid(name, tags, accepted)


def check_metric_definitions(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if not isinstance(value, Sequence) or not all(
        isinstance(m, Mapping) and set(m) == {"Name", "Regex"} for m in value
    ):
        raise ConfigurationError.invalid(name, value, "a list of {'Name': ..., 'Regex': ...} dicts")
    from launchbay.metrics import warn_backtracking  # same layer; loaded when metrics are given

    warn_backtracking(value, name)
    return [dict(m) for m in value]


def check_log_level(name: str, value: Any, ctx: Context) -> Any:
    if not _is_int(value):
        raise ConfigurationError.invalid(name, value, "a logging level such as logging.INFO (20)")
    return value


def check_debugger(name: str, value: Any, ctx: Context) -> Any:
    if value is True:
        return None  # True means "the default hook", as None does
    if value not in (None, False) and not isinstance(value, DebuggerHookConfig):
        raise ConfigurationError.invalid(name, value, "a DebuggerHookConfig, True or False")
    return value


def check_tensorboard(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if not isinstance(value, TensorBoardOutputConfig):
        raise ConfigurationError.invalid(
            name, value, "a TensorBoardOutputConfig (from launchbay.debugger)"
        )
    if not ctx.local and str(value.s3_output_path)[:7].lower() == "file://":
        raise ConfigurationError.invalid(
            f"{name}.s3_output_path",
            value.s3_output_path,
            "an s3:// URI (file:// only for local_process, local and local_gpu jobs)",
        )
    return value


def check_json(hyperparameters: Mapping[str, Any], argument: str = "hyperparameters") -> None:
    """Every key a non-empty string and every value JSON-serialisable, else the error."""
    import json

    for key, value in hyperparameters.items():
        if not isinstance(key, str) or not key:
            raise ConfigurationError.invalid(f"{argument} key", key, "non-empty string keys")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"Invalid {argument}[{key!r}]={value!r}: it cannot be sent as JSON ({exc}). "
                "Accepted: str, int, float (finite), bool, None, and lists/dicts of those.",
                argument=f"{argument}[{key!r}]",
                value=value,
            ) from exc


def check_hyperparameters(name: str, value: Any, ctx: Context) -> Any:
    # A private deep copy: the caller's dict is never touched.
    if value is not None and not isinstance(value, Mapping):
        raise ConfigurationError.invalid(name, value, "a dict")
    if not value:
        return {}
    check_json(value)
    return copy.deepcopy(dict(value))


def check_version(name: str, value: Any, ctx: Context) -> Any:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError.invalid(name, value, "a string such as '2.3' or 'py311'")
    return value


def check_model_dir(name: str, value: Any, ctx: Context) -> Any:
    if value is not None and value is not False and not isinstance(value, str):
        raise ConfigurationError.invalid(
            name, value, "an S3 URI or container path, or False to leave it out"
        )
    return value


def check_dependencies(name: str, value: Any, ctx: Context) -> Any:
    return str_list(name, value) or []


# --------------------------------------------------------------------------- spec forms


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def tags_to_spec(tags: list[dict[str, str]], ctx: SpecContext) -> Any:
    keys = [t["Key"] for t in tags]
    if len(set(keys)) == len(keys):
        return {t["Key"]: t["Value"] for t in tags}
    return copy.deepcopy(tags)


def tags_from_spec(value: Any) -> Any:
    return {k: _text(v) for k, v in value.items()} if isinstance(value, dict) else value


def environment_from_spec(value: Any) -> Any:
    return {k: _text(v) for k, v in value.items()} if isinstance(value, dict) else value


def log_level_from_spec(value: Any) -> Any:
    return LOG_LEVELS[value.upper()] if isinstance(value, str) else value


def groups_to_spec(groups: list[InstanceGroup], ctx: SpecContext) -> Any:
    return [
        {
            "instance_group_name": g.instance_group_name,
            "instance_type": g.instance_type,
            "instance_count": g.instance_count,
        }
        for g in groups
    ]


def groups_from_spec(value: Any) -> Any:
    return [InstanceGroup(**g) for g in value]


def groups_to_request(groups: list[InstanceGroup]) -> Any:
    return [g.to_request_dict() for g in groups] if groups else None


def groups_from_request(groups: Any) -> Any:
    if not groups:
        return MISSING
    return [
        InstanceGroup(g["InstanceGroupName"], g["InstanceType"], g["InstanceCount"]) for g in groups
    ]


def debugger_to_spec(hook: Any, ctx: SpecContext) -> Any:
    if hook is False:
        return False
    config: dict[str, Any] = {}
    if hook.s3_output_path:
        config["s3_output_path"] = hook.s3_output_path
    if hook.container_local_output_path is not None:
        config["container_local_output_path"] = hook.container_local_output_path
    if hook.hook_parameters is not None:
        config["hook_parameters"] = dict(hook.hook_parameters)
    if hook.collection_configs:
        config["collection_configs"] = [
            {"name": c.name, **({"parameters": dict(c.parameters)} if c.parameters else {})}
            for c in hook.collection_configs
        ]
    return config or True


def debugger_from_spec(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return DebuggerHookConfig(
        s3_output_path=value.get("s3_output_path"),
        container_local_output_path=value.get("container_local_output_path"),
        hook_parameters=value.get("hook_parameters"),
        collection_configs=[
            CollectionConfig(c["name"], c.get("parameters"))
            for c in value.get("collection_configs") or []
        ]
        or None,
    )


def tensorboard_to_spec(config: Any, ctx: SpecContext) -> Any:
    spec = {"s3_output_path": config.s3_output_path}
    if config.container_local_output_path is not None:
        spec["container_local_output_path"] = config.container_local_output_path
    return spec


def tensorboard_from_spec(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    return TensorBoardOutputConfig(
        value["s3_output_path"], value.get("container_local_output_path")
    )


class SpecContext:
    """Where a spec is written (paths under it are written relative to it) and the arguments."""

    __slots__ = ("base_dir", "values")

    def __init__(self, base_dir: str, values: Mapping[str, Any]) -> None:
        self.base_dir, self.values = base_dir, values


def is_uri(value: str) -> bool:
    """True for ``scheme://...`` (a URI: never resolved against a directory)."""
    return "://" in value


def relative(path: str, base_dir: str) -> str:
    """``path`` relative to ``base_dir`` when it lies under it (URIs unchanged)."""
    if is_uri(path):
        return path
    absolute = os.path.abspath(os.path.expanduser(path))
    try:
        rel = os.path.relpath(absolute, base_dir)
    except ValueError:  # another drive (Windows)
        return absolute
    return absolute if rel.startswith("..") else rel


def entry_point_to_spec(entry: str, ctx: SpecContext) -> Any:
    source_dir = ctx.values.get("source_dir")
    if source_dir is None:
        return relative(entry, ctx.base_dir)
    if os.path.isabs(entry) and not is_uri(source_dir):
        return os.path.relpath(entry, os.path.abspath(source_dir))
    return entry


def source_dir_to_spec(value: str, ctx: SpecContext) -> Any:
    return relative(os.fspath(value), ctx.base_dir)


def dependencies_to_spec(value: list[str], ctx: SpecContext) -> Any:
    return [relative(os.fspath(d), ctx.base_dir) for d in value] or None


# --------------------------------------------------------------------------- request forms


def true_only(value: Any) -> Any:
    """A flag the request carries only when it is on."""
    return True if value else None


def attach_true(value: Any) -> Any:
    return True if value else MISSING


def attach_truthy(value: Any) -> Any:
    return value if value else MISSING


def attach_set(value: Any) -> Any:
    return MISSING if value is None else value


def debugger_from_description(config: Any) -> Any:
    if not config:
        return False
    collections = [
        CollectionConfig(c["CollectionName"], c.get("CollectionParameters"))
        for c in config.get("CollectionConfigurations") or []
    ]
    return DebuggerHookConfig(
        s3_output_path=config.get("S3OutputPath"),
        container_local_output_path=config.get("LocalPath"),
        hook_parameters=config.get("HookParameters"),
        collection_configs=collections or None,
    )


def tensorboard_from_description(config: Any) -> Any:
    """The ``TensorBoardOutputConfig`` of a described job, as the service stored it."""
    if not config:
        return MISSING
    return TensorBoardOutputConfig._described(config.get("S3OutputPath"), config.get("LocalPath"))
