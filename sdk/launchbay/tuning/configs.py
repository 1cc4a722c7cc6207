"""The tuning job's settings objects: warm start, strategy, completion criteria.

SDK v2's classes of ``sagemaker.tuner``, each with ``to_input_req()`` (its part of
the CreateHyperParameterTuningJob request) and ``from_job_desc()`` (back from a
DescribeHyperParameterTuningJob response), checked when made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from launchbay.errors import ConfigurationError

__all__ = [
    "WarmStartTypes",
    "WarmStartConfig",
    "HyperbandStrategyConfig",
    "StrategyConfig",
    "TuningJobCompletionCriteriaConfig",
    "BEST_OBJECTIVE_NOT_IMPROVING",
    "CONVERGENCE_DETECTED",
    "MAX_NUMBER_OF_TRAINING_JOBS_NOT_IMPROVING",
    "COMPLETE_ON_CONVERGENCE_DETECTED",
    "TARGET_OBJECTIVE_METRIC_VALUE",
]

#: Keys of ``TuningJobCompletionCriteria`` (and SDK v2's names for them).
BEST_OBJECTIVE_NOT_IMPROVING = "BestObjectiveNotImproving"
MAX_NUMBER_OF_TRAINING_JOBS_NOT_IMPROVING = "MaxNumberOfTrainingJobsNotImproving"
CONVERGENCE_DETECTED = "ConvergenceDetected"
COMPLETE_ON_CONVERGENCE_DETECTED = "CompleteOnConvergence"
TARGET_OBJECTIVE_METRIC_VALUE = "TargetObjectiveMetricValue"
#: Most parent tuning jobs one warm start names (SageMaker's limit).
MAX_WARM_START_PARENTS = 5


def _positive_int(argument: str, value: Any, *, most: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError.invalid(argument, value, "an integer 1 or more")
    if most is not None and value > most:
        raise ConfigurationError.invalid(argument, value, f"an integer from 1 to {most}")
    return value


class WarmStartTypes(Enum):
    """How a warm-started tuning job reuses its parents' trials."""

    IDENTICAL_DATA_AND_ALGORITHM = "IdenticalDataAndAlgorithm"
    TRANSFER_LEARNING = "TransferLearning"


class WarmStartConfig:
    """Start a tuning job from what earlier tuning jobs (its parents) learned.

    Args:
        warm_start_type: A :class:`WarmStartTypes` (or its value as a string).
        parents: The parent tuning jobs' names (1 to 5).
    """

    def __init__(self, warm_start_type: WarmStartTypes | str, parents: Iterable[str]) -> None:
        try:
            self.type = WarmStartTypes(warm_start_type)
        except ValueError:
            raise ConfigurationError.invalid(
                "WarmStartConfig(warm_start_type)",
                warm_start_type,
                ", ".join(f"WarmStartTypes.{t.name}" for t in WarmStartTypes),
            ) from None
        listed = [parents] if isinstance(parents, str) else list(parents or ())
        if not listed or len(set(listed)) > MAX_WARM_START_PARENTS:
            raise ConfigurationError.invalid(
                "WarmStartConfig(parents)",
                parents,
                f"1 to {MAX_WARM_START_PARENTS} parent tuning job names",
            )
        if not all(isinstance(p, str) and p for p in listed):
            raise ConfigurationError.invalid(
                "WarmStartConfig(parents)", parents, "tuning job names (strings)"
            )
        self.parents: set[str] = set(listed)

    def __repr__(self) -> str:
        return f"WarmStartConfig({self.type}, parents={sorted(self.parents)!r})"

    @classmethod
    def from_job_desc(cls, warm_start_config: Mapping[str, Any] | None) -> WarmStartConfig | None:
        """From a description's ``WarmStartConfig`` (``None`` when it has none)."""
        if not warm_start_config or "WarmStartType" not in warm_start_config:
            return None
        parents = [
            p["HyperParameterTuningJobName"]
            for p in warm_start_config.get("ParentHyperParameterTuningJobs") or []
        ]
        if not parents:
            return None
        return cls(WarmStartTypes(warm_start_config["WarmStartType"]), parents)

    def to_input_req(self) -> dict[str, Any]:
        """The request's ``WarmStartConfig`` (parents sorted by name: the request is stable)."""
        return {
            "WarmStartType": self.type.value,
            "ParentHyperParameterTuningJobs": [
                {"HyperParameterTuningJobName": p} for p in sorted(self.parents)
            ],
        }


