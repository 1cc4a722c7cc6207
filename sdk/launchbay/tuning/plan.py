"""The tuning plan: a tuning job resolved once, and the one request built from it.

:func:`build_plan` turns the tuner's settings and, per estimator, its resolved
CreateTrainingJob request (:class:`TrainingDefinition`) into a frozen
:class:`TuningPlan`; the plan's ``request`` is exactly what
``create_hyper_parameter_tuning_job`` takes (SDK v2's request for the same call).
Nothing here does I/O: the dry run, ``fit()`` on SageMaker and the local engine
all read the same plan.

Each ``TrainingJobDefinition`` is *derived* from the estimator's training request
(never rebuilt from the estimator's arguments), as SDK v2 derives it:
``StaticHyperParameters`` are the request's ``HyperParameters`` less the tuned
names (plus the estimator class metadata); role, channels, output, stopping
condition, VPC, checkpoints, retry strategy, environment and the network,
encryption and spot flags are the request's; ``HyperParameterTuningResourceConfig``
is the request's ``ResourceConfig`` without its training-only fields; the
``AlgorithmSpecification`` keeps the image and input mode and takes the tuner's
metric definitions. What a tuning job's definition has no field for (debugger,
profiler, TensorBoard, warm pools, experiment) is left out of it, as SDK v2 leaves
it; trials built locally keep the whole training request.

Trials (what the local engine runs, what SageMaker makes of the definition):

* name: ``<tuning job name>-<NNN>-<8 hex>``, the number from 1, three digits at
  least (SageMaker's: ``xgboost-190407-1532-005-0e830ada``): :meth:`TuningPlan.trial_name`;
* hyperparameters: the static ones, each tuned one as SageMaker passes it (a
  continuous value as Python's shortest float text, an integer in decimal, a
  categorical value exactly as listed in the request's ``Values``), and
  ``_tuning_objective_metric``, the objective's name (JSON text of it for
  framework estimators, whose hyperparameters are JSON): :meth:`TuningPlan.encode`
  and :meth:`TuningPlan.trial_request`.
"""

from __future__ import annotations

import copy
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.tuning.parameter import (
    CategoricalParameter,
    IntegerParameter,
    ParameterRange,
    ranges_request,
)

__all__ = [
    "TrainingDefinition",
    "TuningPlan",
    "build_plan",
    "build_request",
    "OBJECTIVE_HYPERPARAMETER",
    "STRATEGIES",
    "OBJECTIVE_TYPES",
    "EARLY_STOPPING_TYPES",
]

#: The hyperparameter SageMaker adds to every trial: the objective metric's name.
OBJECTIVE_HYPERPARAMETER = "_tuning_objective_metric"
STRATEGIES = ("Bayesian", "Random", "Hyperband", "Grid")
OBJECTIVE_TYPES = ("Maximize", "Minimize")
EARLY_STOPPING_TYPES = ("Off", "Auto")
#: Request fields copied from the training request into a TrainingJobDefinition as they are.
_COPIED = (
    "InputDataConfig",
    "VpcConfig",
    "CheckpointConfig",
    "RetryStrategy",
    "Environment",
)
#: Flags copied only when true (SDK v2 leaves them out otherwise).
_FLAGS = (
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
)
_RESOURCE_FIELDS = ("InstanceCount", "InstanceType", "VolumeSizeInGB", "VolumeKmsKeyId")


