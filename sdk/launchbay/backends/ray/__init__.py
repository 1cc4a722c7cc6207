"""The ``ray`` backend: a job's hosts as Ray actors, each on a node of its own (docs/ray.md).

The job's control loop is the local one, in this process (the job is client-driven,
:class:`~launchbay.backends.local.control.LocalBackend`); only its hosts are the
cluster's. The package holds both sides of a Ray job::

    backend.py   RayBackend: the local control loop driving RayHosts (instance type ray)
    hosts.py     RayHosts, the host runner: the cluster, resources per host, the
                 placement group, log pumps and the hosts' files back from the nodes
    agent.py     on each node: HostAgent, the actor that stages the host's tree and
                 runs the runtime there
    rsh.py       mpirun's launch agent, reaching a host through its actor
                 (``python -m launchbay.backends.ray.rsh``)

The public names are importable from here. They are loaded on first use, so that a
node's agent and ``rsh`` import neither the control loop nor Ray when they start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launchbay._lazy import lazy_exports

__all__ = ["RayBackend", "CPUS_SETTING", "GPUS_SETTING", "PACK_SETTING", "connect"]

_LAZY = {
    "RayBackend": "launchbay.backends.ray.backend",
    "CPUS_SETTING": "launchbay.backends.ray.hosts",
    "GPUS_SETTING": "launchbay.backends.ray.hosts",
    "PACK_SETTING": "launchbay.backends.ray.hosts",
    "connect": "launchbay.backends.ray.hosts",
}

if TYPE_CHECKING:  # pragma: no cover
    from launchbay.backends.ray.backend import RayBackend as RayBackend
    from launchbay.backends.ray.hosts import (
        CPUS_SETTING as CPUS_SETTING,
    )
    from launchbay.backends.ray.hosts import (
        GPUS_SETTING as GPUS_SETTING,
    )
    from launchbay.backends.ray.hosts import (
        PACK_SETTING as PACK_SETTING,
    )
    from launchbay.backends.ray.hosts import (
        connect as connect,
    )


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
