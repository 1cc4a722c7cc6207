"""Where a tuning job runs: the tuning backends behind :class:`~launchbay.tuner.HyperparameterTuner`.

Training has one :class:`~launchbay.backends.base.Backend` interface and a backend
per place; tuning has :class:`TuningBackend` (the shape of kubeflow/sdk's
``ExecutionBackend``, one interface for every place a job runs), with two
implementations:

* :class:`LocalTuning`: client-driven estimators (``local_process``, ``local``,
  ``local_gpu``, ``ray``): the trials run as local jobs under this process's control
  loop (:func:`launchbay.tuning.engine.run_local`, the one local hook), their record
  under ``LAUNCHBAY_HOME/tuning``;
* :class:`SageMakerTuning`: ``CreateHyperParameterTuningJob``
  (:mod:`launchbay.tuning.sagemaker`).

:func:`tuning_backend_for` picks the backend of a :class:`~launchbay.tuning.plan.TuningPlan`,
:func:`tuning_backend_of` the one a tuning job's handle came from (its
``tuning_backend`` name), and :func:`find_tuning_job` is the one lookup of what a
tuning job's name is: a local tuning job's record here, else SageMaker's.

The tuner is user API (layer 5), and so is this module: it rebuilds estimators
(``best_estimator()``, ``attach()``), as :mod:`launchbay.tuning.attach` does.
"""

from __future__ import annotations

import abc
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from launchbay.estimator import EstimatorBase
from launchbay.tuning import engine
from launchbay.tuning.analytics import HyperparameterTuningJobAnalytics
from launchbay.tuning.plan import TuningPlan
from launchbay.tuning.sagemaker import TuningJob, create_tuning_job

__all__ = [
    "TuningBackend",
    "LocalTuning",
    "SageMakerTuning",
    "FoundTuningJob",
    "TUNING_BACKENDS",
    "tuning_backend_for",
    "tuning_backend_of",
    "find_tuning_job",
]


@dataclass(frozen=True)
class FoundTuningJob:
    """A tuning job found by name (:func:`find_tuning_job`), ready to attach a tuner to.

    ``details``: its description (a copy; a local job's definitions point at the code
    it kept); ``session`` and ``region``: what its estimators are rebuilt with
    (``None`` for a local tuning job: its estimators need no AWS session or region).
    """

    job: Any
    details: dict[str, Any]
    session: Any
    region: str | None


class TuningBackend(abc.ABC):
    """The interface: start a tuning job, find one by name, and read its results back."""

    #: The name a tuning job's handle carries (``handle.tuning_backend``).
    name: str

    @abc.abstractmethod
    def start(self, plan: TuningPlan, *, stage: Callable[[], None], session: Any) -> Any:
        """Stage the code (``stage()``) and start ``plan``; return its handle without waiting.

        The handle has ``name``, ``describe()``, ``wait()``, ``stop()``,
        ``training_jobs()`` and ``best_training_job()``.
        """

    @abc.abstractmethod
    def find(self, name: str, session: Any, job_details: Mapping[str, Any] | None) -> Any:
        """The :class:`FoundTuningJob` of that name, or ``None`` if this backend has none."""

    @abc.abstractmethod
    def best_estimator(
        self, job: Any, cls: type[EstimatorBase], best: Mapping[str, Any], session: Any
    ) -> EstimatorBase:
        """An estimator of class ``cls`` attached to trial ``best`` of ``job``."""

    @abc.abstractmethod
    def analytics(self, job: Any, session: Callable[[], Any]) -> HyperparameterTuningJobAnalytics:
        """The trials of ``job`` as a table; ``session()`` gives the estimators' session."""


