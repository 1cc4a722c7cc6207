"""What a job name names: the backend that knows a training job, or a tuning job.

Jobs are found by name through the backend registry
(:mod:`launchbay.backends.registry`): local ones (``local_process`` and Docker)
under ``$LAUNCHBAY_HOME/jobs`` first, then SageMaker's; local tuning jobs under
``$LAUNCHBAY_HOME/tuning``, SageMaker's through DescribeHyperParameterTuningJob.
"""

from __future__ import annotations

import os
from typing import Any

from launchbay._home import local_home
from launchbay.backends import registry
from launchbay.backends.base import Backend, InProcessBackend
from launchbay.cli import tuning
from launchbay.errors import ConfigurationError, JobError, MissingDependencyError
from launchbay.estimator import validate_job_name

__all__ = ["job_backend", "cannot_ask", "tuning_job"]


def job_backend(name: str) -> Backend:
    """The backend that knows job ``name`` (the registry asks local ones first).

    Raises:
        JobError: no local job has that name and the remote backend cannot be
            asked (no AWS region configured, boto3 missing): no such job.
    """
    validate_job_name(name, "JOB")
    backend = registry.backend_for_job(name)
    if not isinstance(backend, InProcessBackend):
        why = cannot_ask(backend)
        if why:
            raise JobError(
                f"No training job named {name!r}: there is no local job of that name (under "
                f"{os.path.join(local_home(), 'jobs')}), and {_REMOTE_NAMES.get(backend.name, backend.name)} "
                f"was not asked because {why}."
            )
    return backend


_REMOTE_NAMES = {"sagemaker": "SageMaker"}


def cannot_ask(backend: Backend) -> str | None:
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


def tuning_job(name: str) -> Any:
    """Tuning job ``name``: a local one, else SageMaker's when no training job has that name."""
    found: Any = tuning.local_job(name)
    if found is not None:
        return found
    backend = job_backend(name)
    if isinstance(backend, InProcessBackend):
        return None
    try:
        backend.describe(name)
    except JobError:
        found = tuning.remote_job(name, backend)
        if found is None:
            raise
    return found
