"""When the local tuner stops a running trial early (pure functions).

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
from collections.abc import Sequence

__all__ = ["running_average", "median_rule_stops", "rungs", "hyperband_stops", "ETA", "better"]

#: Hyperband's reduction factor (SageMaker's and the Hyperband paper's usual 3).
ETA = 3


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
