"""The one interface every backend implements: check and run a job's plan, then follow the job.

A backend receives a :class:`~launchbay.backends.plan.JobPlan`: the complete
CreateTrainingJob request (a plain dict, built by the estimator) with where it
runs, its hosts, processes per host and GPU shares, resolved once by
:func:`~launchbay.backends.plan.plan_request`. It never sees the estimator. Every backend answers with the same
shapes: a :class:`launchbay.job.TrainingJob` handle and DescribeTrainingJob-shaped
dicts whose ``TrainingJobStatus`` is one of SageMaker's values
(:data:`launchbay.runtime.names.JOB_STATUSES`: ``InProgress``, ``Completed``,
``Failed``, ``Stopping``, ``Stopped``). A failed job is a status, never an
exception, until :meth:`launchbay.job.TrainingJob.wait` turns it into
:class:`launchbay.errors.JobFailedError`.

What each method must do (abstract unless marked *concrete* or *hook*, which
have a default):

``check(plan)`` (*concrete*, extended by each backend)
    Every refusal of this backend, before anything starts and without side
    effects: a :class:`~launchbay.errors.ConfigurationError` (or
    :class:`~launchbay.errors.InputError`) naming the request field or argument,
    the value and what is accepted. The dry run and ``fit()`` both call it.
``run(plan)``
    Check the plan, start the job and return its
    :class:`~launchbay.job.TrainingJob` at once. A duplicate name raises
    :class:`~launchbay.errors.JobError`.
``describe(name)``
    The job's DescribeTrainingJob response (local backends add ``LocalJobDir``).
    An unknown name raises :class:`~launchbay.errors.JobError`.
``events(name, lines=True, status=True, follow=True)``
    What happens to the job, as data (:mod:`launchbay.backends.events`): a
    :class:`~launchbay.backends.events.JobHosts` first, then the hosts' log
    lines (with ``lines``), its status (with ``status``; a backend may have none
    to give) and notices as they come. With ``follow``, until the job reaches a
    terminal status (:data:`~launchbay.runtime.names.TERMINAL_STATUSES`), then
    one :class:`~launchbay.backends.events.JobEnded`; without, what there is now.
    A backend never prints: the one follower (:mod:`launchbay.backends.follow`)
    does, for :meth:`wait` and :meth:`print_logs`.
``wait(name, logs="All")`` (*concrete*)
    Follow :meth:`events` until the job ends and return its last description;
    ``logs`` (SDK v2's values) says whether log lines are shown. It does not
    raise for a failed job.
``print_logs(name, follow=False, stream=None)`` (*concrete*)
    Print the job's log lines, prefixed by host; with ``follow``, until it ends.
``stop(name)``
    Ask the job to stop; it ends ``Stopped``. Stopping an ended job does nothing.
    Remote backends return once the service accepted the request; local ones once
    the job has stopped. A job this backend cannot reach raises
    :class:`~launchbay.errors.JobError` saying where to stop it.
``list_jobs(max_results=20, status=None)``
    This backend's jobs, newest first, as ListTrainingJobs summaries
    (``TrainingJobName``, ``TrainingJobStatus``, ``CreationTime`` ...), only
    those in ``status`` when given.
``owns(name)``
    Whether job ``name`` belongs to this backend, answered without a remote
    call: local backends look in their job directory; a remote backend claims
    every name (the service then says whether the job exists). The registry
    asks the backends in order, local ones first.
``failure_log_tail(name, description)`` (*hook*)
    The last log lines of the host that failed first, for the failure message
    (:class:`~launchbay.job.LogTail`), or ``None``.
``interrupted(name)`` (*hook*)
    What became of the job when Ctrl-C ended following it (printed), or ``None``.
``output_stream(stream)`` (*hook*)
    Where :meth:`wait` and :meth:`print_logs` print (default: ``stream``, else
    ``sys.stdout``).

Backends whose jobs live in the process that runs them (the local ones)
implement :class:`InProcessBackend` as well: ``accept_stops(name)`` lets
``stop(name)`` in another process reach the job, ``run_detached(name,
command)`` runs a command that runs the job detached from this process (what
``launchbay submit --no-wait`` needs), and ``start_detached(plan)`` runs a plan's
job in a runner process of its own, so that it outlives this one (what
``fit(wait=False)`` does with a local job). Nothing else asks for them.

Backends are found by name through :mod:`launchbay.backends.registry`; the
estimator and the ``launchbay`` command both go through it.
"""

from __future__ import annotations

import abc
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TextIO

from launchbay._logs import show_logs
from launchbay.backends.plan import JobPlan
from launchbay.errors import ConfigurationError, JobError
from launchbay.job import LogTail, TrainingJob

if TYPE_CHECKING:  # the events and their follower are imported when a job is followed
    from launchbay.backends.events import Event

__all__ = ["Backend", "DetachedRun", "InProcessBackend"]


class DetachedRun(NamedTuple):
    """What :meth:`InProcessBackend.run_detached` started."""

    #: The detached process's id.
    pid: int
    #: Where its output goes.
    log_path: str
    #: ``None`` once the job started (or while it is still starting); else the
    #: process's exit code.
    exit_code: int | None
    #: The end of its output when the job did not start ("" otherwise).
    output: str = ""
    #: The process still runs but had not registered the job when the start wait
    #: ended (it is staging, pulling an image ...): submitted, not failed.
    starting: bool = False

    @property
    def started(self) -> bool:
        return self.exit_code is None


