"""A job spec's ``tuning:`` section -> a :class:`launchbay.tuner.HyperparameterTuner`.

The section holds the tuner's arguments under their SDK v2 names (docs/jobspec.md):
``objective_metric_name``, ``objective_type``, ``hyperparameter_ranges`` (name ->
``{type: continuous|integer|categorical, min_value, max_value, scaling_type}`` or
``{type: categorical, values: [...]}``), ``metric_definitions`` (default: the spec's
own), ``strategy``, ``max_jobs``, ``max_parallel_jobs``, ``max_runtime_in_seconds``,
``early_stopping_type``, ``random_seed``, ``base_tuning_job_name``, ``tags`` (key ->
value), ``autotune``, ``hyperparameters_to_keep_static``, and three settings as
mappings: ``hyperband: {min_resource, max_resource}`` (:class:`StrategyConfig`),
``completion_criteria: {target_objective_metric_value,
max_number_of_training_jobs_not_improving, complete_on_convergence}`` and
``warm_start: {type, parents}``. The schema (``schemas/jobspec.schema.json``) checks
the shapes; the tuner checks the rest, and its refusals are reported at the line of
the key they name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.jobspec import JobSpec, JobSpecError

__all__ = ["TUNING_KEY", "has_tuning", "tuner_from_spec"]

TUNING_KEY = "tuning"
_PLAIN = (
    "objective_type", "strategy", "max_jobs", "max_parallel_jobs", "max_runtime_in_seconds",
    "early_stopping_type", "random_seed", "base_tuning_job_name", "autotune",
    "hyperparameters_to_keep_static",
)  # fmt: skip
_HEAD = re.compile(r"^(?:\w+\()?([A-Za-z_]\w*)")


def has_tuning(spec: JobSpec) -> bool:
    """Whether the spec has a ``tuning:`` section (``launchbay submit`` then tunes)."""
    return TUNING_KEY in spec.data


def _range(name: str, item: Mapping[str, Any]) -> Any:
    from launchbay.tuning.parameter import (
        CategoricalParameter,
        ContinuousParameter,
        IntegerParameter,
    )

    kind = item["type"]
    if kind == "categorical":
        if "values" not in item:
            raise ConfigurationError.invalid(
                f"hyperparameter_ranges[{name!r}]",
                dict(item),
                "values: [...] for a categorical range",
            )
        return CategoricalParameter(list(item["values"]))
    missing = [k for k in ("min_value", "max_value") if k not in item]
    if missing or "values" in item:
        raise ConfigurationError.invalid(
            f"hyperparameter_ranges[{name!r}]", dict(item),
            f"min_value and max_value (and no values) for a {kind} range",
        )  # fmt: skip
    cls = ContinuousParameter if kind == "continuous" else IntegerParameter
    return cls(item["min_value"], item["max_value"], item.get("scaling_type", "Auto"))


def _locate(spec: JobSpec, exc: ConfigurationError) -> ConfigurationError:
    """``exc`` at the ``tuning`` key it names (else where the estimator's errors go)."""
    argument = str(getattr(exc, "argument", None) or "")
    section = spec.data[TUNING_KEY]
    ranges = re.match(r"^hyperparameter_ranges\[['\"]?([^'\"\]]+)", argument)
    if ranges and ranges.group(1) in section.get("hyperparameter_ranges", {}):
        path: tuple[Any, ...] = (TUNING_KEY, "hyperparameter_ranges", ranges.group(1))
        return JobSpecError([spec.problem(path, str(exc))])
    owners = {
        "HyperbandStrategyConfig": "hyperband", "StrategyConfig": "hyperband",
        "TuningJobCompletionCriteriaConfig": "completion_criteria", "WarmStartConfig": "warm_start",
    }  # fmt: skip
    owner = argument.split("(", 1)[0]
    if owner in owners and owners[owner] in section:
        return JobSpecError([spec.problem((TUNING_KEY, owners[owner]), str(exc))])
    head = _HEAD.match(argument)
    if head and head.group(1) in section:
        return JobSpecError([spec.problem((TUNING_KEY, head.group(1)), str(exc))])
    if head and head.group(1) == "job_name" and "job_name" in spec.data:
        return JobSpecError([spec.problem(("job_name",), str(exc))])
    return JobSpecError([spec.problem((TUNING_KEY,), str(exc))])


def tuner_from_spec(spec: JobSpec, estimator: Any) -> Any:
    """The :class:`~launchbay.tuner.HyperparameterTuner` of ``spec``'s ``tuning:`` section.

    Raises:
        JobSpecError: the tuner refused an argument; the message names the spec's
            file, line and key.
    """
    from launchbay.tuner import (
        HyperbandStrategyConfig,
        HyperparameterTuner,
        StrategyConfig,
        TuningJobCompletionCriteriaConfig,
        WarmStartConfig,
    )

    section = spec.data[TUNING_KEY]
    try:
        kwargs: dict[str, Any] = {k: section[k] for k in _PLAIN if k in section}
        ranges = {}
        for name, item in section["hyperparameter_ranges"].items():
            try:
                ranges[name] = _range(name, item)
            except ConfigurationError as exc:  # at the range's own line
                path = (TUNING_KEY, "hyperparameter_ranges", name)
                raise JobSpecError([spec.problem(path, str(exc))]) from exc
        metrics = section.get("metric_definitions") or spec.data.get("metric_definitions")
        if "tags" in section:
            kwargs["tags"] = [{"Key": k, "Value": v} for k, v in section["tags"].items()]
        if "hyperband" in section:
            kwargs["strategy_config"] = StrategyConfig(
                HyperbandStrategyConfig(**section["hyperband"])
            )
        if "completion_criteria" in section:
            kwargs["completion_criteria_config"] = TuningJobCompletionCriteriaConfig(
                **section["completion_criteria"]
            )
        if "warm_start" in section:
            warm = section["warm_start"]
            kwargs["warm_start_config"] = WarmStartConfig(warm["type"], warm["parents"])
        return HyperparameterTuner(
            estimator, section["objective_metric_name"], ranges,
            metric_definitions=metrics, **kwargs,
        )  # fmt: skip
    except ConfigurationError as exc:
        raise _locate(spec, exc) from exc


def located(spec: JobSpec, exc: ConfigurationError) -> ConfigurationError:
    """A tuner's refusal at fit or dry-run time, at the spec key it names."""
    if isinstance(exc, JobSpecError):
        return exc
    argument = str(getattr(exc, "argument", None) or "")
    head = _HEAD.match(argument)
    if head and (head.group(1) in spec.data[TUNING_KEY] or "hyperparameter_ranges" in argument):
        return _locate(spec, exc)
    return spec.error_for(exc)
