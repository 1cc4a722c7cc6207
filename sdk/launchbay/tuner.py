"""Hyperparameter tuning with SDK v2's interface: ``from launchbay.tuner import HyperparameterTuner``.

:class:`HyperparameterTuner` takes SDK v2's arguments, checks them (each error
names the argument, the value and what is accepted), and resolves a tuning job
once into a :class:`~launchbay.tuning.plan.TuningPlan`: each estimator's own
CreateTrainingJob request (the estimator's one request builder, with the tuning
job's name as job name) is the base of its ``TrainingJobDefinition``. The plan's
request is what :meth:`~HyperparameterTuner.create_tuning_job_request` returns and
what ``fit()`` sends: SDK v2's CreateHyperParameterTuningJob request for the same
call, static hyperparameters and estimator class metadata included (the metadata
names SDK v2's classes, ``sagemaker.pytorch.estimator.PyTorch``, so that either
SDK attaches to the other's tuning jobs).

The tuner is a facade: each estimator offers its job through its public seam
(:meth:`~launchbay.estimator.EstimatorBase.prepare_job`: plan, backend, stage), the
tuner resolves them into the plan, and a tuning backend
(:mod:`launchbay.tuning.backends`) runs it: client-driven estimators
(``local_process``, ``local``, ``local_gpu``, ``ray``) tune under this process's
control loop (:func:`launchbay.tuning.engine.run_local`, the one hook; nothing goes
to SageMaker then), the others on SageMaker. docs/tuning.md has the whole story.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any

from launchbay._names import base_name_from_image
from launchbay.errors import ConfigurationError
from launchbay.estimator import EstimatorBase, Framework, PreparedJob
from launchbay.tuning.analytics import HyperparameterTuningJobAnalytics
from launchbay.tuning.attach import V2_CLASSES, estimator_from_definition
from launchbay.tuning.backends import find_tuning_job, tuning_backend_for, tuning_backend_of
from launchbay.tuning.configs import (
    HyperbandStrategyConfig,
    StrategyConfig,
    TuningJobCompletionCriteriaConfig,
    WarmStartConfig,
    WarmStartTypes,
)
from launchbay.tuning.parameter import (
    CategoricalParameter,
    ContinuousParameter,
    IntegerParameter,
    ParameterRange,
    check_ranges,
    ranges_from_request,
)
from launchbay.tuning.plan import (
    EARLY_STOPPING_TYPES,
    OBJECTIVE_TYPES,
    STRATEGIES,
    TrainingDefinition,
    TuningPlan,
    build_plan,
)
from launchbay.tuning.sagemaker import TuningJob
from launchbay.utils import name_from_base

__all__ = [
    "HyperparameterTuner",
    "HyperparameterTuningJobAnalytics",
    "ContinuousParameter",
    "IntegerParameter",
    "CategoricalParameter",
    "ParameterRange",
    "WarmStartConfig",
    "WarmStartTypes",
    "StrategyConfig",
    "HyperbandStrategyConfig",
    "TuningJobCompletionCriteriaConfig",
    "TuningJob",
    "TuningPlan",
    "create_identical_dataset_and_algorithm_tuner",
    "create_transfer_learning_tuner",
]

logger = logging.getLogger("launchbay.tuner")

TUNING_JOB_NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,31}$"
_TUNER_OPTIONS = (
    "metric_definitions", "strategy", "objective_type", "max_jobs", "max_parallel_jobs",
    "max_runtime_in_seconds", "tags", "base_tuning_job_name", "warm_start_config",
    "strategy_config", "completion_criteria_config", "early_stopping_type", "random_seed",
    "autotune",
)  # fmt: skip


def _check_type(argument: str, value: Any, kind: type | tuple[type, ...], accepted: str) -> None:
    if value is not None and not isinstance(value, kind):
        raise ConfigurationError.invalid(argument, value, accepted)


def _int(argument: str, value: Any, least: int) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or value < least
    ):
        raise ConfigurationError.invalid(argument, value, f"an integer {least} or more")


def _choice(argument: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigurationError.invalid(argument, value, ", ".join(repr(c) for c in choices))


def _metric_definitions(argument: str, value: Any) -> tuple[dict[str, str], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(
        isinstance(m, Mapping)
        and set(m) == {"Name", "Regex"}
        and all(isinstance(v, str) and v for v in m.values())
        for m in value
    ):
        raise ConfigurationError.invalid(
            argument, value, "a list of {'Name': <metric name>, 'Regex': <regex>} dicts"
        )
    from launchbay.metrics import warn_backtracking

    warn_backtracking(value, argument)
    return tuple(dict(m) for m in value)


def _tags(value: Any) -> list[dict[str, str]] | None:
    """SDK v2's ``format_tags``: a dict becomes ``[{"Key", "Value"}]``; a list is kept."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return [{"Key": str(k), "Value": str(v)} for k, v in value.items()]
    if isinstance(value, list) and all(isinstance(t, Mapping) and "Key" in t for t in value):
        return [dict(t) for t in value]
    raise ConfigurationError.invalid(
        "tags", value, "a dict of key to value, or a list of {'Key': ..., 'Value': ...} dicts"
    )