class LocalTuning(TuningBackend):
    """Trials as local jobs driven from this process (:mod:`launchbay.tuning.local`)."""

    name = "local"

    def start(self, plan: TuningPlan, *, stage: Callable[[], None], session: Any) -> Any:
        return engine.run_local(plan, stage=stage, session=session, wait=False)

    def find(
        self, name: str, session: Any, job_details: Mapping[str, Any] | None
    ) -> FoundTuningJob | None:
        if job_details is not None or session is not None:
            return None  # a description or a session given: SageMaker's job
        from launchbay.tuning import local  # the local wing, imported when a name is local

        if not local.exists(name):
            return None
        job = local.LocalTuningJob(name)
        details = local.attachable(copy.deepcopy(dict(job.describe())))
        return FoundTuningJob(job, details, None, None)

    def best_estimator(
        self, job: Any, cls: type[EstimatorBase], best: Mapping[str, Any], session: Any
    ) -> EstimatorBase:
        from launchbay.tuning import local
        from launchbay.tuning.attach import local_trial_estimator

        details = local.attachable(job.describe())
        definition = details.get("TrainingJobDefinition") or next(
            d for d in details["TrainingJobDefinitions"]
            if d.get("DefinitionName") == best.get("TrainingJobDefinitionName")
        )  # fmt: skip
        return local_trial_estimator(cls, best["TrainingJobName"], definition, session)

    def analytics(self, job: Any, session: Callable[[], Any]) -> HyperparameterTuningJobAnalytics:
        return HyperparameterTuningJobAnalytics(job.name, tuning_job=job)


class SageMakerTuning(TuningBackend):
    """Tuning jobs on SageMaker (:mod:`launchbay.tuning.sagemaker`)."""

    name = "sagemaker"

    def start(self, plan: TuningPlan, *, stage: Callable[[], None], session: Any) -> Any:
        stage()
        return create_tuning_job(session, plan.request)

    def find(
        self, name: str, session: Any, job_details: Mapping[str, Any] | None
    ) -> FoundTuningJob:
        if session is None:
            from launchbay.session import Session

            session = Session()
        if job_details is None:
            job_details = TuningJob(session, name).describe()
        region = getattr(session, "boto_region_name", None)
        return FoundTuningJob(
            TuningJob(session, name), copy.deepcopy(dict(job_details)), session, region
        )

    def best_estimator(
        self, job: Any, cls: type[EstimatorBase], best: Mapping[str, Any], session: Any
    ) -> EstimatorBase:
        return cls.attach(best["TrainingJobName"], sagemaker_session=session)

    def analytics(self, job: Any, session: Callable[[], Any]) -> HyperparameterTuningJobAnalytics:
        return HyperparameterTuningJobAnalytics(job.name, session())


#: The tuning backends by name, the local one first (a name is looked for there first).
TUNING_BACKENDS: dict[str, TuningBackend] = {
    LocalTuning.name: LocalTuning(),
    SageMakerTuning.name: SageMakerTuning(),
}


def tuning_backend_for(plan: TuningPlan) -> TuningBackend:
    """The backend that runs ``plan``: local for client-driven estimators, else SageMaker."""
    return TUNING_BACKENDS[LocalTuning.name if plan.local else SageMakerTuning.name]


def tuning_backend_of(job: Any) -> TuningBackend:
    """The backend a tuning job's handle came from (a handle without a name: SageMaker's)."""
    return TUNING_BACKENDS[getattr(job, "tuning_backend", SageMakerTuning.name)]


def find_tuning_job(
    name: str, session: Any = None, job_details: Mapping[str, Any] | None = None
) -> FoundTuningJob:
    """What ``name`` is: a local tuning job's record here (only when neither ``session`` nor
    ``job_details`` is given), else SageMaker's tuning job (described unless ``job_details``).

    Raises:
        JobError: SageMaker has no tuning job of that name (DescribeHyperParameterTuningJob).
    """
    for backend in TUNING_BACKENDS.values():
        found = backend.find(name, session, job_details)
        if found is not None:
            return found
    raise AssertionError("SageMaker's backend finds every name")  # pragma: no cover
