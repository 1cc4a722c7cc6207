"""TensorFlow launchers: TF_CONFIG as the SageMaker TensorFlow toolkit builds it.

**parameter_server** (more than one host; with one host the script just runs):
the first host is the ``master``, the others are ``worker``s, every host also
runs a parameter server::

    {"cluster": {"master": ["algo-1:2222"],
                 "ps": ["algo-1:2223", "algo-2:2223"],
                 "worker": ["algo-2:2222"]},
     "environment": "cloud",
     "task": {"index": 0, "type": "master"}}

The task is ``master``/0 on the first host and ``worker``/``i-1`` on host ``i``.
As in the toolkit, each host also starts a TensorFlow ``ps`` server (job ``ps``,
task index = the host's index, GPUs hidden) next to the script; it is not the
user's script but :mod:`launchbay.runtime._tf_ps` (which imports TensorFlow,
so it is skipped with a warning where TensorFlow is not installed). When the
script ends, a non-master host keeps its ps server until the master's port
2222 stops answering, then stops it.

**multi_worker_mirrored_strategy**: every host is a worker on port 8890::

    {"cluster": {"worker": ["algo-1:8890", "algo-2:8890"]},
     "environment": "cloud",
     "task": {"index": 1, "type": "worker"}}

Hosts are the distribution hosts, addressed through ``LAUNCHBAY_HOST_ADDRESSES``.
With ``LAUNCHBAY_LOCAL_PROCESS=1`` every host shares one machine, so ports are
made distinct: host ``i`` uses ``B + 2i`` (master/worker) and ``B + 2i + 1``
(ps) with ``B = LAUNCHBAY_MASTER_PORT`` (default 2222), and ``W + i`` for
MWMS with ``W = LAUNCHBAY_MASTER_PORT`` (default 8890). TF_CONFIG is serialised
with ``json.dumps`` defaults, as the toolkit does.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
from typing import Any

from launchbay.runtime.launchers import plain
from launchbay.runtime.launchers.base import LaunchContext, LaunchPlan, ProcessSpec
from launchbay.runtime.launchers.mpi import tcp_reachable

__all__ = [
    "WORKER_PORT",
    "PS_PORT",
    "MWMS_PORT",
    "ps_ports",
    "mwms_ports",
    "build_tf_config_ps",
    "build_tf_config_mwms",
    "build_parameter_server",
    "build_mwms",
]

logger = logging.getLogger("launchbay.runtime")

WORKER_PORT = 2222
PS_PORT = 2223
MWMS_PORT = 8890


def ps_ports(ctx: LaunchContext) -> dict[str, tuple[int, int]]:
    """host -> (master/worker port, ps port)."""
    hosts = ctx.env.distribution_hosts
    if not (ctx.settings.local_process or ctx.settings.ray):
        return {h: (WORKER_PORT, PS_PORT) for h in hosts}
    base = ctx.settings.master_port or WORKER_PORT
    return {h: (base + 2 * i, base + 2 * i + 1) for i, h in enumerate(hosts)}


def mwms_ports(ctx: LaunchContext) -> dict[str, int]:
    """host -> MWMS worker port."""
    hosts = ctx.env.distribution_hosts
    if not (ctx.settings.local_process or ctx.settings.ray):
        return {h: MWMS_PORT for h in hosts}
    base = ctx.settings.master_port or MWMS_PORT
    return {h: base + i for i, h in enumerate(hosts)}


def build_tf_config_ps(
    hosts: list[str],
    current_host: str,
    *,
    addresses: dict[str, str] | None = None,
    ports: dict[str, tuple[int, int]] | None = None,
    ps_task: bool = False,
) -> dict[str, Any]:
    """TF_CONFIG for parameter-server training on ``current_host`` (``ps_task``: for its ps server)."""
    addresses = addresses or {}
    ports = ports or {h: (WORKER_PORT, PS_PORT) for h in hosts}

    def at(host: str, which: int) -> str:
        return f"{addresses.get(host, host)}:{ports[host][which]}"

    masters, workers = hosts[:1], hosts[1:]
    ps = hosts if len(hosts) > 1 else None
    config: dict[str, Any] = {
        "cluster": {"master": [at(h, 0) for h in masters]},
        "environment": "cloud",
    }
    if ps:
        config["cluster"]["ps"] = [at(h, 1) for h in ps]
    if workers:
        config["cluster"]["worker"] = [at(h, 0) for h in workers]
    if ps_task:
        if ps is None:
            raise ValueError(
                "Cannot have a ps task if there are no parameter servers in the cluster"
            )
        task = {"index": ps.index(current_host), "type": "ps"}
    elif current_host == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": workers.index(current_host), "type": "worker"}
    config["task"] = task
    return config


def build_tf_config_mwms(
    hosts: list[str],
    current_host: str,
    *,
    addresses: dict[str, str] | None = None,
    ports: dict[str, int] | None = None,
) -> dict[str, Any]:
    """TF_CONFIG for MultiWorkerMirroredStrategy on ``current_host``."""
    addresses = addresses or {}
    ports = ports or {h: MWMS_PORT for h in hosts}
    return {
        "cluster": {"worker": [f"{addresses.get(h, h)}:{ports[h]}" for h in hosts]},
        "environment": "cloud",
        "task": {"index": hosts.index(current_host), "type": "worker"},
    }


class _MasterDown:
    """Waits (after the script) until the master's port stops answering."""

    def __init__(self, address: str, port: int):
        self.address = address
        self.port = port
        self._last = float("-inf")

    def poll(self, now: float) -> int | None:
        """0 once the master's port is closed (checked once a second)."""
        if now - self._last < 1.0:
            return None
        self._last = now
        return None if tcp_reachable(self.address, self.port) else 0


