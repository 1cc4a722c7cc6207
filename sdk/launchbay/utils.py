"""Naming helpers from SDK v2's ``sagemaker.utils`` that notebooks call.

``from launchbay.utils import name_from_base, sagemaker_timestamp`` gives the
same formats as SDK v2 (UTC): ``2026-11-24-09-52-53-283`` (milliseconds last)
and, short, ``261124-0952``. Job names launchbay makes itself use the same stamp.
"""

from __future__ import annotations

import math
import time

__all__ = ["name_from_base", "sagemaker_short_timestamp", "sagemaker_timestamp"]


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
