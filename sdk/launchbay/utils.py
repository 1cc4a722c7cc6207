"""Naming helpers from SDK v2's ``sagemaker.utils`` that notebooks call.

``from launchbay.utils import name_from_base, sagemaker_timestamp`` gives the
same formats as SDK v2 (UTC): ``2026-11-24-09-52-53-283`` (milliseconds last)
and, short, ``261124-0952``. Job names launchbay makes itself use the same stamp.
``unique_name_from_base`` gives SDK v2's ``<base>-<epoch seconds>-<4 hex digits>``.
"""

from __future__ import annotations

import math
import time

__all__ = [
    "name_from_base",
    "sagemaker_short_timestamp",
    "sagemaker_timestamp",
    "unique_name_from_base",
]


def sagemaker_timestamp() -> str:
    """The UTC time with milliseconds, ``YYYY-MM-DD-HH-MM-SS-mmm`` (SDK v2's format)."""
    now = time.time()
    millis = min(int((now - math.floor(now)) * 1000), 999)
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now)) + f"-{millis:03d}"


def sagemaker_short_timestamp() -> str:
    """A short stamp, ``YYMMDD-HHMM`` (SDK v2's, which takes the local time zone's clock)."""
    return time.strftime("%y%m%d-%H%M")


def name_from_base(base: str, max_length: int = 63, short: bool = False) -> str:
    """``base`` trimmed so that ``<base>-<timestamp>`` fits in ``max_length`` characters."""
    stamp = sagemaker_short_timestamp() if short else sagemaker_timestamp()
    return f"{base[: max_length - len(stamp) - 1]}-{stamp}"


def unique_name_from_base(base: str, max_length: int = 63) -> str:
    """``<base>-<seconds since the epoch>-<4 random hex digits>``, at most ``max_length`` long.

    SDK v2's format: ``base`` is cut so that the whole name fits (``max_length``
    counts the two hyphens, the 10-digit seconds and the 4 hex digits). A
    ``max_length`` under 16 leaves no room: the name is then the stamp alone with a
    leading hyphen (SDK v2 keeps a slice of ``base`` taken from its end instead).
    """
    import secrets  # only this helper needs it

    seconds = str(int(time.time()))
    suffix = f"{secrets.randbelow(16**4):04x}"
    room = max(max_length - len(seconds) - len(suffix) - 2, 0)
    return f"{base[:room]}-{seconds}-{suffix}"
