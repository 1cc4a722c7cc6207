"""Local jobs run by a process other than the caller: detached runners and stop requests.

A local job lives as long as the process that runs it (its client). Two things
let other processes act on such a job; the local backends use them behind
:meth:`~launchbay.backends.base.InProcessBackend.run_detached`,
:meth:`~launchbay.backends.base.InProcessBackend.accept_stops` and
:meth:`~launchbay.backends.base.Backend.stop`:

* **a detached runner**: :func:`start` runs a command that runs the job to its
  end (``launchbay submit --wait`` for ``launchbay submit --no-wait``) in its own
  session, stdin closed, its output in ``$LAUNCHBAY_HOME/cli/<job>.log``, and
  returns once the job's ``status.json`` is written, the runner exited, or the
  start wait (``LAUNCHBAY_DETACHED_START_SECONDS``, default 120) is over while
  the runner still works (it is still starting: staging, pulling an image; that
  is reported as such, not as a failure). The caller holds the job's name lock
  (so it never touches the files of a job it does not own) and hands it down to
  the runner, which adopts it
  (:meth:`~launchbay.backends.local.record.NameLock.adopt`);
* **a runner file** ``$LAUNCHBAY_HOME/cli/<job>.pid`` (``<pid> <start time>``, then
  ``detached`` for a runner :func:`start` started): a
  process that writes it (:func:`register`) accepts stop requests by SIGTERM,
  which it handles as Ctrl-C (the job ends Stopped). :func:`stop` sends it and
  waits until the job has ended. The start time (``/proc/<pid>/stat``) keeps a
  reused pid from being signalled. :func:`is_detached` says whether a job's
  runner is a live detached one (``launchbay list`` marks those jobs);
* **a request file** ``$LAUNCHBAY_HOME/cli/<job>.request.json`` (0600): the request a
  detached runner of ``fit(wait=False)`` runs (:func:`write_request`,
  :func:`take_request`; :mod:`launchbay.backends.local.detached_runner`).

A process that did not register (a notebook kernel, a script) is never signalled:
its jobs are stopped where they run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay._home import local_dir, local_home
from launchbay.backends.base import DetachedRun
from launchbay.backends.local.layout import write_text_atomic
from launchbay.backends.state import JobState
from launchbay.errors import ConfigurationError, JobError

__all__ = [
    "START_TIMEOUT",
    "is_detached",
    "register",
    "runner_pid",
    "start",
    "start_timeout",
    "stop",
    "take_request",
    "write_request",
]

logger = logging.getLogger("launchbay.backends.local")

#: Seconds :func:`start` waits for a detached job to start (``LAUNCHBAY_DETACHED_START_SECONDS``).
START_TIMEOUT = 120.0
START_TIMEOUT_ENV = "LAUNCHBAY_DETACHED_START_SECONDS"
#: Names the handed-down name lock (see NameLock.adopt in local/record.py).
_HANDED_LOCK_ENV = "LAUNCHBAY_NAME_LOCK"
#: Seconds :func:`stop` waits beyond the grace period for the job to end.
STOP_MARGIN = 60.0
_OUTPUT_TAIL = 4000


def runner_dir() -> str:
    """``$LAUNCHBAY_HOME/cli``: runner files and detached runners' output."""
    return os.path.join(local_home(), "cli")


def start_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds :func:`start` waits: ``LAUNCHBAY_DETACHED_START_SECONDS``, else 120.

    Raises:
        ConfigurationError: the variable is not a number of seconds above 0.
    """
    raw = (os.environ if environ is None else environ).get(START_TIMEOUT_ENV, "")
    if not raw.strip():
        return START_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise ConfigurationError.invalid(START_TIMEOUT_ENV, raw, "a number of seconds above 0")
    return value


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


_DETACHED = "detached"


def _read_runner(name: str) -> tuple[int, list[str]] | None:
    """The runner file's pid and the words after it, or None."""
    try:
        with open(_pid_file(name), encoding="utf-8") as f:
            parts = f.read().split()
        return int(parts[0]), parts[1:]
    except (OSError, ValueError, IndexError):
        return None


