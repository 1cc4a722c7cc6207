"""A local job's record: its state in this process (:class:`LocalJob`), its ``status.json``, its name lock.

:class:`LocalJob` is what the supervisor thread and the callers share while the
job runs; its description is written to ``status.json`` (the job record other
processes read, :func:`read_record`), with space set aside for the final one
(:func:`_write_final`). :class:`NameLock` holds the job's name on this machine.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from launchbay.backends.local.layout import (
    JobLayout,
    host_names,
    write_json_atomic,
)
from launchbay.backends.local.staging import LocalStager
from launchbay.backends.plan import JobFields, JobPlan, plan_request
from launchbay.backends.state import JobState, Transition, to_description
from launchbay.errors import JobError
from launchbay.runtime.names import (
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    JOB_STATUSES,
    TERMINAL_STATUSES,
)

logger = logging.getLogger("launchbay.backends.local")


REASON_LIMIT = 1024
_REQUEST_KEYS_NOT_DESCRIBED = ("Tags",)
#: The Debugger rules' statuses in a description (LocalJob.rule_statuses's keys).
_DEBUG_RULES, _PROFILER_RULES = "DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses"


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


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


LOCKS_DIR = ".locks"
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

        :func:`launchbay.backends.local.detached.start` passes its locked descriptor
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

    @staticmethod
    def held_for(job_dir: str) -> bool:
        """Whether someone holds the name lock of the job at ``job_dir`` (its client, its watchdog).

        A job whose client died is finished by the process that took its lock;
        nobody else may take its hosts meanwhile. Nothing is created: a job
        without a lock file has no holder.
        """
        import fcntl

        path = os.path.join(
            os.path.dirname(job_dir), LOCKS_DIR, f"{os.path.basename(job_dir)}.lock"
        )
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing lets go of the lock taken to look
        return False

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
        hard_kill: Callable[[LocalJob], None],
        plan: JobPlan | None = None,
        *,
        record: Mapping[str, Any] | None = None,
    ) -> None:
        """A new job; with ``record`` (its ``status.json``, read by :func:`from_json`), the
        unfinished job that record describes, taken up where it was left (a job whose
        client died is finished through it, by the same function as a live one)."""
        self.request = request
        #: The job's plan: what the backend reads of the request (channels, outputs,
        #: checkpoints, environment ...), derived once. A job read back from its
        #: record gets it from the stored request, by the same function.
        self.plan: JobPlan = plan if plan is not None else plan_request(request, stored=True)
        #: The plan as the stager sees the hosts' trees on this machine: the control
        #: loop sets its host runner's ``host_view(plan)`` (containers drop each given
        #: ``LocalPath``), for a live job and one taken up from its record alike.
        self.host_plan: JobFields = self.plan
        #: Kills what is left of the job at once (its host runner's, at interpreter exit).
        self.hard_kill = hard_kill
        self.name: str = self.plan.job_name
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
        self.creation_time = utc_now()
        self.start_time: _dt.datetime | None = None
        self.end_time: _dt.datetime | None = None
        #: What runs each host, by host name (a process, a container ...), the host
        #: runner's own handles, as its prepare()/start() returned them (kept by the loop).
        self.procs: dict[str, Any] = {}
        #: Each host's share of this machine's GPUs (device ids), or None: no GPU
        #: (see launchbay._capacity; found once per job, in run()).
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
        #: The process that finishes the job if this one dies (see launchbay.backends.local.watchdog).
        self.watchdog: Any = None
        #: ``(status, reason)`` the job is ending with, while its outputs are written
        #: (recorded as ``LocalEnding``: a record left so was never finished).
        self.ending: tuple[str, str | None] | None = None
        #: The process that runs the job (:data:`CLIENT_ID`; a recorded job's own).
        self.client = CLIENT_ID
        #: The Debugger rules' statuses by describe() key, and what runs them (.rules).
        self.rule_statuses: dict[str, list[dict[str, Any]]] = {}
        self.rules: Any = None
        #: The job's attempts while it runs here (launchbay.backends.local.attempts), and
        #: how each ended (``LocalAttempts``: spot interruptions rehearsed, retries).
        self.attempts: Any = None
        self.attempt_log: list[dict[str, Any]] = []
        if record is None:
            self._set_secondary("Starting", "Preparing the instances for training")
        else:
            self._restore(record)

    def _restore(self, record: Mapping[str, Any]) -> None:
        """Take the state ``record`` holds; nothing is written (see :meth:`describe`)."""
        state = JobState.from_description(record)
        self.client = state.client or "an unknown process"
        self.status = str(state.status) if state.status in JOB_STATUSES else IN_PROGRESS
        self.secondary = str(state.secondary or self.secondary)
        self.transitions = [t.to_dict() for t in state.transitions or ()]
        if state.creation_time is not None:
            self.creation_time = state.creation_time
        if state.start_time is not None:
            self.start_time = state.start_time
        self.failed_host = state.failed_host or None
        for key, statuses in (
            (_DEBUG_RULES, state.debug_rule_statuses),
            (_PROFILER_RULES, state.profiler_rule_statuses),
        ):
            # rules still running went with the client that ran them
            self.rule_statuses[key] = [
                dict(s, RuleEvaluationStatus="Stopped", StatusDetails="The client that ran the rule went away.")
                if s.get("RuleEvaluationStatus") == "InProgress" else dict(s)
                for s in statuses or ()
            ]  # fmt: skip
        if state.attempts is not None:
            self.attempt_log = [dict(a) for a in state.attempts]
        self.ending = state.ending_outcome

    # -- status -----------------------------------------------------------------
    def _set_secondary(self, status: str, message: str) -> None:
        now = utc_now()
        with self.lock:
            if self.transitions:
                self.transitions[-1].setdefault("EndTime", now)
            self.transitions.append({"Status": status, "StartTime": now, "StatusMessage": message})
            self.secondary = status
        self.save()

    def state(self) -> JobState:
        """The job's state now (what :meth:`describe` writes)."""
        with self.lock:
            start, end, rules = self.start_time, self.end_time, self.rule_statuses
            seconds = billable = None
            if start and end:
                seconds = int((end - start).total_seconds())
                billable = billable_seconds(self.transitions, start, end)
            return JobState(
                name=self.name,
                arn=job_arn(self.name),
                status=self.status,
                secondary=self.secondary,
                creation_time=self.creation_time,
                last_modified_time=utc_now(),
                transitions=tuple(Transition.from_dict(t) for t in self.transitions),
                job_dir=self.layout.job_dir,
                client=self.client,
                start_time=start or None,
                end_time=end or None,
                training_seconds=seconds,
                billable_seconds=billable,
                failed_host=self.failed_host or None,
                failure_reason=self.failure_reason or None,
                model_artifacts=self.model_artifacts or None,
                debug_rule_statuses=tuple(rules.get(_DEBUG_RULES) or ()) or None,
                profiler_rule_statuses=tuple(rules.get(_PROFILER_RULES) or ()) or None,
                attempts=tuple(self.attempt_log) or None,
                ending=(
                    {"Status": self.ending[0], "FailureReason": self.ending[1]}
                    if self.ending is not None and self.status not in TERMINAL_STATUSES
                    else None
                ),
            )

    def describe(self) -> dict[str, Any]:
        """The job's DescribeTrainingJob dict: its request's echo and its state (one codec)."""
        with self.lock:
            echo = {k: v for k, v in self.request.items() if k not in _REQUEST_KEYS_NOT_DESCRIBED}
            return to_description(self.state(), base=echo)

    def save(self) -> None:
        """Write the description to ``status.json`` (best effort)."""
        try:
            write_json_atomic(self.layout.status_file, _to_json(self.describe()))
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
                    )[:REASON_LIMIT]

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


