"""The shared directory of a local multi-host job (``$LAUNCHBAY_SHARED_DIR``).

Layout (every host's runtime reads and writes it)::

    ranks/rank-<N>.start.json, ranks/rank-<N>.json   per-rank records (see _records)
    hosts/<host>.json        {"cause": "failed"|"torn-down", "exit_code", "timestamp"[, "error"]}
    stop                     a host received SIGTERM/SIGINT: every host stops its ranks
    mpi/env/<host>.json      local MPI: each host's rank environment and cwd
    mpi/heartbeat            local MPI: touched every second by the master's runtime
    mpi/done.json            local MPI: {"exit_code"} once the master's mpirun is over
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from launchbay.runtime import _records

__all__ = ["SharedDir"]


@dataclass(frozen=True)
class SharedDir:
    """Accessors for one job's shared directory, seen from ``host``."""

    root: str
    host: str

    @property
    def ranks_dir(self) -> str:
        """Where every rank of the job writes its records."""
        return os.path.join(self.root, "ranks")

    @property
    def hosts_dir(self) -> str:
        """Where each host's runtime marks its failure."""
        return os.path.join(self.root, "hosts")

    @property
    def stop_file(self) -> str:
        """Present once any host was asked to stop."""
        return os.path.join(self.root, "stop")

    def mark_host(
        self, cause: str, exit_code: int | None, timestamp: float, error: str | None = None
    ) -> None:
        """Record that this host failed (``cause="failed"``) or was torn down (and why)."""
        record: dict[str, Any] = {
            "host": self.host,
            "cause": cause,
            "exit_code": exit_code,
            "timestamp": timestamp,
        }
        if error:
            record["error"] = error
        _records.write_record(os.path.join(self.hosts_dir, f"{self.host}.json"), record)

    def host_marks(self) -> dict[str, dict[str, Any]]:
        """Every host's mark, by host."""
        marks: dict[str, dict[str, Any]] = {}
        try:
            names = os.listdir(self.hosts_dir)
        except OSError:
            return marks
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.hosts_dir, name), encoding="utf-8") as f:
                    marks[name[: -len(".json")]] = json.load(f)
            except (OSError, ValueError):
                continue
        return marks

    def request_stop(self, signum: int) -> None:
        """Ask every host of the job to stop (forward a signal to its ranks)."""
        _records.write_record(
            self.stop_file, {"host": self.host, "signal": signum, "timestamp": time.time()}
        )

    def stop_requested(self) -> bool:
        """Whether any host asked the job to stop."""
        return os.path.exists(self.stop_file)
