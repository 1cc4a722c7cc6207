"""The running job's state machine: a local job this process runs, from its hosts' start to its end.

:class:`Supervisor` owns what happens to a job once
:meth:`LocalBackend.run <launchbay.backends.local.control.LocalBackend.run>` has
made it: the supervisor thread (:meth:`Supervisor.supervise`) runs its attempts
(:mod:`.attempts`), each one *Downloading* then *Training* on the backend's
:class:`~launchbay.backends.local.hosts.HostRunner`; it watches the hosts' exit
codes (the first host to exit non-zero fails the job, the others get
:data:`PEER_EXIT_WAIT` seconds to end by themselves), stops the hosts on a stop
request or ``MaxRuntimeInSeconds`` (SIGTERM, SIGKILL after the grace period),
always tears them down, and ends the job through
:func:`~launchbay.backends.local.finish.finish_job`. :func:`request_stop` is how
anything in this process (``stop()``, a Debugger rule's ``StopTraining``) asks it
to stop a job.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence

from launchbay import metrics, transfer
from launchbay.backends.local import attempts, tensorboard
from launchbay.backends.local.finish import failure_reason, finish_job
from launchbay.backends.local.hosts import POLL, RUNTIME_MARGIN, HostHandles, HostRunner
from launchbay.backends.local.record import LocalJob, utc_now
from launchbay.backends.local.rules import start_rules
from launchbay.backends.local.tensorboard import TensorBoardSync
from launchbay.errors import LaunchbayError
from launchbay.runtime.for_client import read_records
from launchbay.runtime.names import COMPLETED, FAILED, STOPPED, STOPPING

logger = logging.getLogger("launchbay.backends.local")

__all__ = ["PEER_EXIT_WAIT", "Supervisor", "keep_hosts", "request_stop"]

#: Seconds the other hosts get to end by themselves once one host failed.
PEER_EXIT_WAIT = 3.0


def request_stop(job: LocalJob, reason: str) -> None:
    """Ask the supervisor to stop a job this process runs (it ends Stopped, saying ``reason``)."""
    job.stop_reason = job.stop_reason or reason
    job.stop_requested.set()
    job.changed.set()


def keep_hosts(job: LocalJob, made: HostHandles) -> None:
    """Keep what the host runner made in the job: the runners return it, only the loop writes it."""
    with job.lock:
        job.procs = dict(made.handles)
        job.readers.extend(r for r in made.readers if r not in job.readers)


def _start_tensorboard_sync(job: LocalJob) -> TensorBoardSync | None:
    """Copy the hosts' TensorBoard files to their destination while the job runs (if asked)."""
    if tensorboard.destination(job.host_plan) is None:
        return None
    outputs = job.stager.outputs
    return TensorBoardSync(
        job.name,
        lambda: outputs.sync_tensorboard(job.host_plan, job.layout),
        cancel=[(job.force_kill, "the job was killed at once")],
    ).start()


def _still_running(job: LocalJob, hosts: Sequence[str]) -> str:
    """``host algo-2 (ranks 2, 3)``...: the ranks without an end, by host.

    Ranks are read from the runtime's rank records in the job's shared dir
    (:mod:`launchbay.runtime._records`, lent by :mod:`launchbay.runtime.for_client`). A host whose ranks all ended is only
    waiting for the others (an MPI master, say) and is left out; without any
    record (the hosts never got to their ranks) the running hosts are named.
    """
    starts, ends = read_records(os.path.join(job.layout.shared_dir, "ranks"))
    parts = []
    for host in hosts:
        ranks = sorted(
            rank
            for rank, record in starts.items()
            if record.get("host") == host and rank not in ends
        )
        if ranks:
            label = "rank" if len(ranks) == 1 else "ranks"
            parts.append(f"host {host} ({label} {', '.join(str(r) for r in ranks)})")
    if not parts:
        parts = [f"host {host}" for host in hosts]
    return ", ".join(parts) or "no host (every host had just ended)"