def _with_rank(plan: LaunchPlan, ctx: LaunchContext) -> LaunchPlan:
    hosts = ctx.env.distribution_hosts
    rank = hosts.index(ctx.env.current_host)
    process = plan.processes[0]
    env = {**process.env, "LAUNCHBAY_RANK": str(rank), "LAUNCHBAY_LOCAL_RANK": "0"}
    plan.processes[0] = dataclasses.replace(process, env=env, rank=rank)
    plan.host_ranks = {rank: 0}
    plan.world_size = len(hosts)
    plan.label_ranks = len(hosts) > 1
    return plan


def build_parameter_server(ctx: LaunchContext) -> LaunchPlan:
    """The script with the ps TF_CONFIG, plus this host's ps server when TensorFlow is installed."""
    hosts = ctx.env.distribution_hosts
    if len(hosts) < 2:
        plan = plain.build(ctx)
        plan.launcher = "parameter_server"
        return plan
    addresses = {h: ctx.settings.address(h) for h in hosts}
    ports = ps_ports(ctx)
    current = ctx.env.current_host
    config = build_tf_config_ps(hosts, current, addresses=addresses, ports=ports)
    plan = _with_rank(plain.build(ctx, extra_env={"TF_CONFIG": json.dumps(config)}), ctx)
    plan.launcher = "parameter_server"
    if importlib.util.find_spec("tensorflow") is not None:
        ps_config = build_tf_config_ps(
            hosts, current, addresses=addresses, ports=ports, ps_task=True
        )
        ps_env = dict(ctx.base_env)
        ps_env.update({"TF_CONFIG": json.dumps(ps_config), "CUDA_VISIBLE_DEVICES": "-1"})
        plan.processes.append(
            ProcessSpec(
                name="ps-server",
                argv=[ctx.python, "-m", "launchbay.runtime._tf_ps"],
                env=ps_env,
                cwd=ctx.code_dir,
                role="aux",
            )
        )
    else:
        plan.notes.append(
            "TensorFlow is not installed: no parameter server process is started on this host."
        )
    if current != hosts[0]:
        master = hosts[0]
        plan.waiter = _MasterDown(addresses[master], ports[master][0])
    return plan


def build_mwms(ctx: LaunchContext) -> LaunchPlan:
    """The script with the MultiWorkerMirroredStrategy TF_CONFIG."""
    hosts = ctx.env.distribution_hosts
    addresses = {h: ctx.settings.address(h) for h in hosts}
    config = build_tf_config_mwms(
        hosts, ctx.env.current_host, addresses=addresses, ports=mwms_ports(ctx)
    )
    plan = _with_rank(plain.build(ctx, extra_env={"TF_CONFIG": json.dumps(config)}), ctx)
    plan.launcher = "multi_worker_mirrored_strategy"
    return plan
