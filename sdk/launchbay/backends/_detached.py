"""Local jobs run by a process other than the caller: detached runners and stop requests.

A local job lives as long as the process that runs it (its client). Two things
let other processes act on such a job; the local backends use them behind
:meth:`~launchbay.backends.base.Backend.run_detached`,
:meth:`~launchbay.backends.base.Backend.accept_stops` and
:meth:`~launchbay.backends.base.Backend.stop`:

* **a detached runner**: :func:`start` runs a command that runs the job to its
  end (``launchbay submit --wait`` for ``launchbay submit --no-wait``) in its own
  session, stdin closed, its output in ``$LAUNCHBAY_HOME/cli/<job>.log``, and
  returns once the job's ``status.json`` is written (or the runner exited);
* **a runner file** ``$LAUNCHBAY_HOME/cli/<job>.pid`` (``<pid> <start time>``): a
  process that writes it (:func:`register`) accepts stop requests by SIGTERM,
  which it handles as Ctrl-C (the job ends Stopped). :func:`stop` sends it and
  waits until the job has ended. The start time (``/proc/<pid>/stat``) keeps a
  reused pid from being signalled.

A process that did not register (a notebook kernel, a script) is never signalled:
its jobs are stopped where they run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay._home import local_home
from launchbay.backends.base import DetachedRun
from launchbay.errors import JobError
from launchbay.runtime.names import TERMINAL_STATUSES

__all__ = ["START_TIMEOUT", "register", "runner_pid", "start", "stop"]

logger = logging.getLogger("launchbay.backends.local")

#: Seconds :func:`start` waits for a detached job to start.
START_TIMEOUT = 120.0
#: Seconds :func:`stop` waits beyond the grace period for the job to end.
STOP_MARGIN = 60.0
_OUTPUT_TAIL = 4000


def runner_dir() -> str:
    """``$LAUNCHBAY_HOME/cli``: runner files and detached runners' output."""
    return os.path.join(local_home(), "cli")


def _pid_file(name: str) -> str:
    return os.path.join(runner_dir(), f"{name}.pid")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of stat(5)


def register(name: str, pid: int | None = None) -> None:
    """Record ``pid`` (default: this process) as the runner of job ``name`` (best effort)."""
    pid = os.getpid() if pid is None else pid
    path = _pid_file(name)
    try:
        os.makedirs(runner_dir(), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{pid} {_start_time(pid) or ''}".rstrip() + "\n")
    except OSError as exc:
        logger.debug("Could not write %s: %s", path, exc)


def runner_pid(name: str) -> int | None:
    """The pid of the registered runner of job ``name``, if that process still lives."""
    try:
        with open(_pid_file(name), encoding="utf-8") as f:
            parts = f.read().split()
        pid = int(parts[0])
    except (OSError, ValueError, IndexError):
        return None
    recorded = parts[1] if len(parts) > 1 else None
    current = _start_time(pid)
    if current is not None:
        return pid if recorded is None or recorded == current else None
    try:  # no /proc: trust the file while the pid exists
        os.kill(pid, 0)
    except OSError:
        return None
    return pid


def _fresh(path: str, since: float) -> bool:
    try:
        return os.stat(path).st_mtime >= since - 1.0
    except OSError:
        return False


def start(
    name: str, command: Sequence[str], status_file: str, timeout: float = START_TIMEOUT
) -> DetachedRun:
    """Run ``command`` detached; return once ``status_file`` is (re)written or it exited."""
    os.makedirs(runner_dir(), exist_ok=True)
    log_path = os.path.join(runner_dir(), f"{name}.log")
    started = time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the caller's terminal does not reach it
        )
    register(name, proc.pid)
    deadline = time.monotonic() + timeout
    while not _fresh(status_file, started):
        code = proc.poll()
        if code is not None or time.monotonic() > deadline:
            output = ""
            with contextlib.suppress(OSError), open(log_path, encoding="utf-8") as f:
                output = f.read()[-_OUTPUT_TAIL:]
            return DetachedRun(proc.pid, log_path, -1 if code is None else code, output)
        time.sleep(0.1)
    return DetachedRun(proc.pid, log_path, None)


def stop(
    name: str, describe: Callable[[str], Mapping[str, Any]], grace: float
) -> Mapping[str, Any] | None:
    """SIGTERM the registered runner of job ``name`` and wait until the job ended.

    Returns the job's last description, or ``None`` when no registered runner lives.

    Raises:
        JobError: the job did not end within ``grace`` plus a minute.
    """
    pid = runner_pid(name)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    logger.info("stopping local training job %s (runner pid %d)", name, pid)
    deadline = time.monotonic() + grace + STOP_MARGIN
    while True:
        description = describe(name)
        if description.get("TrainingJobStatus") in TERMINAL_STATUSES:
            return description
        if time.monotonic() > deadline:
            raise JobError(f"Local training job {name!r} did not stop in time.")
        time.sleep(0.2)
