"""The torch_distributed launcher: one ``torchrun`` per host.

(In ``local_process`` mode with several hosts, one torchrun for all of them: see
:func:`launchbay.runtime.launchers.mpi.build_torchrun_local`.)

The command line is the toolkit's: ``--nnodes N --nproc_per_node P`` and, with
several hosts, ``--master_addr <first host> --master_port 7777 --node_rank i``;
the script runs through the bootstrap (``-m launchbay.runtime._bootstrap``).
torchrun is started as ``python -m torch.distributed.run`` so it is the same
interpreter as the runtime's.

Differences from the toolkit, all off SageMaker: in ``local_process`` mode the
master address comes from ``LAUNCHBAY_HOST_ADDRESSES``, the port from
``LAUNCHBAY_MASTER_PORT`` (also for one host, so concurrent local jobs do not
collide) and sockets are pinned to loopback (``GLOO_SOCKET_IFNAME`` /
``NCCL_SOCKET_IFNAME=lo`` unless already set). On SageMaker/containers the
toolkit's NCCL/EFA variables are set.
"""

from __future__ import annotations

from collections.abc import Mapping

from launchbay.runtime.errors import TrainingSetupError
from launchbay.runtime.launchers.base import (
    BOOTSTRAP_MODULE,
    LaunchContext,
    LaunchPlan,
    ProcessSpec,
    python_target,
)
from launchbay.runtime.names import SETTING

__all__ = [
    "MASTER_PORT",
    "EFA_NCCL_INSTANCES",
    "EFA_RDMA_INSTANCES",
    "torchrun_argv",
    "host_env",
    "build",
]

MASTER_PORT = 7777

# Instance types with EFA (the toolkit enables EFA for these).
EFA_NCCL_INSTANCES = (
    "ml.g4dn.8xlarge",
    "ml.g4dn.12xlarge",
    "ml.g5.48xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.trn1.32xlarge",
    "ml.p6e-gb200.36xlarge",
)
EFA_RDMA_INSTANCES = (
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.trn1.32xlarge",
    "ml.p6e-gb200.36xlarge",
)


def torchrun_argv(ctx: LaunchContext, single_node_of: int | None = None) -> list[str]:
    """``python -m torch.distributed.run ... -m launchbay.runtime._bootstrap <target>``.

    With ``single_node_of``, one torchrun starts that many ranks as one node: the
    ``local_process`` form for several hosts (see :func:`~.mpi.build_torchrun_local`).
    """
    if not ctx.entry.is_python:
        raise TrainingSetupError(
            f"torch_distributed needs a Python entry point; got {ctx.entry.name!r} (a "
            f"{ctx.entry.kind}). Accepted: a .py script or a Python module/package."
        )
    env = ctx.env
    hosts = env.distribution_hosts
    nnodes = 1 if single_node_of else len(hosts)
    argv = [
        ctx.python,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nnodes),
        "--nproc_per_node",
        str(single_node_of or env.processes_per_host()),
    ]
    if nnodes > 1 or ctx.settings.local_process:
        argv += [
            "--master_addr",
            ctx.settings.address(env.master_hostname),
            "--master_port",
            str(ctx.settings.master_port or MASTER_PORT),
            "--node_rank",
            "0" if single_node_of else str(hosts.index(env.current_host)),
        ]
    return argv + ["-m", BOOTSTRAP_MODULE, *python_target(ctx.entry, ctx.args)]


def local_interface(environ: Mapping[str, str]) -> str:
    """The interface a ``local_process`` host's ranks talk on: ``eth0`` on the job's network
    (each host its own, see runtime._netns), else loopback."""
    return "eth0" if environ.get(SETTING.HOST_NETWORK) == "own" else "lo"


def _network_env(ctx: LaunchContext) -> dict[str, str]:
    base = ctx.base_env
    if ctx.settings.local_process:
        iface = local_interface(base)
        return {
            name: base.get(name, iface) for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
        }
    extra = {
        "NCCL_SOCKET_IFNAME": str(ctx.env.network_interface_name),
        "NCCL_PROTO": "simple",
    }
    if ctx.env.current_instance_type in EFA_NCCL_INSTANCES:
        extra["FI_PROVIDER"] = "efa"
    if ctx.env.current_instance_type in EFA_RDMA_INSTANCES:
        extra.update({"FI_EFA_USE_DEVICE_RDMA": "1", "RDMAV_FORK_SAFE": "1"})
    return extra


def host_env(ctx: LaunchContext) -> dict[str, str]:
    """The environment of this host's torchrun (and so of its ranks)."""
    process_env = dict(ctx.base_env)
    process_env.update(_network_env(ctx))
    for name in ("LAUNCHBAY_RANK", "LAUNCHBAY_LOCAL_RANK"):
        process_env.pop(name, None)
    process_env["LAUNCHBAY_IO_DIR"] = ctx.io_dir
    # torchrun's own SIGTERM -> SIGKILL delay follows ours.
    process_env.setdefault(
        "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(max(1, int(ctx.settings.grace_seconds)))
    )
    return process_env


def build(ctx: LaunchContext) -> LaunchPlan:
    """One torchrun on this host; its ranks' output comes through per-rank FIFOs."""
    env = ctx.env
    ppn = env.processes_per_host()
    node_rank = env.distribution_hosts.index(env.current_host)
    world = len(env.distribution_hosts) * ppn
    return LaunchPlan(
        launcher="torch_distributed",
        processes=[
            ProcessSpec(
                name="torchrun", argv=torchrun_argv(ctx), env=host_env(ctx), cwd=ctx.code_dir
            )
        ],
        world_size=world,
        host_ranks={node_rank * ppn + local: local for local in range(ppn)},
        label_ranks=world > 1,
        fifo=True,
    )
