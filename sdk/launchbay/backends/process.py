"""The ``local_process`` backend: the local control loop with each host a process group.

:class:`ProcessBackend` is :class:`~launchbay.backends.local.control.LocalBackend`
(the job's life: staging, failure triage, outputs, Ctrl-C) driving a
:class:`~launchbay.backends.local.process_hosts.ProcessHosts` (the hosts: one
runtime per host, ``python -m launchbay.runtime.train`` in its own process group).
"""

from __future__ import annotations

from launchbay.backends.local.control import DEFAULT_GRACE_SECONDS, LocalBackend
from launchbay.backends.local.process_hosts import ProcessHosts, free_port_block
from launchbay.runtime.names import LOCAL_PROCESS

__all__ = ["ProcessBackend", "DEFAULT_GRACE_SECONDS", "free_port_block"]


class ProcessBackend(LocalBackend):
    """Runs CreateTrainingJob requests as local process groups, one per host.

    Takes :class:`~launchbay.backends.local.control.LocalBackend`'s arguments
    (``session``, ``job_root``, ``grace_seconds``); its hosts are
    :class:`~launchbay.backends.local.process_hosts.ProcessHosts`'.
    """

    name = "local_process"
    instance_types = (LOCAL_PROCESS,)
    host_kind = "process group"
    runner_class = ProcessHosts
