"""What a backend says about a job it follows: data, never output.

A backend's :meth:`~launchbay.backends.base.Backend.events` yields these, in
this order: one :class:`JobHosts` first, then :class:`LogLines`,
:class:`JobStatus`, :class:`JobMetrics` and :class:`Notice` as they come, and, when it followed
the job to its end, one :class:`JobEnded` last. The one follower,
:func:`launchbay.backends.follow.show_events`, prints them for every backend (host
prefixes, colours, the live status line); the backends never print.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["Event", "JobEnded", "JobHosts", "JobMetrics", "JobStatus", "LogLines", "Notice"]


@dataclass(frozen=True)
class JobHosts:
    """The job's name and hosts, in order (``algo-1`` first): the prefixes and their colours."""

    name: str
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class LogLines:
    """Lines the hosts printed, ``(host, line)`` without line ends, in the order to show them."""

    lines: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class JobStatus:
    """The job's latest description; the follower shows what changed since the last one."""

    description: Mapping[str, Any]


@dataclass(frozen=True)
class JobMetrics:
    """The newest value of each of the job's metrics, ``(name, value)``, when one changed.

    ``timestamp`` is the time of the newest value (None if unknown).
    """

    values: tuple[tuple[str, float], ...]
    timestamp: datetime | None = None


@dataclass(frozen=True)
class Notice:
    """A line of launchbay's own for the person following the job (no host prefix)."""

    text: str


@dataclass(frozen=True)
class JobEnded:
    """The job reached a terminal status; its last description."""

    description: Mapping[str, Any]


#: Any event a backend yields.
Event = JobHosts | LogLines | JobStatus | JobMetrics | Notice | JobEnded
