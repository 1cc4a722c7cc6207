"""The Ray backend's pure parts, without a cluster: resources per host, the refusal of a
cluster with too few nodes (a stand-in for ``ray.nodes()``), host addresses, no Ray at import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from launchbay import ConfigurationError
from launchbay.backends.ray.hosts import check_cluster, host_addresses, host_resources


class FakeRay:
    def __init__(self, nodes):
        self._nodes = nodes

    def nodes(self):
        return self._nodes


def node(name, cpus, gpus=0, alive=True):
    resources = {"CPU": float(cpus)}
    if gpus:
        resources["GPU"] = float(gpus)
    return {"NodeID": name * 8, "NodeManagerAddress": "10.0.0.1", "Alive": alive,
            "Resources": resources}  # fmt: skip


def request(**environment):
    return {"Environment": {k: str(v) for k, v in environment.items()}}


def test_resources_per_host_come_from_the_request_then_the_caller(monkeypatch):
    assert host_resources(request()) == host_resources({})
    assert (host_resources({}).cpus, host_resources({}).gpus, host_resources({}).pack) == (
        1.0,
        0.0,
        False,
    )
    monkeypatch.setenv("LAUNCHBAY_RAY_CPUS_PER_HOST", "3")
    assert host_resources({}).cpus == 3.0
    wanted = host_resources(request(LAUNCHBAY_RAY_CPUS_PER_HOST=2, LAUNCHBAY_RAY_GPUS_PER_HOST=1))
    assert (wanted.cpus, wanted.gpus, wanted.bundle) == (2.0, 1.0, {"CPU": 2.0, "GPU": 1.0})
    assert host_resources(request(LAUNCHBAY_RAY_PACK=1)).pack


@pytest.mark.parametrize(
    ("name", "value"),
    [("LAUNCHBAY_RAY_CPUS_PER_HOST", "0"), ("LAUNCHBAY_RAY_CPUS_PER_HOST", "many"),
     ("LAUNCHBAY_RAY_GPUS_PER_HOST", "-1"), ("LAUNCHBAY_RAY_PACK", "maybe")],
)  # fmt: skip
def test_a_bad_setting_is_named_with_its_value_and_what_is_accepted(name, value):
    with pytest.raises(ConfigurationError) as caught:
        host_resources(request(**{name: value}))
    message = str(caught.value)
    assert f"environment[{name!r}]" in message and repr(value) in message
    assert "Accepted:" in message


def test_too_few_nodes_is_refused_naming_every_node():
    ray = FakeRay([node("h", 0), node("a", 2), node("b", 2), node("c", 4, alive=False)])
    assert check_cluster(ray, {}, ["algo-1", "algo-2"]).cpus == 1.0
    with pytest.raises(ConfigurationError) as caught:
        check_cluster(ray, {}, ["algo-1", "algo-2", "algo-3"])
    message = str(caught.value)
    assert "instance_count=3" in message and "2 node(s) that can hold a host" in message
    assert "3 alive in all" in message and "hhhhhhhh" in message and "cccccccc" not in message
    assert "LAUNCHBAY_RAY_PACK=1" in message
    # Packing lets the hosts share the nodes that fit.
    assert check_cluster(ray, request(LAUNCHBAY_RAY_PACK=1), ["a1", "a2", "a3"]).pack
    # A host no node can hold is refused even when packing.
    with pytest.raises(ConfigurationError, match="No node of the Ray cluster can hold"):
        check_cluster(ray, request(LAUNCHBAY_RAY_GPUS_PER_HOST=1, LAUNCHBAY_RAY_PACK=1), ["a1"])


def test_hosts_of_one_machine_get_loopback_aliases():
    one_machine = host_addresses({"algo-1": "127.0.0.1", "algo-2": "127.0.0.1"})
    assert one_machine == {"algo-1": "127.0.0.1", "algo-2": "127.0.0.2"}
    machines = {"algo-1": "10.0.0.1", "algo-2": "10.0.0.2"}
    assert host_addresses(machines) == machines
    assert host_addresses({"algo-1": "10.0.0.1"}) == {"algo-1": "10.0.0.1"}


def test_importing_launchbay_and_the_ray_backend_imports_no_ray():
    code = (
        "import sys, launchbay, launchbay.backends.ray, launchbay.backends.ray.backend, "
        "launchbay.backends.ray.rsh; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
