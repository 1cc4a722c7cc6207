"""A local job's attempts: spot interruptions rehearsed, retries, ``max_wait``.

SageMaker runs a job again in two cases, and so does a local job here:

* a **managed spot interruption** (``use_spot_instances=True``): every host's script
  gets SIGTERM, SIGKILL after the grace period; the checkpoints are uploaded to
  ``checkpoint_s3_uri``; the secondary status is ``Interrupted``, then ``Starting``,
  ``Downloading`` and ``Training`` again on fresh hosts, with the checkpoints restored
  into each host's ``checkpoint_local_path`` before the script starts. Locally the
  interruptions are rehearsed on purpose (:mod:`launchbay.backends.local.rehearsal`);
* a **retry** (``max_retry_attempts``, the request's ``RetryStrategy``): an
  ``InternalServerError`` (an infrastructure failure: here, a host lost by the
  rehearsal setting) is retried up to that many times, with the checkpoints restored;
  an ``AlgorithmError`` (the script failed) or a ``ClientError`` is never retried.

Across attempts ``MaxWaitTimeInSeconds`` counts the whole job since its creation (the
job ends ``Stopped``, secondary status ``MaxWaitTimeExceeded``, once it runs out), and
``MaxRuntimeInSeconds`` counts the training of all attempts together, as SageMaker
counts both. Each restart watches whether the script read the restored checkpoint
files (:mod:`.checkpoint_watch`); each attempt is recorded in ``describe()`` as
``LocalAttempts`` (a launchbay field) and the CLI's summary says, e.g., "2
interruptions; after each restart the script opened none of the restored checkpoint
files".

:func:`run_attempts` is the control loop's way to run a job; :meth:`Attempts.rehearse`
is what its monitor asks each time it looks at the hosts.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

from launchbay.backends.local.checkpoint_watch import RestoredWatch
from launchbay.backends.local.hosts import HostRunner
from launchbay.backends.local.record import LocalJob
from launchbay.backends.local.rehearsal import HOST_LOSS, SETTING_NAME, SPOT, rehearsed
from launchbay.runtime.for_client import rmtree_beneath
from launchbay.runtime.names import FAILED, STOPPED

__all__ = ["INTERRUPTED", "Attempts", "run_attempts", "earlier_training"]

logger = logging.getLogger("launchbay.backends.local")

#: What an attempt ended by a spot interruption returns as its status (never a job's).
INTERRUPTED = "Interrupted"
#: The start of a failure reason SageMaker retries (``RetryStrategy``).
RETRIED_ERROR = "InternalServerError"
#: Read files named per restart in ``LocalAttempts`` (the count is always whole).
_NAMED_FILES = 20

Outcome = tuple[str, "str | None"]


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _seconds(start: Any, end: Any) -> float:
    if isinstance(start, _dt.datetime) and isinstance(end, _dt.datetime):
        return max((end - start).total_seconds(), 0.0)
    return 0.0


def earlier_training(job: LocalJob) -> float:
    """Seconds the job's earlier attempts trained (ended ``Training`` transitions)."""
    with job.lock:
        ended = job.transitions[:-1] if job.secondary == "Training" else job.transitions
        return sum(
            _seconds(t.get("StartTime"), t.get("EndTime"))
            for t in ended
            if t["Status"] == "Training"
        )


