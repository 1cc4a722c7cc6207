"""The handle of a started training job, the same for every backend."""

from __future__ import annotations

from typing import Any

from launchbay.errors import JobFailedError

__all__ = ["TrainingJob", "TERMINAL_STATUSES"]

TERMINAL_STATUSES = ("Completed", "Failed", "Stopped")


class TrainingJob:
    """A training job started by a backend: status, wait, stop, model artifact.

    A failed job is only a status here; :meth:`wait` (and ``fit(wait=True)``)
    turns it into :class:`launchbay.errors.JobFailedError`.
    """

    def __init__(self, name: str, backend: Any) -> None:
        self.name = name
        self.backend = backend

    def __repr__(self) -> str:
        return f"TrainingJob(name={self.name!r}, backend={type(self.backend).__name__})"

    def describe(self) -> dict[str, Any]:
        """The job's DescribeTrainingJob response."""
        return self.backend.describe(self.name)

    @property
    def status(self) -> str:
        return self.describe()["TrainingJobStatus"]

    def stop(self) -> None:
        """Ask the job to stop (it ends in the Stopped state)."""
        self.backend.stop(self.name)

    def wait(self, logs: str | bool = "All") -> dict[str, Any]:
        """Block until the job ends; raise :class:`JobFailedError` if it failed or stopped."""
        description = self.backend.wait(self.name, logs=logs)
        status = description.get("TrainingJobStatus")
        if status in ("Failed", "Stopped"):
            reason = description.get("FailureReason", "")
            detail = f": {reason}" if reason else ""
            raise JobFailedError(
                f"Training job {self.name} ended with status {status}{detail}",
                job_name=self.name,
                status=status,
                reason=reason,
            )
        return description

    @property
    def model_data(self) -> str | None:
        """``ModelArtifacts.S3ModelArtifacts`` of the job, once it has one."""
        return self.describe().get("ModelArtifacts", {}).get("S3ModelArtifacts")
