"""The local tuner's search strategies: which hyperparameter values the next trial gets.

:class:`Searcher` is the interface (as Optuna's ``Sampler`` and Ray Tune's ``Searcher``
are small objects chosen by configuration): :meth:`Searcher.ask` answers
``(definition name, values, key)`` (plain Python values, encoded by
``TuningPlan.encode``) or ``None`` when it has nothing more to try, and
:meth:`Searcher.tell` learns each trial's final objective with that key (``None``:
the trial failed or logged no objective). :func:`make_searcher` picks the strategy
of ``plan.strategy`` (:data:`SEARCHERS`); when a running trial stops is not the
searcher's business but the stoppers' (:mod:`launchbay.tuning.stopping`).

* :class:`RandomSearcher`: each value drawn independently within its range, on its
  scale (:func:`sample`); seeded by ``random_seed``.
* :class:`GridSearcher`: every combination of the categorical values, in the order
  the ranges and values are listed (:func:`grid`); SageMaker's grid takes categorical
  ranges only.
* :class:`BayesianSearcher`: Optuna's TPE sampler (``pip install 'launchbay[tuning]'``),
  one study per training definition, seeded by ``random_seed``; warm start parents'
  trials are added to the study before the first ask.
* :class:`HyperbandSearcher`: values drawn as ``Random``; the Hyperband rungs
  (:class:`launchbay.tuning.stopping.HyperbandRungs`) stop trials.

Scaling types: ``Linear`` (and ``Auto``) uniform; ``Logarithmic`` uniform in
``log(x)``; ``ReverseLogarithmic`` uniform in ``log(1 - x)`` (dense near 1).
Integers are drawn on the same scale and rounded into the range.
"""

from __future__ import annotations

import abc
import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from launchbay.errors import MissingDependencyError
from launchbay.tuning.parameter import CategoricalParameter, IntegerParameter, ParameterRange
from launchbay.tuning.plan import TuningPlan

__all__ = [
    "Searcher",
    "RandomSearcher",
    "GridSearcher",
    "BayesianSearcher",
    "HyperbandSearcher",
    "SEARCHERS",
    "Suggestion",
    "make_searcher",
    "sample",
    "grid",
    "scale",
    "unscale",
]

#: What :meth:`Searcher.ask` answers: ``(definition name, values, key for tell())``.
Suggestion = tuple[str | None, dict[str, Any], Any]


def scale(parameter: ParameterRange, value: float) -> float:
    """``value`` on the parameter's search scale (what is drawn uniformly)."""
    kind = parameter.scaling_type
    if kind == "Logarithmic":
        return math.log(value)
    if kind == "ReverseLogarithmic":
        return math.log(1.0 - value)
    return float(value)


def unscale(parameter: ParameterRange, point: float) -> float:
    """The value at ``point`` of the parameter's search scale (inverse of :func:`scale`)."""
    kind = parameter.scaling_type
    if kind == "Logarithmic":
        return math.exp(point)
    if kind == "ReverseLogarithmic":
        return 1.0 - math.exp(point)
    return point


def sample(parameter: ParameterRange, rng: random.Random) -> Any:
    """One value of ``parameter`` drawn uniformly on its scale."""
    if isinstance(parameter, CategoricalParameter):
        return rng.choice(parameter.values)
    low, high = scale(parameter, parameter.min_value), scale(parameter, parameter.max_value)
    if low > high:  # ReverseLogarithmic: log(1 - x) falls as x grows
        low, high = high, low
    if isinstance(parameter, IntegerParameter):  # each integer gets its share of the scale
        low = scale(parameter, parameter.min_value - 0.5)
        high = scale(parameter, parameter.max_value + 0.5)
        drawn = round(unscale(parameter, rng.uniform(low, high)))
        return min(max(int(drawn), parameter.min_value), parameter.max_value)
    value = unscale(parameter, rng.uniform(low, high))
    return min(max(value, parameter.min_value), parameter.max_value)


def grid(ranges: Mapping[str, ParameterRange]) -> Iterator[dict[str, str]]:
    """Every combination of the categorical values, the first range varying slowest."""
    names = list(ranges)
    values = [ranges[n].values for n in names]  # type: ignore[attr-defined]  # Grid: categorical only
    for combination in itertools.product(*values):
        yield dict(zip(names, combination, strict=True))


class Searcher(abc.ABC):
    """The interface of a search strategy: :meth:`ask` for a trial's values, :meth:`tell` its result.

    ``history``: warm start trials (``definition``, ``values``, ``value``) a strategy
    may learn from before its first ask. Definitions take turns, one trial each.
    """

    def __init__(self, plan: TuningPlan, history: Sequence[Mapping[str, Any]] = ()) -> None:
        self.plan = plan
        self.turn = itertools.cycle([d.name for d in plan.definitions])
        self.history = list(history)

    def ranges(self, definition: str | None) -> Mapping[str, ParameterRange]:
        """The ranges the definition tunes."""
        return self.plan.definition(definition).ranges or {}

    def auto(self, definition: str | None) -> dict[str, str]:
        """The definition's autotuned values (``autotune=True``), given to every trial."""
        return dict(self.plan.definition(definition).auto_parameters or {})

    @abc.abstractmethod
    def ask(self) -> Suggestion | None:
        """``(definition name, values, key)`` of the next trial, or ``None``: nothing left."""

    def tell(self, key: Any, value: float | None) -> None:  # noqa: B027  # learning is optional
        """The final objective of the trial :meth:`ask` gave ``key`` (``None``: none)."""


