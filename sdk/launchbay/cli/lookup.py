"""What a job name names: a training job and the backend that knows it, or a tuning job.

``launchbay status`` and ``stop`` take a name and ask :func:`find_job` what it is;
nothing else in the command guesses. The answer, in this order:

1. a local tuning job: its record under ``$LAUNCHBAY_HOME/tuning``;
2. a local training job: the backend registry asks its local backends first
   (``$LAUNCHBAY_HOME/jobs``; :mod:`launchbay.backends.registry`);
3. SageMaker's training job of that name (DescribeTrainingJob);
4. SageMaker's tuning job of that name (DescribeHyperParameterTuningJob), when no
   training job has it; else the training job's "no such job" stands.

SageMaker is not asked when it cannot be (no AWS region configured, boto3 missing):
then the name is no job, and the error says why SageMaker was not asked. Commands that
only training jobs have (``logs``, ``replay``) ask :func:`job_backend`: steps 2 and 3,
without asking SageMaker anything yet.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launchbay._home import local_home
from launchbay.backends import registry
from launchbay.backends.base import Backend, InProcessBackend
from launchbay.errors import ConfigurationError, JobError, MissingDependencyError
from launchbay.estimator import validate_job_name
from launchbay.tuning import local
from launchbay.tuning.sagemaker import TuningJob

__all__ = ["TrainingJobFound", "TuningJobFound", "find_job", "job_backend"]

_REMOTE_NAMES = {"sagemaker": "SageMaker"}


@dataclass(frozen=True)
class TrainingJobFound:
    """A training job: the backend that knows it, and its description when the lookup
    already asked for it (a remote backend is asked to tell a training job from a tuning
    job; a local one is not)."""

    name: str
    backend: Backend
    description: Mapping[str, Any] | None = None

    def describe(self) -> Mapping[str, Any]:
        """The DescribeTrainingJob description: the lookup's, else the backend's now."""
        if self.description is not None:
            return self.description
        return self.backend.describe(self.name)


@dataclass(frozen=True)
class TuningJobFound:
    """A tuning job: its handle (local or SageMaker's), and its description when the
    lookup already asked for it."""

    name: str
    job: local.LocalTuningJob | TuningJob
    description: Mapping[str, Any] | None = None


def find_job(name: str) -> TrainingJobFound | TuningJobFound:
    """What job ``name`` is (the order is in the module's docstring).

    Raises:
        ConfigurationError: ``name`` is no job name at all (checked first).
        JobError: no such job (also when SageMaker cannot be asked, saying why).
    """
    validate_job_name(name, "JOB")
    if local.exists(name):
        return TuningJobFound(name, local.LocalTuningJob(name))
    backend = _training_backend(name)
    if isinstance(backend, InProcessBackend):
        return TrainingJobFound(name, backend)
    try:
        return TrainingJobFound(name, backend, backend.describe(name))
    except JobError:
        found = _remote_tuning_job(name, backend)
        if found is None:
            raise
        return found


def job_backend(name: str) -> Backend:
    """The backend that knows training job ``name``, for what only training jobs have
    (``logs``, ``replay``): :func:`find_job`'s answer without tuning jobs, nothing asked
    of the backend yet.

    Raises:
        ConfigurationError: ``name`` is no job name at all.
        JobError: no local job has that name and the remote backend cannot be asked
            (no AWS region configured, boto3 missing): no such job.
    """
    validate_job_name(name, "JOB")
    return _training_backend(name)


def _training_backend(name: str) -> Backend:
    """The registry's backend for ``name`` (local ones first), refused when it is remote
    and cannot be asked."""
    backend = registry.backend_for_job(name)
    if not isinstance(backend, InProcessBackend):
        why = _cannot_ask(backend)
        if why:
            raise JobError(
                f"No training job named {name!r}: there is no local job of that name (under "
                f"{os.path.join(local_home(), 'jobs')}), and "
                f"{_REMOTE_NAMES.get(backend.name, backend.name)} was not asked because {why}."
            )
    return backend


def _remote_tuning_job(name: str, backend: Backend) -> TuningJobFound | None:
    """SageMaker's tuning job ``name`` (DescribeHyperParameterTuningJob answers), or None."""
    session = getattr(backend, "session", None)
    if session is None:
        return None
    job = TuningJob(session, name)
    try:
        description = job.describe()
    except JobError:
        return None
    return TuningJobFound(name, job, description)


def _cannot_ask(backend: Backend) -> str | None:
    """Why the remote ``backend`` cannot be asked about a job (no region, no boto3), or None."""
    session = getattr(backend, "session", None)
    if session is None:
        return None
    try:
        region = session.boto_region_name
    except MissingDependencyError as exc:
        return str(exc)
    except ConfigurationError:
        return (
            "no AWS region is configured (set AWS_REGION or AWS_DEFAULT_REGION, or a region "
            "in ~/.aws/config)"
        )
    return None if region else "no AWS region is configured"
