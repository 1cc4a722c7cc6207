"""The job-spec (YAML) form of ``rules`` and ``profiler_config`` (docs/debugger.md).

```yaml
rules:
  - builtin: loss_not_decreasing          # a rule_configs function
    parameters: {tensor_regex: ".*loss.*", num_steps: 20}
    collections: [{name: losses, parameters: {save_interval: "10"}}]
    actions: [{stop_training: true}, {email: me@example.com}, {sms: "+14155550123"}]
  - profiler: ProfilerReport              # a rule_configs profiling rule
    parameters: {CPUBottleneck_threshold: 90}
  - custom: MyRule                        # Rule.custom (profiling: true: ProfilerRule.custom)
    image_uri: 123456789012.dkr.ecr.us-west-2.amazonaws.com/my-rules:1
    instance_type: ml.t3.medium
    volume_size_in_gb: 30
    source: s3://bucket/rules/my_rule.py
    rule_to_invoke: MyRule
profiler_config:
  system_monitor_interval_millis: 500
  framework_profile: {start_step: 5, num_steps: 2}   # FrameworkProfile(...)
```
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from launchbay.debugger.hook import CollectionConfig
from launchbay.debugger.profiler import FrameworkProfile, Profiler, ProfilerConfig
from launchbay.debugger.rules import ProfilerRule, Rule, RuleBase
from launchbay.errors import ConfigurationError

__all__ = [
    "PROFILER_SCHEMA",
    "RULES_SCHEMA",
    "profiler_from_spec",
    "profiler_to_spec",
    "rules_from_spec",
    "rules_to_spec",
]

_SCALARS = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
_TEXT = {"type": "string", "minLength": 1}
_COLLECTIONS = {"type": "array", "items": {
    "type": "object", "additionalProperties": False, "required": ["name"],
    "properties": {"name": _TEXT, "parameters": _SCALARS}}}  # fmt: skip
_ACTIONS = {"type": "array", "items": {"anyOf": [
    {"type": "object", "additionalProperties": False, "required": ["stop_training"],
     "properties": {"stop_training": {"anyOf": [{"const": True}, {
         "type": "object", "additionalProperties": False,
         "properties": {"training_job_prefix": _TEXT}}]}}},
    {"type": "object", "additionalProperties": False, "required": ["email"],
     "properties": {"email": _TEXT}},
    {"type": "object", "additionalProperties": False, "required": ["sms"],
     "properties": {"sms": _TEXT}}]}}  # fmt: skip
_WHERE = {"s3_output_path": _TEXT, "container_local_output_path": _TEXT, "name": _TEXT}
RULES_SCHEMA: dict[str, Any] = {"type": "array", "items": {"anyOf": [
    {"type": "object", "additionalProperties": False, "required": ["builtin"],
     "properties": {"builtin": _TEXT, **_WHERE, "parameters": _SCALARS,
                    "collections": _COLLECTIONS, "actions": _ACTIONS,
                    "other_trials_s3_input_paths": {"type": "array", "items": _TEXT}}},
    {"type": "object", "additionalProperties": False, "required": ["profiler"],
     "properties": {"profiler": _TEXT, **_WHERE, "parameters": _SCALARS,
                    "instance_type": _TEXT, "volume_size_in_gb": {"type": "integer"}}},
    {"type": "object", "additionalProperties": False,
     "required": ["custom", "image_uri", "instance_type", "volume_size_in_gb"],
     "properties": {"custom": _TEXT, "profiling": {"type": "boolean"}, "image_uri": _TEXT,
                    "instance_type": _TEXT, "volume_size_in_gb": {"type": "integer"},
                    "source": _TEXT, "rule_to_invoke": _TEXT, "parameters": _SCALARS,
                    "s3_output_path": _TEXT, "container_local_output_path": _TEXT,
                    "collections": _COLLECTIONS, "actions": _ACTIONS,
                    "other_trials_s3_input_paths": {"type": "array", "items": _TEXT}}}]}}  # fmt: skip
_STEPS = {"type": "integer", "minimum": 0}
PROFILER_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "properties": {
        "s3_output_path": _TEXT,
        "system_monitor_interval_millis": {"enum": [100, 200, 500, 1000, 5000, 60000]},
        "disable_profiler": {"type": "boolean"},
        "framework_profile": {"type": "object", "additionalProperties": False, "properties": {
            "local_path": _TEXT, "file_max_size": {"type": "integer"},
            "file_close_interval": {"type": "number"},
            "file_open_fail_threshold": {"type": "integer"},
            "start_step": _STEPS, "num_steps": _STEPS, "start_unix_time": _STEPS,
            "duration": {"type": "number"}}},
        "profiler": {"type": "object", "additionalProperties": False, "properties": {
            "cpu_profiling_duration": {"type": ["string", "integer"]},
            "file_rotation_interval": {"type": ["string", "integer"]}}}}}  # fmt: skip
_FRAMEWORK_KEYS = ("local_path", "file_max_size", "file_close_interval", "file_open_fail_threshold")


def _actions_from_spec(items: Any) -> Any:
    if not items:
        return None
    from launchbay.debugger import rule_configs

    made = []
    for item in items:
        if "stop_training" in item:
            prefix = item["stop_training"]
            prefix = prefix.get("training_job_prefix") if isinstance(prefix, Mapping) else None
            made.append(rule_configs.StopTraining(prefix))
        elif "email" in item:
            made.append(rule_configs.Email(item["email"]))
        else:
            made.append(rule_configs.SMS(item["sms"]))
    return rule_configs.ActionList(*made)


def _actions_to_spec(actions: Any) -> list[dict[str, Any]] | None:
    if actions is None:
        return None
    spec: list[dict[str, Any]] = []
    for action in getattr(actions, "actions", (actions,)):
        params = action.action_parameters
        if params["name"] == "stoptraining":
            prefix = (
                None
                if action.use_default_training_job_prefix
                else params.get("training_job_prefix")
            )
            spec.append({"stop_training": {"training_job_prefix": prefix} if prefix else True})
        else:
            spec.append({"email" if params["name"] == "email" else "sms": params["endpoint"]})
    return spec


def _collections(items: Any) -> list[CollectionConfig] | None:
    return [CollectionConfig(c["name"], c.get("parameters")) for c in items] if items else None


def _collections_to_spec(collections: Any) -> list[dict[str, Any]] | None:
    return [
        {"name": c.name, **({"parameters": dict(c.parameters)} if c.parameters else {})}
        for c in collections or []
    ] or None


def _builtin(name: str) -> Any:
    from launchbay.debugger import rule_configs

    function = getattr(rule_configs, name, None) if not name[:1].isupper() else None
    if not callable(function) or name not in rule_configs.__all__:
        raise ConfigurationError.invalid(
            "rules[].builtin",
            name,
            "a debugging rule of rule_configs such as vanishing_gradient, "
            "loss_not_decreasing, overfit, exploding_tensor",
        )
    return function()


def rules_from_spec(value: Any) -> Any:
    """The ``rules`` of a job spec as ``Rule``/``ProfilerRule`` objects."""
    if not isinstance(value, list):
        return value
    made: list[RuleBase] = []
    for item in value:
        where = {k: item.get(k) for k in ("s3_output_path", "container_local_output_path")}
        if "builtin" in item:
            made.append(
                Rule.sagemaker(
                    _builtin(item["builtin"]),
                    name=item.get("name"),
                    other_trials_s3_input_paths=item.get("other_trials_s3_input_paths"),
                    rule_parameters=item.get("parameters"),
                    collections_to_save=_collections(item.get("collections")),
                    actions=_actions_from_spec(item.get("actions")),
                    **where,
                )
            )
        elif "profiler" in item:
            from launchbay.debugger import rule_configs

            kind = getattr(rule_configs, item["profiler"], None)
            if item["profiler"][:1].islower() or not callable(kind):
                raise ConfigurationError.invalid(
                    "rules[].profiler",
                    item["profiler"],
                    "a profiling rule of rule_configs "
                    "such as ProfilerReport, CPUBottleneck, LowGPUUtilization",
                )
            made.append(
                ProfilerRule.sagemaker(
                    kind(**(item.get("parameters") or {})),
                    name=item.get("name"),
                    instance_type=item.get("instance_type"),
                    volume_size_in_gb=item.get("volume_size_in_gb"),
                    **where,
                )
            )
        else:
            common = {
                "name": item["custom"],
                "image_uri": item["image_uri"],
                "instance_type": item["instance_type"],
                "volume_size_in_gb": item["volume_size_in_gb"],
                "source": item.get("source"),
                "rule_to_invoke": item.get("rule_to_invoke"),
                "rule_parameters": item.get("parameters"),
                **where,
            }
            if item.get("profiling"):
                made.append(ProfilerRule.custom(**common))
            else:
                made.append(
                    Rule.custom(
                        **common,
                        other_trials_s3_input_paths=item.get("other_trials_s3_input_paths"),
                        collections_to_save=_collections(item.get("collections")),
                        actions=_actions_from_spec(item.get("actions")),
                    )
                )
    return made


def _builtin_name(config_name: str) -> str:
    """The rule_configs function whose base config is named ``config_name``."""
    from launchbay.debugger import rule_configs

    for name in rule_configs.__all__:
        function = getattr(rule_configs, name)
        if name[:1].islower() and name not in ("is_valid_action_object", "get_collection"):
            config = function()
            if (config or {}).get("DebugRuleConfiguration", {}).get(
                "RuleConfigurationName"
            ) == config_name:
                return name
    return config_name


def _drop_none(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if v is not None}


def rules_to_spec(rules: Any, ctx: Any = None) -> list[dict[str, Any]]:
    """``rules`` in the job-spec form that :func:`rules_from_spec` reads back."""
    spec = []
    for rule in rules:
        where = {"s3_output_path": rule.s3_output_path,
                 "container_local_output_path": rule.container_local_output_path}  # fmt: skip
        made_as = getattr(rule, "_made_as", None)
        if isinstance(rule, Rule) and made_as is not None:
            spec.append(_drop_none({
                "builtin": _builtin_name(made_as["builtin"]), "name": made_as["name"], **where,
                "parameters": made_as["parameters"],
                "collections": _collections_to_spec(made_as["collections"]),
                "actions": _actions_to_spec(rule.actions),
                "other_trials_s3_input_paths": made_as["other_trials_s3_input_paths"]}))  # fmt: skip
            continue
        parameters = copy.deepcopy(dict(rule.rule_parameters or {}))
        if isinstance(rule, ProfilerRule) and rule.uses_default_image:
            kind = parameters.pop("rule_to_invoke", rule.name)
            spec.append(_drop_none({
                "profiler": kind, "name": None if rule.name == kind else rule.name, **where,
                "parameters": parameters or None, "instance_type": rule.instance_type,
                "volume_size_in_gb": rule.volume_size_in_gb}))  # fmt: skip
            continue
        custom = {
            "custom": rule.name, "image_uri": rule.image_uri,
            "instance_type": rule.instance_type, "volume_size_in_gb": rule.volume_size_in_gb,
            "source": parameters.pop("source_s3_uri", None),
            "rule_to_invoke": parameters.pop("rule_to_invoke", None), **where,
            "parameters": parameters or None,
        }  # fmt: skip
        if isinstance(rule, ProfilerRule):
            custom["profiling"] = True
        else:
            custom["collections"] = _collections_to_spec(rule.collection_configs)
            custom["actions"] = _actions_to_spec(rule.actions)
        spec.append(_drop_none(custom))
    return spec


def profiler_from_spec(value: Any) -> Any:
    """The ``profiler_config`` of a job spec as a :class:`ProfilerConfig`."""
    if not isinstance(value, Mapping):
        return value
    framework = value.get("framework_profile")
    profiler = value.get("profiler")
    return ProfilerConfig(
        s3_output_path=value.get("s3_output_path"),
        system_monitor_interval_millis=value.get("system_monitor_interval_millis"),
        framework_profile_params=None if framework is None else FrameworkProfile(**framework),
        profile_params=None if profiler is None else Profiler(**profiler),
        disable_profiler=value.get("disable_profiler", False),
    )


def profiler_to_spec(config: ProfilerConfig, ctx: Any = None) -> dict[str, Any]:
    """A ``ProfilerConfig`` in the job-spec form (a framework profile as its parameters)."""
    spec: dict[str, Any] = _drop_none({
        "s3_output_path": config.s3_output_path,
        "system_monitor_interval_millis": config.system_monitor_interval_millis,
        "disable_profiler": config.disable_profiler or None})  # fmt: skip
    if config.profile_params is not None:
        params = config.profile_params.profiling_parameters
        spec["profiler"] = {
            "cpu_profiling_duration": params["CPUProfilingDuration"],
            "file_rotation_interval": params["SMPFileRotationSecs"],
        }
    if config.framework_profile_params is not None:
        spec["framework_profile"] = _framework_to_spec(config.framework_profile_params)
    return spec


def _number(text: str) -> float | int:
    return int(text) if text.isdigit() else float(text)


def _framework_to_spec(profile: FrameworkProfile) -> dict[str, Any]:
    """The trace-file settings and, when all five options share one range, that range."""
    params = profile.profiling_parameters
    spec: dict[str, Any] = {
        "local_path": params["LocalPath"],
        "file_max_size": int(params["RotateMaxFileSizeInBytes"]),
        "file_close_interval": _number(params["RotateFileCloseIntervalInSeconds"]),
        "file_open_fail_threshold": int(params["FileOpenFailThreshold"]),
    }
    default = FrameworkProfile()
    options = {k: v for k, v in params.items() if k not in ("LocalPath",) and "Config" in k}
    if options == {k: v for k, v in default.profiling_parameters.items() if "Config" in k}:
        return spec
    import ast

    ranges = {k: ast.literal_eval(v) for k, v in options.items()}
    detailed = ranges.get("DetailedProfilingConfig", {})
    for key, spec_key in (("StartStep", "start_step"), ("NumSteps", "num_steps"),
                          ("StartTimeInSecSinceEpoch", "start_unix_time"),
                          ("Duration", "duration")):  # fmt: skip
        if key in detailed:
            spec[spec_key] = detailed[key]
    if FrameworkProfile(**spec).profiling_parameters != params:
        raise ConfigurationError.invalid(
            "profiler_config.framework_profile_params",
            profile,
            "in a job spec: the default options or one step or time range for all of them "
            "(options configured one by one have no job-spec form yet)",
        )
    return spec