class Supervisor:
    """Runs one local job to its end on ``runner``, looking at its hosts every ``poll_interval`` s.

    Args:
        runner: What runs the job's hosts (the backend's host runner).
        poll_interval: Seconds between two looks at the hosts' exit codes (the
            backend's :attr:`~launchbay.backends.local.control.LocalBackend.poll_interval`).
    """

    def __init__(self, runner: HostRunner, poll_interval: float = POLL) -> None:
        self.runner = runner
        self.poll_interval = poll_interval

    def supervise(self, job: LocalJob) -> None:
        """The supervisor thread: run the job, tear its hosts down, finish it, whatever happens."""
        # Every metric of MetricDefinitions as a time series in <job dir>/metrics.jsonl, read
        # from the logs by a process of its own (launchbay.metrics), ended before the job is.
        recorder = metrics.start_recorder(
            job.layout.job_dir, [job.layout.log_file(h) for h in job.hosts],
            job.plan.metric_definitions,
        )  # fmt: skip
        outcome: tuple[str, str | None] = (FAILED, "InternalError: the job ended unexpectedly")
        try:
            outcome = self.run_job(job)
        except LaunchbayError as exc:
            outcome = (FAILED, f"ClientError: {exc}")
            logger.error("Local training job %s could not start: %s", job.name, exc)
        except Exception as exc:  # the supervisor must always finish the job
            logger.exception("Local training job %s: unexpected error", job.name)
            outcome = (FAILED, f"InternalError: {type(exc).__name__}: {exc}")
        finally:
            try:
                try:
                    self.teardown(job)
                finally:
                    if recorder is not None:  # the logs are whole: the job ends once they are read
                        killed = "the job was killed at once" if job.force_kill.is_set() else None
                        recorder.finish(abandon=killed, cancel=job.force_kill)
                    if job.rules is not None:  # the Debugger rules read the job's data to its end
                        job.rules.finish(cancel=job.force_kill)
                # a second Ctrl-C or SIGTERM stops the uploads at once
                with transfer.cancelled_by(job.force_kill, "the job was killed at once"):
                    finish_job(job, *outcome)
            finally:
                if not job.done.is_set():  # _finish itself failed: still end the job
                    with job.lock:
                        job.status, job.end_time = FAILED, job.end_time or utc_now()
                        job.failure_reason = job.failure_reason or outcome[1]
                    job.save_final()
                    job.release_name()
                    job.done.set()
                    job.notify()
                job.release_name()

    def run_job(self, job: LocalJob) -> tuple[str, str | None]:
        """Every attempt of the job; returns ``(status, failure reason)``."""
        # Spot interruptions (rehearsed) and retries run the job again: docs/local.md.
        return attempts.run_attempts(job, self.run_attempt, self.teardown)

    def run_attempt(self, job: LocalJob) -> tuple[str, str | None]:
        """One attempt: *Downloading*, then *Training* until the hosts end."""
        job._set_secondary("Downloading", "Downloading input data")
        # Channel and checkpoint downloads stop with the job.
        with transfer.cancelled_by(job.stop_requested, "the job was stopped"):
            prepared = self.runner.prepare(job)
        if prepared is not None:  # made ahead (a Docker job's containers), read from job.procs
            keep_hosts(job, prepared)
        job.attempts.restored(job)  # a restart watches whether its script reads them
        if job.stop_requested.is_set():
            return STOPPED, None
        job._set_secondary("Training", "Training image download completed. Training in progress.")
        with job.lock:
            # the first attempt's Training transition (TrainingStartTime, as SageMaker)
            job.start_time = job.start_time or job.transitions[-1]["StartTime"]
        keep_hosts(job, self.runner.start(job))
        job.save()
        sync = _start_tensorboard_sync(job)
        # Debugger rules and system metrics (docs/debugger.md); StopTraining stops as stop() does.
        if job.rules is None:  # once per job, whatever its attempts
            job.rules = start_rules(job, lambda reason: request_stop(job, reason))
        try:
            return self.monitor(job)
        finally:
            if sync is not None:  # the copy made with the outputs sends the rest
                sync.stop()

    def monitor(self, job: LocalJob) -> tuple[str, str | None]:
        """Watch the hosts until the job ends; returns ``(status, failure reason)``."""
        max_run = job.plan.max_run
        started = time.monotonic() - attempts.earlier_training(job)  # all attempts count
        while True:
            if job.stop_requested.is_set():
                job.status = STOPPING
                job._set_secondary("Stopping", f"Stopping the training job: {job.stop_reason}")
                self.terminate(job, self.running_hosts(job))
                return STOPPED, None
            ended = job.attempts.rehearse(job, self.runner, self.terminate)
            if ended is not None:  # a rehearsed interruption, a host lost, max_wait
                return ended
            if max_run and time.monotonic() - started > float(max_run):
                job._set_secondary("MaxRuntimeExceeded", "Training job reached MaxRuntimeInSeconds")
                running = self.running_hosts(job)
                still = _still_running(job, running)
                self.terminate(job, running)
                return STOPPED, (
                    f"Training job exceeded MaxRuntimeInSeconds ({max_run} seconds) and was "
                    f"stopped. Still running when the limit was hit: {still}."
                )
            codes = self.runner.exit_codes(job)
            failed = [host for host, code in codes.items() if code not in (None, 0)]
            if failed:
                logger.info(
                    "Host %s of job %s exited with code %s: stopping the other hosts",
                    failed[0],
                    job.name,
                    codes[failed[0]],
                )
                self.let_hosts_end(job, PEER_EXIT_WAIT)
                self.terminate(job, self.running_hosts(job))
                return FAILED, failure_reason(job, failed[0], codes[failed[0]])
            if codes and all(code == 0 for code in codes.values()):
                return COMPLETED, None
            job.changed.wait(self.poll_interval)
            job.changed.clear()

    def running_hosts(self, job: LocalJob) -> list[str]:
        return self.runner.running(job)

    def let_hosts_end(self, job: LocalJob, seconds: float) -> None:
        """Give the other hosts up to ``seconds`` to end by themselves after a host failed.

        Their runtimes learn of the failure through the shared directory (or from
        the MPI master) and stop their ranks themselves, each writing its own
        report (a worker says why it ends); only those still running then get SIGTERM.
        """
        deadline = time.monotonic() + seconds
        while self.running_hosts(job) and time.monotonic() < deadline:
            if job.stop_requested.is_set() or job.force_kill.is_set():
                return
            job.changed.wait(self.poll_interval)
            job.changed.clear()

    # -- stopping hosts ----------------------------------------------------------------
    def terminate(self, job: LocalJob, hosts: list[str]) -> None:
        """Stop ``hosts``: SIGTERM, SIGKILL after ``job.grace`` (at once on ``job.force_kill``)."""
        alive = [h for h in hosts if h in self.running_hosts(job)]
        self.runner.signal(job, alive, signal.SIGTERM)
        deadline = time.monotonic() + job.grace + RUNTIME_MARGIN
        while True:
            survivors = [h for h in alive if h in self.running_hosts(job)]
            if not survivors:
                break
            if job.force_kill.is_set() or time.monotonic() >= deadline:
                self.runner.signal(job, survivors, signal.SIGKILL)
                break
            time.sleep(POLL)
        self.runner.reap(job, alive)

    def teardown(self, job: LocalJob) -> None:
        """Stop what still runs, then let the runner leave nothing running or allocated."""
        running = self.running_hosts(job)
        if running:
            self.terminate(job, running)
        self.runner.teardown(job)
