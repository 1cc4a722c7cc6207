"""The Debugger and profiler fields of a CreateTrainingJob request, as SDK v2 2.257.7 fills them.

:func:`debugger_fields` turns an estimator's ``rules``, ``debugger_hook_config``,
``profiler_config`` and ``disable_profiler`` into ``DebugHookConfig``,
``DebugRuleConfigurations``, ``ProfilerConfig`` and ``ProfilerRuleConfigurations``
for one job (its region, output path and name), with v2's rules:

* a built-in rule runs on the region's rule evaluator image
  (``image_uris.retrieve("debugger", region)``; SageMaker Profiler's processing rule
  on ``"detailed-profiler"``), with no instance type or volume of its own;
* debugging rules make the debugger hook on (a default one when none is given), and
  the collections each rule saves join the hook's;
* the profiler is on unless ``disable_profiler``, the region has no Debugger, or an
  instance type is Trainium (``ml.trn*``); when on, the job gets a default
  ``ProfilerConfig`` and no profiling rule unless given (v2 adds no ``ProfilerReport``),
  except SageMaker Profiler's processing rule for ``ProfilerConfig(profile_params=...)``
  when ``rules`` holds no profiling rule.

docs/debugger.md.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any

from launchbay._regions import DEBUGGER_UNSUPPORTED_REGIONS, PROFILER_UNSUPPORTED_REGIONS
from launchbay.debugger.hook import DebuggerHookConfig
from launchbay.debugger.profiler import ProfilerConfig
from launchbay.debugger.rules import DETAILED_PROFILER_RULE, ProfilerRule, Rule, RuleBase
from launchbay.errors import ConfigurationError

__all__ = ["check_rules", "debugger_fields", "rule_sources", "source_key"]


def check_rules(name: str, value: Any) -> list[RuleBase] | None:
    """``rules``: None, or a list of ``Rule`` and ``ProfilerRule`` objects (a copy)."""
    if value is None:
        return None
    if isinstance(value, RuleBase) or not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigurationError.invalid(
            name, value, "a list of Rule and ProfilerRule objects (from launchbay.debugger)"
        )
    for index, rule in enumerate(value):
        if not isinstance(rule, (Rule, ProfilerRule)):
            raise ConfigurationError.invalid(
                f"{name}[{index}]",
                rule,
                "a Rule (Rule.sagemaker(rule_configs.<rule>()) or Rule.custom(...)) or a "
                "ProfilerRule (ProfilerRule.sagemaker(rule_configs.ProfilerReport()) ...)",
            )
    names = [rule.name for rule in value]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigurationError.invalid(
            name,
            twice[0],
            "rules with distinct names (pass name= to tell two uses of one rule apart)",
            reason=f"Two rules are named {twice[0]!r}: SageMaker names each rule's job after it",
        )
    return list(value)


def _rule_image(rule: RuleBase, region: str) -> str:
    if not rule.uses_default_image:
        return rule.image_uri
    from launchbay import image_uris  # the image tables load with the first rule

    scope = "detailed-profiler" if rule.name.startswith(DETAILED_PROFILER_RULE) else "debugger"
    return image_uris.retrieve(scope, region)


def source_key(rule_name: str, path: str) -> str:
    """The key, below the default bucket's prefix, of a custom rule's local source file.

    ``<rule name>/<sha256 of the file>/<file name>``: SDK v2 puts a random UUID where
    launchbay puts the content's hash, so the same file is stored once and the dry run
    names the key ``fit()`` uploads to.
    """
    try:
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
    except OSError as exc:
        raise ConfigurationError.invalid(
            "source",
            path,
            "an s3:// URI or the path of a readable local file",
            reason=f"It cannot be read ({exc.strerror or exc})",
        ) from None
    return f"{rule_name}/{digest}/{os.path.basename(path)}"


def rule_sources(rules: Sequence[RuleBase] | None) -> dict[str, str]:
    """``{rule name: local path}`` of the rules whose ``source`` is a local file."""
    found = {}
    for rule in rules or []:
        source = (rule.rule_parameters or {}).get("source_s3_uri")
        if isinstance(source, str) and not source.startswith("s3://"):
            found[rule.name] = source
    return found


def _with_source(request: dict[str, Any], source_uris: dict[str, str]) -> dict[str, Any]:
    uri = source_uris.get(request["RuleConfigurationName"])
    if uri is not None:
        request["RuleParameters"]["source_s3_uri"] = uri
    return request


def debugger_fields(
    *,
    rules: Sequence[RuleBase] | None,
    hook: DebuggerHookConfig | bool | None,
    profiler_config: ProfilerConfig | None,
    disable_profiler: bool,
    region: str,
    output_path: str,
    job_name: str,
    instance_types: Sequence[str],
    debugger_allowed: bool,
    source_uri: Callable[[str, str], str] | None = None,
    rule_name: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """The request fields (:class:`launchbay._request.RequestSpec`'s names) of one job.

    Args:
        source_uri: ``(rule name, local path) -> s3:// URI`` for a custom rule's local
            source (``None``: the path stays as given, for local jobs).
        rule_name: Makes SageMaker Profiler's processing rule name from its base
            (SDK v2: the base and a timestamp).
    """
    debugging = [r for r in rules or [] if isinstance(r, Rule)]
    profiling = [r for r in rules or [] if isinstance(r, ProfilerRule)]
    sources = {
        name: source_uri(name, path)
        for name, path in rule_sources(rules).items()
        if source_uri is not None
    }
    supported = region.lower() not in DEBUGGER_UNSUPPORTED_REGIONS

    # -- the hook and the debugging rules
    if hook is True:
        hook = None
    if not supported and (hook or debugging):
        argument, value = (
            ("rules", [r.name for r in debugging]) if debugging else ("debugger_hook_config", hook)
        )
        raise ConfigurationError(
            f"{argument}={value!r} needs SageMaker Debugger, which region {region!r} does "
            "not have. Accepted: no debugging rules and debugger_hook_config=False there, or "
            "a region outside " + ", ".join(DEBUGGER_UNSUPPORTED_REGIONS) + ".",
            argument=argument,
            value=value,
        )
    rule_requests = [
        _with_source(
            rule.to_debugger_rule_config_dict(_rule_image(rule, region), job_name), sources
        )
        for rule in debugging
    ]
    hook_request = None
    if supported and hook is not False and debugger_allowed:
        hook_config = hook or DebuggerHookConfig()
        # The collections the rules read are saved too (each once, rules' first).
        collections = [c for rule in debugging for c in rule.collection_configs]
        collections += hook_config.collection_configs or []
        merged = DebuggerHookConfig(
            hook_config.s3_output_path,
            hook_config.container_local_output_path,
            hook_config.hook_parameters,
            collections or None,
        )
        hook_request = merged.to_request_dict(output_path)

    # -- the profiler and the profiling rules
    why = (
        "disable_profiler=True"
        if disable_profiler
        else f"region {region!r} has no SageMaker Profiler"
        if region.lower() in PROFILER_UNSUPPORTED_REGIONS
        else "Trainium (ml.trn*) instances have no SageMaker Profiler"
        if any(t.startswith(("ml.trn", "ml_trn")) for t in instance_types)
        else None
    )
    if why is not None:
        if profiler_config is not None and not profiler_config.disable_profiler:
            raise ConfigurationError(
                f"profiler_config={profiler_config!r} turns the profiler on, but {why}. "
                "Accepted: no profiler_config (or ProfilerConfig(disable_profiler=True)).",
                argument="profiler_config",
                value=profiler_config,
            )
        if profiling:
            raise ConfigurationError(
                f"rules holds profiling rules ({', '.join(r.name for r in profiling)}), but "
                f"{why}. Accepted: Rule objects only (no ProfilerRule).",
                argument="rules",
                value=[r.name for r in profiling],
            )
        config = profiler_config or ProfilerConfig(disable_profiler=True)
    else:
        config = profiler_config or ProfilerConfig()
        if rules is None or (rules and not profiling):
            profiling = []
            if config.profile_params is not None:
                profiling.append(_detailed_profiler_rule(config, rule_name))
    profiler_rule_requests = [
        _with_source(rule.to_profiler_rule_config_dict(_rule_image(rule, region)), sources)
        for rule in profiling
    ]
    return {
        "debug_hook_config": hook_request,
        "debug_rule_configs": rule_requests or None,
        "profiler_config": config.to_request_dict(output_path),
        "profiler_rule_configs": profiler_rule_requests or None,
    }


def _detailed_profiler_rule(
    config: ProfilerConfig, rule_name: Callable[[str], str] | None
) -> ProfilerRule:
    """SageMaker Profiler's processing rule, which SDK v2 adds for ``profile_params``."""
    params = config.profile_params
    assert params is not None, "only for profile_params"

    class _Base:
        rule_name = DETAILED_PROFILER_RULE
        rule_parameters = {"rule_to_invoke": "DetailedProfilerProcessing"}

    name = rule_name(DETAILED_PROFILER_RULE) if rule_name else DETAILED_PROFILER_RULE
    return ProfilerRule.sagemaker(
        _Base(),
        name=name,
        instance_type=params.instanceType,
        volume_size_in_gb=params.volumeSizeInGB,
    )