class Backend(abc.ABC):
    """Runs finished CreateTrainingJob requests; see the module docstring for the contract."""

    #: The backend's name in the registry (and in ``launchbay`` output).
    name: ClassVar[str] = ""

    @classmethod
    def for_instance_type(cls, instance_type: str | None, session: Any = None) -> Backend:
        """The backend for jobs of ``instance_type`` (the registry calls this)."""
        return cls(session)  # type: ignore[call-arg]  # every concrete backend takes the session first

    def check(self, plan: JobPlan) -> None:
        """Refuse what this backend cannot run, before anything starts (no side effects).

        Backends add their own refusals after this one's: a plan placed on
        another backend is refused here.
        """
        if plan.backend != self.name:
            raise ConfigurationError(
                f"Job {plan.name!r} is placed on the {plan.backend!r} backend "
                f"(instance type {plan.placement.instance_type!r}), not on {self.name!r}. "
                "Accepted: run it with the backend its plan names "
                "(launchbay.backends.registry.backend_for_plan).",
                argument="instance_type",
                value=plan.placement.instance_type,
            )

    @abc.abstractmethod
    def run(self, plan: JobPlan) -> TrainingJob:
        """Check the plan, start the job; return its handle at once."""

    @abc.abstractmethod
    def describe(self, name: str) -> dict[str, Any]:
        """The job's DescribeTrainingJob response."""

    @abc.abstractmethod
    def events(
        self, name: str, *, lines: bool = True, status: bool = True, follow: bool = True
    ) -> Iterator[Event]:
        """The job's events (:mod:`launchbay.backends.events`); with ``follow``, until it ends."""

    @abc.abstractmethod
    def stop(self, name: str) -> None:
        """Ask the job to stop (it ends Stopped); nothing for an ended job."""

    @abc.abstractmethod
    def list_jobs(self, max_results: int = 20, status: str | None = None) -> list[dict[str, Any]]:
        """This backend's jobs, newest first, as ListTrainingJobs summaries."""

    @abc.abstractmethod
    def owns(self, name: str) -> bool:
        """Whether job ``name`` belongs to this backend (no remote call)."""

    # -- hooks with defaults --------------------------------------------------------
    def failure_log_tail(
        self, name: str, description: Mapping[str, Any] | None = None
    ) -> LogTail | None:
        """The failing host's last log lines, or None when the backend cannot fetch them."""
        return None

    def interrupted(self, name: str) -> str | None:
        """What became of job ``name`` when Ctrl-C ended following it, or None (nothing to say)."""
        return None

    def output_stream(self, stream: TextIO | None = None) -> TextIO:
        """Where :meth:`wait` and :meth:`print_logs` print."""
        return stream if stream is not None else sys.stdout

    # -- following, the same for every backend ------------------------------------------
    def wait(self, name: str, logs: str | bool | None = "All") -> dict[str, Any]:
        """Block until the job ends; return its last description (never raises for Failed).

        Status changes are shown, and with ``logs`` ``"All"``/``True`` every
        host's log lines (:func:`launchbay._logs.show_logs` reads SDK v2's values).

        Raises:
            ConfigurationError: ``logs`` is not one of SDK v2's values.
        """
        from launchbay.backends.follow import show_events

        lines = show_logs(logs)
        ended = show_events(
            self.events(name, lines=lines, status=True, follow=True),
            self.output_stream(),
            interrupted=lambda: self.interrupted(name),
        )
        if ended is None:  # a backend that broke its contract: say so rather than guess
            raise JobError(f"Following training job {name!r} ended before the job did.")
        return dict(ended)

    def print_logs(self, name: str, follow: bool = False, stream: TextIO | None = None) -> None:
        """Print the job's host-prefixed log lines; with ``follow``, until it ends."""
        from launchbay.backends.follow import show_events

        show_events(
            self.events(name, lines=True, status=False, follow=follow),
            self.output_stream(stream),
            live=False,
            interrupted=lambda: self.interrupted(name),
        )


class InProcessBackend(Backend):
    """A backend whose jobs live only as long as the process that runs them (the local ones).

    A command that must return at once (``launchbay submit --no-wait``) runs
    such a job detached (:meth:`run_detached`), and ``stop(name)`` from another
    process reaches it through :meth:`accept_stops`.
    """

    @abc.abstractmethod
    def accept_stops(self, name: str) -> None:
        """Let ``stop(name)`` in another process reach the job this process runs."""

    @abc.abstractmethod
    def run_detached(self, name: str, command: Sequence[str]) -> DetachedRun:
        """Run ``command`` (a process that runs job ``name`` to its end) detached; return once started."""

    @abc.abstractmethod
    def start_detached(self, plan: JobPlan) -> TrainingJob:
        """Check the plan and run its job in a runner process of its own; return its handle.

        The job outlives this process, as a SageMaker job outlives its client;
        ``stop(name)`` reaches it from any process.
        """
