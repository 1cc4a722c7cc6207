"""A local job's life, shared by the local backends (``local_process`` and Docker).

:class:`LocalBackend` does everything SageMaker's control plane does for a
training job, whatever runs the hosts:

1. ``run(request)`` checks the request, makes the job directory (see
   :mod:`launchbay.backends._local`) and returns a
   :class:`~launchbay.job.TrainingJob` at once; a supervisor thread does the rest;
2. *Downloading*: writes each host's ``input/config/*.json``, links the
   channels, restores checkpoints (:meth:`LocalBackend._prepare`);
3. *Training*: the subclass starts one host per instance
   (:meth:`LocalBackend._start_hosts`). Every line a host prints goes to
   ``logs/<host>.log``, which :meth:`LocalBackend.wait` prints from as it
   grows, prefixed by the host (nothing is dropped, however far the display
   falls behind);
4. the first host to exit non-zero fails the job: the other hosts are stopped
   at once (SIGTERM, SIGKILL after the grace period), every host's
   ``output/launchbay-failure.json`` is read and the earliest failure is the root
   cause; its report (or the host's ``output/failure``) becomes ``FailureReason``
   (first 1024 characters, as SageMaker);
5. *Uploading*: checkpoints are saved (in every end state: success, failure,
   stop, Ctrl-C), then ``model.tar.gz``, ``output.tar.gz`` and the failure reason
   are written under ``<output_path>/<job>/output/``;
6. teardown (:meth:`LocalBackend._teardown`) always runs, also when the
   interpreter exits with jobs still running.

Subclasses implement how hosts start, report their exit codes, stop and are
cleaned up; nothing else.
"""

from __future__ import annotations

import atexit
import codecs
import collections
import contextlib
import copy
import datetime as _dt
import json
import logging
import os
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from launchbay import transfer
from launchbay._home import unusable_home_error, usable_local_home
from launchbay._logs import LogPrinter, show_logs
from launchbay.backends import _detached
from launchbay.backends._local import (
    JobLayout,
    LocalStager,
    _write_json_atomic,
    check_request,
    default_job_root,
    host_names,
)
from launchbay.backends.base import Backend, DetachedRun
from launchbay.backends.plan import JobPlan
from launchbay.errors import ConfigurationError, JobError, LaunchbayError
from launchbay.job import LogTail, TrainingJob
from launchbay.runtime import _records
from launchbay.runtime._procs import describe_exit, is_alive
from launchbay.runtime.contract import check_request_paths, write_host_config
from launchbay.runtime.names import (
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    JOB_STATUSES,
    MAX_LOG_LINE,
    STOPPED,
    STOPPING,
    TERMINAL_STATUSES,
)
from launchbay.runtime.settings import DEFAULT_GRACE_SECONDS, GRACE_ENV, parse_grace_seconds

__all__ = ["LocalBackend", "DEFAULT_GRACE_SECONDS"]

logger = logging.getLogger("launchbay.backends.local")

#: Extra time a host's runtime gets after the grace period to report and exit.
RUNTIME_MARGIN = 5.0
#: Seconds the other hosts get to end by themselves once one host failed.
PEER_EXIT_WAIT = 3.0
POLL = 0.05
_READER_JOIN = 5.0
#: Most bytes of one host's log file a follower reads at once (see _LogFiles).
_READ_CHUNK = 1 << 20
#: What ends a line in a log file: a newline, or a carriage return (a progress bar).
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: Most bytes read from the end of a host's log file for the last lines of a failure.
_TAIL_BYTES = 256 * 1024
#: Most lines handed to the printer at once.
_PRINT_BATCH = 2_000
#: Last lines of the failing host given in a failure reason without a report.
_TAIL_LINES = 20
_REASON_LIMIT = 1024
_FAILURE_CAUSE_ORDER = {
    "exception": 0,
    "exit": 1,
    "crash": 2,
    "launcher": 3,
    "host": 4,
    "setup": 5,
    "signal": 6,
}
_REQUEST_KEYS_NOT_DESCRIBED = ("Tags",)


#: ``<host name>:<pid>`` of this process, recorded with every local job it runs.
CLIENT_ID = f"{socket.gethostname()}:{os.getpid()}"


