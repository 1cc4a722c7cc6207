"""Backends run a finished CreateTrainingJob request; they never see the estimator.

Each implements the same small interface (:class:`Backend`) and returns a
:class:`launchbay.job.TrainingJob` whose statuses are SageMaker's.
"""

from __future__ import annotations

from typing import Any, Protocol

from launchbay.distribution import LOCAL_INSTANCE_TYPES

__all__ = ["Backend", "backend_for"]


class Backend(Protocol):
    """Run a request, describe a job, wait for it, stop it, print its logs, list jobs."""

    def run(self, request: dict[str, Any]) -> Any: ...

    def describe(self, name: str) -> dict[str, Any]: ...

    def wait(self, name: str, logs: str | bool = "All") -> dict[str, Any]: ...

    def stop(self, name: str) -> None: ...

    def print_logs(self, name: str, follow: bool = False, stream: Any = None) -> None: ...

    def list_jobs(
        self, max_results: int = 20, status: str | None = None
    ) -> list[dict[str, Any]]: ...


def backend_for(instance_type: str | None, session: Any) -> Backend:
    """The backend that runs jobs of ``instance_type``.

    ``local_process`` runs each host as a process group on this machine
    (:class:`launchbay.backends.process.ProcessBackend`); ``local`` and
    ``local_gpu`` as one Docker container per instance
    (:class:`launchbay.backends.docker.DockerBackend`); ``ml.*`` types run on
    SageMaker.
    """
    if instance_type == "local_process":
        from launchbay.backends.process import ProcessBackend

        return ProcessBackend(session)
    if instance_type in LOCAL_INSTANCE_TYPES:
        from launchbay.backends.docker import DockerBackend

        return DockerBackend(session, gpu=instance_type == "local_gpu")
    from launchbay.backends.sagemaker import SageMakerBackend

    return SageMakerBackend(session)
