"""The ``ray`` backend's class: the local control loop with each host a Ray actor on a node of its own.

:class:`RayBackend` is :class:`~launchbay.backends.local.control.LocalBackend`
(the job's life: its record in ``$LAUNCHBAY_HOME/jobs``, failure triage,
outputs, Ctrl-C, ``status``/``logs``/``stop``/``list``) driving a
:class:`~launchbay.backends.ray.hosts.RayHosts` (the hosts: one
:class:`~launchbay.backends.ray.agent.HostAgent` actor per host, placed
by a ``STRICT_SPREAD`` placement group, running ``python -m
launchbay.runtime.train`` on its node). Ray is imported only when a Ray job
is checked or run (``pip install 'launchbay[ray]'``); docs/ray.md.
"""

from __future__ import annotations

from launchbay.backends.local.control import LocalBackend
from launchbay.backends.plan import JobPlan
from launchbay.backends.ray.hosts import (
    RayHosts,
    check_cluster,
    connect,
)
from launchbay.runtime.names import RAY

__all__ = ["RayBackend"]


class RayBackend(LocalBackend):
    """Runs CreateTrainingJob requests on a Ray cluster, one actor per host on nodes of their own.

    Takes :class:`~launchbay.backends.local.control.LocalBackend`'s arguments
    (``session``, ``job_root``, ``grace_seconds``); its hosts are
    :class:`~launchbay.backends.ray.hosts.RayHosts`'.
    """

    name = "ray"
    instance_types = (RAY,)
    host_kind = "Ray actor"
    runner_class = RayHosts

    def check(self, plan: JobPlan) -> None:
        """The local refusals, then the cluster's: Ray installed, a cluster named, nodes enough.

        Raises:
            ConfigurationError: as :meth:`LocalBackend.check`; Ray is not installed;
                neither ``ray.init()`` nor ``RAY_ADDRESS`` names a cluster; the
                cluster has fewer nodes that can hold a host than ``instance_count``
                (naming its nodes), or a bad ``LAUNCHBAY_RAY_*`` setting.
        """
        super().check(plan)
        check_cluster(connect(), plan, list(plan.hosts))