@dataclass(frozen=True)
class TrainingDefinition:
    """One estimator of a tuning job, resolved.

    Attributes:
        name: The ``DefinitionName`` (the key of ``create()``'s dicts), or ``None``
            for a tuner made with one estimator.
        training_request: The estimator's CreateTrainingJob request, made with the
            tuning job's name as its job name: the base of every trial.
        static_hyperparameters: Sent unchanged to every trial (strings).
        auto_parameters: With ``autotune``, the hyperparameters SageMaker may tune
            itself (name -> value hint), else ``None``.
        ranges: The tuned hyperparameters, in the order given (``None``: none given).
        objective_metric_name / objective_type: The objective.
        metric_definitions: ``[{"Name", "Regex"}]`` read from each trial's logs.
        json_values: A framework estimator: categorical values are JSON text, and so
            is ``_tuning_objective_metric``.
    """

    name: str | None
    training_request: Mapping[str, Any]
    static_hyperparameters: Mapping[str, str]
    auto_parameters: Mapping[str, str] | None
    ranges: Mapping[str, ParameterRange] | None
    objective_metric_name: str
    objective_type: str
    metric_definitions: tuple[Mapping[str, str], ...] | None
    json_values: bool

    def ranges_request(self) -> dict[str, Any] | None:
        """``ParameterRanges``/``HyperParameterRanges`` with ``AutoParameters`` (or ``None``)."""
        out = None if self.ranges is None else ranges_request(self.ranges, self.json_values)
        if self.auto_parameters is not None:
            out = {} if out is None else out
            out["AutoParameters"] = [
                {"Name": k, "ValueHint": v} for k, v in self.auto_parameters.items()
            ]
        return out

    def tuned_names(self) -> tuple[str, ...]:
        """What each trial gets a value for: the ranges, then the auto parameters."""
        return (*(self.ranges or {}), *(self.auto_parameters or {}))

    def wire(self, multi: bool) -> dict[str, Any]:
        """This definition as the request's ``TrainingJobDefinition(s)`` item."""
        request = self.training_request
        algorithm = request["AlgorithmSpecification"]
        spec: dict[str, Any] = {"TrainingInputMode": algorithm["TrainingInputMode"]}
        if self.metric_definitions is not None:
            spec["MetricDefinitions"] = [dict(m) for m in self.metric_definitions]
        spec["TrainingImage"] = algorithm["TrainingImage"]
        resource = request["ResourceConfig"]
        out: dict[str, Any] = {
            "StaticHyperParameters": dict(self.static_hyperparameters),
            "RoleArn": request["RoleArn"],
            "OutputDataConfig": copy.deepcopy(dict(request["OutputDataConfig"])),
            "StoppingCondition": copy.deepcopy(dict(request["StoppingCondition"])),
            "HyperParameterTuningResourceConfig": {
                k: resource[k] for k in _RESOURCE_FIELDS if k in resource
            },
            "AlgorithmSpecification": spec,
        }
        for key in _COPIED:
            if key in request:
                out[key] = copy.deepcopy(request[key])
        for key in _FLAGS:
            if request.get(key):
                out[key] = True
        if multi:
            out["DefinitionName"] = self.name
            out["TuningObjective"] = {
                "Type": self.objective_type,
                "MetricName": self.objective_metric_name,
            }
            ranges = self.ranges_request()
            if ranges is not None:
                out["HyperParameterRanges"] = ranges
        return out