def billable_seconds(
    transitions: list[dict[str, Any]], start: _dt.datetime, end: _dt.datetime
) -> int:
    """``BillableTimeInSeconds`` as SageMaker counts it: the time the job's instances ran
    from ``TrainingStartTime`` to ``TrainingEndTime``, without the time spent waiting for
    new ones (``Starting`` after a spot interruption or before a retry). For a job run
    once it equals ``TrainingTimeInSeconds``."""
    waited = 0.0
    for transition in transitions:
        began, ended = transition.get("StartTime"), transition.get("EndTime") or end
        if transition.get("Status") != "Starting" or not isinstance(began, _dt.datetime):
            continue
        if isinstance(ended, _dt.datetime) and began >= start:
            waited += max((min(ended, end) - began).total_seconds(), 0.0)
    return max(int((end - start).total_seconds() - waited), 0)


def _to_json(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    return value


def from_json(value: Any, key: str = "") -> Any:
    if isinstance(value, str) and key.endswith("Time"):
        with contextlib.suppress(ValueError):
            return _dt.datetime.fromisoformat(value)
    if isinstance(value, dict):
        return {k: from_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v, key) for v in value]
    return value


# --------------------------------------------------------------------------- job records

#: A SageMaker job name: what a job directory under the job root is called.
JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_warned: set[str] = set()
#: More hosts than any local job can have: a record claiming more is damaged.
_MAX_RECORDED_HOSTS = 100_000


