"""Where this process sits in the job, from the launcher's environment (stdlib only).

launchbay's runtime exports ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and
``LOCAL_WORLD_SIZE`` for every rank of an smdistributed job (from what mpirun
says, ``OMPI_COMM_WORLD_*``); those are read first, mpirun's own variables next.
"""

from __future__ import annotations

import os

__all__ = ["rank", "size", "local_rank", "local_size", "node_rank", "launched"]


def _first(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return default


def rank() -> int:
    """Global rank of this process."""
    return _first(("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"), 0)


def size() -> int:
    """Number of processes in the job."""
    return _first(("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"), 1)


def local_rank() -> int:
    """Rank of this process among the processes of its host."""
    return _first(("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), 0)


def local_size() -> int:
    """Number of processes on this host."""
    return _first(("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"), 1)


def node_rank() -> int:
    """Index of this host among the job's hosts."""
    return rank() // max(local_size(), 1)


def launched() -> bool:
    """Whether a launcher started this process as a rank of a job."""
    return any(os.environ.get(n) for n in ("RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))
