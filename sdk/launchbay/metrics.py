"""Metrics read from a job's log lines with ``MetricDefinitions``, as SageMaker reads them.

SageMaker matches every log line of a training job against each metric
definition's ``Regex`` and takes the regex's first group (or the whole match
when it has no group) as a float: a metric is the time series of those values,
and a tuning job's objective is the last value of its objective metric. The
same rule runs here for local jobs:

* :func:`parse_line` is the rule for one line (pure);
* :func:`start_recorder` starts the **recorder process** of a local job: a
  niced child of the client that follows the job's log files (one per host),
  matches every line and appends what it finds to ``<job dir>/metrics.jsonl``,
  one JSON object per line::

      {"time": <epoch seconds>, "values": {name: [value, ...]}}  values of one batch of lines
      {"final": true}                                             every log was read to its end
      {"final": true, "incomplete": "<why>"}                      recording stopped early: why

  The local backend tells it when the hosts have ended (:meth:`Recorder.finish`)
  and waits for it, at most :data:`FINISH_SECONDS`, before the job's terminal
  status shows: when ``fit()`` returns, the metrics are complete or say why not;
* :class:`MetricsReader` reads that file from where its last read stopped (the
  local tuner follows its trials with it); :func:`load_metrics` reads it whole.
  ``metrics.json`` (one JSON document, written by earlier versions) is still read.

Regexes never run in the client: a regex that backtracks (``(a+)+b`` against a
long line) cannot hold the client's GIL, so Ctrl-C and ``max_run`` act at once.
Each chunk of a log (at most :data:`CHUNK` bytes; a longer line is matched in
pieces of that size) gets :data:`REGEX_BUDGET` CPU seconds of matching; a chunk
that takes longer ends the job's recording: the metrics file and a warning name
the metric, its regex, the log and the byte offset of the line.
:func:`warn_backtracking` warns about nested quantifiers (``(a+)+``) when an
estimator or a tuner is made. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any

from launchbay.errors import ConfigurationError

logger = logging.getLogger("launchbay.metrics")

__all__ = [
    "METRICS_FILE",
    "LEGACY_METRICS_FILE",
    "BacktrackingRegexWarning",
    "MetricsReader",
    "Recorder",
    "compile_definitions",
    "nested_quantifier",
    "warn_backtracking",
    "parse_line",
    "load_metrics",
    "metrics_path",
    "stored_metrics_file",
    "read_logs",
    "start_recorder",
]

#: The file in a job's directory that holds its metrics (JSON lines, appended).
METRICS_FILE = "metrics.jsonl"
#: The file earlier versions wrote (one JSON document); read, never written.
LEGACY_METRICS_FILE = "metrics.json"
#: Seconds between two reads of a running job's log files.
POLL_SECONDS = 0.25
#: Most bytes of one log matched at once (one budget, one batch); a longer line is cut.
CHUNK = 256 * 1024
#: CPU seconds the recorder may spend matching one chunk.
REGEX_BUDGET = 2.0
#: Seconds the client waits for the recorder to read the logs to their end once the hosts ended.
FINISH_SECONDS = 60.0
#: The recorder's niceness (added to the client's).
NICE = 5
#: Seconds a recorder asked to stop (SIGTERM) has to say where it was before SIGKILL.
_STOP_GRACE = 5.0
#: Most chunks of one log read per poll while the job runs (16 MiB).
_POLL_CHUNKS = 64
_LINE_END = re.compile(rb"\r\n|\r|\n")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def metrics_path(job_dir: str) -> str:
    """``<job dir>/metrics.jsonl``."""
    return os.path.join(job_dir, METRICS_FILE)


def stored_metrics_file(job_dir: str) -> str | None:
    """The job's metrics file (``metrics.jsonl``, else an earlier version's ``metrics.json``), or None."""
    for name in (METRICS_FILE, LEGACY_METRICS_FILE):
        path = os.path.join(job_dir, name)
        if os.path.isfile(path):
            return path
    return None


# -- the rule ---------------------------------------------------------------------------------
class BacktrackingRegexWarning(UserWarning):
    """A metric regex repeats a group that itself repeats: it can backtrack for a very long time."""


def nested_quantifier(regex: str) -> str | None:
    """The first part of ``regex`` that repeats a group which itself repeats, or None.

    ``(a+)+``, ``(.*)*``, ``(\\w+\\s?)+`` and ``((a|b)*c)+`` are such parts: on a line
    that almost matches, the engine tries every way to split the text between the
    two repetitions (exponential in the line's length). A heuristic on the text of
    the regex: escapes and character classes are skipped, a ``?`` or ``{0,1}``
    is not a repetition.
    """
    stack: list[tuple[int, bool]] = []  # (where the group opens, whether something in it repeats)
    closed: tuple[int, bool] | None = None  # the group that ends just before i
    i, n = 0, len(regex)
    while i < n:
        c = regex[i]
        repeat = _quantifier(regex, i)
        if repeat is not None:
            end, repeats = repeat
            if repeats and closed is not None and closed[1]:
                return regex[closed[0] : end]
            if repeats and stack:
                stack[-1] = (stack[-1][0], True)
            closed = None
            i = end
            continue
        closed = None
        if c == "\\":
            i += 2
        elif c == "[":
            i = _class_end(regex, i)
        elif c == "(":
            stack.append((i, False))
            i += 1
        elif c == ")" and stack:
            start, repeats = stack.pop()
            if repeats and stack:
                stack[-1] = (stack[-1][0], True)
            closed = (start, repeats)
            i += 1
        else:
            i += 1
    return None


def _quantifier(regex: str, i: int) -> tuple[int, bool] | None:
    """``(end, repeats more than once)`` of the quantifier at ``i`` (with a lazy/possessive suffix)."""
    c = regex[i]
    if c in "*+?":
        end, repeats = i + 1, c != "?"
    elif c == "{":
        found = re.match(r"\{(\d*)(,?)(\d*)\}", regex[i:])
        if found is None or not (found.group(1) or found.group(3)):
            return None
        low, comma, high = found.groups()
        repeats = bool(comma) and (not high or int(high) > 1) or (not comma and int(low) > 1)
        end = i + found.end()
    else:
        return None
    if end < len(regex) and regex[end] in "?+":
        end += 1
    return end, repeats


def _class_end(regex: str, i: int) -> int:
    """The index after the character class opening at ``i``."""
    j = i + 1
    if j < len(regex) and regex[j] == "^":
        j += 1
    if j < len(regex) and regex[j] == "]":
        j += 1
    while j < len(regex) and regex[j] != "]":
        j += 2 if regex[j] == "\\" else 1
    return j + 1


def warn_backtracking(
    definitions: Sequence[Mapping[str, Any]] | None, argument: str = "metric_definitions"
) -> None:
    """Warn (:class:`BacktrackingRegexWarning`) about each regex with a nested quantifier."""
    for index, item in enumerate(definitions or []):
        regex = item.get("Regex") if isinstance(item, Mapping) else None
        part = nested_quantifier(regex) if isinstance(regex, str) else None
        if part is not None:
            warnings.warn(
                f"{argument}[{index}]['Regex'] = {regex!r} (metric {item.get('Name')!r}) "
                f"repeats a group that itself repeats: {part!r}. On a long log line such a "
                "regex can backtrack for minutes; a local job stops recording its metrics "
                f"when one chunk of its log takes more than {REGEX_BUDGET:g} s of matching. "
                "Accepted: a regex without nested repetition, e.g. 'loss=([0-9.eE+-]+)'.",
                BacktrackingRegexWarning,
                stacklevel=_caller_level(),
            )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside launchbay (the user's call)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]  # None ends it
    return level


def compile_definitions(
    definitions: Sequence[Mapping[str, str]] | None,
) -> list[tuple[str, re.Pattern[str]]]:
    """``[(name, compiled regex)]`` of ``MetricDefinitions``.

    Raises:
        ConfigurationError: a definition without ``Name``/``Regex``, or a regex
            that does not compile (naming the definition and the regex).
    """
    out: list[tuple[str, re.Pattern[str]]] = []
    for index, item in enumerate(definitions or []):
        name, regex = item.get("Name"), item.get("Regex")
        if not isinstance(name, str) or not name or not isinstance(regex, str) or not regex:
            raise ConfigurationError.invalid(
                f"metric_definitions[{index}]", dict(item), "a dict with a 'Name' and a 'Regex'"
            )
        try:
            out.append((name, re.compile(regex)))
        except re.error as exc:
            raise ConfigurationError.invalid(
                f"metric_definitions[{index}]['Regex']",
                regex,
                f"a Python regular expression ({exc})",
            ) from exc
    return out


def parse_line(
    compiled: Sequence[tuple[str, re.Pattern[str]]], line: str
) -> list[tuple[str, float]]:
    """The ``(metric name, value)`` pairs one log line gives (SageMaker's rule).

    Each definition's regex is searched in the line; its first group (the whole
    match when it has no group) is the value. A match that is not a finite
    number is skipped, as SageMaker skips it.
    """
    found: list[tuple[str, float]] = []
    for name, pattern in compiled:
        value = _value(pattern, line)
        if value is not None:
            found.append((name, value))
    return found


def _value(pattern: re.Pattern[str], line: str) -> float | None:
    match = pattern.search(line)
    if match is None:
        return None
    text = match.group(1) if pattern.groups else match.group(0)
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


# -- reading the metrics file -----------------------------------------------------------------
class MetricsReader:
    """A job's metrics, read from its metrics file where the last :meth:`read` stopped.

    Args:
        job_dir: The job's directory (its ``metrics.jsonl``, else ``metrics.json``).
        path: Read this JSON-lines file instead.

    Each metric's values are in :attr:`values` (and the time each was read in
    :attr:`times`); :attr:`final` tells that the recorder ended, and
    :attr:`incomplete` why it ended before the logs' end (None when it did not).
    """

    def __init__(self, job_dir: str, path: str | None = None) -> None:
        self.path = path or metrics_path(job_dir)
        self.legacy = None if path else os.path.join(job_dir, LEGACY_METRICS_FILE)
        self.values: dict[str, list[float]] = {}
        self.times: dict[str, list[float]] = {}
        self.final = False
        self.incomplete: str | None = None
        self.offset = 0

    def read(self) -> bool:
        """Read what was appended since the last read; whether anything was."""
        if self.final:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except FileNotFoundError:
            return self._read_legacy()
        except OSError:
            return False
        added = False
        with os.fdopen(fd, "rb") as f:
            f.seek(self.offset)
            rest = b""
            while True:
                data = f.read(16 << 20)
                if not data:
                    break
                data = rest + data
                end = data.rfind(b"\n") + 1
                rest = data[end:]
                self.offset += end
                for line in data[:end].splitlines():
                    added = self._take(line) or added
        return added

    def _take(self, line: bytes) -> bool:
        try:
            record = json.loads(line)
        except ValueError:
            return False  # a batch cut short by a killed recorder
        if not isinstance(record, dict):
            return False
        batch = record.get("values")
        if isinstance(batch, dict):
            stamp = record.get("time")
            stamp = float(stamp) if isinstance(stamp, int | float) else 0.0
            for name, items in batch.items():
                if not isinstance(items, list):
                    continue
                numbers = [float(v) for v in items if isinstance(v, int | float)]
                self.values.setdefault(name, []).extend(numbers)
                self.times.setdefault(name, []).extend([stamp] * len(numbers))
        if record.get("final") is True:
            self.final = True
            reason = record.get("incomplete")
            self.incomplete = reason if isinstance(reason, str) else None
        return True

    def _read_legacy(self) -> bool:
        """An earlier version's ``metrics.json`` (``{"metrics": {name: [[t, v], ...]}, "final"}``)."""
        if self.legacy is None:
            return False
        try:
            with open(self.legacy, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return False
        series = data.get("metrics") if isinstance(data, dict) else None
        if not isinstance(series, dict):
            return False
        self.values, self.times = {}, {}
        for name, points in series.items():
            pairs = (
                [p for p in points if isinstance(p, list) and len(p) == 2]
                if isinstance(points, list)
                else []
            )
            self.times[name] = [float(t) for t, _ in pairs]
            self.values[name] = [float(v) for _, v in pairs]
        self.final = data.get("final") is True
        return True

    def series(self) -> dict[str, list[list[float]]]:
        """``{name: [[epoch seconds, value], ...]}``."""
        return {
            name: [[t, v] for t, v in zip(self.times[name], values, strict=True)]
            for name, values in self.values.items()
        }


def load_metrics(job_dir: str) -> dict[str, Any]:
    """A job's metrics whole: ``{"metrics": {name: [[t, value], ...]}, "final": bool}``.

    ``"incomplete"`` (why the recording stopped early) is added when the file says so.
    ``{"metrics": {}, "final": False}`` when there is no metrics file.
    """
    reader = MetricsReader(job_dir)
    reader.read()
    out: dict[str, Any] = {"metrics": reader.series(), "final": reader.final}
    if reader.incomplete is not None:
        out["incomplete"] = reader.incomplete
    return out


# -- the recorder process ---------------------------------------------------------------------
class _Interrupted(Exception):
    """Raised in the recorder process by its signal handlers (budget spent, or told to stop)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class MetricRecorder:
    """Reads log files from where the last read stopped and appends the metrics they print.

    Runs in the recorder process (:func:`start_recorder`), where the budget's
    SIGPROF and the client's SIGTERM interrupt a search (:func:`_recorder_main`).

    Args:
        path: The JSON-lines file the batches are appended to.
        log_files: The log files to follow (one per host).
        definitions: ``MetricDefinitions`` (``[{"Name", "Regex"}]``).
        clock: The time each batch is stamped with (the moment its lines are read).
        budget: CPU seconds of matching per chunk (0: no budget). SIGPROF ends a chunk
            over budget: only where a handler raises :class:`_Interrupted` (the
            recorder process), never in the client, whose default action would end it.
    """

    def __init__(
        self,
        path: str,
        log_files: Sequence[str],
        definitions: Sequence[Mapping[str, str]] | None,
        clock: Callable[[], float] = time.time,
        budget: float = 0.0,
    ) -> None:
        self.path = path
        self.compiled = compile_definitions(definitions)
        self.regexes = {name: pattern.pattern for name, pattern in self.compiled}
        self.offsets = dict.fromkeys(log_files, 0)
        self.pending = dict.fromkeys(log_files, b"")
        self.clock = clock
        self.budget = budget
        #: What is being done, for a reason: (log, byte offset).
        self.reading: tuple[str, int] | None = None
        self.fd: int | None = None

    def open(self) -> None:
        """Create the file (every metric named, no values yet)."""
        self.fd = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600
        )
        self._append({"time": self.clock(), "values": {name: [] for name, _ in self.compiled}})

    def poll(self, final: bool = False) -> bool:
        """Read every log to its current end, chunk by chunk, appending one batch per chunk.

        ``final``: the hosts have ended, the logs are complete (a last line without
        a newline counts too). Otherwise at most :data:`_POLL_CHUNKS` chunks of each
        log are read per call, so that a host that floods its log leaves time for the
        other hosts' logs and for the client's word. Returns whether a log was left
        unread for that reason (more is there already).
        """
        behind = False
        for path in self.offsets:
            for _ in range(sys.maxsize if final else _POLL_CHUNKS):
                self.reading = (path, self.offsets[path])
                try:
                    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
                except OSError:
                    break  # not made yet (the host has not started), or gone
                try:
                    data = os.pread(fd, CHUNK, self.offsets[path])
                finally:
                    os.close(fd)
                more = len(data) == CHUNK
                self._take(path, data, last=final and not more)
                if not more:
                    break
            else:
                behind = True
        self.reading = None
        return behind

    def _take(self, path: str, data: bytes, last: bool) -> None:
        start = self.offsets[path] - len(self.pending[path])  # where buf begins in the log
        self.offsets[path] += len(data)
        buf = self.pending[path] + data
        lines = _LINE_END.split(buf)
        rest = lines.pop()
        if last and rest:
            lines.append(rest)
            rest = b""
        if len(rest) >= CHUNK:  # a line longer than a chunk is matched in pieces
            lines.append(rest[:CHUNK])
            rest = rest[CHUNK:]
        self.pending[path] = rest
        found = self._match(path, start, buf, lines)
        if any(found.values()):
            self._append({"time": self.clock(), "values": found})

    def _match(
        self, path: str, start: int, buf: bytes, lines: list[bytes]
    ) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {name: [] for name, _ in self.compiled}
        index, name = 0, ""
        if self.budget > 0:
            signal.setitimer(signal.ITIMER_PROF, self.budget)
        try:
            for index in range(len(lines)):  # index: where an interruption happened
                line = lines[index].decode("utf-8", "replace")
                for name, pattern in self.compiled:
                    value = _value(pattern, line)
                    if value is not None:
                        found[name].append(value)
        except _Interrupted as exc:
            if any(found.values()):  # the values of the lines before it are kept
                self._append({"time": self.clock(), "values": found})
            offset = start + _line_start(buf, index)
            size = len(lines[index])
            raise _Interrupted(
                f"{exc.why} while metric {name!r} (regex {self.regexes.get(name)!r}) was "
                f"matched against the {size}-byte line at byte {offset} of {path}"
            ) from None
        finally:
            if self.budget > 0:
                signal.setitimer(signal.ITIMER_PROF, 0)
        return found

    def _append(self, record: Mapping[str, Any]) -> None:
        if self.fd is None:
            return
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        # the client's SIGTERM waits until the batch is whole in the file
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view) :]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def close(self, incomplete: str | None = None) -> None:
        """Append the end (``final``, and why the logs were not read to their end)."""
        record: dict[str, Any] = {"final": True}
        if incomplete:
            record["incomplete"] = incomplete
        self._append(record)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _line_start(buf: bytes, index: int) -> int:
    """The byte offset in ``buf`` of the ``index``-th line (as ``_LINE_END.split`` cuts it)."""
    if index == 0:
        return 0
    for count, match in enumerate(_LINE_END.finditer(buf), start=1):
        if count == index:
            return match.end()
    return len(buf)


def _on_budget(signum: int, frame: Any) -> None:
    raise _Interrupted(f"matching took more than {REGEX_BUDGET:g} s of CPU for one chunk")


def _on_stop(signum: int, frame: Any) -> None:
    raise _Interrupted(
        f"the logs were not read to their end within {FINISH_SECONDS:g} s after the job ended"
    )


def _recorder_main(argument: str) -> int:
    """The recorder process: follow the logs until the client says the hosts ended (or goes).

    ``argument``: JSON with ``out``, ``logs``, ``definitions``, ``follow`` (false: read
    the logs once, to their end), ``stamp`` (a fixed time for every value), ``budget``
    and ``job``. Its stdin is the client's pipe: ``end`` means the hosts have ended;
    end of file without it, or a new parent, means the client went away. Warnings go
    to stderr, one line each (the client logs them).
    """
    config = json.loads(argument)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the client's to handle
    signal.signal(signal.SIGPROF, _on_budget)
    signal.signal(signal.SIGTERM, _on_stop)
    stamp = config.get("stamp")
    recorder = MetricRecorder(
        config["out"],
        config["logs"],
        config["definitions"],
        clock=(lambda: float(stamp)) if stamp is not None else time.time,
        budget=float(config.get("budget", REGEX_BUDGET)),
    )
    try:
        recorder.open()
    except OSError as exc:
        sys.stderr.write(f"Metrics of job {config.get('job')} are not recorded: {exc}\n")
        return 1
    parent = os.getppid()
    incomplete: str | None = None
    try:
        if not config.get("follow", True):
            recorder.poll(final=True)
        else:
            behind = False
            while True:
                said = _client_says(parent, 0.0 if behind else POLL_SECONDS)
                behind = recorder.poll(final=said == "end")
                if said == "end":
                    break
                if said == "gone":
                    incomplete = (
                        "the client process that ran the job went away before the job ended: "
                        "the metrics hold the log lines read until then"
                    )
                    break
    except _Interrupted as exc:
        incomplete = exc.why
        if recorder.reading is not None and " while " not in exc.why:
            incomplete += f" while {recorder.reading[0]} was read at byte {recorder.reading[1]}"
        incomplete += "; the values before that point are kept"
    except OSError as exc:  # the metrics file cannot be written (a full disk)
        incomplete = f"writing {recorder.path} failed: {exc}"
    if incomplete is not None:
        with contextlib.suppress(OSError):  # a client that went away reads nothing
            sys.stderr.write(
                f"Metrics of job {config.get('job')} stop being recorded: {incomplete}\n"
            )
            sys.stderr.flush()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        recorder.close(incomplete)
    except OSError:
        return 1
    return 0


def _client_says(parent: int, timeout: float) -> str | None:
    """``"end"``, ``"gone"`` or None (nothing yet) from the client, waiting up to ``timeout``."""
    if os.getppid() != parent:
        return "gone"
    ready, _, _ = select.select([0], [], [], timeout)
    if not ready:
        return None
    data = os.read(0, 64)
    if b"end" in data:
        return "end"
    return "gone" if not data else None


_CHILD = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from launchbay.metrics import _recorder_main; sys.exit(_recorder_main(sys.argv[1]))"
)


def _spawn(config: Mapping[str, Any]) -> subprocess.Popen[bytes]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.Popen(
        [sys.executable, "-I", "-c", _CHILD.format(root=root), json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # Ctrl-C in the client's terminal is the client's
        close_fds=True,
    )


def _append_end(path: str, incomplete: str) -> None:
    """Append ``{"final": true, "incomplete": ...}`` from the client (the recorder could not)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o600)
    except OSError:
        return  # the job directory is gone: nothing to keep
    try:
        size = os.fstat(fd).st_size
        torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a batch cut short by SIGKILL
        line = json.dumps({"final": True, "incomplete": incomplete}) + "\n"
        os.write(fd, (("\n" if torn else "") + line).encode())
    except OSError:
        pass
    finally:
        os.close(fd)