def register(name: str, pid: int | None = None, *, detached: bool = False) -> None:
    """Record ``pid`` (default: this process) as the runner of job ``name`` (best effort).

    ``detached``: :func:`start` started it. A runner registering itself again
    (``accept_stops``) keeps that mark.
    """
    pid = os.getpid() if pid is None else pid
    path = _pid_file(name)
    started = _start_time(pid) or ""
    if not detached:
        previous = _read_runner(name)
        detached = previous is not None and previous[0] == pid and _DETACHED in previous[1]
    try:
        # Replaced whole, never truncated in place: a reader (list, stop, the client that
        # started this runner) never sees an empty file while the runner registers again.
        words = (str(pid), started, _DETACHED if detached else "")
        write_text_atomic(path, " ".join(w for w in words if w) + "\n")
    except OSError as exc:
        logger.debug("Could not write %s: %s", path, exc)


def runner_pid(name: str) -> int | None:
    """The pid of the registered runner of job ``name``, if that process still lives."""
    found = _read_runner(name)
    if found is None:
        return None
    pid, rest = found
    recorded = rest[0] if rest and rest[0] != _DETACHED else None
    current = _start_time(pid)
    if current is not None:
        return pid if recorded is None or recorded == current else None
    try:  # no /proc: trust the file while the pid exists
        os.kill(pid, 0)
    except OSError:
        return None
    return pid


def is_detached(name: str) -> bool:
    """Whether job ``name`` is run by a live runner :func:`start` started (not its caller)."""
    found = _read_runner(name)
    return found is not None and _DETACHED in found[1] and runner_pid(name) == found[0]


def _request_file(name: str) -> str:
    return os.path.join(runner_dir(), f"{name}.request.json")


def write_request(name: str, request: Mapping[str, Any]) -> str:
    """Store the request a detached runner of job ``name`` runs (0600); returns its path.

    The caller holds the job's name lock (see :func:`start`).
    """
    local_dir("cli")
    path = _request_file(name)
    write_text_atomic(path, json.dumps(request, default=str))  # 0600
    return path


def take_request(path: str) -> dict[str, Any]:
    """Read the request :func:`write_request` stored, and remove its file."""
    try:
        with open(path, encoding="utf-8") as f:
            request = json.load(f)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if not isinstance(request, dict):
        raise JobError(f"{path} does not hold a CreateTrainingJob request.")
    return request


def _fresh(path: str, since: float) -> bool:
    try:
        return os.stat(path).st_mtime >= since - 1.0
    except OSError:
        return False


def start(
    name: str,
    command: Sequence[str],
    status_file: str,
    timeout: float | None = None,
    *,
    lock: Any = None,
) -> DetachedRun:
    """Run ``command`` detached; return once ``status_file`` is (re)written, it exited, or ``timeout``.

    ``lock`` (a :class:`~launchbay.backends.local.record.NameLock` the caller took
    for ``name``) is handed down to the command and released here; the runner
    file and the output file are written only under it. ``timeout`` defaults to
    :func:`start_timeout`. A runner still alive at the timeout is starting:
    ``DetachedRun(starting=True)``.
    """
    timeout = start_timeout() if timeout is None else timeout
    env = None
    pass_fds: tuple[int, ...] = ()
    try:
        directory = local_dir("cli")
        log_path = os.path.join(directory, f"{name}.log")
        started = time.time()
        if lock is not None and lock.fd is not None:
            pass_fds = (lock.fd,)
            env = dict(os.environ, **{_HANDED_LOCK_ENV: f"{name}:{lock.fd}"})
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in the caller's terminal does not reach it
                env=env,
                pass_fds=pass_fds,
            )
        register(name, proc.pid, detached=True)
    finally:
        if lock is not None:
            lock.release()  # the runner holds it now (or nobody, if it did not start)
    deadline = time.monotonic() + timeout
    while not _fresh(status_file, started):
        code = proc.poll()
        if code is not None:
            output = ""
            with contextlib.suppress(OSError), open(log_path, encoding="utf-8") as f:
                output = f.read()[-_OUTPUT_TAIL:]
            return DetachedRun(proc.pid, log_path, code, output)
        if time.monotonic() > deadline:
            logger.debug("Runner %d of job %s still starting after %gs", proc.pid, name, timeout)
            return DetachedRun(proc.pid, log_path, None, starting=True)
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
        if JobState.from_description(description).terminal:
            return description
        if time.monotonic() > deadline:
            raise JobError(f"Local training job {name!r} did not stop in time.")
        time.sleep(0.2)
