"""Runs a :class:`~launchbay.runtime.launchers.base.LaunchPlan` and watches every rank.

One single-threaded loop (``selectors`` with a 0.1 s tick):

* pumps every stream: the processes' pipes and the per-rank FIFOs the bootstrap
  writes to; lines are labelled ``[rank N] `` when the job has more than one
  process (mpirun's ``[1,N]<stdout>:`` tags are relabelled the same way), and
  the last lines of each rank's stderr are kept for the failure report; a
  newline or a carriage return ends a line, and a line longer than
  :data:`MAX_LINE` (64 KiB), also one never ended, is cut into pieces of that
  size (unlabelled output passes through as it comes, with a newline where it
  is cut), so nothing downstream holds more than that of a line;
* reads the ranks' records (and, in local modes, the shared directory) to see
  failures as they happen -- here or on another host -- and tears the whole
  job down at once: SIGTERM to every process below the runtime, SIGKILL
  2 s later;
* forwards SIGTERM/SIGINT (as SIGTERM, so scripts can write a last checkpoint)
  to each launcher's process group, and SIGKILLs everything left after
  ``LAUNCHBAY_GRACE_SECONDS``;
* makes sure no process of the job outlives it (the runtime is a child
  subreaper, so orphans are found too).

Failures are data here: the loop only collects an :class:`Outcome`; turning it
into a report is :mod:`._triage`'s job.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from typing import BinaryIO

from launchbay.runtime import _procs, _records
from launchbay.runtime._shared import SharedDir
from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.launchers.base import LaunchPlan, ProcessSpec
from launchbay.runtime.names import MAX_LOG_LINE

__all__ = ["Outcome", "RankState", "Supervisor", "FAILURE_KILL_DELAY", "TAIL_LINES"]

TICK = 0.1
SCAN_INTERVAL = 0.2
FAILURE_KILL_DELAY = 2.0
CLEANUP_KILL_DELAY = 2.0
HARD_STOP_AFTER_KILL = 5.0
TAIL_LINES = 40
#: Tracebacks in a rank's output whose exception line is kept (the earliest).
EXCEPTIONS_KEPT = 16
#: What torch puts before each line a torchrun worker writes to stderr on an error.
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
#: A second stop signal within this many seconds of the first is taken as a copy of it.
SIGNAL_REPEAT_SECONDS = 1.0
#: The longest piece of a line written to the host's output (a longer one is cut).
MAX_LINE = MAX_LOG_LINE
#: The longest exception line kept for the failure report.
MAX_REPORTED_LINE = 2000
#: What ends a line: a newline, or a carriage return (a progress bar's redraw).
_LINE_END = re.compile(rb"\r\n|\r|\n")


@dataclass
class RankState:
    """What this host's runtime saw of one of its ranks."""

    rank: int
    local_rank: int
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    pid: int | None = None
    died_at: float | None = None
    traceback_seen_at: float | None = None
    #: The exception line ending each traceback in the rank's output (the first
    #: :data:`EXCEPTIONS_KEPT`): ``(time seen, line, whether the rank had started
    #: processes then)``. Triage names one as the context of the rank's failure.
    exceptions: list[tuple[float, str, bool]] = field(default_factory=list)
    in_traceback: bool = False


@dataclass
class Outcome:
    """How the run ended, before triage."""

    exit_code: int
    started_at: float
    main_codes: dict[str, int] = field(default_factory=dict)
    main_exit_times: dict[str, float] = field(default_factory=dict)
    signal: int | None = None
    teardown_reason: str | None = None
    teardown_at: float | None = None
    first_failure_at: float | None = None
    waiter_code: int | None = None
    waiter_reason: str | None = None
    setup_error: str | None = None
    ranks: dict[int, RankState] = field(default_factory=dict)
    launcher_tails: dict[str, deque[str]] = field(default_factory=dict)
    #: Processes that crashed after their code returned normally (forgiven, with a warning).
    teardown_crashes: list[str] = field(default_factory=list)


