"""When the local tuner stops a running trial early, or the whole search.

The rules are pure functions; the stoppers are small objects over them, chosen by
the plan (:func:`make_stopper`), as Optuna's ``Pruner`` and Ray Tune's
``TrialScheduler`` and ``Stopper`` are. A :class:`Stopper` answers two questions:
:meth:`Stopper.stops_trial` (after each new step of a running trial) and
:meth:`Stopper.stops_search` (before each new trial), and learns each trial's end
through :meth:`Stopper.trial_ended`. :class:`MedianRule` and :class:`HyperbandRungs`
stop trials, :class:`CompletionCriteria` ends the search; :class:`Stoppers` asks
each of several.

A trial's *steps* are the values of its objective metric in the order it logged
them: step N is the Nth value (one per epoch for a script that reports its
objective each epoch, as SageMaker's early stopping and Hyperband expect).

**Median stopping rule** (``early_stopping_type="Auto"``, SageMaker's documented
rule): after each step N of a running trial, take for each earlier trial that has
ended and reached step N the running average of its objective over steps 1..N,
and the median of those running averages. The running trial is stopped when its
value at step N is worse than that median (higher when minimizing, lower when
maximizing). With no earlier trial at step N nothing is stopped.

**Hyperband** (``strategy="Hyperband"``): rungs at ``MinResource x 3^k`` steps up
to ``MaxResource`` (:func:`rungs`), asynchronous successive halving: a trial that
reaches a rung is stopped unless its value there is in the best third of the
values every trial reached at that rung (once at least 3 did); any trial is
stopped at ``MaxResource`` steps, its budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from launchbay.tuning.plan import TuningPlan

__all__ = [
    "running_average",
    "median_rule_stops",
    "rungs",
    "hyperband_stops",
    "ETA",
    "better",
    "Stopper",
    "MedianRule",
    "HyperbandRungs",
    "CompletionCriteria",
    "Stoppers",
    "make_stopper",
    "CONVERGENCE_WINDOW",
    "CONVERGENCE_TOLERANCE",
]

#: Hyperband's reduction factor (SageMaker's and the Hyperband paper's usual 3).
ETA = 3
#: Convergence (``CompleteOnConvergence``): this many trials in a row (at least; twice
#: ``max_parallel_jobs`` when larger) that improve the best by less than CONVERGENCE_TOLERANCE.
CONVERGENCE_WINDOW = 5
CONVERGENCE_TOLERANCE = 1e-4


def better(a: float, b: float, objective_type: str) -> bool:
    """Whether ``a`` is strictly better than ``b`` for ``objective_type``."""
    return a > b if objective_type == "Maximize" else a < b


def running_average(values: Sequence[float], step: int) -> float:
    """The mean of the first ``step`` values."""
    return sum(values[:step]) / step


def median_rule_stops(
    current: Sequence[float], finished: Sequence[Sequence[float]], objective_type: str
) -> bool:
    """Whether the running trial with objective steps ``current`` is stopped now.

    ``finished``: the objective steps of the trials that have ended. The rule is
    applied at the trial's latest step.
    """
    step = len(current)
    if step == 0:
        return False
    averages = [running_average(f, step) for f in finished if len(f) >= step]
    if not averages:
        return False
    median = statistics.median(averages)
    return better(median, current[-1], objective_type)


def rungs(min_resource: int, max_resource: int, eta: int = ETA) -> list[int]:
    """The steps at which Hyperband compares trials: ``min x eta^k`` below ``max``."""
    out, step = [], max(1, min_resource)
    while step < max_resource:
        out.append(step)
        step *= eta
    return out


def hyperband_stops(
    current: Sequence[float],
    others: Sequence[Sequence[float]],
    objective_type: str,
    min_resource: int,
    max_resource: int,
    eta: int = ETA,
) -> bool:
    """Whether Hyperband stops the trial with objective steps ``current`` now.

    ``others``: the steps of every other trial (running or ended). At ``max_resource``
    steps the trial has used its budget; at a rung it goes on only while its value
    there ranks in the best ``1/eta`` of the values every trial reached there.
    """
    step = len(current)
    if step >= max_resource:
        return True
    if step not in rungs(min_resource, max_resource, eta):
        return False
    at_rung = [o[step - 1] for o in others if len(o) >= step] + [current[step - 1]]
    if len(at_rung) < eta:
        return False
    ranked = sorted(at_rung, reverse=objective_type == "Maximize")
    keep = max(1, len(at_rung) // eta)
    cutoff = ranked[keep - 1]
    return better(cutoff, current[step - 1], objective_type)


# -- the stoppers ----------------------------------------------------------------------------
class Stopper:
    """The interface: whether a running trial stops now, and whether the search ends.

    ``ended`` and ``running`` are the objective steps of the *other* trials (those that
    have ended, those still running). The base stops nothing.
    """

    #: Whether :meth:`stops_trial` may ever say yes (the engine reads no steps otherwise).
    watches_trials = False

    def stops_trial(
        self,
        steps: Sequence[float],
        ended: Sequence[Sequence[float]],
        running: Sequence[Sequence[float]],
    ) -> bool:
        """Whether the running trial with objective steps ``steps`` is stopped now."""
        return False

    def trial_ended(self, value: float | None, previous_best: float | None) -> None:
        """A trial ended with final objective ``value`` (``None``: none); ``previous_best``:
        the best of the other ended trials before it."""

    def stops_search(self, best: float | None) -> str | None:
        """Why no new trial starts (``best``: the best objective so far), or ``None``."""
        return None


class MedianRule(Stopper):
    """``early_stopping_type="Auto"``: :func:`median_rule_stops` over the ended trials."""

    watches_trials = True

    def __init__(self, objective_type: str) -> None:
        self.objective_type = objective_type

    def stops_trial(
        self,
        steps: Sequence[float],
        ended: Sequence[Sequence[float]],
        running: Sequence[Sequence[float]],
    ) -> bool:
        return median_rule_stops(steps, [e for e in ended if e], self.objective_type)


class HyperbandRungs(Stopper):
    """``strategy="Hyperband"``: :func:`hyperband_stops` against every other trial."""

    watches_trials = True

    def __init__(self, objective_type: str, min_resource: int, max_resource: int) -> None:
        self.objective_type = objective_type
        self.min_resource = min_resource
        self.max_resource = max_resource

    def stops_trial(
        self,
        steps: Sequence[float],
        ended: Sequence[Sequence[float]],
        running: Sequence[Sequence[float]],
    ) -> bool:
        return hyperband_stops(
            steps, [*ended, *running], self.objective_type, self.min_resource, self.max_resource
        )


class CompletionCriteria(Stopper):
    """``TuningJobCompletionCriteria``: a target reached, no improvement, or convergence."""

    def __init__(self, criteria: Mapping[str, Any], objective_type: str, parallel: int) -> None:
        self.objective_type = objective_type
        self.target = criteria.get("TargetObjectiveMetricValue")
        self.patience = (criteria.get("BestObjectiveNotImproving") or {}).get(
            "MaxNumberOfTrainingJobsNotImproving"
        )
        convergence = (criteria.get("ConvergenceDetected") or {}).get("CompleteOnConvergence")
        self.convergence = convergence == "Enabled"
        self.window = max(CONVERGENCE_WINDOW, 2 * parallel)
        #: Trials in a row that did not improve the best; trials in a row without a gain.
        self.not_improving = 0
        self.no_gain = 0

    def trial_ended(self, value: float | None, previous_best: float | None) -> None:
        if value is None:
            return
        if previous_best is None or better(value, previous_best, self.objective_type):
            gain = None if previous_best is None else abs(value - previous_best)
            scale = max(abs(previous_best), 1e-12) if previous_best is not None else 1.0
            self.not_improving = 0
            small = gain is not None and gain <= CONVERGENCE_TOLERANCE * scale
            self.no_gain = self.no_gain + 1 if small else 0
        else:
            self.not_improving += 1
            self.no_gain += 1

    def stops_search(self, best: float | None) -> str | None:
        if self.target is not None and best is not None:
            if not better(float(self.target), best, self.objective_type):
                return f"TargetObjectiveMetricValue {self.target} reached"
        if self.patience and self.not_improving >= int(self.patience):
            return f"{self.patience} training jobs in a row did not improve the best"
        if self.convergence and self.no_gain >= self.window:
            return f"converged ({self.window} trials without a gain)"
        return None


class Stoppers(Stopper):
    """Several stoppers: a trial or the search stops when the first of them says so."""

    def __init__(self, stoppers: Sequence[Stopper]) -> None:
        self.stoppers = list(stoppers)
        self.watches_trials = any(s.watches_trials for s in self.stoppers)

    def stops_trial(
        self,
        steps: Sequence[float],
        ended: Sequence[Sequence[float]],
        running: Sequence[Sequence[float]],
    ) -> bool:
        return any(s.stops_trial(steps, ended, running) for s in self.stoppers)

    def trial_ended(self, value: float | None, previous_best: float | None) -> None:
        for stopper in self.stoppers:
            stopper.trial_ended(value, previous_best)

    def stops_search(self, best: float | None) -> str | None:
        for stopper in self.stoppers:
            reason = stopper.stops_search(best)
            if reason is not None:
                return reason
        return None


def make_stopper(plan: TuningPlan) -> Stoppers:
    """The plan's stoppers: Hyperband's rungs or the median rule, and its completion criteria."""
    stoppers: list[Stopper] = []
    if plan.strategy == "Hyperband":
        config = (plan.strategy_config or {}).get("HyperbandStrategyConfig") or {}
        stoppers.append(
            HyperbandRungs(
                plan.objective_type,
                int(config.get("MinResource") or 1),
                int(config.get("MaxResource") or 10**9),
            )
        )
    elif plan.early_stopping_type == "Auto":
        stoppers.append(MedianRule(plan.objective_type))
    stoppers.append(
        CompletionCriteria(
            plan.completion_criteria or {}, plan.objective_type, plan.max_parallel_jobs
        )
    )
    return Stoppers(stoppers)
