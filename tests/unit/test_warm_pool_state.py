"""Warm pools' state without an engine (issue 36 item 2): WarmPoolStatus as SageMaker shows
it, and a pool whose containers are gone (an engine restart stops them) is ended by the
next sweep instead of outliving the restart."""

from __future__ import annotations

import json
import time
from typing import Any

from launchbay.backends.local import warm_pool


class _Api:
    def __init__(self, running: list[str]) -> None:
        self.running = running
        self.removed: list[str] = []

    def containers(self, all: bool = False, filters: dict[str, Any] | None = None) -> list:
        return [{"Id": cid} for cid in self.running]

    def remove_container(self, cid: str, **_: Any) -> None:
        self.removed.append(cid)

    def remove_network(self, name: str) -> None:
        self.removed.append(name)


class _Client:
    def __init__(self, running: list[str]) -> None:
        self.api = _Api(running)


def _pool(home, key: str, **state: Any) -> str:
    directory = home / "warm-pools" / key
    directory.mkdir(parents=True)
    (directory / "pool.json").write_text(json.dumps({"key": key, "network": "n-" + key, **state}))
    return str(directory)


def _job(tmp_path, name: str, pool: str) -> str:
    job_dir = tmp_path / name
    job_dir.mkdir()
    (job_dir / warm_pool.JOB_FILE).write_text(json.dumps({"pool": pool, "key": "k"}))
    return str(job_dir)


def test_warm_pool_status_follows_sagemakers_four_states(home, tmp_path):
    now = time.time()
    pool = _pool(
        home,
        "k",
        status="InUse",
        jobs={
            "a": {"started": now - 50, "ended": now - 40, "reused_by": "b", "reused_at": now - 30},
            "b": {"started": now - 30, "ended": None},
        },
    )
    a, b = _job(tmp_path, "a", pool), _job(tmp_path, "b", pool)
    assert warm_pool.pool_status_of_job(a, "a") == {
        "Status": "Reused",
        "ResourceRetainedBillableTimeInSeconds": 10,
        "ReusedByJob": "b",
    }
    assert warm_pool.pool_status_of_job(b, "b") == {"Status": "InUse"}
    state = json.loads((home / "warm-pools" / "k" / "pool.json").read_text())
    state["jobs"]["b"]["ended"] = now - 20
    (home / "warm-pools" / "k" / "pool.json").write_text(json.dumps(state))
    found = warm_pool.pool_status_of_job(b, "b")
    assert found is not None and found["Status"] == "Available"
    assert found["ResourceRetainedBillableTimeInSeconds"] >= 20
    state["terminated_at"] = now - 5
    (home / "warm-pools" / "k" / "pool.json").write_text(json.dumps(state))
    assert warm_pool.pool_status_of_job(b, "b") == {
        "Status": "Terminated",
        "ResourceRetainedBillableTimeInSeconds": 15,
    }
    assert warm_pool.pool_status_of_job(str(tmp_path), "c") is None  # no pool: no status


def test_a_pool_whose_containers_are_gone_is_ended_by_the_next_sweep(home):
    expires = time.time() + 600
    live = _pool(home, "live", status="Available", expires_at=expires, waiting={"algo-1": "c1"})
    gone = _pool(home, "gone", status="Available", expires_at=expires, waiting={"algo-1": "c2"})
    over = _pool(home, "over", status="Available", expires_at=time.time() - 1, waiting={})
    client = _Client(running=["c1"])  # c2 stopped with the engine
    warm_pool.sweep(client)
    states = {
        d: json.loads((home / "warm-pools" / d / "pool.json").read_text())
        for d in ("live", "gone", "over")
    }
    assert states["live"]["status"] == "Available"
    assert states["gone"]["status"] == "Terminated" and "n-gone" in client.api.removed
    assert states["over"]["status"] == "Terminated" and "n-over" in client.api.removed
    assert live and gone and over
    listed = {p["WarmPool"]: p["Status"] for p in warm_pool.list_pools()}
    assert listed == {"live": "Available", "gone": "Terminated", "over": "Terminated"}
