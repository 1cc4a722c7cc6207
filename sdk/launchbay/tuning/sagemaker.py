"""Tuning jobs on SageMaker: create, describe, follow, stop, list their trials.

:class:`TuningJob` is the handle ``HyperparameterTuner.fit()`` and ``attach()``
keep as ``latest_tuning_job`` (SDK v2's ``_TuningJob``). Following a job
(:meth:`TuningJob.wait`) polls DescribeHyperParameterTuningJob and shows, through
:mod:`launchbay.display`, one progress line: the job's status, its trials counted
by state (``TrainingJobStatusCounters``: completed, in progress, failed =
retryable + non-retryable errors, stopped) and the best trial so far with its
objective value. On a terminal or in a notebook the line is redrawn in place;
elsewhere (CI, files) a plain line is printed each time it changes. The job ends
Completed or Stopped (returned) or Failed (:class:`~launchbay.errors.JobFailedError`
with the failure reason), as SDK v2's ``wait_for_tuning_job`` does. Ctrl-C stops
following and leaves the job running.

AWS errors are translated here, at the boundary, into :class:`~launchbay.errors.JobError`
naming the operation, the tuning job and what to do next.
"""

from __future__ import annotations

import datetime as _dt
import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from launchbay.display import Display
from launchbay.errors import JobError, JobFailedError

__all__ = ["TuningJob", "create_tuning_job", "progress_line", "TRIAL_STATES", "POLL_SECONDS"]

logger = logging.getLogger("launchbay.tuning.sagemaker")

#: Seconds between two DescribeHyperParameterTuningJob calls while following (SDK v2's 5).
POLL_SECONDS = 5.0
#: Tuning job statuses that are not final.
_RUNNING = ("InProgress", "Stopping")
#: The states trials are counted in, as shown (failed = both kinds of error).
TRIAL_STATES = ("completed", "in progress", "failed", "stopped")


def _call(session: Any, operation: str, name: str, **kwargs: Any) -> dict[str, Any]:
    """One SageMaker API call; botocore's errors become a JobError naming the tuning job."""
    from botocore.exceptions import BotoCoreError, ClientError

    method = getattr(session.sagemaker_client, operation)
    try:
        return dict(method(**kwargs))
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        message = exc.response.get("Error", {}).get("Message", str(exc))
        hint = {
            "ResourceNotFound": "check the name and the region",
            "ValidationException": "check the name and the region",
            "ResourceInUse": "choose another job_name or base_tuning_job_name",
            "AccessDeniedException": "the credentials need sagemaker permissions for it",
            "ResourceLimitExceeded": "wait for running tuning jobs to end, or ask for a higher quota",
        }.get(code, "see the message for the cause")
        raise JobError(
            f"{operation} for tuning job {name!r} failed ({code or 'error'}): {message}. "
            f"Next: {hint}."
        ) from exc
    except BotoCoreError as exc:
        raise JobError(
            f"{operation} for tuning job {name!r} failed: {exc}. Next: check the network "
            "and the AWS configuration (region, endpoint, credentials)."
        ) from exc


def counts(description: Mapping[str, Any]) -> dict[str, int]:
    """Trials by state (:data:`TRIAL_STATES`) from ``TrainingJobStatusCounters``."""
    raw = description.get("TrainingJobStatusCounters") or {}
    return {
        "completed": int(raw.get("Completed", 0)),
        "in progress": int(raw.get("InProgress", 0)),
        "failed": int(raw.get("RetryableError", 0)) + int(raw.get("NonRetryableError", 0)),
        "stopped": int(raw.get("Stopped", 0)),
    }


def progress_line(description: Mapping[str, Any]) -> str:
    """``<job> <status> | trials: ... | best: <trial> <metric>=<value>`` for a description."""
    name = description.get("HyperParameterTuningJobName", "")
    status = description.get("HyperParameterTuningJobStatus", "")
    trials = counts(description)
    parts = [f"{name} {status}".strip()]
    parts.append("trials: " + ", ".join(f"{trials[s]} {s}" for s in TRIAL_STATES))
    best = description.get("BestTrainingJob")
    if best:
        metric = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
        value = metric.get("Value")
        shown = f"{best.get('TrainingJobName', '')}"
        if value is not None:
            shown += f" {metric.get('MetricName', 'objective')}={value:g}"
        parts.append("best: " + shown)
    return " | ".join(parts)


class NamedTuningJob:
    """What both tuning job handles (SageMaker's, local) share: the name, SDK v2's spelling,
    the best trial from the description."""

    name: str

    @property
    def job_name(self) -> str:
        """SDK v2's name for :attr:`name`."""
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def describe(self) -> dict[str, Any]:
        """DescribeHyperParameterTuningJob's shape (each handle reads its own source)."""
        raise NotImplementedError

    def best_training_job(self) -> dict[str, Any]:
        """The description's ``BestTrainingJob``.

        Raises:
            JobError: no trial has reported an objective value yet.
        """
        best = self.describe().get("BestTrainingJob")
        if not best:
            raise JobError(
                f"Best training job not available for tuning job {self.name!r}: no trial has "
                "reported its objective metric yet. Next: wait() for the job, and check that "
                "the metric definitions' regexes match the trials' log lines."
            )
        return dict(best)


