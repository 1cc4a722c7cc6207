"""What a local job's client process does about signals, its own exit and its own death.

* Ctrl-C while waiting (:class:`SigintFlag`) and SIGTERM to the client stop
  every running job like Ctrl-C (:func:`_on_sigterm`; :func:`sigterm_received` tells
  other control loops, such as a local tuning job's, that it came);
* at interpreter exit, jobs still running are stopped, then killed
  (:func:`_stop_all_at_exit`);
* a watchdog process (:func:`start_watchdog`, :mod:`launchbay.backends.local.watchdog`)
  finishes a job whose client died; detached runs are :mod:`launchbay.backends.local.detached`'s.

The jobs this interpreter runs are registered here (:func:`register_job`, ``RUNNING_JOBS``).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import launchbay
from launchbay.backends.local.hosts import RUNTIME_MARGIN
from launchbay.backends.local.record import LocalJob

logger = logging.getLogger("launchbay.backends.local")


class SigintFlag:
    """Turns SIGINT into a flag while a caller waits (main thread only).

    A KeyboardInterrupt raised at an arbitrary bytecode can land between a
    lock's acquire and the ``with`` block that releases it, leaving the lock
    held and the supervisor thread blocked on it forever. Counting the signal
    and raising at a known point avoids that.
    """

    def __init__(self) -> None:
        self.count = 0
        self.seen = 0
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> SigintFlag:
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.signal(signal.SIGINT, self._handler)
                self._installed = True
            except ValueError:  # not the main interpreter
                self._installed = False
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)

    def _handler(self, signum: int, frame: Any) -> None:
        self.count += 1

    def pending(self) -> bool:
        """True once for every Ctrl-C not yet raised."""
        if self.count > self.seen:
            self.seen = self.count
            return True
        return False


# Every job started in this interpreter, by job directory (for atexit and other backends).
RUNNING_JOBS: dict[str, LocalJob] = {}
RUNNING_JOBS_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False


def register_job(job: LocalJob) -> None:
    global _ATEXIT_REGISTERED
    with RUNNING_JOBS_LOCK:
        RUNNING_JOBS[job.layout.job_dir] = job
        if not _ATEXIT_REGISTERED:
            atexit.register(_stop_all_at_exit)
            _ATEXIT_REGISTERED = True
    _install_sigterm_handler()


def running_job(job_dir: str) -> LocalJob | None:
    """The job this process runs in ``job_dir``, if any."""
    with RUNNING_JOBS_LOCK:
        return RUNNING_JOBS.get(job_dir)


# SIGTERM to the client is handled like Ctrl-C: every running job is stopped (its
# hosts get SIGTERM, checkpoints and outputs are saved, it ends Stopped), then the
# process dies of SIGTERM as it was told to. Installed only over the default action.
SIGTERM_STATE = {"installed": False, "stopping": False, "exit": False}


def sigterm_received() -> bool:
    """Whether this process got SIGTERM and is stopping its local jobs (so should any other
    control loop it runs: a local tuning job starts no trial more and stops those running)."""
    return bool(SIGTERM_STATE["stopping"])


def _install_sigterm_handler() -> None:
    if SIGTERM_STATE["installed"] or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # the caller's own handler stays
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return
    SIGTERM_STATE["installed"] = True


def running_jobs() -> list[LocalJob]:
    # No lock here: a signal handler must never wait for one its own thread may hold.
    for _ in range(10):
        try:
            return [job for job in list(RUNNING_JOBS.values()) if not job.done.is_set()]
        except RuntimeError:  # the dict changed while being copied
            continue
    return []


def _on_sigterm(signum: int, frame: Any) -> None:
    if SIGTERM_STATE["exit"]:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    running = running_jobs()
    if SIGTERM_STATE["stopping"]:  # a second SIGTERM: kill the hosts at once
        for job in running:
            job.force_kill.set()
            job.changed.set()
        return
    SIGTERM_STATE["stopping"] = True
    for job in running:
        logger.warning(
            "SIGTERM: stopping local training job %s (SIGTERM again to kill at once)", job.name
        )
        job.stop_reason = job.stop_reason or "the client process received SIGTERM"
        job.stop_requested.set()
        job.changed.set()
    threading.Thread(
        target=die_after_stopping, args=(running,), name="launchbay-sigterm", daemon=True
    ).start()


#: What ended jobs left running in the background (their containers and network being
#: removed, :func:`clean_up_later`); a process about to die of SIGTERM waits for it.
_CLEANUPS: set[concurrent.futures.Future[Any]] = set()
_CLEANUPS_LOCK = threading.Lock()
#: Seconds a process dying of SIGTERM waits at most for the cleanups of its ended jobs.
CLEANUP_WAIT = 30.0


def clean_up_later(
    executor: concurrent.futures.Executor, what: str, work: Callable[..., Any], *args: Any
) -> None:
    """Run ``work(*args)`` on ``executor``, off the path of the job that ended.

    An exiting interpreter's executors accept no more work (an interrupted notebook's job
    ended at exit): then it runs now. A failure is logged, naming ``what``. A process that
    dies of SIGTERM (:func:`die_after_stopping`) waits for the work still pending first;
    an interpreter that exits joins the executor's threads itself.
    """
    try:
        future = executor.submit(work, *args)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        try:
            work(*args)
        except Exception as exc:
            logger.warning("Could not clean up %s: %s", what, exc)
        return
    with _CLEANUPS_LOCK:
        _CLEANUPS.add(future)

    def done(future: concurrent.futures.Future[Any]) -> None:
        with _CLEANUPS_LOCK:
            _CLEANUPS.discard(future)
        error = future.exception()
        if error is not None:
            logger.warning("Could not clean up %s: %s", what, error)

    future.add_done_callback(done)


def wait_for_cleanups(timeout: float) -> None:
    """Wait up to ``timeout`` seconds for the work :func:`clean_up_later` still runs."""
    with _CLEANUPS_LOCK:
        pending = list(_CLEANUPS)
    if pending:
        concurrent.futures.wait(pending, timeout=timeout)


def die_after_stopping(jobs: list[LocalJob]) -> None:
    """Wait for ``jobs`` to end (checkpoints and outputs saved), then die of SIGTERM.

    The ended jobs' cleanups left to the background (containers and the job network) are
    waited for too: dying would leave them to the next job's orphan sweep.
    """
    deadline = time.monotonic() + max((j.grace for j in jobs), default=0) + RUNTIME_MARGIN + 120
    for job in jobs:
        job.done.wait(max(deadline - time.monotonic(), 0.1))
    wait_for_cleanups(CLEANUP_WAIT)
    SIGTERM_STATE["exit"] = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)  # else the handler, on the main thread, lets it kill us
    if threading.current_thread() is threading.main_thread():
        time.sleep(60)  # the signal is delivered before this returns


def _stop_all_at_exit() -> None:
    """Stop every job still running when the interpreter exits; leave no process behind."""
    with RUNNING_JOBS_LOCK:
        running = [job for job in RUNNING_JOBS.values() if not job.done.is_set()]
    for job in running:
        logger.warning("Stopping local training job %s (the Python process is exiting)", job.name)
        job.stop_reason = job.stop_reason or "the Python process that started it exited"
        job.stop_requested.set()
        job.changed.set()
    deadline = time.monotonic() + max((j.grace for j in running), default=0) + RUNTIME_MARGIN
    for job in running:
        job.done.wait(max(deadline - time.monotonic(), 0.1))
        if not job.done.is_set():
            job.force_kill.set()
            try:
                job.hard_kill(job)
            except Exception as exc:  # at exit: report, go on with the other jobs
                logger.warning("Could not kill what is left of job %s: %s", job.name, exc)


def start_watchdog(backend: type, job_root: str, job: LocalJob) -> Any:
    """Start the job's watchdog (see :mod:`launchbay.backends.local.watchdog`); None if it cannot.

    ``backend`` is the class the watchdog makes (``job_root=``, ``grace_seconds=``)
    to finish the job.
    """
    import subprocess
    import sys

    target = f"{backend.__module__}:{backend.__qualname__}"
    env = dict(os.environ)
    parent = os.path.dirname(os.path.dirname(os.path.abspath(launchbay.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [parent, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    os.makedirs(job.layout.artifacts_dir, exist_ok=True)
    try:
        with open(os.path.join(job.layout.artifacts_dir, "watchdog.log"), "ab") as log:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "launchbay.backends.local.watchdog",
                    target,
                    job_root,
                    job.name,
                    f"{job.grace:g}",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:  # the job runs; only a dying client would leave it unfinished
        logger.warning("Could not start the watchdog of job %s: %s", job.name, exc)
        return None
