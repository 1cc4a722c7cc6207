"""What the Ray tests share besides fixtures (tests/ray/conftest.py): where the scripts
are, the cluster's shape, and how a test sees what is left running on the cluster."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from job_processes import live_processes

# Read when Ray is first imported: every node, and this driver, use 127.0.0.1 (test traffic
# stays on loopback) instead of this machine's network address.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

SCRIPTS = Path(__file__).parent / "scripts"
NODE_CPUS = 2


def left_running(marker: str = "launchbay-ray-") -> list[psutil.Process]:
    """Live processes that run a Ray host's tree (its runtime, torchrun, ranks, mpirun)."""
    return live_processes(lambda proc: marker in proc.environ().get("SAGEMAKER_BASE_DIR", ""))


def wait_none_left(timeout: float = 20.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while True:
        left = left_running()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def actors_alive(ray) -> list[dict]:
    """Host agents still alive on the cluster (GCS's actor table: no dashboard runs here)."""
    from ray._private import state

    return [
        a
        for a in state.actors().values()
        if a.get("State") != "DEAD" and "HostAgent" in str(a.get("ActorClassName"))
    ]


def cluster_idle(ray, timeout: float = 10.0) -> bool:
    """Every placement group removed and every CPU of the worker nodes free again."""
    deadline = time.monotonic() + timeout
    while True:
        groups = ray.util.placement_group_table().values()
        live = [g for g in groups if g.get("state") != "REMOVED"]
        free = ray.available_resources().get("CPU", 0)
        if (not live and free >= 2 * NODE_CPUS) or time.monotonic() > deadline:
            return not live and free >= 2 * NODE_CPUS
        time.sleep(0.2)