def client_pid(client_id: str) -> int | None:
    """The pid of a :data:`CLIENT_ID` recorded on this machine (``None``: another machine's)."""
    host, _, pid = client_id.rpartition(":")
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def job_arn(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The ARN a local job reports: SageMaker's form, in the caller's region (else ``local``)."""
    environ = os.environ if environ is None else environ
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "local"
    return f"arn:aws:sagemaker:{region}:000000000000:training-job/{name.lower()}"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def grace_from(request: Mapping[str, Any], explicit: float | None) -> float:
    """The grace period: ``explicit``, else ``LAUNCHBAY_GRACE_SECONDS`` (request, then caller).

    Read with the runtime's own rule (:func:`launchbay.runtime.settings.parse_grace_seconds`),
    so the client and the hosts accept the same values.

    Raises:
        ConfigurationError: a value that is not a finite number of seconds from 0
            to :data:`~launchbay.runtime.settings.MAX_GRACE_SECONDS`.
    """
    if explicit is not None:
        return _grace_value(explicit, "grace_seconds")
    raw = (request.get("Environment") or {}).get(GRACE_ENV)
    argument = f"environment[{GRACE_ENV!r}]"
    if raw in (None, ""):
        raw, argument = os.environ.get(GRACE_ENV), GRACE_ENV
    if raw in (None, ""):
        return DEFAULT_GRACE_SECONDS
    return _grace_value(raw, argument)


def _grace_value(value: object, argument: str) -> float:
    try:
        return parse_grace_seconds(value, argument)
    except ValueError as exc:
        raise ConfigurationError(str(exc), argument=argument, value=value) from None


def _check_host_paths(request: Mapping[str, Any]) -> None:
    """Channel names and checkpoint ``LocalPath`` by the runtime's rule, before anything is made."""
    try:
        check_request_paths(request)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


# --------------------------------------------------------------------------- one job


class _SigintFlag:
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

    def __enter__(self) -> _SigintFlag:
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


class _LogFiles:
    """Each host's ``logs/<host>.log``, read from where the last read stopped.

    Followers print from these files, not from memory: a driver whose display is
    slower than the ranks falls behind but never loses a line, and its memory
    stays flat however far behind it is, and however long a line is: each read
    takes at most :data:`_READ_CHUNK` bytes of a host, every byte is read once,
    and at most :data:`~launchbay.runtime.names.MAX_LOG_LINE` bytes of a line not
    yet ended are held. A longer line is shown in pieces of that size.

    A carriage return ends a line too, so a progress bar (``print(..., end="\\r")``)
    is shown as it moves; updates that a later one in the same read overwrites
    are skipped, as a terminal would overwrite them.
    """

    def __init__(self, layout: JobLayout) -> None:
        self.paths = {h: layout.log_file(h) for h in layout.hosts}
        self.offsets = dict.fromkeys(self.paths, 0)
        #: Per host: the bytes of a line not yet ended (at most MAX_LOG_LINE).
        self.pending = dict.fromkeys(self.paths, b"")
        #: Per host: the last read ended with a carriage return (a newline next belongs to it).
        self.after_cr = dict.fromkeys(self.paths, False)
        self.decoders = {
            h: codecs.getincrementaldecoder("utf-8")(errors="replace") for h in self.paths
        }

    def read(self, host: str, final: bool) -> list[str]:
        """The next lines of ``host`` (up to a chunk's worth), without line ends.

        A line longer than :data:`~launchbay.runtime.names.MAX_LOG_LINE` bytes
        comes in pieces of that size. With ``final`` (the host has stopped
        writing), a last line without a line end is returned too.
        """
        return self._next(host, final)[0]

    def _next(self, host: str, final: bool) -> tuple[list[str], bool]:
        """``(lines, whether anything was read)``; see :meth:`read`."""
        try:
            with open(self.paths[host], "rb") as f:
                f.seek(self.offsets[host])
                data = f.read(_READ_CHUNK)
        except OSError:
            return [], False
        self.offsets[host] += len(data)
        if self.after_cr[host] and data.startswith(b"\n"):
            data = data[1:]  # the second half of a \r\n split between two reads
        if data:
            self.after_cr[host] = data.endswith(b"\r")
        decoder = self.decoders[host]
        pieces: list[tuple[str, bool]] = []  # (text, ended by a lone carriage return)
        pending = self.pending[host]
        start = 0
        for match in _LINE_END.finditer(data):
            pending = self._cut(pending + data[start : match.start()], pieces, decoder)
            pieces.append((decoder.decode(pending), match.group() == b"\r"))
            pending, start = b"", match.end()
        pending = self._cut(pending + data[start:], pieces, decoder)
        at_end = len(data) < _READ_CHUNK
        if final and at_end and pending:
            pieces.append((decoder.decode(pending, final=True), False))
            pending = b""
        self.pending[host] = pending
        lines = [
            text
            for i, (text, overwritten) in enumerate(pieces)
            # A later piece of the same read draws over a carriage-return line (as on a
            # terminal): such a line is shown only as the last of the read.
            if not overwritten or (i == len(pieces) - 1 and text)
        ]
        return lines, bool(data) or bool(pieces)

    @staticmethod
    def _cut(pending: bytes, pieces: list[tuple[str, bool]], decoder: Any) -> bytes:
        """Move whole MAX_LOG_LINE pieces of a line not yet ended into ``pieces``."""
        if len(pending) <= MAX_LOG_LINE:
            return pending
        view = memoryview(pending)
        whole = (len(pending) - 1) // MAX_LOG_LINE * MAX_LOG_LINE  # leaves 1 to MAX bytes
        for offset in range(0, whole, MAX_LOG_LINE):
            pieces.append((decoder.decode(view[offset : offset + MAX_LOG_LINE]), False))
        return bytes(view[whole:])

    def print_new(
        self, printer: LogPrinter, final: bool, hosts: Sequence[str] | None = None
    ) -> bool:
        """Print a chunk of new lines of every host (or of ``hosts``); True when any was read."""
        printed = False
        for host in self.paths if hosts is None else hosts:
            lines, progressed = self._next(host, final)
            # In batches: a live display (rich) renders each batch in memory at once.
            for start in range(0, len(lines), _PRINT_BATCH):
                printer.print([(host, line) for line in lines[start : start + _PRINT_BATCH]])
            printed = printed or progressed
        return printed

    def print_all(self, printer: LogPrinter) -> None:
        """Print what every host wrote so far, host by host, a chunk at a time."""
        for host in self.paths:
            while self.print_new(printer, final=True, hosts=[host]):
                pass


def _log_tail(path: str, lines: int) -> list[str]:
    """The last ``lines`` lines of a host's log file (``[]`` if it cannot be read).

    Only the file's last :data:`_TAIL_BYTES` are read, however long its lines; a
    progress bar's line is what a terminal shows of it (after its last ``\\r``).
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - _TAIL_BYTES, 0))
            data = f.read(_TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    found = text.split("\n")
    if size > _TAIL_BYTES and len(found) > 1:
        found.pop(0)  # the end of a line that began before what was read
    if found and not found[-1]:
        found.pop()
    tail = collections.deque((line.rstrip("\r").rsplit("\r", 1)[-1] for line in found), lines)
    return list(tail)


class _Follower:
    """Prints a job's lines as they come, from the hosts' log files (see :class:`_LogFiles`)."""

    def __init__(self, job: LocalJob, printer: LogPrinter | None) -> None:
        self.job = job
        self.printer = printer
        self.files = _LogFiles(job.layout)

    def follow(self, interrupts: _SigintFlag | None = None) -> None:
        """Print new lines until the job is done and every line is printed.

        A Ctrl-C noted by ``interrupts`` is raised here, between two reads, never
        while a lock the supervisor thread needs is held.
        """
        job = self.job
        while True:
            if interrupts is not None and interrupts.pending():
                raise KeyboardInterrupt
            finished = job.done.is_set()  # then every host's log file is complete
            seen = job.output_count
            if self.printer is not None and self.files.print_new(self.printer, finished):
                continue
            if finished:
                return
            job.wait_for_output(seen, 0.2)


_LOCKS_DIR = ".locks"
#: ``<job>:<fd>``: the name lock a detached runner handed down (see NameLock.adopt).
HANDED_LOCK_ENV = "LAUNCHBAY_NAME_LOCK"


class NameLock:
    """An exclusive ``flock`` on a job's lock file, held while the job runs here."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def try_acquire(cls, path: str) -> NameLock | None:
        """The lock, or ``None`` when another holder has it (any process, this one too)."""
        import fcntl

        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return cls(path, fd)

    @classmethod
    def adopt(cls, name: str, path: str) -> NameLock | None:
        """The lock of job ``name`` a detached runner handed to this process, if any.

        :func:`launchbay.backends._detached.start` passes its locked descriptor
        down and names it in ``LAUNCHBAY_NAME_LOCK`` (``<job>:<fd>``); it is taken
        once, for that job, and only if it is the lock file at ``path``.
        """
        import fcntl

        handed = os.environ.get(HANDED_LOCK_ENV, "")
        job, _, fd_text = handed.rpartition(":")
        if job != name or not fd_text.isdigit():
            return None
        os.environ.pop(HANDED_LOCK_ENV, None)  # the job's hosts must not see it
        fd = int(fd_text)
        try:
            mine, there = os.fstat(fd), os.stat(path)
            if (mine.st_dev, mine.st_ino) != (there.st_dev, there.st_ino):
                return None
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already: a no-op
        except OSError:
            return None
        os.set_inheritable(fd, False)
        return cls(path, fd)

    @property
    def fd(self) -> int | None:
        """The locked descriptor (``None`` once released)."""
        return self._fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class LocalJob:
    """State of one running (or finished) job; touched by the supervisor and callers."""

    def __init__(
        self,
        request: dict[str, Any],
        layout: JobLayout,
        stager: LocalStager,
        grace: float,
        backend: LocalBackend,
    ) -> None:
        self.request = request
        #: The request as the stager sees the hosts' trees on this machine (a
        #: backend whose hosts see other paths, e.g. containers, adjusts it).
        self.host_request: dict[str, Any] = request
        self.backend = backend
        self.name: str = request["TrainingJobName"]
        self.layout = layout
        self.hosts = list(layout.hosts)
        self.stager = stager
        self.grace = grace
        self.lock = threading.Condition()
        self.status = IN_PROGRESS
        self.secondary = "Starting"
        self.transitions: list[dict[str, Any]] = []
        self.failure_reason: str | None = None
        #: The host whose failure ended the job (the root cause, not the first to exit).
        self.failed_host: str | None = None
        self.model_artifacts: str | None = None
        self.creation_time = _now()
        self.start_time: _dt.datetime | None = None
        self.end_time: _dt.datetime | None = None
        #: What runs each host, by host name (a process, a container ...), backend's own.
        self.procs: dict[str, Any] = {}
        #: Each host's share of this machine's GPUs (device ids), or None: no GPU
        #: (see launchbay.backends._gpus; found once per job, in run()).
        self.gpus: dict[str, list[str]] | None = None
        self.readers: list[threading.Thread] = []
        self.stop_requested = threading.Event()
        self.force_kill = threading.Event()
        self.done = threading.Event()
        #: Set when something about the job changed (a host ended, a line came in).
        self.changed = threading.Event()
        self.stop_reason: str | None = None
        #: How often a host's log file grew (followers wait for it to change, then
        #: read the files).
        self.output_count = 0
        self.thread: threading.Thread | None = None
        #: Holds the job name on this machine while the job runs (see LocalBackend._claim_name).
        self.name_lock: NameLock | None = None
        #: The process that finishes the job if this one dies (see launchbay.backends._watchdog).
        self.watchdog: Any = None
        #: ``(status, reason)`` the job is ending with, while its outputs are written
        #: (recorded as ``LocalEnding``: a record left so was never finished).
        self.ending: tuple[str, str | None] | None = None
        self._set_secondary("Starting", "Preparing the instances for training")

    # -- status -----------------------------------------------------------------
    def _set_secondary(self, status: str, message: str) -> None:
        now = _now()
        with self.lock:
            if self.transitions:
                self.transitions[-1].setdefault("EndTime", now)
            self.transitions.append({"Status": status, "StartTime": now, "StatusMessage": message})
            self.secondary = status
        self.save()

    def describe(self) -> dict[str, Any]:
        with self.lock:
            described = {
                k: copy.deepcopy(v)
                for k, v in self.request.items()
                if k not in _REQUEST_KEYS_NOT_DESCRIBED
            }
            described.update(
                {
                    "TrainingJobName": self.name,
                    "TrainingJobArn": job_arn(self.name),
                    "TrainingJobStatus": self.status,
                    "SecondaryStatus": self.secondary,
                    "CreationTime": self.creation_time,
                    "LastModifiedTime": _now(),
                    "SecondaryStatusTransitions": copy.deepcopy(self.transitions),
                    "LocalJobDir": self.layout.job_dir,
                    "LocalClient": CLIENT_ID,
                }
            )
            if self.start_time:
                described["TrainingStartTime"] = self.start_time
            if self.end_time:
                described["TrainingEndTime"] = self.end_time
                if self.start_time:
                    seconds = int((self.end_time - self.start_time).total_seconds())
                    described["TrainingTimeInSeconds"] = seconds
            if self.failed_host:
                described["LocalFailedHost"] = self.failed_host
            if self.failure_reason:
                described["FailureReason"] = self.failure_reason
            if self.model_artifacts:
                described["ModelArtifacts"] = {"S3ModelArtifacts": self.model_artifacts}
            if self.ending is not None and self.status not in TERMINAL_STATUSES:
                described["LocalEnding"] = {
                    "Status": self.ending[0],
                    "FailureReason": self.ending[1],
                }
            return described

    def save(self) -> None:
        """Write the description to ``status.json`` (best effort)."""
        try:
            _write_json_atomic(self.layout.status_file, _to_json(self.describe()))
        except OSError as exc:
            logger.debug("Could not write %s: %s", self.layout.status_file, exc)

    def save_final(self) -> None:
        """Write the final description to ``status.json``, the job's reserve helping.

        On a full disk the reserve (see :func:`_write_final`) is given back first.
        If even then nothing can be written, the record still reads as an unfinished
        end (``LocalEnding``), which is finished as Failed when next looked at; a
        Completed job is then reported Failed here too, so that both say the same.
        """
        try:
            _write_final(self.layout.status_file, _to_json(self.describe()))
        except OSError as exc:
            logger.error(
                "The end of local training job %s could not be recorded in %s: %s",
                self.name,
                self.layout.status_file,
                exc,
            )
            with self.lock:
                if self.status == COMPLETED:
                    self.status = FAILED
                    self.secondary = FAILED
                    self.failure_reason = (
                        f"ClientError: the end of the job could not be recorded in "
                        f"{self.layout.status_file}: {exc}"
                    )[:_REASON_LIMIT]

    def release_name(self) -> None:
        """Let the job name go (the job has ended and its final state is written).

        The watchdog is ended first: the final state is written, so there is
        nothing left for it to do, and it must not hold the name after us.
        """
        watchdog, self.watchdog = self.watchdog, None
        if watchdog is not None:
            with contextlib.suppress(OSError):
                watchdog.kill()
            with contextlib.suppress(Exception):
                watchdog.wait(5)
        if self.name_lock is not None:
            self.name_lock.release()

    # -- logs -------------------------------------------------------------------
    def note_output(self) -> None:
        """A host's log file grew: wake the followers."""
        with self.lock:
            self.output_count += 1
            self.lock.notify_all()

    def wait_for_output(self, seen: int, timeout: float) -> None:
        """Wait up to ``timeout`` for output after ``seen`` notes of it (or the job's end)."""
        with self.lock:
            if self.output_count == seen and not self.done.is_set():
                self.lock.wait(timeout)

    def notify(self) -> None:
        """Wake whoever waits for news of this job (log followers, the monitor)."""
        self.changed.set()
        with self.lock:
            self.lock.notify_all()


def _to_json(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def _from_json(value: Any, key: str = "") -> Any:
    if isinstance(value, str) and key.endswith("Time"):
        with contextlib.suppress(ValueError):
            return _dt.datetime.fromisoformat(value)
    if isinstance(value, dict):
        return {k: _from_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v, key) for v in value]
    return value


# --------------------------------------------------------------------------- job records

#: A SageMaker job name: what a job directory under the job root is called.
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_warned: set[str] = set()
#: More hosts than any local job can have: a record claiming more is damaged.
_MAX_RECORDED_HOSTS = 100_000


def _warn_once(key: str, message: str) -> None:
    """Warn once per process about ``key`` (the local backends share the job root)."""
    if key not in _warned:
        _warned.add(key)
        logger.warning("%s", message)


def _instance_types(path: str) -> list[Any] | None:
    """The instance types a job record (``status.json``, ``request.json``) names, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            resources = json.load(f).get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups") or [resources]
        return [g.get("InstanceType") for g in groups]
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def _damaged(name: str, path: str, problem: str, job_dir: str | None = None) -> JobError:
    return JobError(
        f"Local training job {name!r} cannot be read: {path} {problem}. The job directory "
        f"is damaged (a full disk, an interrupted copy, or an edit); remove "
        f"{job_dir or os.path.dirname(path)} to forget the job."
    )


def _read_record(name: str, path: str) -> dict[str, Any]:
    """A job's JSON record (``status.json``, ``request.json``) as a dict.

    Raises:
        JobError: naming the file and what is wrong with it (missing, not a file,
            not JSON, not a JSON object).
    """
    job_dir = os.path.dirname(path)
    if not os.path.isdir(job_dir):
        raise _damaged(name, job_dir, "is not a directory", job_dir)
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError as exc:
        raise _damaged(name, path, "is missing") from exc
    except IsADirectoryError as exc:
        raise _damaged(name, path, "is a directory, not a file") from exc
    except OSError as exc:
        raise _damaged(name, path, f"cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise _damaged(name, path, f"is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise _damaged(name, path, f"holds a JSON {type(document).__name__}, not an object")
    return document


#: Bytes set aside for a job's final record (``artifacts/status.reserve``, made at the
#: start): a disk filled by then still takes the job's outcome.
_RESERVE_BYTES = 256 * 1024


def _reserve_file(status_file: str) -> str:
    return os.path.join(os.path.dirname(status_file), "artifacts", "status.reserve")


def _make_reserve(status_file: str) -> None:
    """Set aside :data:`_RESERVE_BYTES` next to ``status_file`` for the final record."""
    path = _reserve_file(status_file)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(_RESERVE_BYTES))  # real blocks, even on a compressing file system
    except OSError as exc:
        logger.warning("Could not set aside space for the final record %s: %s", status_file, exc)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _write_final(status_file: str, record: Any) -> None:
    """Write a job's final record; on a full disk, into the space set aside for it.

    The record is written as usual (a new file renamed over ``status.json``).
    If that fails (no space), it is written over the reserve's own blocks, which
    needs no new space, and the reserve is renamed over ``status.json``: as
    atomic, and not at the mercy of whatever else fills the disk meanwhile.

    Raises:
        OSError: it could not be written either way.
    """
    reserve = _reserve_file(status_file)
    try:
        _write_json_atomic(status_file, record)
    except OSError as exc:
        data = json.dumps(record, indent=2, default=str).encode()
        if len(data) > _RESERVE_BYTES or not os.path.isfile(reserve):
            raise
        logger.warning(
            "Writing %s failed (%s): writing it in the space set aside", status_file, exc
        )
        fd = os.open(reserve, os.O_WRONLY)  # no O_TRUNC: its blocks are kept and written over
        try:
            view = memoryview(data)
            while view:
                view = view[os.pwrite(fd, view, len(data) - len(view)) :]
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        os.replace(reserve, status_file)
        return
    with contextlib.suppress(OSError):
        os.unlink(reserve)


def _status_problem(description: Mapping[str, Any]) -> str | None:
    """What is wrong with a job record's fields the local backends rely on, or None."""
    status = description.get("TrainingJobStatus")
    if status not in JOB_STATUSES:
        return f"has TrainingJobStatus={status!r} (accepted: {', '.join(JOB_STATUSES)})"
    resources = description.get("ResourceConfig")
    if not isinstance(resources, dict):
        return f"has ResourceConfig={resources!r} (accepted: an object)"
    groups = resources.get("InstanceGroups") or [resources]
    counts = [g.get("InstanceCount", 1) if isinstance(g, dict) else g for g in groups]
    if not all(type(c) is int and 1 <= c <= _MAX_RECORDED_HOSTS for c in counts):
        return f"has instance counts {counts!r} (accepted: integers 1 to {_MAX_RECORDED_HOSTS})"
    try:
        host_names(description)
    except (TypeError, ValueError, AttributeError) as exc:
        return f"has a ResourceConfig that names no hosts ({exc})"
    return None


# Every job started in this interpreter, by job directory (for atexit and other backends).
_JOBS: dict[str, LocalJob] = {}
_JOBS_LOCK = threading.Lock()
_ATEXIT_REGISTERED = False


def _register(job: LocalJob) -> None:
    global _ATEXIT_REGISTERED
    with _JOBS_LOCK:
        _JOBS[job.layout.job_dir] = job
        if not _ATEXIT_REGISTERED:
            atexit.register(_stop_all_at_exit)
            _ATEXIT_REGISTERED = True
    _install_sigterm_handler()


# SIGTERM to the client is handled like Ctrl-C: every running job is stopped (its
# hosts get SIGTERM, checkpoints and outputs are saved, it ends Stopped), then the
# process dies of SIGTERM as it was told to. Installed only over the default action.
_sigterm = {"installed": False, "stopping": False, "exit": False}


def _install_sigterm_handler() -> None:
    if _sigterm["installed"] or threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # the caller's own handler stays
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        return
    _sigterm["installed"] = True


def _running_jobs() -> list[LocalJob]:
    # No lock here: a signal handler must never wait for one its own thread may hold.
    for _ in range(10):
        try:
            return [job for job in list(_JOBS.values()) if not job.done.is_set()]
        except RuntimeError:  # the dict changed while being copied
            continue
    return []


def _on_sigterm(signum: int, frame: Any) -> None:
    if _sigterm["exit"]:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    running = _running_jobs()
    if _sigterm["stopping"]:  # a second SIGTERM: kill the hosts at once
        for job in running:
            job.force_kill.set()
            job.changed.set()
        return
    _sigterm["stopping"] = True
    for job in running:
        logger.warning(
            "SIGTERM: stopping local training job %s (SIGTERM again to kill at once)", job.name
        )
        job.stop_reason = job.stop_reason or "the client process received SIGTERM"
        job.stop_requested.set()
        job.changed.set()
    threading.Thread(
        target=_die_after_stopping, args=(running,), name="launchbay-sigterm", daemon=True
    ).start()


def _die_after_stopping(jobs: list[LocalJob]) -> None:
    """Wait for ``jobs`` to end (checkpoints and outputs saved), then die of SIGTERM."""
    deadline = time.monotonic() + max((j.grace for j in jobs), default=0) + RUNTIME_MARGIN + 120
    for job in jobs:
        job.done.wait(max(deadline - time.monotonic(), 0.1))
    _sigterm["exit"] = True
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)  # else the handler, on the main thread, lets it kill us
    if threading.current_thread() is threading.main_thread():
        time.sleep(60)  # the signal is delivered before this returns


