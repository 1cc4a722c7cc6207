"""The one follower: prints the events of any backend (:mod:`launchbay.backends.events`).

Backends only say what happened to a job (its hosts, their log lines, its
status, the newest values of its metrics, launchbay's own notices, its end);
:func:`show_events` shows it, the same way for every backend, through
:class:`launchbay._logs.LogPrinter`: lines as ``algo-1 | line``, the status as
one live line redrawn in place on a terminal or in a notebook (the newest metric
values after the status), and elsewhere (CI, files) as plain lines
``<UTC time> <Status> - <message>`` (``<UTC time> Metrics - name=value, ...``
when the metric values change) with no carriage return or colour code.

:meth:`launchbay.backends.base.Backend.wait` and
:meth:`~launchbay.backends.base.Backend.print_logs` are this follower over the
backend's :meth:`~launchbay.backends.base.Backend.events`.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from launchbay._logs import LogPrinter
from launchbay.backends.events import (
    Event,
    JobEnded,
    JobHosts,
    JobMetrics,
    JobStatus,
    LogLines,
    Notice,
)
from launchbay.backends.state import JobState, Transition
from launchbay.job import rule_status_lines
from launchbay.runtime.names import IN_PROGRESS

__all__ = ["StatusView", "show_events"]

logger = logging.getLogger("launchbay.backends")

#: Most lines handed to the printer at once (a live display renders each batch in memory).
PRINT_BATCH = 2_000


def _utc(value: Any) -> str:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(_dt.timezone.utc)
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value) if value is not None else ""


def _elapsed(description: Mapping[str, Any]) -> str:
    state = JobState.from_description(description)
    start = state.creation_time
    if start is None or start.tzinfo is None:
        return ""
    end = state.end_time
    if state.terminal and end is None:
        end = state.last_modified_time
    if end is None or end.tzinfo is None:
        end = _dt.datetime.now(_dt.timezone.utc)
    seconds = max(int((end - start).total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def metrics_text(values: Iterable[tuple[str, float]]) -> str:
    """``name=value, ...`` with six significant digits."""
    return ", ".join(f"{name}={value:.6g}" for name, value in values)


class StatusView:
    """Shows status changes: a live line, or one plain line per new transition."""

    def __init__(self, name: str, printer: LogPrinter) -> None:
        self.name = name
        self.printer = printer
        self._seen: set[tuple[int, str, str]] = set()
        self._primary: str | None = None
        self._description: Mapping[str, Any] | None = None
        self._metrics = ""

    def metrics(self, event: JobMetrics) -> None:
        """Show the newest metric values: in the live line, or one plain line when they changed."""
        text = metrics_text(event.values)
        if not text or text == self._metrics:
            return
        self._metrics = text
        if self.printer.live:
            if self._description is not None:
                self.printer.status(self._live_text(self._description))
        else:
            self.printer.status(f"{_utc(event.timestamp)} Metrics - {text}".lstrip())

    def update(self, description: Mapping[str, Any]) -> bool:
        """Show what changed since the last call; True if the status changed."""
        self._description = description
        state = JobState.from_description(description)
        transitions = state.transitions or ()
        new = []
        for index, transition in enumerate(transitions):
            key = (index, str(transition.status), str(transition.message))
            if key not in self._seen:
                self._seen.add(key)
                new.append(transition)
        primary = "" if state.status is None else str(state.status)
        primary_changed = primary != self._primary
        self._primary = primary
        for transition in new:
            logger.debug("%s: %s - %s", self.name, transition.status, transition.message)
        if self.printer.live:
            self.printer.status(self._live_text(description))
        else:
            for transition in new:
                message = "" if transition.message is None else transition.message
                self.printer.status(
                    f"{_utc(transition.described('start_time'))} {transition.status} - {message}".lstrip()
                )
            latest = transitions[-1].status if transitions else None
            if primary_changed and primary != latest and (primary != IN_PROGRESS or not new):
                when = _utc(state.described("last_modified_time"))
                self.printer.status(f"{when} Training job {self.name} is {primary}".lstrip())
        return bool(new) or primary_changed

    def _live_text(self, description: Mapping[str, Any]) -> str:
        state = JobState.from_description(description)
        last = state.last_transition or Transition()
        secondary = last.status or state.secondary or ""
        message = last.message or ""
        # the metrics before the message: a narrow terminal cuts the line's end
        parts = [self.name, "" if state.status is None else str(state.status), self._metrics]
        parts.append(f"{secondary}: {message}" if message else str(secondary))
        elapsed = _elapsed(description)
        if elapsed:
            parts.append(elapsed)
        return " | ".join(p for p in parts if p)

    def finish(self, description: Mapping[str, Any]) -> None:
        self.update(description)
        self.printer.close()


def show_events(
    events: Iterable[Event],
    stream: TextIO,
    *,
    live: bool | None = None,
    interrupted: Callable[[], str | None] | None = None,
) -> Mapping[str, Any] | None:
    """Print ``events`` to ``stream`` as they come; the last description when the job ended.

    ``live`` forces (or forbids) the live status line (default: the stream
    decides, see :class:`~launchbay._logs.LogPrinter`). On Ctrl-C the live line
    is ended, ``interrupted()``'s text (the backend's word on what became of the
    job) is printed when there is one, and the interrupt goes on.
    """
    printer: LogPrinter | None = None
    view: StatusView | None = None
    name = ""
    ended: Mapping[str, Any] | None = None

    def printer_for(hosts: tuple[str, ...] = ()) -> LogPrinter:
        nonlocal printer
        if printer is None:
            printer = LogPrinter(hosts, stream, live=live)
        return printer

    try:
        for event in events:
            if isinstance(event, JobHosts):
                name = event.name
                printer_for(event.hosts)
            elif isinstance(event, LogLines):
                lines = event.lines
                for start in range(0, len(lines), PRINT_BATCH):
                    printer_for().print(lines[start : start + PRINT_BATCH])
            elif isinstance(event, JobStatus):
                if view is None:
                    view = StatusView(name, printer_for())
                view.update(event.description)
            elif isinstance(event, JobMetrics):
                if view is None:
                    view = StatusView(name, printer_for())
                view.metrics(event)
            elif isinstance(event, Notice):
                printer_for().message(event.text)
            elif isinstance(event, JobEnded):
                ended = event.description
                for line in rule_status_lines(ended):  # Debugger rules' verdicts, as v2 shows them
                    printer_for().message(line)
                if view is not None:
                    view.finish(ended)
    except KeyboardInterrupt:
        if printer is not None:
            printer.close()
        text = interrupted() if interrupted is not None else None
        if text:
            printer_for().message(text)
        raise
    finally:
        # A generator left suspended (the printing failed) would keep what it holds, such as
        # a local job's SIGINT handler, for as long as the traceback lives: end it now.
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return ended
