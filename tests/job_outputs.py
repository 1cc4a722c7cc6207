"""Reading what a local training job left: its archives and the rank reports the scripts write.

Shared by the ``local_process`` and Docker tests (importable because ``tests/`` is on
``sys.path`` through its conftest).
"""

from __future__ import annotations

import io
import json
import tarfile


def file_uri(path) -> str:
    return "file://" + str(path)


def archive_members(source) -> dict[str, bytes]:
    """Files of a tar.gz given as a path or as its bytes."""
    if isinstance(source, bytes):
        opened = tarfile.open(fileobj=io.BytesIO(source))
    else:
        opened = tarfile.open(source)
    with opened as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def rank_reports(members) -> dict[int, dict]:
    """``rank-N.json`` files of an output archive, by rank."""
    return {
        json.loads(data)["rank"]: json.loads(data)
        for name, data in members.items()
        if name.startswith("rank-")
    }


def check_ranks(reports):
    """2 hosts x 2 processes: every rank saw the world, its local rank and its host."""
    assert sorted(reports) == [0, 1, 2, 3]
    for rank, report in reports.items():
        assert report["world"] == 4
        assert report["sum"] == 6
        assert report["local_rank"] == rank % 2
        assert report["host"] == f"algo-{rank // 2 + 1}"
        assert report["hosts"] == ["algo-1", "algo-2"]
