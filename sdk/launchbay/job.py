"""The handle of a started training job, the same for every backend.

A job that failed or was stopped is only a status in its description; one place,
:func:`job_failed_error`, turns it into :class:`launchbay.errors.JobFailedError`
(with the failure reason and, where the backend can fetch them, the last log
lines of the host that failed first). :meth:`TrainingJob.wait` raises it, so
``fit()``, a later ``wait()`` and ``Estimator.attach(...).latest_training_job.wait()``
all report a failure the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from launchbay.errors import JobFailedError
from launchbay.runtime.names import FAILED, FAILED_STATUSES, TERMINAL_STATUSES

# TERMINAL_STATUSES and FAILED_STATUSES (those wait() raises for) are re-exported from
# launchbay.runtime.names, where every status is spelled.
__all__ = [
    "TrainingJob",
    "TERMINAL_STATUSES",
    "FAILED_STATUSES",
    "LogTail",
    "job_failed_error",
    "rule_statuses",
    "rule_status_lines",
]


def rule_statuses(description: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``DebugRuleEvaluationStatuses`` then ``ProfilerRuleEvaluationStatuses`` (SDK v2's order)."""
    return [
        dict(status)
        for key in ("DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses")
        for status in description.get(key) or []
    ]


def rule_status_lines(description: Mapping[str, Any]) -> list[str]:
    """``Rule <name>: <status> - <details>``, one line per Debugger rule of the job."""
    lines = []
    for status in rule_statuses(description):
        details = str(status.get("StatusDetails") or "").strip().splitlines()
        line = f"Rule {status.get('RuleConfigurationName')}: {status.get('RuleEvaluationStatus')}"
        lines.append(line + (f" - {details[0][:300]}" if details else ""))
    return lines


class LogTail(NamedTuple):
    """The last log lines of one host of a job (for failure reports)."""

    host: str
    #: Where the lines come from, e.g. the CloudWatch log stream's name.
    source: str
    lines: Sequence[str]


def job_failed_error(
    name: str, description: Mapping[str, Any], tail: LogTail | None = None
) -> JobFailedError:
    """The :class:`JobFailedError` for a job that ended Failed or Stopped.

    The message starts ``Training job <name> ended with status <status>: <reason>``
    and, when ``tail`` has lines, shows them below, indented, with where they come
    from.
    """
    status = str(description.get("TrainingJobStatus", ""))
    reason = str(description.get("FailureReason") or "")
    detail = f": {reason}" if reason else ""
    message = f"Training job {name} ended with status {status}{detail}"
    lines = list(tail.lines) if tail else []
    if tail and lines:
        body = "\n".join(f"    {line}" for line in lines)
        message += f"\n\nLast {len(lines)} log line(s) of {tail.host} ({tail.source}):\n{body}"
    return JobFailedError(
        message,
        job_name=name,
        status=status,
        reason=reason,
        log_host=tail.host if tail and lines else None,
        log_tail=lines,
    )


class TrainingJob:
    """A training job started by a backend: status, wait, stop, logs, model artifact.

    A failed job is only a status here; :meth:`wait` (and ``fit(wait=True)``)
    turns it into :class:`launchbay.errors.JobFailedError`.
    """

    def __init__(self, name: str, backend: Any) -> None:
        self.name = name
        self.backend = backend

    def __repr__(self) -> str:
        return f"TrainingJob(name={self.name!r}, backend={type(self.backend).__name__})"

    @property
    def job_name(self) -> str:
        """The job's name (SDK v2's spelling of :attr:`name`)."""
        return self.name

    def describe(self) -> dict[str, Any]:
        """The job's DescribeTrainingJob response."""
        return self.backend.describe(self.name)

    @property
    def status(self) -> str:
        """``TrainingJobStatus``: InProgress, Completed, Failed, Stopping or Stopped."""
        return self.describe()["TrainingJobStatus"]

    def stop(self) -> None:
        """Ask the job to stop (it ends in the Stopped state)."""
        self.backend.stop(self.name)

    def wait(self, logs: str | bool | None = "All") -> dict[str, Any]:
        """Follow the job until it ends and return its last description.

        Args:
            logs: ``"All"``/``True`` shows status changes and every host's log
                lines; ``"None"``/``False``/``None`` shows status changes only.

        Raises:
            JobFailedError: the job ended Failed or Stopped; it carries the
                failure reason and the last log lines of the host that failed first.
        """
        description = self.backend.wait(self.name, logs=logs)
        if description.get("TrainingJobStatus") in FAILED_STATUSES:
            raise job_failed_error(self.name, description, self._log_tail(description))
        return description

    def _log_tail(self, description: Mapping[str, Any]) -> LogTail | None:
        fetch = getattr(self.backend, "failure_log_tail", None)
        return fetch(self.name, description) if fetch is not None else None

    def rule_job_summary(self) -> list[dict[str, Any]]:
        """SDK v2's ``rule_job_summary()``: each Debugger rule's status, debugging rules first.

        Each is ``{"RuleConfigurationName", "RuleEvaluationStatus", "StatusDetails",
        "LastModifiedTime", ...}`` as ``describe()`` gives it (docs/debugger.md).
        """
        return rule_statuses(self.describe())

    def logs(self, follow: bool = False) -> None:
        """Print every host's log lines; with ``follow``, keep printing until the job ends."""
        self.backend.print_logs(self.name, follow=follow)

    @property
    def model_data(self) -> str | None:
        """The model artifact URI.

        ``ModelArtifacts.S3ModelArtifacts`` once the job has one; while it runs,
        the URI the service will write (``<output_path>/<job>/output/model.tar.gz``,
        or ``.../output/model/`` without compression); ``None`` for a failed job
        without artifacts.
        """
        description = self.describe()
        uri = (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        if uri:
            return str(uri)
        output = description.get("OutputDataConfig") or {}
        if description.get("TrainingJobStatus") == FAILED or not output.get("S3OutputPath"):
            return None
        leaf = "model/" if output.get("CompressionType") == "NONE" else "model.tar.gz"
        return f"{str(output['S3OutputPath']).rstrip('/')}/{self.name}/output/{leaf}"