@dataclass(frozen=True)
class TuningPlan:
    """A tuning job resolved once: its settings, its estimators and its request.

    ``definitions`` has one :class:`TrainingDefinition` (a tuner of one estimator,
    ``multi`` false) or one per ``create()`` estimator, sorted by name. ``local``:
    the estimators run on this machine (``local_process``/``local``/``local_gpu``).
    ``request`` is the CreateHyperParameterTuningJob request, exactly what
    ``fit()`` sends to SageMaker.
    """

    name: str
    strategy: str
    objective_type: str
    max_jobs: int | None
    max_parallel_jobs: int
    max_runtime_in_seconds: int | None
    early_stopping_type: str
    random_seed: int | None
    autotune: bool
    strategy_config: Mapping[str, Any] | None
    completion_criteria: Mapping[str, Any] | None
    warm_start_type: str | None
    warm_start_parents: tuple[str, ...]
    tags: tuple[Mapping[str, str], ...] | None
    definitions: tuple[TrainingDefinition, ...]
    multi: bool
    local: bool
    request: Mapping[str, Any] = field(repr=False, default_factory=dict)

    # -- what the local engine asks ---------------------------------------------------
    def definition(self, name: str | None = None) -> TrainingDefinition:
        """The definition called ``name`` (``None``: the only, or first, one)."""
        if name is None:
            return self.definitions[0]
        for item in self.definitions:
            if item.name == name:
                return item
        raise ConfigurationError.invalid(
            "definition", name, ", ".join(repr(d.name) for d in self.definitions)
        )

    def trial_name(self, number: int, token: str | None = None) -> str:
        """``<tuning job name>-<number, 3 digits>-<8 hex>`` (a random token unless given)."""
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ConfigurationError.invalid("number", number, "an integer 1 or more")
        token = secrets.token_hex(4) if token is None else token
        if len(token) != 8 or any(c not in "0123456789abcdef" for c in token):
            raise ConfigurationError.invalid("token", token, "8 lowercase hex digits")
        return f"{self.name}-{number:03d}-{token}"

    def encode(self, values: Mapping[str, Any], definition: str | None = None) -> dict[str, str]:
        """Chosen values (Python numbers or strings) as SageMaker passes them to a trial.

        Continuous: ``repr(float(v))``; integer: ``str(int(v))``; categorical: the
        value as listed in the request (``"adam"``, or ``'"adam"'`` for a framework
        estimator) whether given as listed or as the plain value. Auto parameters
        are taken as given (``str``).

        Raises:
            ConfigurationError: a name that is not tuned, a missing one, or a value
                outside its range.
        """
        item = self.definition(definition)
        names = item.tuned_names()
        unknown = sorted(set(values) - set(names))
        missing = [n for n in names if n not in values]
        if unknown or missing:
            raise ConfigurationError.invalid(
                "values",
                dict(values),
                f"a value for each tuned hyperparameter, exactly: {', '.join(names)}",
            )
        out: dict[str, str] = {}
        ranges = item.ranges or {}
        for name, value in values.items():
            parameter = ranges.get(name)
            if parameter is None:
                out[name] = str(value)
            elif isinstance(parameter, CategoricalParameter):
                listed = parameter.as_json_range(name) if item.json_values else None
                wire = listed["Values"] if listed else parameter.values
                if value in wire:
                    out[name] = str(value)
                elif str(value) in parameter.values:
                    out[name] = wire[parameter.values.index(str(value))]
                else:
                    raise ConfigurationError.invalid(f"values[{name!r}]", value, repr(wire))
            else:
                number = parameter.cast_to_type(value)
                if not parameter.is_valid(number):
                    raise ConfigurationError.invalid(
                        f"values[{name!r}]",
                        value,
                        f"{parameter.min_value} to {parameter.max_value}",
                    )
                out[name] = (
                    str(int(number))
                    if isinstance(parameter, IntegerParameter)
                    else repr(float(number))
                )
        return out

    def trial_request(
        self,
        values: Mapping[str, str],
        number: int,
        *,
        definition: str | None = None,
        token: str | None = None,
    ) -> dict[str, Any]:
        """The CreateTrainingJob request of one trial.

        ``values``: each tuned hyperparameter, already encoded (:meth:`encode`). The
        request is the definition's training request with the trial's name, the
        static hyperparameters, ``values`` and ``_tuning_objective_metric``, and the
        tuner's metric definitions.
        """
        item = self.definition(definition)
        if any(not isinstance(v, str) for v in values.values()):
            raise ConfigurationError.invalid(
                "values", dict(values), "strings, as TuningPlan.encode() makes them"
            )
        self.encode(values, definition)  # every tuned name, each in its range
        request = copy.deepcopy(dict(item.training_request))
        request["TrainingJobName"] = self.trial_name(number, token)
        hyperparameters = dict(item.static_hyperparameters)
        hyperparameters.update(values)
        metric = item.objective_metric_name
        hyperparameters[OBJECTIVE_HYPERPARAMETER] = (
            json.dumps(metric) if item.json_values else metric
        )
        request["HyperParameters"] = hyperparameters
        if item.metric_definitions is not None:
            request["AlgorithmSpecification"]["MetricDefinitions"] = [
                dict(m) for m in item.metric_definitions
            ]
        return request