def _stop_all_at_exit() -> None:
    """Stop every job still running when the interpreter exits; leave no process behind."""
    with _JOBS_LOCK:
        running = [job for job in _JOBS.values() if not job.done.is_set()]
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
                job.backend._hard_kill(job)
            except Exception as exc:  # at exit: report, go on with the other jobs
                logger.warning("Could not kill what is left of job %s: %s", job.name, exc)


# --------------------------------------------------------------------------- the backend


# --------------------------------------------------------------------------- the backend


def _still_running(job: LocalJob, hosts: Sequence[str]) -> str:
    """``host algo-2 (ranks 2, 3)``...: the ranks without an end, by host.

    Ranks are read from the runtime's rank records in the job's shared dir
    (:mod:`launchbay.runtime._records`). A host whose ranks all ended is only
    waiting for the others (an MPI master, say) and is left out; without any
    record (the hosts never got to their ranks) the running hosts are named.
    """
    starts, ends = _records.read_records(os.path.join(job.layout.shared_dir, "ranks"))
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


class LocalBackend(Backend):
    """Runs CreateTrainingJob requests on this machine; subclasses say how hosts run.

    Args:
        session: A :class:`launchbay.Session` for ``s3://`` channels, outputs and
            checkpoints; created on first S3 use when not given.
        job_root: Where job directories go (default ``$LAUNCHBAY_HOME/jobs`` or
            ``~/.launchbay/jobs``).
        grace_seconds: Seconds between SIGTERM and SIGKILL when hosts are stopped
            (default ``$LAUNCHBAY_GRACE_SECONDS`` from the request's Environment or
            the caller's environment, else 10).
    """

    def __init__(
        self,
        session: Any = None,
        job_root: str | os.PathLike[str] | None = None,
        *,
        grace_seconds: float | None = None,
    ) -> None:
        self.session = session
        self._job_root = os.fspath(job_root) if job_root is not None else None
        self.grace_seconds = (
            None if grace_seconds is None else _grace_value(grace_seconds, "grace_seconds")
        )
        self._stager: LocalStager | None = None

    #: How a host is called in messages ("local process", "container" ...).
    host_kind = "host"
    #: A local job lives as long as the process that runs it.
    runs_in_client = True
    #: The instance types whose jobs this backend runs (and owns, see :meth:`owns`).
    instance_types: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(job_root={self.job_root!r})"

    @property
    def job_root(self) -> str:
        """The directory job directories are made in."""
        root = self._job_root or default_job_root()
        return os.path.abspath(os.path.expanduser(root))

    @property
    def stager(self) -> LocalStager:
        if self._stager is None:
            self._stager = LocalStager(self.session)
        return self._stager

    # -- the Backend interface ----------------------------------------------------
    def check(self, plan: JobPlan) -> None:
        """Every refusal of a local job, before anything is made.

        The plan has already refused what this machine cannot run (more ranks
        than it runs, too few GPUs: :func:`launchbay.backends.plan.plan_request`).

        Raises:
            ConfigurationError: the request asks for something that cannot run
                locally (FileSystemInput channels, Pipe mode ...), a channel named
                ``.`` or ``..``, a checkpoint ``LocalPath`` a host's tree cannot
                take, or a grace period that is not a finite number of seconds
                from 0 to 3600.
            InputError: a ``file://`` channel path does not exist.
        """
        super().check(plan)
        check_request(plan.request)
        _check_host_paths(plan.request)
        grace_from(plan.request, self.grace_seconds)

    def run(self, plan: JobPlan) -> TrainingJob:
        """Check the plan, start the job in the background and return its handle at once.

        Raises:
            ConfigurationError: the request asks for something that cannot run
                locally (FileSystemInput channels, Pipe mode, more hosts than GPUs ...),
                a channel named ``.`` or ``..``, a checkpoint ``LocalPath`` a host's tree
                cannot take, or a grace period that is not a finite number of seconds
                from 0 to 3600.
            InputError: a ``file://`` channel path does not exist.
            JobError: a job of that name is still running here.
        """
        self.check(plan)
        request = copy.deepcopy(dict(plan.request))
        name = request["TrainingJobName"]
        grace = grace_from(request, self.grace_seconds)
        hosts = list(plan.hosts)
        gpus = {h: list(ids) for h, ids in plan.gpus.items()} if plan.gpus is not None else None
        self._check_can_run(request, hosts)
        name_lock = self._claim_name(name)
        try:
            self._finish_left_behind(name)
            layout = JobLayout.create(self.job_root, name, hosts)
            layout.write_request(request)
            _make_reserve(layout.status_file)
            job = LocalJob(request, layout, self.stager, grace, self)
            job.gpus = gpus
        except BaseException:
            name_lock.release()
            raise
        job.name_lock = name_lock
        job.watchdog = self._start_watchdog(job)
        _register(job)
        job.thread = threading.Thread(
            target=self._supervise, args=(job,), name=f"launchbay-job-{name}", daemon=True
        )
        job.thread.start()
        logger.info(
            "Started local training job %s: %d host(s), job directory %s",
            name,
            len(hosts),
            layout.job_dir,
        )
        return TrainingJob(name, self)

    def _claim_name(self, name: str) -> NameLock:
        """Take the job name on this machine, or refuse it while a job of that name runs.

        The name is held by an exclusive ``flock`` on ``<job root>/.locks/<name>.lock``
        for as long as the job runs in this process; the kernel lets it go when
        the process dies, so a crashed client never blocks the name. A job whose
        client is gone but whose hosts still run (they are being stopped) keeps
        the name too.

        A detached runner (:meth:`run_detached`) took the name before it started
        this process and handed the lock down (:meth:`NameLock.adopt`): it is kept.

        Raises:
            ConfigurationError: the job root cannot be made or written
                (``LAUNCHBAY_HOME``, or the ``job_root`` argument).
            JobError: a job of that name runs (in this process or another one).
        """
        job_dir = self.job_dir(name)
        path = os.path.join(self._usable_job_root(), _LOCKS_DIR, f"{name}.lock")
        handed = NameLock.adopt(name, path)
        if handed is not None:
            return handed
        lock = NameLock.try_acquire(path)
        if lock is None or self._hosts_left(name):
            if lock is not None:
                lock.release()
            raise JobError(
                f"A local training job named {name!r} is still running ({self._who_runs(name)}; "
                f"job directory {job_dir}). SageMaker refuses a duplicate job name, and so "
                "does a local run: its directory and processes are left alone. Accepted: "
                f"another job_name, or stop that job first (launchbay stop {name})."
            )
        return lock

    def _usable_job_root(self) -> str:
        """:attr:`job_root` and its ``.locks``, made if missing.

        Raises:
            ConfigurationError: naming ``LAUNCHBAY_HOME`` (or ``job_root`` when
                given), its value and what is needed, when they cannot be made.
        """
        root = self.job_root
        try:
            if self._job_root is None:
                usable_local_home()
            os.makedirs(os.path.join(root, _LOCKS_DIR), exist_ok=True)
        except OSError as exc:
            if self._job_root is None:
                raise unusable_home_error(root, exc) from exc
            raise ConfigurationError.invalid(
                "job_root",
                self._job_root,
                "a directory this user can create and write to",
                reason=f"{root} cannot be used: {exc.strerror or exc}",
            ) from exc
        return root

    def _start_watchdog(self, job: LocalJob) -> Any:
        """Start the job's watchdog (see :mod:`launchbay.backends._watchdog`); None if it cannot."""
        import subprocess
        import sys

        target = f"{type(self).__module__}:{type(self).__qualname__}"
        env = dict(os.environ)
        parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
                        "launchbay.backends._watchdog",
                        target,
                        self.job_root,
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

    def finish_orphan(self, name: str, reason: str | None = None) -> dict[str, Any]:
        """End a job whose client process is gone, as the client would have; returns its description.

        The caller holds the job's name lock. The hosts are stopped (SIGTERM,
        SIGKILL after the grace period), checkpoints and outputs saved, and the
        final state written to ``status.json``: ``Completed`` when every host had
        already succeeded, else ``Failed`` with a reason saying the client went away.
        """
        description = self._load(name)
        if description["TrainingJobStatus"] in TERMINAL_STATUSES:
            return description
        client = str(description.get("LocalClient") or "an unknown process")
        request_file = os.path.join(self.job_dir(name), "request.json")
        request = _read_record(name, request_file)
        problem = _status_problem(dict(request, TrainingJobStatus=IN_PROGRESS))
        if problem:
            raise _damaged(name, request_file, problem)
        layout = JobLayout(self.job_dir(name), tuple(host_names(request)))
        grace = grace_from(request, self.grace_seconds)
        logger.warning("Finishing local training job %s: its client %s is gone", name, client)
        started = description.get("SecondaryStatus") not in ("Starting", "Downloading")
        if started:
            self._stop_orphan_hosts(name, layout, grace)
        layout.forget_secrets()
        succeeded = started and all(
            os.path.exists(os.path.join(layout.host_dir(h), "output", "success"))
            for h in layout.hosts
        )
        status = COMPLETED if succeeded else FAILED
        ending = description.pop("LocalEnding", None)
        if isinstance(ending, dict) and reason is None:
            # Its client was already ending it (writing the checkpoints and outputs) and
            # never recorded the end: it went away, or could not write status.json. What
            # it would have said is unknown: the job failed, and says why.
            status = FAILED
            found = ending.get("FailureReason") or f"it was ending {ending.get('Status')}"
            reason = (
                f"ClientError: the end of this local job was not recorded: its client "
                f"({client}) was saving the checkpoints and outputs and went away, or could "
                f"not write {layout.status_file}, before it recorded how the job ended "
                f"({found}). launchbay saved the checkpoints and outputs again."
            )
        elif not succeeded and reason is None:
            reason = (
                f"ClientError: the process that ran this local job ({client}) went away before "
                "the job ended (it was killed, or its notebook kernel was closed). launchbay "
                "stopped the hosts (SIGTERM, SIGKILL after the grace period) and saved the "
                "checkpoints and outputs."
            )
        host_request = self._orphan_host_request(request)
        try:
            self.stager.save_checkpoints(host_request, layout)
        except Exception as exc:  # report it; the job must still end
            logger.error("Saving the checkpoints of job %s failed: %s", name, exc)
        try:
            artifacts = self.stager.collect_outputs(
                host_request, layout, reason if status != COMPLETED else None
            )
        except Exception as exc:
            logger.error("Writing the outputs of job %s failed: %s", name, exc)
            artifacts = None
            if status == COMPLETED:  # as the client would have: no outputs, no success
                status, reason = FAILED, f"ClientError: writing the outputs failed: {exc}"
        now = _now()
        transitions = list(description.get("SecondaryStatusTransitions") or [])
        if transitions:
            transitions[-1].setdefault("EndTime", now)
        transitions.append(
            {
                "Status": status,
                "StartTime": now,
                "EndTime": now,
                "StatusMessage": _final_message(status, reason),
            }
        )
        description.update(
            {
                "TrainingJobStatus": status,
                "SecondaryStatus": status,
                "SecondaryStatusTransitions": transitions,
                "LastModifiedTime": now,
                "TrainingEndTime": now,
            }
        )
        if reason and status != COMPLETED:
            description["FailureReason"] = reason[:_REASON_LIMIT]
        if artifacts:
            description["ModelArtifacts"] = {"S3ModelArtifacts": artifacts}
        start = description.get("TrainingStartTime")
        if isinstance(start, _dt.datetime):
            description["TrainingTimeInSeconds"] = int((now - start).total_seconds())
        try:
            _write_final(layout.status_file, _to_json(description))
        except OSError as exc:  # the same outcome is found again next time: report it now
            logger.error(
                "Could not record the end of job %s in %s: %s", name, layout.status_file, exc
            )
        logger.warning("Local training job %s ended %s", name, status)
        return description

    def _stop_orphan_hosts(self, name: str, layout: JobLayout, grace: float) -> None:
        """Stop what still runs of a job whose client is gone (the backend's own way)."""

    def _orphan_host_request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request as the stager sees the hosts' trees (see ``LocalJob.host_request``)."""
        return request

    def _finish_left_behind(self, name: str) -> None:
        """Before a job directory is replaced: finish the old job if its client left it unfinished.

        The caller holds the name. Its checkpoints and outputs are saved first.
        """
        try:
            description = self._load(name)
        except JobError:
            return
        if description["TrainingJobStatus"] not in TERMINAL_STATUSES:
            try:
                self.finish_orphan(name)
            except Exception as exc:  # the new job must still be able to start
                logger.warning("Could not finish the earlier job %s: %s", name, exc)

    def _reconcile(self, name: str, description: dict[str, Any]) -> dict[str, Any]:
        """A job left unfinished with nobody holding its name is finished here and now."""
        if description["TrainingJobStatus"] in TERMINAL_STATUSES or self._find(name) is not None:
            return description
        lock = NameLock.try_acquire(os.path.join(self.job_root, _LOCKS_DIR, f"{name}.lock"))
        if lock is None:  # its client (or its watchdog) is at work
            return description
        try:
            return self.finish_orphan(name)
        finally:
            lock.release()

    def _who_runs(self, name: str) -> str:
        try:
            description = self._load(name)
        except JobError:
            return "its status is not written yet"
        client = str(description.get("LocalClient") or "an unknown process")
        return f"status {description.get('TrainingJobStatus')}, started by process {client}"

    def _hosts_left(self, name: str) -> bool:
        """Whether anything that ran a host of job ``name`` is still alive (after its client)."""
        return False

    def describe(self, name: str) -> dict[str, Any]:
        """The job's DescribeTrainingJob-shaped description (plus ``LocalJobDir``)."""
        job = self._find(name)
        if job is not None:
            return job.describe()
        return self._reconcile(name, self._load(name))

    def wait(self, name: str, logs: str | bool | None = "All") -> dict[str, Any]:
        """Block until the job ends and return its description.

        With ``logs`` truthy (``"All"``, ``True``), every line of every host is
        printed from the start, prefixed by the host (coloured on a terminal);
        with ``False``, ``None`` or ``"None"`` nothing is printed. Ctrl-C stops
        every host (SIGTERM, SIGKILL after the grace period), waits for the
        checkpoints to be saved, marks the job Stopped and re-raises
        :class:`KeyboardInterrupt`.
        """
        job = self._find(name)
        if job is None:
            return self._wait_detached(name, logs)
        follower = _Follower(job, LogPrinter(job.hosts) if show_logs(logs) else None)
        with _SigintFlag() as interrupts:
            try:
                follower.follow(interrupts)
            except KeyboardInterrupt:
                logger.warning(
                    "Interrupted: stopping local training job %s (Ctrl-C again to kill at once)",
                    name,
                )
                job.stop_reason = job.stop_reason or "interrupted (KeyboardInterrupt)"
                job.stop_requested.set()
                job.changed.set()
                while True:
                    try:
                        follower.follow(interrupts)
                        break
                    except KeyboardInterrupt:
                        job.force_kill.set()
                raise
        if _sigterm["stopping"] and threading.current_thread() is threading.main_thread():
            _die_after_stopping(_running_jobs())  # SIGTERM stopped the job: now obey it
        return job.describe()

    def stop(self, name: str) -> None:
        """Stop the job (SIGTERM to every host, SIGKILL after the grace period) and wait.

        Returns once the hosts are gone and checkpoints and outputs are saved;
        the job ends Stopped. Stopping a finished job does nothing. A job another
        process runs is stopped through that process when it accepts stop requests
        (:meth:`accept_stops`, e.g. ``launchbay submit``): SIGTERM, then this
        waits until the job has ended.

        Raises:
            JobError: another process runs the job and does not accept stop
                requests (stop it there), or the job did not end in time.
        """
        job = self._find(name)
        if job is None:
            description = self.describe(name)  # a job whose client is gone is finished here
            if description["TrainingJobStatus"] in TERMINAL_STATUSES:
                return
            grace = grace_from(description, self.grace_seconds)
            if _detached.stop(name, self.describe, grace) is not None:
                return
            pid = client_pid(str(description.get("LocalClient") or ""))
            if pid is not None and not is_alive(pid):
                # Its watchdog is finishing it: wait until it lets the name go.
                path = os.path.join(self.job_root, _LOCKS_DIR, f"{name}.lock")
                deadline = time.monotonic() + grace + RUNTIME_MARGIN + 60
                while time.monotonic() < deadline:
                    lock = NameLock.try_acquire(path)
                    if lock is not None:
                        try:
                            self.finish_orphan(name)
                        finally:
                            lock.release()
                        return
                    time.sleep(0.2)
            raise JobError(
                f"Local training job {name!r} was started by another process "
                f"({description.get('LocalClient')}) that still runs it; stop it there "
                "(Ctrl-C, or SIGTERM to that process)."
            )
        if job.done.is_set():
            return
        job.stop_reason = job.stop_reason or "stopped by request (stop())"
        job.stop_requested.set()
        job.changed.set()
        job.done.wait()

    def print_logs(self, name: str, follow: bool = False, stream: TextIO | None = None) -> None:
        """Print the job's log lines as ``algo-1 | line`` (from ``logs/<host>.log``).

        Without ``follow``, prints what the hosts wrote so far, host by host. With
        ``follow``, keeps printing new lines until the job ends (also for a job
        another process runs); a job of this process is followed line by line as
        :meth:`wait` prints it.

        Raises:
            JobError: there is no local job of that name.
        """
        job = self._find(name)
        if job is not None and follow:
            _Follower(job, LogPrinter(job.hosts, stream)).follow()
            return
        description = self.describe(name)
        hosts = host_names(description)
        printer = LogPrinter(hosts, stream)
        files = _LogFiles(JobLayout(self.job_dir(name), tuple(hosts)))
        gone = 0
        while True:
            if follow:
                description = self.describe(name)
            finished = description["TrainingJobStatus"] in TERMINAL_STATUSES
            if not follow:
                files.print_all(printer)
                return
            while files.print_new(printer, final=finished):
                pass
            if finished:
                return
            training = description.get("SecondaryStatus") == "Training"
            gone = gone + 1 if training and not self._runs_elsewhere(name) else 0
            if gone >= 3:  # no host process for a while: whoever ran the job is gone
                return
            time.sleep(0.5)

    def list_jobs(self, max_results: int = 20, status: str | None = None) -> list[dict[str, Any]]:
        """Local jobs under :attr:`job_root`, newest first, as ListTrainingJobs summaries.

        Each summary has ``TrainingJobName``, ``TrainingJobArn``, ``TrainingJobStatus``,
        ``SecondaryStatus``, ``CreationTime``, ``LastModifiedTime``,
        ``TrainingEndTime`` (once ended) and ``LocalJobDir``. ``status`` keeps the
        jobs in that state only.
        """
        try:
            names = os.listdir(self.job_root)
        except OSError:
            return []
        summaries = []
        keys = (
            "TrainingJobName",
            "TrainingJobArn",
            "TrainingJobStatus",
            "SecondaryStatus",
            "CreationTime",
            "LastModifiedTime",
            "TrainingEndTime",
            "LocalJobDir",
        )
        for name in sorted(names):
            if not self.owns(name):
                continue
            try:
                description = self.describe(name)
            except JobError as exc:  # a damaged job directory: say so, list the others
                _warn_once(self.job_dir(name), f"{exc} It is left out of the list.")
                continue
            if status is not None and description.get("TrainingJobStatus") != status:
                continue
            summaries.append({k: description[k] for k in keys if k in description})

        def created(summary: dict[str, Any]) -> float:
            value = summary.get("CreationTime")
            return value.timestamp() if isinstance(value, _dt.datetime) else 0.0

        summaries.sort(key=created, reverse=True)
        return summaries[: max(int(max_results), 0)]

    def job_dir(self, name: str) -> str:
        """The job directory of ``name``."""
        return os.path.join(self.job_root, name)

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a job under :attr:`job_root` of one of :attr:`instance_types`.

        The local backends share the job root; a job's instance type (its
        ``status.json``'s ``ResourceConfig``, else ``request.json``'s) says which of
        them runs it.

        A job whose instance type cannot be read from ``status.json`` nor
        ``request.json`` (a damaged job directory) is owned by every local
        backend: it is a local job, and :meth:`describe` says what is wrong with it.
        """
        if not _JOB_NAME.match(name) or not os.path.lexists(self.job_dir(name)):
            return False
        types = _instance_types(os.path.join(self.job_dir(name), "status.json"))
        if types is None:
            types = _instance_types(os.path.join(self.job_dir(name), "request.json"))
        if types is None:
            return True
        return any(t in self.instance_types for t in types)

    def accept_stops(self, name: str) -> None:
        """Let :meth:`stop` in another process reach this one: SIGTERM, handled as Ctrl-C.

        Only for a process that treats SIGTERM as an interrupt of the job it
        waits for (``launchbay submit``); see :mod:`launchbay.backends._detached`.
        """
        _detached.register(name)

    def run_detached(self, name: str, command: Sequence[str]) -> DetachedRun:
        """Run ``command`` (a process that runs job ``name`` and accepts stop requests) detached.

        The name is taken here first (refused while a job of that name runs, see
        :meth:`_claim_name`), so nothing of a running job (its runner file, its
        output) is touched; the lock is handed down to ``command``, whose own
        claim adopts it. Returns once the job's status is written, the process
        exited, or it is still starting after the start wait (see
        :class:`~launchbay.backends.base.DetachedRun` and :mod:`._detached`).

        Raises:
            JobError: a job of that name is running.
        """
        lock = self._claim_name(name)
        return _detached.start(
            name, command, os.path.join(self.job_dir(name), "status.json"), lock=lock
        )

    # -- lookup -------------------------------------------------------------------
    def _find(self, name: str) -> LocalJob | None:
        with _JOBS_LOCK:
            return _JOBS.get(self.job_dir(name))

    def _load(self, name: str) -> dict[str, Any]:
        """The job's ``status.json``, checked.

        Raises:
            JobError: there is no such job, or its directory or ``status.json``
                is damaged (the message names the file and what is wrong).
        """
        job_dir = self.job_dir(name)
        if not os.path.lexists(job_dir):
            raise JobError(f"No local training job named {name!r} under {self.job_root}.")
        description = _read_record(name, os.path.join(job_dir, "status.json"))
        problem = _status_problem(description)
        if problem:
            raise _damaged(name, os.path.join(job_dir, "status.json"), problem)
        return _from_json(description)

    def _wait_detached(self, name: str, logs: Any) -> dict[str, Any]:
        """Wait for a job another process runs (its status file), then print its logs."""
        description = self._load(name)
        gone = 0
        while description["TrainingJobStatus"] not in TERMINAL_STATUSES:
            training = description.get("SecondaryStatus") == "Training"
            gone = gone + 1 if training and not self._runs_elsewhere(name) else 0
            if gone >= 3:  # no host process for a while: whoever ran the job is gone
                description["TrainingJobStatus"] = FAILED
                description["FailureReason"] = (
                    "The process that ran this local job ended before the job did; "
                    f"see {self.job_dir(name)}"
                )
                break
            time.sleep(1.0)
            description = self.describe(name)
        if show_logs(logs):
            hosts = host_names(description)
            _LogFiles(JobLayout(self.job_dir(name), tuple(hosts))).print_all(LogPrinter(hosts))
        return description

    # -- supervision ----------------------------------------------------------------
    def _supervise(self, job: LocalJob) -> None:
        outcome: tuple[str, str | None] = (FAILED, "InternalError: the job ended unexpectedly")
        try:
            outcome = self._run_job(job)
        except LaunchbayError as exc:
            outcome = (FAILED, f"ClientError: {exc}")
            logger.error("Local training job %s could not start: %s", job.name, exc)
        except Exception as exc:  # the supervisor must always finish the job
            logger.exception("Local training job %s: unexpected error", job.name)
            outcome = (FAILED, f"InternalError: {type(exc).__name__}: {exc}")
        finally:
            try:
                self._teardown(job)
                # a second Ctrl-C or SIGTERM stops the uploads at once
                with transfer.cancelled_by(job.force_kill, "the job was killed at once"):
                    self._finish(job, *outcome)
            finally:
                if not job.done.is_set():  # _finish itself failed: still end the job
                    with job.lock:
                        job.status, job.end_time = FAILED, job.end_time or _now()
                        job.failure_reason = job.failure_reason or outcome[1]
                    job.save_final()
                    job.release_name()
                    job.done.set()
                    job.notify()
                job.release_name()

    def _run_job(self, job: LocalJob) -> tuple[str, str | None]:
        job._set_secondary("Downloading", "Downloading input data")
        with transfer.cancelled_by(job.stop_requested, "the job was stopped"):
            self._prepare(job)  # channel and checkpoint downloads stop with the job
        if job.stop_requested.is_set():
            return STOPPED, None
        job._set_secondary("Training", "Training image download completed. Training in progress.")
        with job.lock:
            job.start_time = _now()
        self._start_hosts(job)
        job.save()
        return self._monitor(job)

    def _prepare(self, job: LocalJob) -> None:
        """Write each host's config files, link the channels, restore the checkpoints."""
        for host in job.hosts:
            write_host_config(job.layout.host_dir(host), job.request, host, job.hosts)
        job.stager.stage_channels(job.host_request, job.layout)
        job.stager.restore_checkpoints(job.host_request, job.layout)

    def _monitor(self, job: LocalJob) -> tuple[str, str | None]:
        """Watch the hosts until the job ends; returns ``(status, failure reason)``."""
        max_run = (job.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        started = time.monotonic()
        while True:
            if job.stop_requested.is_set():
                job.status = STOPPING
                job._set_secondary("Stopping", f"Stopping the training job: {job.stop_reason}")
                self._terminate(job, self._running_hosts(job))
                return STOPPED, None
            if max_run and time.monotonic() - started > float(max_run):
                job._set_secondary("MaxRuntimeExceeded", "Training job reached MaxRuntimeInSeconds")
                running = self._running_hosts(job)
                still = _still_running(job, running)
                self._terminate(job, running)
                return STOPPED, (
                    f"Training job exceeded MaxRuntimeInSeconds ({max_run} seconds) and was "
                    f"stopped. Still running when the limit was hit: {still}."
                )
            codes = self._exit_codes(job)
            failed = [host for host, code in codes.items() if code not in (None, 0)]
            if failed:
                logger.info(
                    "Host %s of job %s exited with code %s: stopping the other hosts",
                    failed[0],
                    job.name,
                    codes[failed[0]],
                )
                self._let_hosts_end(job, PEER_EXIT_WAIT)
                self._terminate(job, self._running_hosts(job))
                return FAILED, self._failure_reason(job, failed[0], codes[failed[0]])
            if codes and all(code == 0 for code in codes.values()):
                return COMPLETED, None
            job.changed.wait(self.poll_interval)
            job.changed.clear()

    def _running_hosts(self, job: LocalJob) -> list[str]:
        return [host for host, code in self._exit_codes(job).items() if code is None]

    def _let_hosts_end(self, job: LocalJob, seconds: float) -> None:
        """Give the other hosts up to ``seconds`` to end by themselves after a host failed.

        Their runtimes learn of the failure through the shared directory (or from
        the MPI master) and stop their ranks themselves, each writing its own
        report (a worker says why it ends); only those still running then get SIGTERM.
        """
        deadline = time.monotonic() + seconds
        while self._running_hosts(job) and time.monotonic() < deadline:
            if job.stop_requested.is_set() or job.force_kill.is_set():
                return
            job.changed.wait(self.poll_interval)
            job.changed.clear()

    #: Seconds between two looks at the hosts' exit codes.
    poll_interval = POLL

    # -- what subclasses implement ----------------------------------------------------
    def _check_can_run(self, request: Mapping[str, Any], hosts: list[str]) -> None:
        """Refuse, before anything is made, a request this backend cannot run."""

    def _start_hosts(self, job: LocalJob) -> None:
        """Start every host; fill ``job.procs`` and start ``job.readers`` (:func:`start_reader` or :func:`start_watcher`)."""
        raise NotImplementedError

    def _exit_codes(self, job: LocalJob) -> dict[str, int | None]:
        """Each started host's exit code, ``None`` while it runs."""
        raise NotImplementedError

    def _terminate(self, job: LocalJob, hosts: list[str]) -> None:
        """Stop ``hosts``: SIGTERM, SIGKILL after ``job.grace`` (at once on ``job.force_kill``)."""
        alive = [h for h in hosts if h in self._running_hosts(job)]
        self._signal(job, alive, signal.SIGTERM)
        deadline = time.monotonic() + job.grace + RUNTIME_MARGIN
        while True:
            survivors = [h for h in alive if h in self._running_hosts(job)]
            if not survivors:
                break
            if job.force_kill.is_set() or time.monotonic() >= deadline:
                self._signal(job, survivors, signal.SIGKILL)
                break
            time.sleep(POLL)
        self._reap(job, alive)

    def _signal(self, job: LocalJob, hosts: list[str], sig: signal.Signals) -> None:
        """Send ``sig`` to what runs each of ``hosts`` (SIGKILL: and everything below it)."""
        raise NotImplementedError

    def _reap(self, job: LocalJob, hosts: list[str]) -> None:
        """Wait a little for ``hosts``, just signalled, to be gone."""
        raise NotImplementedError

    def _teardown(self, job: LocalJob) -> None:
        """Leave nothing of the job running or allocated; let the log readers finish."""
        raise NotImplementedError

    def _hard_kill(self, job: LocalJob) -> None:
        """Kill what is left of ``job`` at once (the interpreter is exiting)."""
        raise NotImplementedError

    def _runs_elsewhere(self, name: str) -> bool:
        """Whether the process that runs a job this process did not start is still alive."""
        try:
            client = str(self._load(name).get("LocalClient") or "")
        except JobError:
            return False
        pid = client_pid(client)
        return pid is not None and is_alive(pid)

    def _failure_reason(self, job: LocalJob, first_host: str, code: int | None) -> str:
        """The root cause across hosts: the earliest failure any host reported."""
        reports: list[tuple[dict[str, Any], str]] = []
        for host in job.hosts:
            try:
                document = json.loads(job.layout.read_host_file(host, "launchbay-failure.json"))
            except ValueError:
                continue
            if isinstance(document, dict):
                reports.append((document, host))
        if reports:
            document, host = min(
                reports,
                key=lambda r: (
                    float(r[0].get("timestamp") or 0),
                    _FAILURE_CAUSE_ORDER.get(str(r[0].get("cause")), 9),
                    r[1] != r[0].get("host"),
                ),
            )
            text = job.layout.read_host_file(host, "failure")
            if not text:
                text = _compose_reason(document)
            job.failed_host = host
        else:
            job.failed_host = first_host
            text = job.layout.read_host_file(first_host, "failure")
            if not text:
                tail = _log_tail(job.layout.log_file(first_host), _TAIL_LINES)
                how = describe_exit(code)
                text = f"Host {first_host} failed: {how}.\n" + "\n".join(tail)
        return ("AlgorithmError: " + text.strip())[:_REASON_LIMIT]

    def failure_log_tail(
        self, name: str, description: Mapping[str, Any] | None = None, lines: int = 20
    ) -> LogTail | None:
        """The last ``lines`` lines the failing host printed (``logs/<host>.log``), or None."""
        if description is None:
            description = self.describe(name)
        host = description.get("LocalFailedHost")
        if not host:
            return None
        path = JobLayout(self.job_dir(name), (str(host),)).log_file(str(host))
        tail = _log_tail(path, lines)
        return LogTail(str(host), path, tail) if tail else None

    def _finish(self, job: LocalJob, status: str, reason: str | None) -> None:
        """Save checkpoints and outputs, then record the end state."""
        if job.stop_requested.is_set() and status != COMPLETED:
            status = STOPPED
            reason = reason or (
                f"The job was stopped: {job.stop_reason}" if job.stop_reason else None
            )
        with job.lock:
            job.ending = (status, reason)
        job.layout.forget_secrets()
        job._set_secondary("Uploading", "Uploading generated training model")
        try:
            job.stager.save_checkpoints(job.host_request, job.layout)
        except Exception as exc:  # report it; the outputs must still be written
            logger.error("Saving the checkpoints of job %s failed: %s", job.name, exc)
            if status == COMPLETED:
                status, reason = FAILED, f"ClientError: saving checkpoints failed: {exc}"
        try:
            job.model_artifacts = job.stager.collect_outputs(
                job.host_request, job.layout, reason if status != COMPLETED else None
            )
        except Exception as exc:  # report it; the job must still end
            logger.error("Writing the outputs of job %s failed: %s", job.name, exc)
            if status == COMPLETED:
                status, reason = FAILED, f"ClientError: writing the outputs failed: {exc}"
        job._set_secondary(status, _final_message(status, reason))
        with job.lock:
            job.end_time = job.transitions[-1]["StartTime"]
            job.transitions[-1]["EndTime"] = job.end_time
            job.status = status
            job.failure_reason = reason[:_REASON_LIMIT] if reason else None
        job.save_final()
        status = job.status
        job.release_name()
        job.done.set()
        job.notify()
        if status == COMPLETED:
            logger.info("Local training job %s completed; model: %s", job.name, job.model_artifacts)
        else:
            logger.info(
                "Local training job %s ended %s (logs: %s)", job.name, status, job.layout.logs_dir
            )


def _final_message(status: str, reason: str | None) -> str:
    if status == COMPLETED:
        return "Training job completed"
    if reason:
        return reason.splitlines()[0][:200]
    return f"Training job {status.lower()}"


def _compose_reason(document: Mapping[str, Any]) -> str:
    host = document.get("host") or document.get("reporting_host") or "an unknown host"
    rank = document.get("rank")
    who = f"Rank {rank} on host {host}" if rank is not None else f"Host {host}"
    text = f"{who} failed with exit code {document.get('exit_code')}: {document.get('error') or ''}"
    tail = str(document.get("traceback_tail") or "").strip()
    return text + ("\nLast lines:\n" + tail if tail else "")


def pump_lines(job: LocalJob, host: str, lines: Iterable[str]) -> None:
    """Append every line ``host`` prints to its log file and wake the followers (a reader thread)."""
    try:
        with open(job.layout.log_file(host), "a", encoding="utf-8") as log:
            for line in lines:
                log.write(line + "\n")
                log.flush()
                job.note_output()
    except (OSError, ValueError) as exc:
        logger.debug("Log reader of %s/%s stopped: %s", job.name, host, exc)
    finally:
        job.notify()


def watch_log(job: LocalJob, path: str, running: Callable[[], bool]) -> None:
    """Wake the followers whenever a log file a host writes itself grows, until it has ended."""
    size = -1
    try:
        while True:
            ended = not running()
            try:
                now = os.path.getsize(path)
            except OSError:
                now = size
            if now != size:
                size = now
                job.note_output()
            elif ended:
                return
            time.sleep(POLL)
    finally:
        job.notify()


def _start_thread(job: LocalJob, host: str, target: Callable[..., None], *args: Any) -> None:
    reader = threading.Thread(
        target=target, args=args, name=f"launchbay-log-{job.name}-{host}", daemon=True
    )
    reader.start()
    job.readers.append(reader)


def start_reader(job: LocalJob, host: str, lines: Iterable[str]) -> None:
    """Start a daemon thread running :func:`pump_lines` and remember it in ``job.readers``."""
    _start_thread(job, host, pump_lines, job, host, lines)


def start_watcher(job: LocalJob, host: str, running: Callable[[], bool]) -> None:
    """Start a daemon thread running :func:`watch_log` on ``host``'s log file."""
    _start_thread(job, host, watch_log, job, job.layout.log_file(host), running)


def join_readers(job: LocalJob) -> None:
    """Let the log reader threads finish (each at most a few seconds)."""
    for reader in job.readers:
        reader.join(_READER_JOIN)
