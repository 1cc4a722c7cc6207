"""What runs the hosts of a local job: the one protocol the control loop drives.

The control loop (:class:`launchbay.backends.local.control.LocalBackend`) does
what SageMaker's control plane does for a job, whatever runs its hosts; a
:class:`HostRunner` only makes, watches and removes the hosts:

* :class:`~launchbay.backends.local.process_hosts.ProcessHosts`: each host a
  process group on this machine (``local_process``);
* :class:`~launchbay.backends.local.container_hosts.ContainerHosts`: each host a
  Docker container (``local``, ``local_gpu``);
* :class:`~launchbay.backends.ray.hosts.RayHosts`: each host a Ray actor on a node of
  a cluster (``ray``; the job is still client-driven, so its loop is this one).

The loop calls, for a job: :meth:`~HostRunner.check_can_run` and
:meth:`~HostRunner.check_name` before anything is made, :meth:`~HostRunner.host_view`
(the plan as the hosts' trees look here), :meth:`~HostRunner.prepare`
(*Downloading*), :meth:`~HostRunner.start` (*Training*), then polls
:meth:`~HostRunner.exit_codes` / :meth:`~HostRunner.running`. It stops hosts with
:meth:`~HostRunner.signal` (SIGTERM, SIGKILL after the grace period) and
:meth:`~HostRunner.reap`, and ends with :meth:`~HostRunner.teardown`.
:meth:`~HostRunner.hard_kill` runs at interpreter exit, and the ``orphan`` and
:meth:`~HostRunner.hosts_left` methods serve a job whose client process died.
:func:`grace_from` is the grace period the hosts get between SIGTERM and SIGKILL.

A runner takes the job's plan (:class:`~launchbay.backends.plan.JobPlan`), never its
request dict, and never writes into the :class:`~launchbay.backends.local.record.LocalJob`:
``prepare`` and ``start`` return what they made (:class:`HostHandles`), and the control
loop, the job's only owner, keeps it (``job.procs``, ``job.readers``). A runner keeps
its own bookkeeping (a Ray job's actors, a Docker job's network) in itself
(``tests/unit/test_architecture.py`` holds the rule).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from launchbay.errors import ConfigurationError
from launchbay.runtime.contract import write_host_config
from launchbay.runtime.settings import DEFAULT_GRACE_SECONDS, GRACE_ENV, parse_grace_seconds

if TYPE_CHECKING:
    from launchbay.backends.local.layout import JobLayout
    from launchbay.backends.local.record import LocalJob
    from launchbay.backends.plan import JobFields, JobPlan

__all__ = [
    "HostRunner",
    "HostHandles",
    "prepare_hosts",
    "grace_from",
    "grace_value",
    "POLL",
    "RUNTIME_MARGIN",
]

#: Extra time a host's runtime gets after the grace period to report and exit.
RUNTIME_MARGIN = 5.0
#: Seconds between two looks at something a host does (its exit, its log file).
POLL = 0.05


@dataclass(frozen=True)
class HostHandles:
    """What a runner made for a job's hosts; the control loop keeps it in the job.

    ``handles`` is what runs (or will run) each host, by host name: the runner's own
    kind of handle (a process, a container, a Ray actor), which the loop keeps as
    ``job.procs`` and the runner reads back from there. ``readers`` are the threads
    that bring the hosts' output to their log files (:mod:`.logs`), kept as
    ``job.readers`` and joined when the job ends.
    """

    handles: Mapping[str, Any] = field(default_factory=dict)
    readers: tuple[threading.Thread, ...] = ()


class HostRunner(Protocol):
    """The per-host operations of a local job; ``job.procs`` holds the runner's own handles.

    A runner reads the job (its plan, layout, hosts, ``procs``) and never assigns to it:
    what it makes it returns (:class:`HostHandles`), and the control loop keeps it.
    """

    def check_can_run(self, plan: JobPlan) -> None:
        """Refuse, before anything is made, a job this runner cannot run."""

    def check_name(self, name: str, job_dir: str) -> None:
        """Refuse a job name whose hosts would clash with another job's (the name is held)."""

    def host_view(self, plan: JobPlan) -> JobFields:
        """The plan as the stager sees the hosts' trees on this machine (``LocalJob.host_plan``).

        The same for a live job and a job taken up from its record (orphan recovery).
        """
        ...

    def prepare(self, job: LocalJob) -> HostHandles | None:
        """Write each host's config files, stage the channels, restore the checkpoints.

        Returns the handles made ahead of :meth:`start` (the control loop keeps them as
        ``job.procs`` before it calls :meth:`start`), or None: nothing made yet.
        """

    def start(self, job: LocalJob) -> HostHandles:
        """Start every host; returns each host's handle and the log readers started (:mod:`.logs`)."""
        ...

    def exit_codes(self, job: LocalJob) -> dict[str, int | None]:
        """Each started host's exit code, ``None`` while it runs."""
        ...

    def running(self, job: LocalJob) -> list[str]:
        """The hosts still running."""
        ...

    def signal(self, job: LocalJob, hosts: list[str], sig: signal.Signals) -> None:
        """Send ``sig`` to what runs each of ``hosts`` (SIGKILL: and everything below it)."""

    def reap(self, job: LocalJob, hosts: list[str]) -> None:
        """Wait a little for ``hosts``, just signalled, to be gone."""

    def teardown(self, job: LocalJob) -> None:
        """After the hosts were stopped: leave nothing running or allocated; let the log readers finish."""

    def hard_kill(self, job: LocalJob) -> None:
        """Kill what is left of ``job`` at once (the interpreter is exiting)."""

    def hosts_left(self, job_dir: str) -> bool:
        """Whether anything that ran a host of the job in ``job_dir`` is still alive."""
        ...

    def stop_orphan_hosts(self, name: str, layout: JobLayout, grace: float) -> None:
        """Stop what still runs of a job whose client is gone."""


def prepare_hosts(job: LocalJob) -> None:
    """Write each host's config files, link the channels, restore the checkpoints."""
    for host in job.hosts:
        write_host_config(job.layout.host_dir(host), job.request, host, job.hosts)
    job.stager.stage_channels(job.host_plan, job.layout)
    job.stager.restore_checkpoints(job.host_plan, job.layout)


def grace_from(source: JobFields, explicit: float | None) -> float:
    """The grace period: ``explicit``, else ``LAUNCHBAY_GRACE_SECONDS`` (request, then caller).

    Read with the runtime's own rule (:func:`launchbay.runtime.settings.parse_grace_seconds`),
    so the client and the hosts accept the same values.

    Raises:
        ConfigurationError: a value that is not a finite number of seconds from 0
            to :data:`~launchbay.runtime.settings.MAX_GRACE_SECONDS`.
    """
    if explicit is not None:
        return grace_value(explicit, "grace_seconds")
    # The job's plan (a stored job's from its stored request: recovery.stored_plan).
    raw = source.environment.get(GRACE_ENV)
    argument = f"environment[{GRACE_ENV!r}]"
    if raw in (None, ""):
        raw, argument = os.environ.get(GRACE_ENV), GRACE_ENV
    if raw in (None, ""):
        return DEFAULT_GRACE_SECONDS
    return grace_value(raw, argument)


def grace_value(value: object, argument: str) -> float:
    """``value`` as a grace period in seconds, or a ConfigurationError naming ``argument``."""
    try:
        return parse_grace_seconds(value, argument)
    except ValueError as exc:
        raise ConfigurationError(str(exc), argument=argument, value=value) from None
