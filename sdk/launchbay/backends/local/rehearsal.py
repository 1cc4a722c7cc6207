"""What SageMaker will do to a job, rehearsed locally: the ``LAUNCHBAY_REHEARSE_INTERRUPTIONS`` setting.

The setting lists what happens to the job's attempts, one item per attempt, in order::

    LAUNCHBAY_REHEARSE_INTERRUPTIONS=60s,120s            # two spot interruptions
    LAUNCHBAY_REHEARSE_INTERRUPTIONS=host-loss:30s       # attempt 1 loses its last host
    LAUNCHBAY_REHEARSE_INTERRUPTIONS=spot:1m,host-loss:45s@algo-1

Item *n* happens to attempt *n*, that many seconds after its hosts started training
(``Training``); an attempt without an item runs undisturbed. An item is:

* ``DURATION`` or ``spot:DURATION``: a managed spot interruption. Every host's script
  gets SIGTERM, SIGKILL after the grace period (120 s unless ``LAUNCHBAY_GRACE_SECONDS``
  says otherwise, as SageMaker gives), the checkpoints are uploaded to
  ``checkpoint_s3_uri``, and the job restarts on fresh hosts with them restored
  (secondary statuses ``Interrupted``, ``Starting``, ``Downloading``, ``Training``).
  Only a job with ``use_spot_instances=True`` is interrupted so.
* ``host-loss:DURATION[@HOST]``: a host (the last one unless named) is lost at once
  (SIGKILL): the job fails with ``InternalServerError``, which ``max_retry_attempts``
  retries, with the checkpoints restored.

``DURATION`` is a number of seconds, with an optional unit: ``90``, ``90s``, ``1.5m``, ``1h``.

The setting is read from the job's ``environment=`` (also a job spec's ``rehearse:`` and
``launchbay submit --interrupt-after``), else from the caller's environment. The
attempts themselves are :mod:`launchbay.backends.local.attempts`'s.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from launchbay.backends.plan import JobFields
from launchbay.errors import ConfigurationError
from launchbay.runtime.names import SETTING
from launchbay.runtime.settings import GRACE_ENV

__all__ = [
    "SETTING_NAME",
    "SPOT",
    "HOST_LOSS",
    "SPOT_GRACE_SECONDS",
    "Rehearsed",
    "parse",
    "rehearsed",
    "check",
    "interruption_grace",
    "ACCEPTED",
]

#: The setting's name (the job's ``environment=`` or the caller's environment).
SETTING_NAME = SETTING.REHEARSE_INTERRUPTIONS
SPOT = "spot"
HOST_LOSS = "host-loss"
#: Seconds between SIGTERM and SIGKILL at a rehearsed interruption when no grace is set:
#: what SageMaker gives a script it stops.
SPOT_GRACE_SECONDS = 120.0
#: The most items the setting takes (an attempt each).
MAX_ITEMS = 100
ACCEPTED = (
    "a comma-separated list, one item per attempt: DURATION or spot:DURATION (a spot "
    "interruption that many seconds into the attempt's training), or "
    "host-loss:DURATION[@algo-N] (a host lost); DURATION is seconds with an optional "
    "unit s, m or h (60s, 1.5m, 90); e.g. 60s,120s"
)

_ITEM = re.compile(
    r"^(?:(?P<kind>[a-z-]+):)?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[smh]?)"
    r"(?:@(?P<host>[A-Za-z0-9-]+))?$"
)
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Rehearsed:
    """One rehearsed event: what (:data:`SPOT` or :data:`HOST_LOSS`), when (seconds into the
    attempt's training), and the host a loss hits (``None``: the last)."""

    kind: str
    seconds: float
    host: str | None = None
    text: str = ""


def parse(raw: object, argument: str = SETTING_NAME) -> tuple[Rehearsed, ...]:
    """The events of a setting's value (empty: none).

    Raises:
        ConfigurationError: naming ``argument``, the value and what is accepted.
    """
    text = str(raw).strip()
    if not text:
        return ()
    items = [item.strip() for item in text.split(",")]
    if len(items) > MAX_ITEMS:
        raise ConfigurationError.invalid(
            argument, raw, ACCEPTED, reason=f"it has {len(items)} items, more than {MAX_ITEMS}"
        )
    events = []
    for item in items:
        match = _ITEM.match(item.lower())
        kind = (match.group("kind") if match else None) or SPOT
        if match is None or kind not in (SPOT, HOST_LOSS):
            why = f"{item!r} is not an item" if match is None else f"{kind!r} is not a kind"
            raise ConfigurationError.invalid(argument, raw, ACCEPTED, reason=why)
        seconds = float(match.group("number")) * _UNITS[match.group("unit")]
        if not math.isfinite(seconds) or seconds <= 0:
            raise ConfigurationError.invalid(
                argument, raw, ACCEPTED, reason=f"{item!r} is not a time after the start"
            )
        host = match.group("host")
        if host is not None and kind != HOST_LOSS:
            raise ConfigurationError.invalid(
                argument, raw, ACCEPTED, reason=f"{item!r}: only a host loss names a host"
            )
        events.append(Rehearsed(kind, seconds, host, item))
    return tuple(events)


def _raw(source: JobFields | Mapping[str, str]) -> tuple[str, str]:
    """The setting's value and where it was found (the job's environment, else the caller's)."""
    environment = source.environment if isinstance(source, JobFields) else source
    raw = environment.get(SETTING_NAME)
    if raw not in (None, ""):
        return str(raw), f"environment[{SETTING_NAME!r}]"
    return os.environ.get(SETTING_NAME, ""), SETTING_NAME


def rehearsed(plan: JobFields) -> tuple[Rehearsed, ...]:
    """The job's rehearsed events (see the module docstring); checked as :func:`check` does."""
    raw, argument = _raw(plan)
    return parse(raw, argument)


def check(plan: JobFields, hosts: tuple[str, ...] | list[str]) -> None:
    """Refuse a setting the job cannot be rehearsed with, before anything starts.

    Raises:
        ConfigurationError: a value that does not parse; a spot interruption of a job
            without ``use_spot_instances=True``; a host loss naming a host the job lacks.
    """
    raw, argument = _raw(plan)
    events = parse(raw, argument)
    for event in events:
        if event.kind == SPOT and not plan.spot:
            raise ConfigurationError.invalid(
                argument,
                raw,
                "spot interruptions of a job with use_spot_instances=True (and max_wait), "
                "or host-loss:DURATION items for any job",
                reason=f"{event.text!r} interrupts a managed spot job; this job does not "
                "use spot instances",
            )
        if event.host is not None and event.host not in hosts:
            raise ConfigurationError.invalid(
                argument,
                raw,
                f"one of this job's hosts: {', '.join(hosts)}",
                reason=f"{event.text!r} names host {event.host!r}",
            )


def interruption_grace(plan: JobFields, explicit: float | None) -> float | None:
    """:data:`SPOT_GRACE_SECONDS` for a job with rehearsed spot interruptions and no grace
    period set anywhere (``grace_seconds=``, ``LAUNCHBAY_GRACE_SECONDS``); else ``None``:
    the usual rule (:func:`launchbay.backends.local.hosts.grace_from`) holds."""
    if explicit is not None or plan.environment.get(GRACE_ENV) or os.environ.get(GRACE_ENV):
        return None
    if any(event.kind == SPOT for event in rehearsed(plan)):
        return SPOT_GRACE_SECONDS
    return None
