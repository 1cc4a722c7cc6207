"""Per-rank records: small JSON files that carry a rank's fate across process boundaries.

Every rank started through :mod:`launchbay.runtime._bootstrap` writes, into the
ranks directory (``$LAUNCHBAY_RANKS_DIR``: ``<shared>/ranks`` in local modes,
else ``<base>/output/ranks``):

* ``rank-<N>.start.json`` when it starts: ``{rank, local_rank, host, pid, timestamp}``;
* ``rank-<N>.json`` when it ends: the same plus ``exit_code`` and, for an
  uncaught exception, ``error`` (``Type: message``) and ``traceback`` (text).

Files are written atomically (temp file + rename), so readers never see half a
record. This module is imported by every rank: it stays tiny and stdlib only.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

__all__ = ["write_record", "read_records", "start_path", "end_path"]


def start_path(ranks_dir: str, rank: int) -> str:
    """Where rank ``rank``'s start record lives."""
    return os.path.join(ranks_dir, f"rank-{rank}.start.json")


def end_path(ranks_dir: str, rank: int) -> str:
    """Where rank ``rank``'s end record lives."""
    return os.path.join(ranks_dir, f"rank-{rank}.json")


def write_record(path: str, record: dict[str, Any]) -> None:
    """Atomically write ``record`` (JSON) to ``path``, creating its directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def read_records(ranks_dir: str) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """``(starts, ends)``: every readable start and end record, keyed by rank."""
    starts: dict[int, dict[str, Any]] = {}
    ends: dict[int, dict[str, Any]] = {}
    try:
        names = os.listdir(ranks_dir)
    except OSError:
        return starts, ends
    for name in names:
        if not name.startswith("rank-") or not name.endswith(".json"):
            continue
        stem = name[len("rank-") : -len(".json")]
        is_start = stem.endswith(".start")
        number = stem[: -len(".start")] if is_start else stem
        if not number.isdigit():
            continue
        try:
            with open(os.path.join(ranks_dir, name), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        (starts if is_start else ends)[int(number)] = record
    return starts, ends
