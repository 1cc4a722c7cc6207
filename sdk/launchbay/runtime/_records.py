"""Per-rank records: small JSON files that carry a rank's fate across process boundaries.

Every rank started through :mod:`launchbay.runtime._bootstrap` writes, into the
ranks directory (``$LAUNCHBAY_RANKS_DIR``: ``<shared>/ranks`` in local modes,
else ``<base>/output/ranks``):

* ``rank-<N>.start.json`` when it starts: ``{rank, local_rank, host, pid, timestamp}``;
* ``rank-<N>.json`` when it ends: the same plus ``exit_code`` and, for an
  uncaught exception, ``error`` (``Type: message``) and ``traceback`` (text).

A process the rank started that runs the bootstrap too (a user's launcher that
starts ``python -m launchbay.runtime._bootstrap ...`` or a nested launcher) is
not the rank: it writes no start record and, when it fails, its end record as
``rank-<N>.child-<pid>.json``, which triage reads as context for the rank's own
failure (:func:`read_child_records`), never as the rank's.

Files are written atomically (temp file + rename), so readers never see half a
record. This module is imported by every rank: it stays tiny and stdlib only.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # not typing's: every rank imports this module before its script
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "write_record",
    "read_records",
    "read_child_records",
    "start_path",
    "end_path",
    "child_path",
]


def start_path(ranks_dir: str, rank: int) -> str:
    """Where rank ``rank``'s start record lives."""
    return os.path.join(ranks_dir, f"rank-{rank}.start.json")


def end_path(ranks_dir: str, rank: int) -> str:
    """Where rank ``rank``'s end record lives."""
    return os.path.join(ranks_dir, f"rank-{rank}.json")


def child_path(ranks_dir: str, rank: int, pid: int) -> str:
    """Where a failed child process (``pid``) of rank ``rank`` leaves its end record."""
    return os.path.join(ranks_dir, f"rank-{rank}.child-{pid}.json")


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


def read_child_records(ranks_dir: str) -> dict[int, list[dict[str, Any]]]:
    """The end records of the ranks' failed children, by rank, earliest first."""
    found: dict[int, list[dict[str, Any]]] = {}
    try:
        names = os.listdir(ranks_dir)
    except OSError:
        return found
    for name in names:
        if not name.startswith("rank-") or not name.endswith(".json"):
            continue
        number, sep, pid = name[len("rank-") : -len(".json")].partition(".child-")
        if not sep or not number.isdigit() or not pid.isdigit():
            continue
        try:
            with open(os.path.join(ranks_dir, name), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.setdefault(int(number), []).append(record)
    for records in found.values():
        records.sort(key=lambda r: float(r.get("timestamp") or 0))
    return found