class TuningJob(NamedTuningJob):
    """A SageMaker hyperparameter tuning job, by name.

    Args:
        sagemaker_session: The :class:`launchbay.Session` whose ``sagemaker_client`` is used.
        name: The tuning job's name.
        stream: Where :meth:`wait` shows progress (default: ``sys.stdout`` then).
        sleep: Waits between polls (injectable for tests).
    """

    #: The tuning backend it came from (:func:`launchbay.tuning.backends.tuning_backend_of`).
    tuning_backend = "sagemaker"

    def __init__(
        self,
        sagemaker_session: Any,
        name: str,
        *,
        stream: TextIO | None = None,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.sagemaker_session = sagemaker_session
        self.name = name
        self.stream = stream
        self.sleep = sleep

    def describe(self) -> dict[str, Any]:
        """The DescribeHyperParameterTuningJob response."""
        return _call(
            self.sagemaker_session,
            "describe_hyper_parameter_tuning_job",
            self.name,
            HyperParameterTuningJobName=self.name,
        )

    def stop(self) -> None:
        """Ask SageMaker to stop the tuning job and its running trials.

        A job that already ended is left as it is (logged, as SDK v2 does).
        """
        try:
            _call(
                self.sagemaker_session,
                "stop_hyper_parameter_tuning_job",
                self.name,
                HyperParameterTuningJobName=self.name,
            )
        except JobError as exc:
            if "ValidationException" not in str(exc):
                raise
            logger.info("Tuning job %s is already stopped or not running.", self.name)
        else:
            logger.info("Stopping tuning job %s", self.name)

    def training_jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every trial's summary (ListTrainingJobsForHyperParameterTuningJob, all pages)."""
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"HyperParameterTuningJobName": self.name, "MaxResults": 100}
        if status is not None:
            kwargs["StatusEquals"] = status
        while True:
            page = _call(
                self.sagemaker_session,
                "list_training_jobs_for_hyper_parameter_tuning_job",
                self.name,
                **kwargs,
            )
            out.extend(page.get("TrainingJobSummaries") or [])
            token = page.get("NextToken")
            if not token:
                return out
            kwargs["NextToken"] = token

    def wait(self, poll: float = POLL_SECONDS) -> dict[str, Any]:
        """Follow the job until it ends; return its last description.

        Raises:
            JobFailedError: the tuning job ended Failed (its reason in the message).
        """
        return follow(
            self.name,
            self.describe,
            lambda: self.sleep(poll),
            self.stream,
            interrupt_message=(
                f"Stopped following tuning job {self.name}; it keeps running. Follow it again "
                f"with HyperparameterTuner.attach({self.name!r}).wait(), or stop it with "
                ".stop_tuning_job()."
            ),
        )


def follow(
    name: str,
    describe: Callable[[], Mapping[str, Any]],
    pause: Callable[[], object],
    stream: TextIO | None,
    *,
    interrupt_message: str,
    interrupted: Callable[[], bool] = lambda: False,
    on_interrupt: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Follow a tuning job (SageMaker's or a local one) to its end with one progress line.

    ``describe`` gives DescribeHyperParameterTuningJob's shape; the line (:func:`progress_line`)
    is redrawn in place on a terminal or in Jupyter, printed with a timestamp when it
    changes elsewhere; ``pause`` waits between looks. On Ctrl-C (or ``interrupted()``)
    ``interrupt_message`` is shown, ``on_interrupt`` runs and :class:`KeyboardInterrupt`
    is re-raised. Returns the last description.

    Raises:
        JobFailedError: the tuning job ended Failed (its reason in the message).
    """
    display = Display(stream or sys.stdout)
    shown = ""
    try:
        while True:
            if interrupted():
                raise KeyboardInterrupt
            description = dict(describe())
            line = progress_line(description)
            if line != shown:
                logger.debug("%s", line)
                if display.live:
                    display.update(line)
                else:
                    display.print(f"{_now()} {line}")
                shown = line
            status = description.get("HyperParameterTuningJobStatus")
            if status not in _RUNNING:
                break
            pause()
    except KeyboardInterrupt:
        display.close()
        display.print(interrupt_message)
        on_interrupt()
        raise
    display.close()
    if status == "Failed":
        reason = str(description.get("FailureReason") or "")
        raise JobFailedError(
            f"Tuning job {name} failed: {reason or 'no reason given'}",
            job_name=name,
            status="Failed",
            reason=reason,
        )
    return description


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def create_tuning_job(session: Any, request: Mapping[str, Any], **handle: Any) -> TuningJob:
    """Send ``request`` (CreateHyperParameterTuningJob) and return the job's handle."""
    name = str(request["HyperParameterTuningJobName"])
    response = _call(session, "create_hyper_parameter_tuning_job", name, **dict(request))
    logger.info(
        "Created SageMaker hyperparameter tuning job %s (%s)",
        name,
        response.get("HyperParameterTuningJobArn", ""),
    )
    return TuningJob(session, name, **handle)
