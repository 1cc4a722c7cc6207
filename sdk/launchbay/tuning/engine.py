"""THE LOCAL TUNING HOOK: where a tuning job of local estimators runs.

``HyperparameterTuner.fit()`` on client-driven estimators (``local_process``,
``local``, ``local_gpu``, ``ray``) sends nothing to SageMaker: its tuning backend
(:class:`launchbay.tuning.backends.LocalTuning`) calls :func:`run_local` with the
:class:`~launchbay.tuning.plan.TuningPlan` and nothing else. The local engine,
:mod:`launchbay.tuning.local`, runs it (docs/tuning.md, "Locally").
:class:`LocalTuningNotAvailable` is kept for callers that catch it.

What the engine gets (see docs/tuning.md, "Interface for the local engine"):

* ``plan``: every resolved setting (ranges with scaling, objective, metric
  definitions, strategy and its config, limits, early stopping, completion
  criteria, warm start parents, static hyperparameters, random seed), and
  ``plan.trial_request(plan.encode(values), number)``: the CreateTrainingJob
  request of one trial, to run with :func:`launchbay.backends.plan.plan_request`
  and :func:`launchbay.backends.backend_for_plan` as ``Estimator.fit()`` does.
* ``stage``: stores the estimators' code where the trial requests point
  (``file://``); call it once before the first trial.
* ``session``: the estimators' session (``None`` for a purely local job).
* ``wait``: follow the tuning job to its end (``fit(wait=True)``) or return at once.

It returns the tuning job's handle, kept as ``tuner.latest_tuning_job``: an
object with ``name``, ``describe()`` (DescribeHyperParameterTuningJob's shape),
``wait()``, ``stop()``, ``training_jobs()`` (TrainingJobSummary dicts) and
``best_training_job()``, as :class:`launchbay.tuning.sagemaker.TuningJob` has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launchbay.errors import LaunchbayError
from launchbay.tuning.plan import TuningPlan

__all__ = ["LocalTuningNotAvailable", "run_local"]


class LocalTuningNotAvailable(LaunchbayError, NotImplementedError):
    """Local tuning is not built yet: the tuning job's estimators are local."""


def run_local(plan: TuningPlan, *, stage: Callable[[], None], session: Any, wait: bool) -> Any:
    """Run ``plan``'s trials on this machine (:mod:`launchbay.tuning.local`); return the handle.

    Raises:
        JobError: a local tuning job of that name exists already, or a warm start
            parent is not a local tuning job here.
        JobFailedError: with ``wait``, the tuning job ended Failed.
    """
    from launchbay.tuning import local  # the local wing, imported when a local job tunes

    return local.start(plan, stage=stage, session=session, wait=wait)