class Recorder:
    """The client's handle on a job's recorder process (see :func:`start_recorder`)."""

    def __init__(self, proc: subprocess.Popen[bytes], path: str, job: str) -> None:
        self.proc = proc
        self.path = path
        self.job = job
        self.said: list[str] = []
        self._relay = threading.Thread(
            target=self._relay_warnings, name=f"launchbay-metrics-{job}", daemon=True
        )
        self._relay.start()

    def _relay_warnings(self) -> None:
        stream: IO[bytes] | None = self.proc.stderr
        if stream is None:
            return
        for raw in stream:
            text = raw.decode("utf-8", "replace").rstrip()
            if text:
                self.said.append(text)
                logger.warning("%s", text)

    def finish(
        self,
        timeout: float = FINISH_SECONDS,
        abandon: str | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """The hosts have ended: let the recorder read the logs to their end and wait for it.

        At most ``timeout`` seconds; then the recorder is stopped and the file says
        where it was. ``abandon``: do not wait; stop it now, the file saying why;
        ``cancel`` set while waiting does the same (the job is killed at once).
        Never raises: the job must end whatever happens here.
        """
        try:
            self._finish(timeout, abandon, cancel)
        except Exception as exc:  # the job must still end
            logger.error("The metrics recorder of job %s could not be ended: %s", self.job, exc)
            with contextlib.suppress(OSError):
                self.proc.kill()

    def _finish(self, timeout: float, abandon: str | None, cancel: threading.Event | None) -> None:
        proc = self.proc
        if abandon is None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.write(b"end\n")
                    proc.stdin.flush()
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                if cancel is not None and cancel.is_set():
                    abandon = "the job was killed at once: its logs were not read to their end"
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(min(0.2, max(deadline - time.monotonic(), 0.0)))
            if proc.poll() is None and abandon is None:
                proc.terminate()  # it appends where it was, and ends
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(_STOP_GRACE)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            reason = abandon or (
                f"the logs were not read to their end within {timeout:g} s after the job "
                "ended, and the recorder did not stop when asked"
            )
            logger.warning("Metrics of job %s stop being recorded: %s", self.job, reason)
            _append_end(self.path, reason)
        elif proc.returncode != 0:
            reason = f"the metrics recorder ended with exit code {proc.returncode}"
            if self.said:
                reason += f": {self.said[-1]}"
            _append_end(self.path, reason)
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        self._relay.join(5)


def start_recorder(
    job_dir: str,
    log_files: Sequence[str],
    definitions: Sequence[Mapping[str, str]] | None,
) -> Recorder | None:
    """Start the recorder process that follows ``log_files`` into ``<job dir>/metrics.jsonl``.

    ``None`` (nothing started) when there are no metric definitions. When the
    recorder cannot run (a definition that does not compile, no process), the
    file says so at once (``final`` with ``incomplete``) and a warning is logged:
    the job runs, only its metrics are not kept.
    """
    if not definitions:
        return None
    path = metrics_path(job_dir)
    job = os.path.basename(os.path.normpath(job_dir))
    try:
        compile_definitions(definitions)
        proc = _spawn(
            {"out": path, "logs": list(log_files), "definitions": [dict(d) for d in definitions],
             "follow": True, "job": job}
        )  # fmt: skip
    except Exception as exc:  # the job runs; only its metrics are not kept
        logger.warning("Metrics of job %s are not recorded: %s", job, exc)
        _append_end(path, f"the metrics are not recorded: {exc}")
        return None
    return Recorder(proc, path, job)


def read_logs(
    log_files: Sequence[str],
    definitions: Sequence[Mapping[str, str]],
    out: str,
    stamp: float | None = None,
) -> MetricsReader:
    """Read ``log_files`` once, to their end, in a recorder process; the metrics they print.

    ``out``: the JSON-lines file to write (a temporary one: a job's own directory
    is not touched). ``stamp``: the time every value is stamped with. Waits for the
    recorder (Ctrl-C stops it); its warnings are logged.

    Raises:
        ConfigurationError: a definition without ``Name``/``Regex``, or a regex that
            does not compile.
    """
    compile_definitions(definitions)
    proc = _spawn(
        {"out": out, "logs": list(log_files), "definitions": [dict(d) for d in definitions],
         "follow": False, "stamp": stamp, "job": os.path.basename(out)}
    )  # fmt: skip
    try:
        _, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in err.decode("utf-8", "replace").splitlines():
        if line.strip():
            logger.warning("%s", line)
    if proc.returncode != 0:
        _append_end(out, f"the metrics recorder ended with exit code {proc.returncode}")
    reader = MetricsReader("", path=out)
    reader.read()
    return reader