@dataclass
class _Stream:
    fd: int
    kind: str  # "out" | "err"
    mode: str  # "rank" | "launcher" | "mpi-tags"
    name: str
    rank: int | None = None
    #: The line not yet ended (at most MAX_LINE bytes; see Supervisor._split).
    buffer: bytes = b""
    #: The last read ended with a carriage return (a newline next completes a \r\n).
    after_cr: bool = False


def _returncode(code: int) -> int:
    return 128 - code if code < 0 else code


class Supervisor:
    """Run ``plan`` on this host; see the module docstring."""

    def __init__(
        self,
        plan: LaunchPlan,
        *,
        host: str,
        ranks_dir: str,
        io_dir: str,
        shared: SharedDir | None,
        grace_seconds: float,
        stdout: BinaryIO | None = None,
        stderr: BinaryIO | None = None,
    ) -> None:
        self.plan = plan
        self.host = host
        self.ranks_dir = ranks_dir
        self.io_dir = io_dir
        self.shared = shared
        self.grace = grace_seconds
        self._out = stdout or sys.stdout.buffer
        self._err = stderr or sys.stderr.buffer
        self._selector = selectors.DefaultSelector()
        self._streams: dict[int, _Stream] = {}
        self._keepalive: list[int] = []
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._specs: dict[str, ProcessSpec] = {}
        self._signals: list[int] = []
        started = time.time()
        self.outcome = Outcome(exit_code=0, started_at=started)
        self.outcome.ranks = {
            rank: RankState(rank, local) for rank, local in plan.host_ranks.items()
        }
        self._kill_at: float | None = None
        self._hard_stop_at: float | None = None
        self._finishing = False
        self._last_scan = 0.0
        self._seen_failures: set[str] = set()
        self._pidfds: dict[int, int] = {}
        #: A pidfd per process this host started: the loop wakes the moment one ends instead
        #: of at its next tick (a job's end is often its last stream's EOF slightly before
        #: its exit).
        self._exit_fds: set[int] = set()
        #: Ranks that died while the runtime could not read their exit status (their
        #: launcher had reaped them): only the launcher's own report can still say how.
        self._unseen_deaths: set[int] = set()
        self._first_signal_at = float("-inf")

    # ------------------------------------------------------------------ output

    def _write(self, kind: str, data: bytes) -> None:
        target = self._out if kind == "out" else self._err
        try:
            target.write(data)
            target.flush()
        except (OSError, ValueError):
            pass

    def _label(self, rank: int | None) -> bytes:
        if rank is None or not self.plan.label_ranks:
            return b""
        return f"[rank {rank}] ".encode()

    def _tail(self, stream: _Stream, rank: int | None, line: bytes) -> None:
        if stream.kind != "err":
            return
        text = line.decode("utf-8", "replace")
        if rank is not None and rank in self.outcome.ranks:
            state = self.outcome.ranks[rank]
            state.stderr_tail.append(text)
            self._note_traceback(state, _RANK_PREFIX.sub("", text))
        else:
            tails = self.outcome.launcher_tails.setdefault(stream.name, deque(maxlen=TAIL_LINES))
            tails.append(text)

    def _note_traceback(self, state: RankState, text: str) -> None:
        """Follow the tracebacks in a rank's stderr; keep each one's exception line."""
        if text.startswith("Traceback (most recent"):
            if state.traceback_seen_at is None:
                state.traceback_seen_at = time.time()
            state.in_traceback = True
            return
        if not state.in_traceback or not text.strip() or text[:1].isspace():
            return
        state.in_traceback = False
        if len(state.exceptions) < EXCEPTIONS_KEPT:
            # Whether the rank had started processes: a launcher's child printed it.
            below = bool(state.pid and _procs.descendants(state.pid, include_zombies=True))
            state.exceptions.append((time.time(), text.strip()[:MAX_REPORTED_LINE], below))

    def _emit_line(self, stream: _Stream, line: bytes) -> None:
        rank = stream.rank
        kind = stream.kind
        if stream.mode == "mpi-tags" and line.startswith(b"[") and b"]<std" in line[:40]:
            head, _, rest = line.partition(b">:")
            try:
                rank = int(head[1 : head.index(b"]")].split(b",")[1])
                kind = "err" if head.endswith(b"<stderr") else "out"
                line = rest
                if rank not in self.outcome.ranks:
                    self.outcome.ranks[rank] = RankState(rank, -1)
            except (ValueError, IndexError):
                rank = None
        self._tail(_Stream(stream.fd, kind, stream.mode, stream.name), rank, line)
        self._write(kind, self._label(rank) + line + b"\n")

    def _feed(self, stream: _Stream, data: bytes) -> None:
        raw = stream.mode == "rank" and not self.plan.label_ranks
        newline = stream.after_cr and data[:1] == b"\n"
        if newline:  # the end of a \r\n split between two reads
            data = data[1:]
        stream.after_cr = data.endswith(b"\r")
        written = len(stream.buffer)  # raw: the line's start is out already
        pieces = self._split(stream, data)
        if raw:
            # One process, unlabelled: pass bytes through at once (progress bars
            # stay live), with a newline where an overlong line is cut; keep lines
            # only for the stderr tail.
            out = bytearray(b"\n" if newline else b"")
            for line, end in pieces:
                out += memoryview(line)[written:]
                out += end or b"\n"
                written = 0
            out += memoryview(stream.buffer)[written:]
            if out:
                self._write(stream.kind, bytes(out))
            for line, _end in pieces:
                self._tail(stream, stream.rank, line)
        else:
            for line, _end in pieces:
                self._emit_line(stream, line)

    @staticmethod
    def _split(stream: _Stream, data: bytes) -> list[tuple[bytes, bytes]]:
        """The lines ``data`` completes, as ``(line, end)`` (``end`` is ``b""`` for a cut).

        Linear in ``data``: every line end is found once, and a line longer than
        :data:`MAX_LINE` (or one never ended) is cut into pieces of that size, so
        a stream keeps at most that much of a line (``stream.buffer``).
        """
        pieces: list[tuple[bytes, bytes]] = []

        def cut(line: bytes) -> bytes:
            if len(line) <= MAX_LINE:
                return line
            whole = (len(line) - 1) // MAX_LINE * MAX_LINE
            view = memoryview(line)
            pieces.extend((bytes(view[i : i + MAX_LINE]), b"") for i in range(0, whole, MAX_LINE))
            return bytes(view[whole:])

        line, start = stream.buffer, 0
        for match in _LINE_END.finditer(data):
            pieces.append((cut(line + data[start : match.start()]), match.group()))
            line, start = b"", match.end()
        stream.buffer = cut(line + data[start:])
        return pieces

    def _flush_partial(self, stream: _Stream) -> None:
        if stream.buffer:
            if stream.mode == "rank" and not self.plan.label_ranks:
                self._tail(stream, stream.rank, stream.buffer)
            else:
                self._emit_line(stream, stream.buffer)
            stream.buffer = b""

    def _register(self, fd: int, stream: _Stream) -> None:
        os.set_blocking(fd, False)
        self._streams[fd] = stream
        self._selector.register(fd, selectors.EVENT_READ)

    def _read(self, fd: int) -> None:
        stream = self._streams.get(fd)
        if stream is None:
            return
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                data = b""
            if not data:
                self._flush_partial(stream)
                self._selector.unregister(fd)
                del self._streams[fd]
                os.close(fd)
                return
            self._feed(stream, data)
            if len(data) < 65536:
                return

    def _pump(self, timeout: float) -> None:
        if not self._streams and not self._pidfds and not self._exit_fds:
            time.sleep(timeout)
            return
        for key, _ in self._selector.select(timeout):
            if key.fd in self._exit_fds:  # reaped by the loop's _poll_processes
                self._exit_fds.discard(key.fd)
                self._selector.unregister(key.fd)
                os.close(key.fd)
            elif key.fd in self._pidfds:
                rank = self._pidfds.pop(key.fd)
                self._selector.unregister(key.fd)
                os.close(key.fd)
                self._rank_died(rank, time.time())
            else:
                self._read(key.fd)

    def _drain(self) -> None:
        for fd in list(self._streams):
            self._read(fd)
        for stream in list(self._streams.values()):
            self._flush_partial(stream)

    # ------------------------------------------------------------------ setup

    def _make_fifos(self) -> None:
        if not self.plan.fifo:
            return
        os.makedirs(self.io_dir, exist_ok=True)
        for rank in self.plan.host_ranks:
            for kind, suffix in (("out", "out"), ("err", "err")):
                path = os.path.join(self.io_dir, f"{rank}.{suffix}")
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
                os.mkfifo(path, 0o600)
                reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                # Our own idle writer keeps the FIFO from reporting EOF between
                # ranks' writes (and before the rank opens it).
                self._keepalive.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                self._register(reader, _Stream(reader, kind, "rank", f"rank-{rank}", rank=rank))

    def _clear_stale_records(self) -> None:
        for rank in self.plan.host_ranks:
            for path in (
                _records.start_path(self.ranks_dir, rank),
                _records.end_path(self.ranks_dir, rank),
            ):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)

    def _start(self, spec: ProcessSpec) -> None:
        try:
            proc = subprocess.Popen(
                spec.argv,
                env=spec.env,
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_procs.die_with_parent,  # noqa: PLW1509 - single-threaded runtime
            )
        except OSError as exc:
            raise TrainingSetupError(
                f"Could not start {spec.argv[0]!r} ({spec.name}): {exc}"
            ) from exc
        self._procs[spec.name] = proc
        self._specs[spec.name] = spec
        exit_fd = _pidfd(proc.pid)
        if exit_fd is not None:
            self._exit_fds.add(exit_fd)
            self._selector.register(exit_fd, selectors.EVENT_READ)
        for pipe, kind in ((proc.stdout, "out"), (proc.stderr, "err")):
            assert pipe is not None  # noqa: S101 - Popen with PIPE
            fd = os.dup(pipe.fileno())
            pipe.close()
            self._register(fd, _Stream(fd, kind, spec.output, spec.name, rank=spec.rank))

    # ------------------------------------------------------------------ signals

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._signals.append(signum)

    def _signal_groups(self, sig: int, roles: tuple[str, ...]) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is None and self._specs[name].role in roles:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)

    def _signal_all(self, sig: int) -> None:
        _procs.send_signal(_procs.descendants(), sig)

    # ------------------------------------------------------------------ watching

    def _watch_pid(self, rank: int, pid: int) -> bool:
        """Get notified the moment a rank's process ends (Linux pidfd); False if unsupported."""
        fd = _pidfd(pid)
        if fd is None:
            return False
        self._pidfds[fd] = rank
        self._selector.register(fd, selectors.EVENT_READ)
        return True

    def _rank_died(self, rank: int, at: float) -> None:
        """A rank's process is gone; without an end record, record the crash for triage."""
        state = self.outcome.ranks[rank]
        if state.died_at is not None:
            return
        state.died_at = at
        path = _records.end_path(self.ranks_dir, rank)
        teardown_at = self.outcome.teardown_at
        if os.path.exists(path) or (teardown_at is not None and at >= teardown_at):
            return
        # Read at once: the launcher (the rank's parent) reaps it any moment now.
        status = _procs.zombie_status(state.pid) if state.pid is not None else None
        if status is None:
            self._unseen_deaths.add(rank)
        with contextlib.suppress(OSError):
            _records.write_record(
                path,
                {
                    "rank": rank,
                    "local_rank": state.local_rank,
                    "host": self.host,
                    "pid": state.pid,
                    "timestamp": at,
                    "exit_code": _procs.exit_code_of_status(status),
                    "crashed": True,
                    "error": _procs.crash_error(_procs.exit_code_of_status(status)),
                },
            )

    def _scan(self, now: float) -> None:
        starts, ends = _records.read_records(self.ranks_dir)
        since = self.outcome.started_at - 1.0
        for rank, state in self.outcome.ranks.items():
            start = starts.get(rank)
            if start and state.pid is None and start.get("timestamp", 0) >= since:
                state.pid = int(start["pid"])
                if self._watch_pid(rank, state.pid):
                    continue
            if (
                state.pid is not None
                and state.died_at is None
                and rank not in self._pidfds.values()
                and rank not in ends
                and not _procs.is_alive(state.pid)
            ):
                self._rank_died(rank, time.time())
        for rank, end in ends.items():
            key = f"rank-{rank}"
            if key in self._seen_failures or not end.get("exit_code"):
                continue
            if end.get("timestamp", 0) < since:
                continue
            self._seen_failures.add(key)
            local = rank in self.outcome.ranks
            # The failing rank itself is left to finish printing its traceback.
            spare = {int(end["pid"])} if end.get("pid") else set()
            self._failure("failure" if local else "peer", float(end["timestamp"]), spare=spare)
        if self.shared is not None:
            for host, mark in self.shared.host_marks().items():
                key = f"host-{host}"
                if host == self.host or key in self._seen_failures:
                    continue
                if mark.get("cause") == "failed" and mark.get("timestamp", 0) >= since:
                    self._seen_failures.add(key)
                    self._failure("peer", float(mark["timestamp"]))
            if self.outcome.teardown_reason is None and self.shared.stop_requested():
                self._stop("stop", signal.SIGTERM)

    def _failure(self, reason: str, at: float, spare: set[int] | None = None) -> None:
        outcome = self.outcome
        if outcome.first_failure_at is None or at < outcome.first_failure_at:
            outcome.first_failure_at = at
        if outcome.teardown_reason is not None:
            return
        outcome.teardown_reason = reason
        outcome.teardown_at = time.time()
        if self.shared is not None:
            cause = "failed" if reason == "failure" else "torn-down"
            with contextlib.suppress(OSError):
                self.shared.mark_host(cause, None, at if reason == "failure" else time.time())
        # Launchers (torchrun, mpirun, sshd) only print noise when asked to stop:
        # kill them; ranks get SIGTERM (then SIGKILL) so handlers can run. Unless a rank
        # died with a status only its launcher saw: mpirun then ends the job by itself
        # and says which signal killed it, which the report needs (SIGKILL in
        # FAILURE_KILL_DELAY if it does not).
        launchers = {
            proc.pid
            for name, proc in self._procs.items()
            if self._specs[name].output != "rank" and proc.poll() is None
        }
        if not self._unseen_deaths:
            _procs.send_signal(launchers, signal.SIGKILL)
        others = set(_procs.descendants()) - launchers - (spare or set())
        _procs.send_signal(others, signal.SIGTERM)
        self._kill_at = time.monotonic() + FAILURE_KILL_DELAY

    def _stop(self, reason: str, signum: int) -> None:
        """Forward a stop request (signal or shared-dir stop) to the launchers."""
        outcome = self.outcome
        if outcome.teardown_reason is not None:
            return
        outcome.teardown_reason = reason
        outcome.teardown_at = time.time()
        if reason == "signal":
            outcome.signal = signum
            self._first_signal_at = time.monotonic()
            if self.shared is not None:
                with contextlib.suppress(OSError):
                    self.shared.request_stop(signum)
        self._signal_groups(signal.SIGTERM, ("main", "aux", "service"))
        # Each rank of this host gets the SIGTERM itself too: a launcher (torchrun) can
        # exit without passing it on when every host is stopped at once, which left its
        # ranks to the SIGKILL with no chance to write a last checkpoint.
        launched = {proc.pid for proc in self._procs.values()}
        ranks = {s.pid for s in outcome.ranks.values() if s.pid and s.died_at is None}
        _procs.send_signal(ranks - launched, signal.SIGTERM)
        self._kill_at = time.monotonic() + self.grace
        if self.plan.stop_via_shared_dir:
            # Nothing of ours to kill: wait for the master to report, but not forever.
            self._hard_stop_at = time.monotonic() + self.grace + 15.0

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop(0)
            if self.outcome.teardown_reason is None and not self._finishing:
                self._stop("signal", signum)
            else:
                now = time.monotonic()
                first = self.outcome.signal is None
                if first:
                    self.outcome.signal = signum
                    self._first_signal_at = now
                # A signal after a signal (someone insisting) stops waiting. The first one
                # after a stop this host saw in the shared directory (another host got the
                # same SIGTERM a moment earlier, e.g. when the client died) is that stop,
                # and so is a copy of the first signal within a second of it.
                insisting = not first and now - self._first_signal_at >= SIGNAL_REPEAT_SECONDS
                if insisting or self._finishing:
                    self._kill_at = now

    # ------------------------------------------------------------------ main loop

    def _mains_done(self) -> bool:
        for spec in self.plan.main_processes:
            proc = self._procs.get(spec.name)
            if proc is None or proc.poll() is None:
                return False
        return True

    def _poll_processes(self) -> None:
        for name, proc in self._procs.items():
            if name in self.outcome.main_codes or proc.poll() is None:
                continue
            code = _returncode(proc.returncode)
            spec = self._specs[name]
            if spec.role != "main":
                continue
            if code != 0 and self._crashed_after_return(spec, proc.returncode):
                code = 0
            self.outcome.main_codes[name] = code
            self.outcome.main_exit_times[name] = time.time()
            if code != 0:
                self._failure("failure", time.time())

    def _crashed_after_return(self, spec: ProcessSpec, returncode: int) -> bool:
        """Whether ``spec`` failed only after its ranks' code had returned normally.

        A rank process (``output == "rank"``) must have died by a signal after
        its end record said it returned (exit code 0); a launcher (torchrun,
        mpirun) may exit with any code, as long as every rank of this host
        recorded a normal return. Such a crash is interpreter teardown (torch
        2.13's gloo aborts at exit, pytorch/pytorch#179291): the work is done,
        so it is reported as a warning, not a failure.
        """
        if self.outcome.teardown_reason is not None:
            return False  # stopped or torn down: the exit codes say nothing about teardown
        if spec.output == "rank":
            if spec.rank is None or returncode >= 0:
                return False
            ranks = [spec.rank]
        else:
            ranks = list(self.outcome.ranks)
        if not ranks:
            return False
        _starts, ends = _records.read_records(self.ranks_dir)
        since = self.outcome.started_at - 1.0
        for rank in ranks:
            end = ends.get(rank)
            if end is None or end.get("exit_code") != 0 or float(end.get("timestamp", 0)) < since:
                return False
        how = (
            f"was killed by {_procs.signal_name(-returncode)}"
            if returncode < 0
            else f"exited with code {returncode}"
        )
        who = f"Rank {spec.rank}" if spec.output == "rank" else f"{spec.name} (ranks {ranks})"
        message = (
            f"{who} {how} after the training code had returned normally: the Python "
            "interpreter crashed while tearing down (torch's gloo aborts at exit with "
            "'terminate called without an active exception'). The work was done, so "
            "this does not fail the job."
        )
        self.outcome.teardown_crashes.append(message)
        self._write("err", f"[launchbay] WARNING {message}\n".encode())
        return True

    def _begin_finish(self) -> None:
        """The job is over: stop helpers (ps server, sshd) and anything left behind."""
        self._finishing = True
        self._signal_groups(signal.SIGTERM, ("aux", "service"))
        self._signal_all(signal.SIGTERM)
        if self._kill_at is None:
            self._kill_at = time.monotonic() + CLEANUP_KILL_DELAY

    def _all_gone(self) -> bool:
        return all(p.poll() is not None for p in self._procs.values()) and not _procs.descendants()

    def run(self) -> Outcome:
        """Run the plan to its end and return what happened."""
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        previous = {s: signal.signal(s, self._on_signal) for s in handled}
        _procs.set_child_subreaper()
        try:
            self._run()
        except BaseException:
            # Never leave a half-started job behind (e.g. a launcher that cannot start).
            self._signal_all(signal.SIGKILL)
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            fds = [*self._streams, *self._keepalive, *self._pidfds, *self._exit_fds]
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._selector.close()
        return self.outcome

    def _run(self) -> None:
        plan = self.plan
        outcome = self.outcome
        self._clear_stale_records()
        os.makedirs(self.ranks_dir, exist_ok=True)
        self._make_fifos()
        for action in plan.before_start:
            action()
        for spec in plan.processes:
            if spec.role == "service":
                self._start(spec)
        gate_open = plan.gate is None
        started = False
        waiter_done = plan.waiter is None
        while True:
            # Nothing to wait for before the workers start once the gate is open.
            self._pump(0.0 if gate_open and not started else TICK)
            self._handle_signals()
            mono = time.monotonic()
            for hook in plan.periodic:
                with contextlib.suppress(OSError):
                    hook(mono)
            self._poll_processes()
            if mono - self._last_scan >= SCAN_INTERVAL:
                self._last_scan = mono
                self._scan(mono)
                _procs.reap_adopted({p.pid for p in self._procs.values()})
            stopping = outcome.teardown_reason is not None
            if not started:
                if stopping:
                    if self._all_gone():
                        break
                else:
                    if not gate_open and plan.gate is not None:  # closed only while there is a gate
                        try:
                            gate_open = plan.gate.poll(mono)
                        except TrainingSetupError as exc:
                            outcome.setup_error = str(exc)
                            self._failure("failure", time.time())
                            continue
                    if gate_open:
                        for spec in plan.processes:
                            if spec.role != "service":
                                self._start(spec)
                        started = True
            if started:
                mains_done = self._mains_done()
                wait_for_waiter = not stopping or plan.stop_via_shared_dir
                # waiter_done is False only while there is a waiter
                if not waiter_done and mains_done and wait_for_waiter and plan.waiter is not None:
                    code = plan.waiter.poll(mono)
                    if code is not None:
                        waiter_done = True
                        outcome.waiter_code = code
                        outcome.waiter_reason = getattr(plan.waiter, "reason", None)
                        if code != 0 and outcome.waiter_reason:
                            self._write(
                                "err", f"[launchbay] ERROR {outcome.waiter_reason}\n".encode()
                            )
                        if code != 0 and outcome.teardown_reason is None:
                            self._failure("failure", time.time())
                if not self._finishing and mains_done and (waiter_done or not wait_for_waiter):
                    self._begin_finish()
                if self._finishing and self._all_gone():
                    break
            if self._kill_at is not None and mono >= self._kill_at:
                self._signal_all(signal.SIGKILL)
                for proc in self._procs.values():
                    if proc.poll() is None:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(proc.pid, signal.SIGKILL)
                self._kill_at = None
                if self._hard_stop_at is None:
                    self._hard_stop_at = mono + HARD_STOP_AFTER_KILL
            if self._hard_stop_at is not None and mono >= self._hard_stop_at:
                break
        self._poll_processes()
        self._drain()
        self._scan(time.monotonic())
        outcome.exit_code = self._exit_code()

    def _exit_code(self) -> int:
        outcome = self.outcome
        if outcome.signal is not None:
            return 128 + outcome.signal
        if outcome.teardown_reason == "stop":
            return 128 + signal.SIGTERM
        if outcome.setup_error:
            return 1
        if outcome.waiter_code is not None and not self.plan.main_processes:
            return outcome.waiter_code
        codes = [outcome.main_codes.get(s.name, 1) for s in self.plan.main_processes]
        failed = [c for c in codes if c != 0]
        if failed:
            return failed[0]
        if outcome.waiter_code:
            return outcome.waiter_code
        if outcome.teardown_reason in ("failure", "peer"):
            return 1
        return 0


def _pidfd(pid: int) -> int | None:
    """A descriptor readable once ``pid`` has ended (Linux pidfd), or None where the kernel
    or a seccomp profile has no ``pidfd_open`` (the loop then sees the end at its tick)."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None


def make_io_dir() -> str:
    """A private directory for the per-rank FIFOs."""
    return tempfile.mkdtemp(prefix="launchbay-io-")
