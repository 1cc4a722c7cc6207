"""Metrics read from a job's log lines with ``MetricDefinitions``, as SageMaker reads them.

SageMaker matches every log line of a training job against each metric
definition's ``Regex`` and takes the regex's first group (or the whole match
when it has no group) as a float: a metric is the time series of those values,
and a tuning job's objective is the last value of its objective metric. The
same rule runs here for local jobs:

* :func:`parse_line` is the rule for one line (pure);
* :class:`MetricRecorder` follows a local job's log files (one per host) while it
  runs and keeps every metric as a time series in ``<job dir>/metrics.json``
  (``{"metrics": {name: [[epoch seconds, value], ...]}, "final": bool}``), written
  as lines arrive; ``final`` is true once the job's logs have been read to their end;
* :func:`load_metrics` reads that file back.

The local backend starts a recorder for every local job whose request has
``AlgorithmSpecification.MetricDefinitions`` (:func:`start_recorder`), so a
plain local ``fit()`` and a tuning trial keep their metrics the same way;
``Estimator.training_job_analytics`` and the local tuner read them.
Standard library only.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay.errors import ConfigurationError

logger = logging.getLogger("launchbay.metrics")

__all__ = [
    "METRICS_FILE",
    "MetricRecorder",
    "compile_definitions",
    "parse_line",
    "load_metrics",
    "metrics_path",
    "start_recorder",
]

#: The file in a job's directory that holds its metrics.
METRICS_FILE = "metrics.json"
#: Seconds between two reads of a running job's log files.
POLL_SECONDS = 0.25
#: Most bytes of one log file read at once.
_CHUNK = 1 << 20


def metrics_path(job_dir: str) -> str:
    """``<job dir>/metrics.json``."""
    return os.path.join(job_dir, METRICS_FILE)


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
        match = pattern.search(line)
        if match is None:
            continue
        text = match.group(1) if pattern.groups else match.group(0)
        try:
            value = float(text)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            found.append((name, value))
    return found


def load_metrics(job_dir: str) -> dict[str, Any]:
    """``<job dir>/metrics.json`` (``{"metrics": {}, "final": False}`` when absent or unreadable)."""
    try:
        with open(metrics_path(job_dir), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {"metrics": {}, "final": False}
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        return {"metrics": {}, "final": False}
    return data


class MetricRecorder:
    """Reads log files from where the last read stopped and records the metrics they print.

    Args:
        job_dir: Where ``metrics.json`` is written.
        log_files: The log files to follow (one per host).
        definitions: ``MetricDefinitions`` (``[{"Name", "Regex"}]``).
        clock: The time each value is stamped with (the moment its line is read).
    """

    def __init__(
        self,
        job_dir: str,
        log_files: Sequence[str],
        definitions: Sequence[Mapping[str, str]] | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.job_dir = job_dir
        self.compiled = compile_definitions(definitions)
        self.offsets = dict.fromkeys(log_files, 0)
        self.pending = dict.fromkeys(log_files, b"")
        self.clock = clock
        self.series: dict[str, list[list[float]]] = {name: [] for name, _ in self.compiled}
        self.final = False

    def poll(self, final: bool = False) -> bool:
        """Read what was added to the log files; write ``metrics.json`` when anything changed.

        ``final``: the job has ended, its logs are complete (a last line without a
        newline counts too). Returns whether a value was recorded.
        """
        now = self.clock()
        added = False
        for path in self.offsets:
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[path])
                    data = f.read(_CHUNK)
            except OSError:
                data = b""
            self.offsets[path] += len(data)
            data = self.pending[path] + data
            lines = re.split(rb"\r\n|\r|\n", data)
            self.pending[path] = lines.pop()
            if final and len(data) < _CHUNK and self.pending[path]:
                lines.append(self.pending[path])
                self.pending[path] = b""
            for raw in lines:
                for name, value in parse_line(self.compiled, raw.decode("utf-8", "replace")):
                    self.series[name].append([now, value])
                    added = True
        if added or (final and not self.final):
            self.final = final
            self.write()
        return added

    def write(self) -> None:
        """Write ``metrics.json`` whole (a temporary file renamed over it)."""
        path = metrics_path(self.job_dir)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"metrics": self.series, "final": self.final}, f)
            os.replace(tmp, path)
        except OSError:
            pass  # the job directory is gone (removed while running): nothing to keep


def start_recorder(
    job_dir: str,
    log_files: Sequence[str],
    definitions: Sequence[Mapping[str, str]] | None,
    done: threading.Event,
) -> threading.Thread | None:
    """Follow ``log_files`` until ``done`` is set, then read them to their end (a daemon thread).

    ``None`` (nothing started) when there are no metric definitions.
    """
    if not definitions:
        return None
    try:
        recorder = MetricRecorder(job_dir, log_files, definitions)
    except ConfigurationError as exc:  # the job runs; only its metrics are not kept
        logger.warning("Metrics of %s are not recorded: %s", job_dir, exc)
        return None

    def follow() -> None:
        while not done.wait(POLL_SECONDS):
            recorder.poll()
        while recorder.poll(final=True):  # what is left, chunk by chunk
            pass
        if not recorder.final:
            recorder.final = True
            recorder.write()

    thread = threading.Thread(target=follow, name=f"launchbay-metrics-{job_dir}", daemon=True)
    thread.start()
    return thread