class Attempts:
    """The attempts of one job this process runs (``job.attempts``)."""

    def __init__(self, job: LocalJob) -> None:
        self.events = rehearsed(job.plan)
        #: The attempt now running (1-based).
        self.attempt = 1
        self.retries = 0
        self.interruptions = 0
        self._fired = False
        self._watch: RestoredWatch | None = None
        self._restored: dict[str, set[str]] = {}
        self._started_after: str | None = None

    # -- the monitor's question ----------------------------------------------------
    def rehearse(
        self,
        job: LocalJob,
        runner: HostRunner,
        terminate: Callable[[LocalJob, list[str]], None],
    ) -> Outcome | None:
        """What ends this attempt now, done (hosts stopped), or ``None``: nothing yet.

        ``MaxWaitTimeInSeconds`` run out, or this attempt's rehearsed event due.
        """
        plan = job.plan
        if plan.max_wait and _seconds(job.creation_time, _now()) > plan.max_wait:
            return self._max_wait_exceeded(job, lambda: terminate(job, runner.running(job)))
        event = self.events[self.attempt - 1] if self.attempt <= len(self.events) else None
        if event is None or self._fired:
            return None
        with job.lock:
            training = job.secondary == "Training"
            started = job.transitions[-1]["StartTime"] if training else None
        if started is None or _seconds(started, _now()) < event.seconds:
            return None
        if not runner.running(job):  # every host has ended: the monitor sees how
            return None
        self._fired = True
        if event.kind == SPOT:
            self.interruptions += 1
            message = (
                f"Spot interruption {self.interruptions} rehearsed ({SETTING_NAME} item "
                f"{event.text!r}): SIGTERM to every host, SIGKILL after {job.grace:g} s; "
                "the checkpoints are uploaded and the job restarts"
            )
            logger.warning("Local training job %s: %s", job.name, message)
            job._set_secondary(INTERRUPTED, message)
            terminate(job, runner.running(job))
            return INTERRUPTED, message
        assert event.kind == HOST_LOSS
        host = event.host or job.hosts[-1]
        logger.warning("Local training job %s: host %s lost (rehearsed)", job.name, host)
        if host in runner.running(job):
            runner.signal(job, [host], signal.SIGKILL)
            runner.reap(job, [host])
        terminate(job, runner.running(job))
        return FAILED, (
            f"{RETRIED_ERROR}: host {host} was lost ({SETTING_NAME} item {event.text!r} rehearsed "
            f"an infrastructure failure in attempt {self.attempt}). SageMaker retries such a "
            "failure up to RetryStrategy.MaximumRetryAttempts (max_retry_attempts) times."
        )

    def _max_wait_exceeded(self, job: LocalJob, stop_hosts: Callable[[], None]) -> Outcome:
        job._set_secondary("MaxWaitTimeExceeded", "Training job reached MaxWaitTimeInSeconds")
        stop_hosts()
        interrupted = (
            f" after {self.interruptions} spot interruption(s)" if self.interruptions else ""
        )
        return STOPPED, (
            f"MaxWaitTimeExceeded: the job did not complete within MaxWaitTimeInSeconds "
            f"({job.plan.max_wait} seconds: the time spent waiting for spot capacity plus "
            f"the training of every attempt){interrupted}, and was stopped."
        )

    # -- restored checkpoints ------------------------------------------------------
    def restored(self, job: LocalJob) -> None:
        """The checkpoints were restored for this attempt: watch whether its script reads them."""
        if self.attempt == 1:
            return
        try:
            with open(job.layout.checkpoint_manifest, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            manifest = {}
        self._restored = {
            str(directory): set(files)
            for directory, files in manifest.items()
            if isinstance(files, dict) and files
        }
        if self._restored:
            self._watch = RestoredWatch.start(self._restored)

    def _stop_watch(self) -> tuple[int, list[str]] | None:
        """``(files restored per host, files read)`` of this attempt, or None (not watched)."""
        watch, self._watch = self._watch, None
        if watch is None:
            return None
        read = watch.stop()
        names = sorted({rel for files in read.values() for rel in files})
        return max(len(files) for files in self._restored.values()), names

    # -- between attempts ------------------------------------------------------------
    def record(self, job: LocalJob, outcome: Outcome) -> None:
        """Note how this attempt ended in ``LocalAttempts`` (and warn of unread checkpoints)."""
        status, reason = outcome
        watched = self._stop_watch()
        with job.lock:
            trained = sum(
                _seconds(t.get("StartTime"), t.get("EndTime") or _now())
                for t in job.transitions[self._first_transition(job) :]
                if t["Status"] == "Training"
            )
        entry: dict[str, Any] = {
            "Attempt": self.attempt,
            "StartedAfter": self._started_after,
            "EndedWith": status,
            "Reason": reason.splitlines()[0][:300] if reason else None,
            "TrainingSeconds": int(trained),
        }
        if self.attempt > 1:
            restored = max((len(f) for f in self._restored.values()), default=0)
            entry["RestoredCheckpointFiles"] = restored
            if watched is not None:
                entry["CheckpointFilesRead"] = len(watched[1])
                entry["CheckpointFilesReadNames"] = watched[1][:_NAMED_FILES]
                if restored and not watched[1]:
                    logger.warning(
                        "Local training job %s, attempt %d: the script opened none of the %d "
                        "checkpoint file(s) restored for it",
                        job.name, self.attempt, restored,
                    )  # fmt: skip
        with job.lock:
            job.attempt_log.append(entry)
        job.save()

    def _first_transition(self, job: LocalJob) -> int:
        """Index of this attempt's first transition (after the last ``Starting``)."""
        starts = [i for i, t in enumerate(job.transitions) if t["Status"] == "Starting"]
        return starts[-1] if starts else 0

    def again(self, job: LocalJob, outcome: Outcome) -> str | None:
        """Why the job runs another attempt after ``outcome`` (a Starting message), or None."""
        status, reason = outcome
        if job.stop_requested.is_set():
            return None
        if status == INTERRUPTED:
            self._started_after = "SpotInterruption"
            return f"Restarting after spot interruption {self.interruptions}: attempt {self.attempt + 1}, checkpoints restored"
        retryable = status == FAILED and (reason or "").startswith(RETRIED_ERROR)
        if retryable and self.retries < job.plan.max_retries:
            self.retries += 1
            self._started_after = "Retry"
            return (
                f"Retrying after {RETRIED_ERROR} (retry {self.retries} of "
                f"{job.plan.max_retries}, attempt {self.attempt + 1}): checkpoints restored"
            )
        return None

    def next_attempt(self, job: LocalJob, message: str) -> None:
        """Fresh hosts for the next attempt, as a new instance has: nothing of the last one."""
        layout = job.layout
        for directory in (layout.shared_dir, *map(layout.host_dir, job.hosts)):
            rmtree_beneath(layout.job_dir, directory)
            os.makedirs(directory, exist_ok=True)
        job.procs = {}
        job.readers = []
        self.attempt += 1
        self._fired = False
        self._restored = {}
        job._set_secondary("Starting", message)

    def max_wait_left(self, job: LocalJob) -> Outcome | None:
        """``(Stopped, reason)`` when ``MaxWaitTimeInSeconds`` ran out between attempts."""
        if job.plan.max_wait and _seconds(job.creation_time, _now()) > job.plan.max_wait:
            return self._max_wait_exceeded(job, lambda: None)
        return None


def run_attempts(
    job: LocalJob,
    attempt: Callable[[LocalJob], Outcome],
    teardown: Callable[[LocalJob], None],
) -> Outcome:
    """Run the job's attempts until one ends it; its ``(status, reason)``.

    ``attempt`` runs one (Downloading, Training, until the hosts ended or were stopped);
    ``teardown`` leaves nothing of its hosts. Between attempts the checkpoints are
    uploaded (the next attempt restores them), and ``max_wait`` and a stop are obeyed.
    """
    attempts = Attempts(job)
    job.attempts = attempts
    while True:
        outcome = attempt(job)
        attempts.record(job, outcome)
        message = attempts.again(job, outcome)
        if message is None:
            if outcome[0] == INTERRUPTED:  # stopped while interrupted
                return STOPPED, None
            return outcome
        teardown(job)
        try:
            job.stager.save_checkpoints(job.host_plan, job.layout)
        except Exception as exc:  # the next attempt restores what was saved before
            logger.error("Saving the checkpoints of job %s failed: %s", job.name, exc)
        if job.stop_requested.is_set():
            return STOPPED, None
        exceeded = attempts.max_wait_left(job)
        if exceeded is not None:
            return exceeded
        attempts.next_attempt(job, message)
