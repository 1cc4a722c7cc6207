"""One real Ray cluster for the Ray tests: a head and 2 worker nodes on this machine.

* ``ray_cluster`` (session scope): ``ray.cluster_utils.Cluster`` with a head that
  holds no CPU (so no host lands on it) and two worker nodes of 2 CPUs, each its own
  raylet, every node on 127.0.0.1 (test traffic stays on loopback); this process is
  connected to it (``ray.init(address=...)``), so ``instance_type="ray"`` finds it.
  The nodes' ``LAUNCHBAY_HOME`` is a directory of the session's. At the end the
  cluster is shut down and no process of it may be left.
* ``ray_home``: ``$LAUNCHBAY_HOME`` for one test (``home``) on that cluster.
* ``left_running()``: the processes of launchbay's hosts still alive (host agents'
  runtimes, their ranks): every test ends asserting there are none.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

# Read when Ray is first imported: every node, and this driver, use 127.0.0.1 (test traffic
# stays on loopback) instead of this machine's network address.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

SCRIPTS = Path(__file__).parent / "scripts"
NODE_CPUS = 2


def left_running(marker: str = "launchbay-ray-") -> list[psutil.Process]:
    """Live processes that run a Ray host's tree (its runtime, torchrun, ranks, mpirun)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            environ = proc.environ()
        except psutil.Error:
            continue
        if marker in environ.get("SAGEMAKER_BASE_DIR", ""):
            found.append(proc)
    return found


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


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster

    import ray

    node_home = tmp_path_factory.mktemp("ray-node-home")
    saved = os.environ.get("LAUNCHBAY_HOME")
    os.environ["LAUNCHBAY_HOME"] = str(node_home)  # what the nodes' processes inherit
    started = time.monotonic()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": False,
            "node_ip_address": "127.0.0.1",
        },
    )
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=NODE_CPUS, node_ip_address="127.0.0.1")
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        cluster.wait_for_nodes()
        nodes = [n for n in ray.nodes() if n["Alive"]]
        assert len(nodes) == 3, nodes
        assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
        print(f"Ray cluster up in {time.monotonic() - started:.1f} s")
        yield cluster
    finally:
        if saved is None:
            os.environ.pop("LAUNCHBAY_HOME", None)
        else:
            os.environ["LAUNCHBAY_HOME"] = saved
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture
def ray_home(ray_cluster, home):
    """``$LAUNCHBAY_HOME`` of the test (the client's job directories) on the session's cluster."""
    import ray

    yield home
    left = wait_none_left()
    assert left == [], [p.cmdline() for p in left]
    assert actors_alive(ray) == []
    assert cluster_idle(ray)