class HyperbandStrategyConfig:
    """Hyperband's resource bounds (epochs, say): each trial runs at least ``min_resource``."""

    def __init__(self, max_resource: int | None = None, min_resource: int | None = None) -> None:
        if max_resource is not None:
            _positive_int("HyperbandStrategyConfig(max_resource)", max_resource, most=20_000)
        if min_resource is not None:
            _positive_int("HyperbandStrategyConfig(min_resource)", min_resource)
        if None not in (max_resource, min_resource) and min_resource > max_resource:  # type: ignore[operator]  # both ints here
            raise ConfigurationError.invalid(
                "HyperbandStrategyConfig(min_resource, max_resource)",
                (min_resource, max_resource),
                "min_resource less than or equal to max_resource",
            )
        self.max_resource = max_resource
        self.min_resource = min_resource

    def __repr__(self) -> str:
        return f"HyperbandStrategyConfig(max_resource={self.max_resource!r}, min_resource={self.min_resource!r})"

    @classmethod
    def from_job_desc(cls, config: Mapping[str, Any]) -> HyperbandStrategyConfig:
        return cls(max_resource=config.get("MaxResource"), min_resource=config.get("MinResource"))

    def to_input_req(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.min_resource is not None:
            out["MinResource"] = self.min_resource
        if self.max_resource is not None:
            out["MaxResource"] = self.max_resource
        return out


class StrategyConfig:
    """The strategy's own settings: for ``Hyperband``, a :class:`HyperbandStrategyConfig`."""

    def __init__(self, hyperband_strategy_config: HyperbandStrategyConfig) -> None:
        if not isinstance(hyperband_strategy_config, HyperbandStrategyConfig):
            raise ConfigurationError.invalid(
                "StrategyConfig(hyperband_strategy_config)",
                hyperband_strategy_config,
                "a HyperbandStrategyConfig",
            )
        self.hyperband_strategy_config = hyperband_strategy_config

    def __repr__(self) -> str:
        return f"StrategyConfig({self.hyperband_strategy_config!r})"

    @classmethod
    def from_job_desc(cls, strategy_config: Mapping[str, Any]) -> StrategyConfig:
        return cls(
            HyperbandStrategyConfig.from_job_desc(strategy_config["HyperbandStrategyConfig"])
        )

    def to_input_req(self) -> dict[str, Any]:
        return {"HyperbandStrategyConfig": self.hyperband_strategy_config.to_input_req()}


class TuningJobCompletionCriteriaConfig:
    """When the tuning job ends before ``max_jobs``.

    Args:
        max_number_of_training_jobs_not_improving: End after this many trials in a
            row did not improve the best objective (``BestObjectiveNotImproving``).
        complete_on_convergence: End when the search has converged
            (``ConvergenceDetected``: ``Enabled``/``Disabled``).
        target_objective_metric_value: End once a trial reaches this objective value.
    """

    def __init__(
        self,
        max_number_of_training_jobs_not_improving: int | None = None,
        complete_on_convergence: bool | None = None,
        target_objective_metric_value: float | None = None,
    ) -> None:
        owner = "TuningJobCompletionCriteriaConfig"
        if max_number_of_training_jobs_not_improving is not None:
            value = max_number_of_training_jobs_not_improving
            if isinstance(value, bool) or not isinstance(value, int) or value < 3:
                raise ConfigurationError.invalid(
                    f"{owner}(max_number_of_training_jobs_not_improving)",
                    value,
                    "an integer 3 or more (SageMaker's minimum)",
                )
        if complete_on_convergence is not None and not isinstance(complete_on_convergence, bool):
            raise ConfigurationError.invalid(
                f"{owner}(complete_on_convergence)", complete_on_convergence, "True or False"
            )
        if target_objective_metric_value is not None and (
            isinstance(target_objective_metric_value, bool)
            or not isinstance(target_objective_metric_value, int | float)
        ):
            raise ConfigurationError.invalid(
                f"{owner}(target_objective_metric_value)",
                target_objective_metric_value,
                "a number",
            )
        self.max_number_of_training_jobs_not_improving = max_number_of_training_jobs_not_improving
        self.complete_on_convergence = complete_on_convergence
        self.target_objective_metric_value = target_objective_metric_value

    def __repr__(self) -> str:
        return (
            "TuningJobCompletionCriteriaConfig("
            f"max_number_of_training_jobs_not_improving={self.max_number_of_training_jobs_not_improving!r}, "
            f"complete_on_convergence={self.complete_on_convergence!r}, "
            f"target_objective_metric_value={self.target_objective_metric_value!r})"
        )

    @classmethod
    def from_job_desc(cls, config: Mapping[str, Any]) -> TuningJobCompletionCriteriaConfig:
        converge = (config.get(CONVERGENCE_DETECTED) or {}).get(COMPLETE_ON_CONVERGENCE_DETECTED)
        not_improving = (config.get(BEST_OBJECTIVE_NOT_IMPROVING) or {}).get(
            MAX_NUMBER_OF_TRAINING_JOBS_NOT_IMPROVING
        )
        return cls(
            max_number_of_training_jobs_not_improving=not_improving,
            complete_on_convergence=None if converge is None else converge == "Enabled",
            target_objective_metric_value=config.get(TARGET_OBJECTIVE_METRIC_VALUE),
        )

    def to_input_req(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_number_of_training_jobs_not_improving is not None:
            out[BEST_OBJECTIVE_NOT_IMPROVING] = {
                MAX_NUMBER_OF_TRAINING_JOBS_NOT_IMPROVING: self.max_number_of_training_jobs_not_improving
            }
        if self.target_objective_metric_value is not None:
            out[TARGET_OBJECTIVE_METRIC_VALUE] = self.target_objective_metric_value
        if self.complete_on_convergence is not None:
            out[CONVERGENCE_DETECTED] = {
                COMPLETE_ON_CONVERGENCE_DETECTED: (
                    "Enabled" if self.complete_on_convergence else "Disabled"
                )
            }
        return out