def build_request(plan: TuningPlan) -> dict[str, Any]:
    """The CreateHyperParameterTuningJob request of ``plan`` (pure; SDK v2's shape)."""
    limits: dict[str, Any] = {"MaxParallelTrainingJobs": plan.max_parallel_jobs}
    if plan.max_jobs is not None:
        limits["MaxNumberOfTrainingJobs"] = plan.max_jobs
    if plan.max_runtime_in_seconds is not None:
        limits["MaxRuntimeInSeconds"] = plan.max_runtime_in_seconds
    config: dict[str, Any] = {
        "Strategy": plan.strategy,
        "ResourceLimits": limits,
        "TrainingJobEarlyStoppingType": plan.early_stopping_type,
    }
    if plan.random_seed is not None:
        config["RandomSeed"] = plan.random_seed
    if not plan.multi:
        only = plan.definitions[0]
        config["HyperParameterTuningJobObjective"] = {
            "Type": plan.objective_type,
            "MetricName": only.objective_metric_name,
        }
        ranges = only.ranges_request()
        if ranges is not None:
            config["ParameterRanges"] = ranges
    if plan.strategy_config is not None:
        config["StrategyConfig"] = copy.deepcopy(dict(plan.strategy_config))
    if plan.completion_criteria is not None:
        config["TuningJobCompletionCriteria"] = copy.deepcopy(dict(plan.completion_criteria))
    request: dict[str, Any] = {
        "HyperParameterTuningJobName": plan.name,
        "HyperParameterTuningJobConfig": config,
    }
    if plan.autotune:
        request["Autotune"] = {"Mode": "Enabled"}
    if plan.multi:
        request["TrainingJobDefinitions"] = [d.wire(multi=True) for d in plan.definitions]
    else:
        request["TrainingJobDefinition"] = plan.definitions[0].wire(multi=False)
    if plan.warm_start_type is not None:
        request["WarmStartConfig"] = {
            "WarmStartType": plan.warm_start_type,
            "ParentHyperParameterTuningJobs": [
                {"HyperParameterTuningJobName": p} for p in plan.warm_start_parents
            ],
        }
    if plan.tags is not None:
        request["Tags"] = [dict(t) for t in plan.tags]
    return request


def build_plan(
    *,
    name: str,
    definitions: Sequence[TrainingDefinition],
    multi: bool,
    local: bool,
    strategy: str,
    objective_type: str,
    max_jobs: int | None,
    max_parallel_jobs: int,
    max_runtime_in_seconds: int | None = None,
    early_stopping_type: str = "Off",
    random_seed: int | None = None,
    autotune: bool = False,
    strategy_config: Mapping[str, Any] | None = None,
    completion_criteria: Mapping[str, Any] | None = None,
    warm_start: Mapping[str, Any] | None = None,
    tags: Sequence[Mapping[str, str]] | None = None,
) -> TuningPlan:
    """The :class:`TuningPlan` of resolved settings (the one way a plan is made).

    ``warm_start`` is a request ``WarmStartConfig`` (``WarmStartConfig.to_input_req()``).
    """
    parents: tuple[str, ...] = ()
    if warm_start is not None:
        parents = tuple(
            p["HyperParameterTuningJobName"] for p in warm_start["ParentHyperParameterTuningJobs"]
        )
    plan = TuningPlan(
        name=name,
        strategy=strategy,
        objective_type=objective_type,
        max_jobs=max_jobs,
        max_parallel_jobs=max_parallel_jobs,
        max_runtime_in_seconds=max_runtime_in_seconds,
        early_stopping_type=early_stopping_type,
        random_seed=random_seed,
        autotune=autotune,
        strategy_config=strategy_config,
        completion_criteria=completion_criteria,
        warm_start_type=None if warm_start is None else warm_start["WarmStartType"],
        warm_start_parents=parents,
        tags=None if tags is None else tuple(dict(t) for t in tags),
        definitions=tuple(definitions),
        multi=multi,
        local=local,
    )
    object.__setattr__(plan, "request", build_request(plan))  # frozen: set once, here
    return plan