class RandomSearcher(Searcher):
    """Random search over every definition in turn."""

    def __init__(self, plan: TuningPlan, history: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(plan, history)
        self.rng = random.Random(plan.random_seed)

    def ask(self) -> Suggestion | None:
        definition = next(self.turn)
        values = {n: sample(p, self.rng) for n, p in self.ranges(definition).items()}
        values.update(self.auto(definition))
        return definition, values, None


class HyperbandSearcher(RandomSearcher):
    """Hyperband's draws: random values; its rungs stop trials (``stopping.HyperbandRungs``)."""


class GridSearcher(Searcher):
    """Every combination of each definition's categorical values, then nothing more."""

    def __init__(self, plan: TuningPlan, history: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(plan, history)
        self.points = iter(
            [(d.name, values) for d in plan.definitions for values in grid(d.ranges or {})]
        )

    def ask(self) -> Suggestion | None:
        found = next(self.points, None)
        if found is None:
            return None
        definition, values = found
        values = dict(values)
        values.update(self.auto(definition))
        return definition, values, None


class BayesianSearcher(Searcher):
    """Optuna's TPE, one study per definition; ``key`` of a trial is its Optuna trial."""

    def __init__(self, plan: TuningPlan, history: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(plan, history)
        try:
            import optuna  # the 'tuning' extra, imported only for a Bayesian search
        except ImportError as exc:
            raise MissingDependencyError.for_module(
                "optuna", "tuning", "strategy='Bayesian' on local estimators"
            ) from exc
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        direction = (
            optuna.study.StudyDirection.MAXIMIZE
            if plan.objective_type == "Maximize"
            else optuna.study.StudyDirection.MINIMIZE
        )
        self.studies: dict[str | None, Any] = {}
        self.distributions: dict[str | None, dict[str, Any]] = {}
        for index, item in enumerate(plan.definitions):
            seed = None if plan.random_seed is None else plan.random_seed + index
            sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=_startup(plan))
            self.studies[item.name] = optuna.create_study(direction=direction, sampler=sampler)
            self.distributions[item.name] = {
                n: self._distribution(p) for n, p in (item.ranges or {}).items()
            }
        for old in self.history:  # warm start: the parents' trials seen first
            self._add_known(old)

    def _distribution(self, parameter: ParameterRange) -> Any:
        dist = self.optuna.distributions
        if isinstance(parameter, CategoricalParameter):
            return dist.CategoricalDistribution(list(parameter.values))
        log = parameter.scaling_type == "Logarithmic"
        if parameter.scaling_type == "ReverseLogarithmic":  # searched as 1 - x on a log scale
            return dist.FloatDistribution(
                1.0 - parameter.max_value, 1.0 - parameter.min_value, log=True
            )
        if isinstance(parameter, IntegerParameter):
            return dist.IntDistribution(parameter.min_value, parameter.max_value, log=log)
        return dist.FloatDistribution(parameter.min_value, parameter.max_value, log=log)

    def _add_known(self, old: Mapping[str, Any]) -> None:
        definition = old.get("definition")
        if definition not in self.studies or old.get("value") is None:
            return
        ranges = self.ranges(definition)
        params: dict[str, Any] = {}
        distributions = self.distributions[definition]
        for name, parameter in ranges.items():
            raw = (old.get("values") or {}).get(name)
            if raw is None:
                return  # another search space: not comparable
            try:
                value = _decode(parameter, raw)
                if getattr(parameter, "scaling_type", None) == "ReverseLogarithmic":
                    value = 1.0 - value
                if not distributions[name]._contains(distributions[name].to_internal_repr(value)):
                    return
            except (TypeError, ValueError):
                return
            params[name] = value
        trial = self.optuna.trial.create_trial(
            params=params, distributions=distributions, value=float(old["value"])
        )
        self.studies[definition].add_trial(trial)

    def ask(self) -> Suggestion | None:
        definition = next(self.turn)
        trial = self.studies[definition].ask(self.distributions[definition])
        values: dict[str, Any] = {}
        for name, parameter in self.ranges(definition).items():
            value = trial.params[name]
            if getattr(parameter, "scaling_type", None) == "ReverseLogarithmic":
                value = min(max(1.0 - value, parameter.min_value), parameter.max_value)
            values[name] = value
        values.update(self.auto(definition))
        return definition, values, (definition, trial)

    def tell(self, key: Any, value: float | None) -> None:
        definition, trial = key
        state = self.optuna.trial.TrialState
        if value is None:
            self.studies[definition].tell(trial, state=state.FAIL)
        else:
            self.studies[definition].tell(trial, value)


def _startup(plan: TuningPlan) -> int:
    """Random trials before TPE models the results: Optuna's 10, fewer for small searches."""
    if plan.max_jobs is None:
        return 10
    return max(2, min(10, plan.max_jobs // 3))


def _decode(parameter: ParameterRange, raw: str) -> Any:
    """A value as SageMaker passed it (a string, JSON text for frameworks) as Python."""
    if isinstance(parameter, CategoricalParameter):
        if raw in parameter.values:
            return raw
        import json

        decoded = json.loads(raw)
        if decoded not in parameter.values:
            raise ValueError(raw)
        return decoded
    return parameter.cast_to_type(raw)


#: Each strategy's searcher, by ``plan.strategy``.
SEARCHERS: dict[str, type[Searcher]] = {
    "Random": RandomSearcher,
    "Grid": GridSearcher,
    "Bayesian": BayesianSearcher,
    "Hyperband": HyperbandSearcher,
}


def make_searcher(plan: TuningPlan, history: Sequence[Mapping[str, Any]] = ()) -> Searcher:
    """The searcher of ``plan.strategy``; ``history``: warm start trials (``definition``, ``values``, ``value``)."""
    return SEARCHERS.get(plan.strategy, RandomSearcher)(plan, history)