def _check_job_name(value: Any, argument: str = "job_name") -> str:
    import re

    if not isinstance(value, str) or not re.match(TUNING_JOB_NAME_PATTERN, value):
        raise ConfigurationError.invalid(
            argument,
            value,
            "1-32 characters: letters, digits and hyphens, starting with a letter or digit "
            "(SageMaker's limit for tuning job names)",
        )
    return value


class HyperparameterTuner:
    """A hyperparameter tuning job over one estimator (or several, with :meth:`create`).

    Takes SDK v2's arguments (``sagemaker.tuner.HyperparameterTuner``); see
    docs/tuning.md. ``max_jobs`` defaults to 1, except for ``strategy="Grid"``
    (every combination of the categorical ranges).

    Raises:
        ConfigurationError: an argument SDK v2 or SageMaker refuses, named with its
            value and what is accepted.
    """

    TUNING_JOB_NAME_MAX_LENGTH = 32
    SAGEMAKER_ESTIMATOR_MODULE = "sagemaker_estimator_module"
    SAGEMAKER_ESTIMATOR_CLASS_NAME = "sagemaker_estimator_class_name"
    DEFAULT_ESTIMATOR_MODULE = "sagemaker.estimator"
    DEFAULT_ESTIMATOR_CLS_NAME = "Estimator"

    def __init__(
        self,
        estimator: EstimatorBase,
        objective_metric_name: str,
        hyperparameter_ranges: Mapping[str, ParameterRange] | None,
        metric_definitions: list[dict[str, str]] | None = None,
        strategy: str = "Bayesian",
        objective_type: str = "Maximize",
        max_jobs: int | None = None,
        max_parallel_jobs: int = 1,
        max_runtime_in_seconds: int | None = None,
        tags: Any = None,
        base_tuning_job_name: str | None = None,
        warm_start_config: WarmStartConfig | None = None,
        strategy_config: StrategyConfig | None = None,
        completion_criteria_config: TuningJobCompletionCriteriaConfig | None = None,
        early_stopping_type: str = "Off",
        estimator_name: str | None = None,
        random_seed: int | None = None,
        autotune: bool = False,
        hyperparameters_to_keep_static: list[str] | None = None,
    ) -> None:
        if not isinstance(autotune, bool):
            raise ConfigurationError.invalid("autotune", autotune, "True or False")
        if not hyperparameter_ranges and not autotune:
            raise ConfigurationError.invalid(
                "hyperparameter_ranges",
                hyperparameter_ranges,
                "at least one range (ContinuousParameter, IntegerParameter or "
                "CategoricalParameter), or autotune=True",
            )
        self._check_keep_static(hyperparameters_to_keep_static, autotune)
        self._check_estimator("estimator", estimator)
        if not isinstance(objective_metric_name, str) or not 1 <= len(objective_metric_name) <= 255:
            raise ConfigurationError.invalid(
                "objective_metric_name", objective_metric_name, "a metric name (1-255 characters)"
            )
        ranges = None if hyperparameter_ranges is None else check_ranges(hyperparameter_ranges)
        metrics = _metric_definitions("metric_definitions", metric_definitions)
        if estimator_name is not None:
            _check_type("estimator_name", estimator_name, str, "a name (a string)")
            self.estimator: EstimatorBase | None = None
            self.objective_metric_name: str | None = None
            self._hyperparameter_ranges: dict[str, ParameterRange] | None = None
            self.metric_definitions: list[dict[str, str]] | None = None
            self.hyperparameters_to_keep_static: list[str] | None = None
            self.estimator_dict: dict[str, EstimatorBase] | None = {estimator_name: estimator}
            self.objective_metric_name_dict: dict[str, str] | None = {
                estimator_name: objective_metric_name
            }
            self._hyperparameter_ranges_dict: dict[str, Any] | None = {estimator_name: ranges}
            self.metric_definitions_dict: dict[str, Any] | None = (
                {estimator_name: list(metrics)} if metrics is not None else {}
            )
            self.hyperparameters_to_keep_static_dict: dict[str, Any] | None = {
                estimator_name: hyperparameters_to_keep_static
            }
        else:
            self.estimator = estimator
            self.objective_metric_name = objective_metric_name
            self._hyperparameter_ranges = ranges
            self.metric_definitions = None if metrics is None else list(metrics)
            self.hyperparameters_to_keep_static = hyperparameters_to_keep_static
            self.estimator_dict = None
            self.objective_metric_name_dict = None
            self._hyperparameter_ranges_dict = None
            self.metric_definitions_dict = None
            self.hyperparameters_to_keep_static_dict = None
        _choice("strategy", strategy, STRATEGIES)
        _choice("objective_type", objective_type, OBJECTIVE_TYPES)
        _choice("early_stopping_type", early_stopping_type, EARLY_STOPPING_TYPES)
        _int("max_jobs", max_jobs, 1)
        _int("max_parallel_jobs", max_parallel_jobs, 1)
        _int("max_runtime_in_seconds", max_runtime_in_seconds, 1)
        _int("random_seed", random_seed, 0)
        _check_type("warm_start_config", warm_start_config, WarmStartConfig, "a WarmStartConfig")
        _check_type("strategy_config", strategy_config, StrategyConfig, "a StrategyConfig")
        _check_type(
            "completion_criteria_config",
            completion_criteria_config,
            TuningJobCompletionCriteriaConfig,
            "a TuningJobCompletionCriteriaConfig",
        )
        if base_tuning_job_name is not None:
            _check_job_name(base_tuning_job_name, "base_tuning_job_name")
        if strategy_config is not None and strategy != "Hyperband":
            raise ConfigurationError.invalid(
                "strategy_config",
                strategy_config,
                "None unless strategy='Hyperband' (SageMaker refuses it with other strategies)",
            )
        if strategy == "Hyperband" and early_stopping_type != "Off":
            raise ConfigurationError.invalid(
                "early_stopping_type",
                early_stopping_type,
                "'Off' with strategy='Hyperband' (Hyperband stops trials itself; SageMaker "
                "refuses 'Auto' with it)",
            )
        if strategy == "Grid":
            numeric = [
                n for n, r in (ranges or {}).items() if not isinstance(r, CategoricalParameter)
            ]
            if numeric:
                raise ConfigurationError.invalid(
                    "hyperparameter_ranges",
                    {n: (ranges or {})[n] for n in numeric},
                    "only CategoricalParameter ranges with strategy='Grid' (SageMaker's grid "
                    "search takes every combination of categorical values)",
                )
        self.strategy = strategy
        self.strategy_config = strategy_config
        self.completion_criteria_config = completion_criteria_config
        self.objective_type = objective_type
        self.max_jobs = max_jobs if max_jobs is not None or strategy == "Grid" else 1
        self.max_parallel_jobs = max_parallel_jobs
        self.max_runtime_in_seconds = max_runtime_in_seconds
        self.tags = _tags(tags)
        self.base_tuning_job_name = base_tuning_job_name
        self.warm_start_config = warm_start_config
        self.early_stopping_type = early_stopping_type
        self.random_seed = random_seed
        self.autotune = autotune
        self._current_job_name: str | None = None
        self.latest_tuning_job: Any = None
        #: The static hyperparameters of the last request built (SDK v2 keeps them too).
        self.static_hyperparameters: dict[str, str] | None = None
        self.static_hyperparameters_dict: dict[str, dict[str, str]] | None = None

    # -- checks -------------------------------------------------------------------------
    @staticmethod
    def _check_estimator(argument: str, estimator: Any) -> None:
        if not isinstance(estimator, EstimatorBase):
            raise ConfigurationError.invalid(
                argument, estimator, "a launchbay estimator (PyTorch, TensorFlow, Estimator)"
            )
        if estimator.instance_groups:
            raise ConfigurationError.invalid(
                f"{argument}.instance_groups",
                estimator.instance_groups,
                "None: a tuning job's trials run on one instance_type and instance_count "
                "(SageMaker's HyperParameterTuningResourceConfig)",
            )

    @staticmethod
    def _check_keep_static(
        keep: Any, autotune: bool, argument: str = "hyperparameters_to_keep_static"
    ) -> None:
        if keep is None:
            return
        if not autotune:
            raise ConfigurationError.invalid(
                argument, keep, "None unless autotune=True (only autotune tunes the others)"
            )
        if not isinstance(keep, list | tuple) or not all(isinstance(k, str) for k in keep):
            raise ConfigurationError.invalid(argument, keep, "a list of hyperparameter names")
        if len(set(keep)) != len(keep):
            raise ConfigurationError.invalid(argument, keep, "names without duplicates")

    @staticmethod
    def _check_dict(name: str, value: Any, allowed: list[str], same: bool = False) -> None:
        if value is None:
            return
        if not isinstance(value, Mapping):
            raise ConfigurationError.invalid(name, value, f"a dict with keys among {allowed}")
        keys = sorted(value)
        if (same and keys != allowed) or not set(keys) <= set(allowed):
            accepted = f"exactly the keys {allowed}" if same else f"keys among {allowed}"
            raise ConfigurationError.invalid(name, value, f"a dict with {accepted}")

    # -- SDK v2's accessors ---------------------------------------------------------------
    def _estimators(self) -> list[tuple[str | None, EstimatorBase]]:
        if self.estimator is not None:
            return [(None, self.estimator)]
        assert self.estimator_dict is not None, "a tuner has an estimator or an estimator_dict"
        return [(n, self.estimator_dict[n]) for n in sorted(self.estimator_dict)]

    @property
    def sagemaker_session(self) -> Any:
        """The (first) estimator's session."""
        return self._estimators()[0][1].session

    def hyperparameter_ranges(self) -> dict[str, Any] | None:
        """The ranges as the request's ``ParameterRanges`` (one estimator)."""
        if self._hyperparameter_ranges is None or self.estimator is None:
            return None
        from launchbay.tuning.parameter import ranges_request

        return ranges_request(self._hyperparameter_ranges, isinstance(self.estimator, Framework))

    def hyperparameter_ranges_dict(self) -> dict[str, Any] | None:
        """Each estimator's ranges as its ``HyperParameterRanges`` (:meth:`create` tuners)."""
        if self._hyperparameter_ranges_dict is None or self.estimator_dict is None:
            return None
        from launchbay.tuning.parameter import ranges_request

        return {
            name: ranges_request(
                self._hyperparameter_ranges_dict[name] or {}, isinstance(e, Framework)
            )
            for name, e in sorted(self.estimator_dict.items())
        }

    # -- the plan and the request -----------------------------------------------------------
    def _static(
        self, estimator: EstimatorBase, request: Mapping[str, Any], ranges: Mapping[str, Any] | None,
        include_cls_metadata: bool, keep: list[str] | None, argument: str,
    ) -> tuple[dict[str, str], dict[str, str] | None]:  # fmt: skip
        static = {
            k: v
            for k, v in (request.get("HyperParameters") or {}).items()
            if k not in (ranges or {})
        }
        if include_cls_metadata or isinstance(estimator, Framework):
            ours = (type(estimator).__module__, type(estimator).__name__)
            module, name = V2_CLASSES.get(ours, ours)
            static[self.SAGEMAKER_ESTIMATOR_CLASS_NAME] = json.dumps(name)
            static[self.SAGEMAKER_ESTIMATOR_MODULE] = json.dumps(module)
        if not self.autotune:
            return static, None
        keep = list(keep or [])
        if not set(keep) <= set(static):
            raise ConfigurationError.invalid(
                argument, keep, f"names among the estimator's hyperparameters: {sorted(static)}"
            )
        return {k: v for k, v in static.items() if k in keep}, {
            k: v for k, v in static.items() if k not in keep
        }

    def _resolve(
        self, inputs: Any, job_name: str | None, include_cls_metadata: Any, estimator_kwargs: Any
    ) -> tuple[TuningPlan, list[PreparedJob]]:
        estimators = self._estimators()
        names = [n for n, _ in estimators if n is not None]
        if self.estimator_dict is not None:
            self._check_dict("inputs", inputs, names)
            self._check_dict("include_cls_metadata", include_cls_metadata, names)
            self._check_dict("estimator_kwargs", estimator_kwargs, names)
        elif not isinstance(include_cls_metadata, bool):
            raise ConfigurationError.invalid(
                "include_cls_metadata", include_cls_metadata, "True or False"
            )
        if job_name is not None:
            _check_job_name(job_name)
        placements = {e.placement.local for _, e in estimators}
        if len(placements) > 1:
            raise ConfigurationError.invalid(
                "estimator_dict",
                {n: e.instance_type for n, e in estimators},
                "estimators that all run on SageMaker or all on this machine",
            )
        definitions, staging = [], []
        for name, estimator in estimators:
            if name is None:
                ins, cls_meta = inputs, bool(include_cls_metadata)
                ranges, objective, metrics = (
                    self._hyperparameter_ranges, self.objective_metric_name, self.metric_definitions
                )  # fmt: skip
                keep, keep_arg = (
                    self.hyperparameters_to_keep_static,
                    "hyperparameters_to_keep_static",
                )
            else:
                assert (
                    self.objective_metric_name_dict is not None
                    and self.metric_definitions_dict is not None
                )
                ins = (inputs or {}).get(name)
                cls_meta = bool((include_cls_metadata or {}).get(name, False))
                ranges = (self._hyperparameter_ranges_dict or {})[name]
                objective = self.objective_metric_name_dict[name]
                metrics = self.metric_definitions_dict.get(name)
                keep = (self.hyperparameters_to_keep_static_dict or {}).get(name)
                keep_arg = f"hyperparameters_to_keep_static_dict[{name!r}]"
            if (estimator_kwargs or {}).get(name):
                raise ConfigurationError.invalid(
                    f"estimator_kwargs[{name!r}]", estimator_kwargs[name],
                    "{} (SDK v2 passes these only to Amazon algorithm estimators)",
                )  # fmt: skip
            prepared = estimator.prepare_job(ins, job_name)
            request = prepared.plan.request
            static, auto = self._static(estimator, request, ranges, cls_meta, keep, keep_arg)
            assert objective is not None, "checked at construction"
            definitions.append(
                TrainingDefinition(
                    name=name,
                    training_request=copy.deepcopy(dict(request)),
                    static_hyperparameters=static,
                    auto_parameters=auto,
                    ranges=None if ranges is None else dict(ranges),
                    objective_metric_name=objective,
                    objective_type=self.objective_type,
                    metric_definitions=None if metrics is None else tuple(dict(m) for m in metrics),
                    json_values=isinstance(estimator, Framework),
                )
            )
            staging.append(prepared)
        first = estimators[0][1]
        if job_name is None:
            base = self.base_tuning_job_name or base_name_from_image(first.training_image_uri())
            job_name = name_from_base(base, max_length=self.TUNING_JOB_NAME_MAX_LENGTH, short=True)
        tags = list(self.tags) if self.tags is not None else None
        for tag in staging[0].plan.request.get("Tags") or []:
            tags = [] if tags is None else tags
            if tag not in tags:
                tags.append(dict(tag))
        plan = build_plan(
            name=job_name, definitions=definitions, multi=self.estimator_dict is not None,
            local=placements == {True}, strategy=self.strategy, objective_type=self.objective_type,
            max_jobs=self.max_jobs, max_parallel_jobs=self.max_parallel_jobs,
            max_runtime_in_seconds=self.max_runtime_in_seconds,
            early_stopping_type=self.early_stopping_type, random_seed=self.random_seed,
            autotune=self.autotune,
            strategy_config=self.strategy_config.to_input_req() if self.strategy_config else None,
            completion_criteria=(
                self.completion_criteria_config.to_input_req()
                if self.completion_criteria_config is not None else None
            ),
            warm_start=self.warm_start_config.to_input_req() if self.warm_start_config else None,
            tags=tags,
        )  # fmt: skip
        if plan.multi:
            self.static_hyperparameters_dict = {
                str(d.name): dict(d.static_hyperparameters) for d in plan.definitions
            }
        else:
            self.static_hyperparameters = dict(plan.definitions[0].static_hyperparameters)
        return plan, staging

    def tuning_plan(
        self, inputs: Any = None, job_name: str | None = None,
        include_cls_metadata: Any = False, estimator_kwargs: Any = None,
    ) -> TuningPlan:  # fmt: skip
        """The tuning job resolved (what the local engine runs); uploads nothing."""
        return self._resolve(inputs, job_name, include_cls_metadata, estimator_kwargs)[0]

    def create_tuning_job_request(
        self, inputs: Any = None, job_name: str | None = None,
        include_cls_metadata: Any = False, estimator_kwargs: Any = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The exact CreateHyperParameterTuningJob request ``fit()`` would send; uploads nothing.

        Give ``job_name`` to compare two calls: without it, each call names the job anew.
        """
        plan = self.tuning_plan(inputs, job_name, include_cls_metadata, estimator_kwargs)
        return copy.deepcopy(dict(plan.request))

    # -- running ---------------------------------------------------------------------------
    def fit(
        self,
        inputs: Any = None,
        job_name: str | None = None,
        include_cls_metadata: Any = False,
        estimator_kwargs: dict[str, dict[str, Any]] | None = None,
        wait: bool = True,
        **kwargs: Any,
    ) -> None:
        """Stage the code and start the tuning job; with ``wait``, follow it to its end.

        The plan's tuning backend runs it (:func:`launchbay.tuning.backends.tuning_backend_for`):
        client-driven estimators through :func:`launchbay.tuning.engine.run_local`.

        Raises:
            ConfigurationError: as :meth:`create_tuning_job_request`.
            JobError: SageMaker refused the request.
            JobFailedError: with ``wait``, the tuning job failed.
        """
        if kwargs:
            raise ConfigurationError.invalid(
                "fit() keyword arguments", kwargs,
                "none beyond inputs, job_name, include_cls_metadata, estimator_kwargs and wait "
                "(SDK v2 passes the others only to Amazon algorithm estimators)",
            )  # fmt: skip
        plan, staging = self._resolve(inputs, job_name, include_cls_metadata, estimator_kwargs)

        def stage() -> None:
            for prepared in staging:
                prepared.stage()

        self._current_job_name = plan.name
        # kept before following it: a failed or interrupted job can be looked at
        backend = tuning_backend_for(plan)
        self.latest_tuning_job = backend.start(plan, stage=stage, session=staging[0].session)
        if wait:
            self.latest_tuning_job.wait()

    def _ensure_last_tuning_job(self) -> Any:
        if self.latest_tuning_job is None:
            raise ConfigurationError.invalid(
                "latest_tuning_job", None, "a tuning job started by fit() or attach() first"
            )
        return self.latest_tuning_job

    def wait(self) -> Any:
        """Follow the latest tuning job to its end (status, trials by state, best so far)."""
        return self._ensure_last_tuning_job().wait()

    def stop_tuning_job(self) -> None:
        """Stop the latest tuning job and its running trials."""
        self._ensure_last_tuning_job().stop()

    def describe(self) -> dict[str, Any]:
        """The latest tuning job's DescribeHyperParameterTuningJob response."""
        return dict(self._ensure_last_tuning_job().describe())

    def best_training_job(self) -> str:
        """The name of the latest tuning job's best trial.

        Raises:
            JobError: no trial has reported its objective yet.
        """
        return str(self._ensure_last_tuning_job().best_training_job()["TrainingJobName"])

    def best_estimator(self, best_training_job: Mapping[str, Any] | None = None) -> EstimatorBase:
        """The estimator attached to the best trial (``Estimator.attach``; a local trial: its record)."""
        job = self._ensure_last_tuning_job()
        best = best_training_job or job.best_training_job()
        if self.estimator is not None:
            estimator = self.estimator
        else:
            assert self.estimator_dict is not None
            estimator = self.estimator_dict[best["TrainingJobDefinitionName"]]
        return tuning_backend_of(job).best_estimator(
            job, type(estimator), best, estimator.sagemaker_session
        )

    def deploy(self, *args: Any, **kwargs: Any) -> Any:
        """SDK v2's ``deploy()``: the best trial's ``best_estimator().deploy(...)``.

        Handed over to SageMaker SDK v2 for a SageMaker tuning job; a local tuning job, or
        no SDK v2 installed, raises :class:`~launchbay.errors.HostingNotAvailableError`
        naming the best model's location (docs/compatibility.md, "After training").
        """
        return self.best_estimator().deploy(*args, **kwargs)

    def analytics(self) -> HyperparameterTuningJobAnalytics:
        """The latest tuning job's trials as a table (``.dataframe()``)."""
        job = self._ensure_last_tuning_job()
        return tuning_backend_of(job).analytics(job, lambda: self.sagemaker_session)

    # -- several estimators -------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        estimator_dict: Mapping[str, EstimatorBase],
        objective_metric_name_dict: Mapping[str, str],
        hyperparameter_ranges_dict: Mapping[str, Mapping[str, ParameterRange] | None],
        metric_definitions_dict: Mapping[str, list[dict[str, str]]] | None = None,
        base_tuning_job_name: str | None = None,
        strategy: str = "Bayesian",
        strategy_config: StrategyConfig | None = None,
        completion_criteria_config: TuningJobCompletionCriteriaConfig | None = None,
        objective_type: str = "Maximize",
        max_jobs: int | None = None,
        max_parallel_jobs: int = 1,
        max_runtime_in_seconds: int | None = None,
        tags: Any = None,
        warm_start_config: WarmStartConfig | None = None,
        early_stopping_type: str = "Off",
        random_seed: int | None = None,
        autotune: bool = False,
        hyperparameters_to_keep_static_dict: Mapping[str, list[str]] | None = None,
    ) -> HyperparameterTuner:
        """A tuner over several estimators, each a ``TrainingJobDefinition`` named by its key."""
        if not isinstance(estimator_dict, Mapping) or not estimator_dict:
            raise ConfigurationError.invalid(
                "estimator_dict", estimator_dict, "a dict of at least one name -> estimator"
            )
        if not all(isinstance(n, str) and n for n in estimator_dict):
            raise ConfigurationError.invalid(
                "estimator_dict", estimator_dict, "estimator names that are non-empty strings"
            )
        names = sorted(estimator_dict)
        cls._check_dict("objective_metric_name_dict", objective_metric_name_dict, names, same=True)
        cls._check_dict("hyperparameter_ranges_dict", hyperparameter_ranges_dict, names, same=True)
        cls._check_dict("metric_definitions_dict", metric_definitions_dict, names)
        cls._check_dict(
            "hyperparameters_to_keep_static_dict", hyperparameters_to_keep_static_dict, names
        )
        if objective_metric_name_dict is None or hyperparameter_ranges_dict is None:
            raise ConfigurationError.invalid(
                "objective_metric_name_dict/hyperparameter_ranges_dict", None,
                f"dicts with exactly the keys {names}",
            )  # fmt: skip
        first = names[0]
        keep = hyperparameters_to_keep_static_dict or {}
        metrics = metric_definitions_dict or {}
        tuner = cls(
            estimator=estimator_dict[first], objective_metric_name=objective_metric_name_dict[first],
            hyperparameter_ranges=hyperparameter_ranges_dict[first],
            metric_definitions=metrics.get(first), strategy=strategy,
            strategy_config=strategy_config, completion_criteria_config=completion_criteria_config,
            objective_type=objective_type, max_jobs=max_jobs, max_parallel_jobs=max_parallel_jobs,
            max_runtime_in_seconds=max_runtime_in_seconds, tags=tags,
            base_tuning_job_name=base_tuning_job_name, warm_start_config=warm_start_config,
            early_stopping_type=early_stopping_type, estimator_name=first, random_seed=random_seed,
            autotune=autotune, hyperparameters_to_keep_static=keep.get(first),
        )  # fmt: skip
        assert tuner.estimator_dict is not None and tuner.metric_definitions_dict is not None
        assert (
            tuner.objective_metric_name_dict is not None
            and tuner._hyperparameter_ranges_dict is not None
        )
        for name in names[1:]:
            estimator = estimator_dict[name]
            cls._check_estimator(f"estimator_dict[{name!r}]", estimator)
            objective = objective_metric_name_dict[name]
            if not isinstance(objective, str) or not objective:
                raise ConfigurationError.invalid(
                    f"objective_metric_name_dict[{name!r}]", objective, "a metric name"
                )
            ranges = hyperparameter_ranges_dict[name]
            if not ranges and not autotune:
                raise ConfigurationError.invalid(
                    f"hyperparameter_ranges_dict[{name!r}]",
                    ranges,
                    "at least one range, or autotune=True",
                )
            cls._check_keep_static(
                keep.get(name), autotune, f"hyperparameters_to_keep_static_dict[{name!r}]"
            )
            tuner.estimator_dict[name] = estimator
            tuner.objective_metric_name_dict[name] = objective
            tuner._hyperparameter_ranges_dict[name] = (
                None
                if ranges is None
                else check_ranges(ranges, f"hyperparameter_ranges_dict[{name!r}]")
            )
            defined = _metric_definitions(f"metric_definitions_dict[{name!r}]", metrics.get(name))
            if defined is not None:
                tuner.metric_definitions_dict[name] = list(defined)
            if keep.get(name) is not None:
                assert tuner.hyperparameters_to_keep_static_dict is not None
                tuner.hyperparameters_to_keep_static_dict[name] = keep[name]
        return tuner

    # -- attach and warm start ---------------------------------------------------------------
    @classmethod
    def attach(
        cls,
        tuning_job_name: str,
        sagemaker_session: Any = None,
        job_details: Mapping[str, Any] | None = None,
        estimator_cls: Any = None,
    ) -> HyperparameterTuner:
        """Rebuild a tuner from a tuning job's description (launchbay's or SDK v2's).

        Each estimator's class comes from ``estimator_cls`` (``"module.Class"``, or a
        dict by definition name), else from the class metadata in the static
        hyperparameters (SDK v2's class names map to launchbay's), else the generic
        :class:`~launchbay.estimator.Estimator`.
        """
        # a local tuning job of that name here (neither a session nor details given), else
        # SageMaker's; a local job's estimators keep no session and need no AWS region (none
        # may be configured), as local estimators made without one
        found = find_tuning_job(tuning_job_name, sagemaker_session, job_details)
        details, region, estimator_session = found.details, found.region, found.session
        config = details["HyperParameterTuningJobConfig"]
        limits = config.get("ResourceLimits") or {}
        params: dict[str, Any] = {
            "strategy": config["Strategy"],
            "max_jobs": limits.get("MaxNumberOfTrainingJobs"),
            "max_parallel_jobs": limits.get("MaxParallelTrainingJobs", 1),
            "max_runtime_in_seconds": limits.get("MaxRuntimeInSeconds"),
            "early_stopping_type": config.get("TrainingJobEarlyStoppingType", "Off"),
            "random_seed": config.get("RandomSeed"),
            "warm_start_config": WarmStartConfig.from_job_desc(details.get("WarmStartConfig")),
            "autotune": (details.get("Autotune") or {}).get("Mode") == "Enabled",
        }
        if config.get("StrategyConfig"):
            params["strategy_config"] = StrategyConfig.from_job_desc(config["StrategyConfig"])
        if config.get("TuningJobCompletionCriteria"):
            params["completion_criteria_config"] = TuningJobCompletionCriteriaConfig.from_job_desc(
                config["TuningJobCompletionCriteria"]
            )
        stamp = tuning_job_name.rsplit("-", 2)
        if len(stamp) == 3 and len(stamp[1]) == 6 and stamp[1].isdigit():
            params["base_tuning_job_name"] = stamp[0]
        if details.get("TrainingJobDefinition"):
            definition = details["TrainingJobDefinition"]
            objective = config.get("HyperParameterTuningJobObjective") or {}
            ranges = config.get("ParameterRanges") or {}
            estimator = estimator_from_definition(
                definition, estimator_cls, estimator_session, region, tuning_job_name
            )
            json_values = isinstance(estimator, Framework)
            tuner = cls(
                estimator=estimator,
                objective_metric_name=objective.get("MetricName", ""),
                objective_type=objective.get("Type", "Maximize"),
                hyperparameter_ranges=ranges_from_request(ranges, json_values) or None,
                metric_definitions=definition["AlgorithmSpecification"].get("MetricDefinitions"),
                **params,
            )
        else:
            definitions = details.get("TrainingJobDefinitions") or []
            names = sorted(d["DefinitionName"] for d in definitions)
            cls._check_dict("estimator_cls", estimator_cls, names)
            by_name = {d["DefinitionName"]: d for d in definitions}
            estimators = {
                n: estimator_from_definition(
                    by_name[n], (estimator_cls or {}).get(n), estimator_session, region,
                    tuning_job_name,
                )
                for n in names
            }  # fmt: skip
            tuner = cls.create(
                estimator_dict=estimators,
                objective_metric_name_dict={n: by_name[n]["TuningObjective"]["MetricName"] for n in names},
                hyperparameter_ranges_dict={
                    n: ranges_from_request(
                        by_name[n].get("HyperParameterRanges") or {},
                        isinstance(estimators[n], Framework),
                    )
                    or None
                    for n in names
                },
                metric_definitions_dict={
                    n: by_name[n]["AlgorithmSpecification"]["MetricDefinitions"]
                    for n in names
                    if by_name[n]["AlgorithmSpecification"].get("MetricDefinitions")
                },
                objective_type=by_name[names[0]]["TuningObjective"]["Type"],
                **params,
            )  # fmt: skip
        tuner.latest_tuning_job = found.job
        tuner._current_job_name = tuning_job_name
        return tuner

    def transfer_learning_tuner(
        self, additional_parents: Any = None, estimator: EstimatorBase | None = None
    ) -> HyperparameterTuner:
        """A new tuner like this one, warm-started (TransferLearning) from this tuning job."""
        return self._warm_start_tuner(
            additional_parents, WarmStartTypes.TRANSFER_LEARNING, estimator
        )

    def identical_dataset_and_algorithm_tuner(
        self, additional_parents: Any = None
    ) -> HyperparameterTuner:
        """A new tuner like this one, warm-started (IdenticalDataAndAlgorithm) from this tuning job."""
        return self._warm_start_tuner(
            additional_parents, WarmStartTypes.IDENTICAL_DATA_AND_ALGORITHM
        )

    def _warm_start_tuner(
        self,
        additional_parents: Any,
        warm_start_type: WarmStartTypes,
        estimator: EstimatorBase | None = None,
    ) -> HyperparameterTuner:
        parents = {self._ensure_last_tuning_job().name, *(additional_parents or ())}
        common: dict[str, Any] = {
            "strategy": self.strategy, "strategy_config": self.strategy_config,
            "completion_criteria_config": self.completion_criteria_config,
            "objective_type": self.objective_type, "max_jobs": self.max_jobs,
            "max_parallel_jobs": self.max_parallel_jobs,
            "max_runtime_in_seconds": self.max_runtime_in_seconds,
            "warm_start_config": WarmStartConfig(warm_start_type, parents),
            "early_stopping_type": self.early_stopping_type, "random_seed": self.random_seed,
        }  # fmt: skip
        if self.estimator is not None:
            assert self.objective_metric_name is not None
            return HyperparameterTuner(
                estimator=estimator or self.estimator,
                objective_metric_name=self.objective_metric_name,
                hyperparameter_ranges=self._hyperparameter_ranges,
                metric_definitions=self.metric_definitions,
                **common,
            )
        assert self.estimator_dict is not None and self.objective_metric_name_dict is not None
        assert self._hyperparameter_ranges_dict is not None
        if len(self.estimator_dict) > 1:
            raise ConfigurationError.invalid(
                "estimator_dict", sorted(self.estimator_dict),
                "one estimator: warm start is not supported for tuners of several estimators",
            )  # fmt: skip
        name = next(iter(self.estimator_dict))
        return HyperparameterTuner.create(
            estimator_dict={name: estimator or self.estimator_dict[name]},
            objective_metric_name_dict=self.objective_metric_name_dict,
            hyperparameter_ranges_dict=self._hyperparameter_ranges_dict,
            metric_definitions_dict=self.metric_definitions_dict,
            **common,
        )


def create_identical_dataset_and_algorithm_tuner(
    parent: str, additional_parents: Any = None, sagemaker_session: Any = None
) -> HyperparameterTuner:
    """Attach to ``parent`` and warm-start a new tuner from it (IdenticalDataAndAlgorithm)."""
    tuner = HyperparameterTuner.attach(parent, sagemaker_session=sagemaker_session)
    return tuner.identical_dataset_and_algorithm_tuner(additional_parents=additional_parents)


def create_transfer_learning_tuner(
    parent: str, additional_parents: Any = None, estimator: EstimatorBase | None = None,
    sagemaker_session: Any = None,
) -> HyperparameterTuner:  # fmt: skip
    """Attach to ``parent`` and warm-start a new tuner from it (TransferLearning)."""
    tuner = HyperparameterTuner.attach(parent, sagemaker_session=sagemaker_session)
    return tuner.transfer_learning_tuner(additional_parents=additional_parents, estimator=estimator)
