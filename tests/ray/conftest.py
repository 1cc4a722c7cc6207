"""One real Ray cluster for the Ray tests: a head and 2 worker nodes on this machine.

* ``ray_cluster`` (session scope): ``ray.cluster_utils.Cluster`` with a head that
  holds no CPU (so no host lands on it) and two worker nodes of 2 CPUs, each its own
  raylet, every node on 127.0.0.1 (test traffic stays on loopback); this process is
  connected to it (``ray.init(address=...)``), so ``instance_type="ray"`` finds it.
  The nodes' ``LAUNCHBAY_HOME`` is a directory of the session's. At the end the
  cluster is shut down.
* ``ray_home``: ``$LAUNCHBAY_HOME`` for one test (``home``) on that cluster.
* ``left_running()``: the processes of launchbay's hosts still alive (host agents'
  runtimes, their ranks): every test ends asserting there are none.
"""

from __future__ import annotations

import os
import time

import pytest
from ray_cluster_helpers import NODE_CPUS, actors_alive, cluster_idle, wait_none_left


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