def warn_once(key: str, message: str) -> None:
    """Warn once per process about ``key`` (the local backends share the job root)."""
    if key not in _warned:
        _warned.add(key)
        logger.warning("%s", message)


def instance_types_of(path: str) -> list[Any] | None:
    """The instance types a job record (``status.json``, ``request.json``) names, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            resources = json.load(f).get("ResourceConfig") or {}
        groups = resources.get("InstanceGroups") or [resources]
        return [g.get("InstanceType") for g in groups]
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def damaged_record(name: str, path: str, problem: str, job_dir: str | None = None) -> JobError:
    return JobError(
        f"Local training job {name!r} cannot be read: {path} {problem}. The job directory "
        f"is damaged (a full disk, an interrupted copy, or an edit); remove "
        f"{job_dir or os.path.dirname(path)} to forget the job."
    )


def read_record(name: str, path: str) -> dict[str, Any]:
    """A job's JSON record (``status.json``, ``request.json``) as a dict.

    Raises:
        JobError: naming the file and what is wrong with it (missing, not a file,
            not JSON, not a JSON object).
    """
    job_dir = os.path.dirname(path)
    if not os.path.isdir(job_dir):
        raise damaged_record(name, job_dir, "is not a directory", job_dir)
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except FileNotFoundError as exc:
        raise damaged_record(name, path, "is missing") from exc
    except IsADirectoryError as exc:
        raise damaged_record(name, path, "is a directory, not a file") from exc
    except OSError as exc:
        raise damaged_record(name, path, f"cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise damaged_record(name, path, f"is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise damaged_record(name, path, f"holds a JSON {type(document).__name__}, not an object")
    return document


def load_status(job_root: str, name: str) -> dict[str, Any]:
    """Job ``name``'s ``status.json`` under ``job_root``, checked.

    Raises:
        JobError: there is no such job, or its directory or ``status.json``
            is damaged (the message names the file and what is wrong).
    """
    job_dir = os.path.join(job_root, name)
    if not os.path.lexists(job_dir):
        raise JobError(f"No local training job named {name!r} under {job_root}.")
    description = read_record(name, os.path.join(job_dir, "status.json"))
    problem = status_problem(description)
    if problem:
        raise damaged_record(name, os.path.join(job_dir, "status.json"), problem)
    return from_json(description)


#: Bytes set aside for a job's final record (``artifacts/status.reserve``, made at the
#: start): a disk filled by then still takes the job's outcome.
_RESERVE_BYTES = 256 * 1024


def _reserve_file(status_file: str) -> str:
    return os.path.join(os.path.dirname(status_file), "artifacts", "status.reserve")


def make_reserve(status_file: str) -> None:
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
        write_json_atomic(status_file, record)
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


def status_problem(description: Mapping[str, Any]) -> str | None:
    """What is wrong with a job record's fields the local backends rely on, or None."""
    status = JobState.from_description(description).described("status")
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
