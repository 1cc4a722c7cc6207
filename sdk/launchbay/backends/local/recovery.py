"""Orphan recovery: local jobs left unfinished by a client process that is gone.

A local job lives as long as its client. When the client dies, its job is
taken up again from its record (``status.json``) and its stored request
(``request.json``, :func:`stored_plan`) and ended as the client would have
ended it (:func:`finish_orphan`, through
:func:`~launchbay.backends.local.finish.finish_job`): by the job's watchdog
(:mod:`.watchdog`), by ``describe``/``list``/``stop`` of a job nobody holds
(:func:`reconcile`), and before a new job of the same name replaces it
(:func:`finish_left_behind`). :func:`runs_elsewhere` says whether a job this
process does not run still has a live host or client.

These functions act on the backend's jobs through :class:`LocalJobs` (what
:class:`~launchbay.backends.local.control.LocalBackend` offers them).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from launchbay.backends.local.finish import finish_job, orphan_outcome
from launchbay.backends.local.hosts import HostRunner, grace_from
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.record import (
    LOCKS_DIR,
    LocalJob,
    NameLock,
    client_pid,
    damaged_record,
    load_status,
    read_record,
    status_problem,
)
from launchbay.backends.local.signals import running_job
from launchbay.backends.local.staging import LocalStager
from launchbay.backends.plan import JobPlan, plan_request
from launchbay.backends.state import JobState
from launchbay.errors import JobError
from launchbay.runtime.for_client import is_alive
from launchbay.runtime.names import IN_PROGRESS

logger = logging.getLogger("launchbay.backends.local")

__all__ = [
    "LocalJobs",
    "finish_left_behind",
    "finish_orphan",
    "reconcile",
    "runs_elsewhere",
    "stored_plan",
]


class LocalJobs(Protocol):
    """What recovery and cross-process control use of a local backend (``LocalBackend``)."""

    @property
    def runner(self) -> HostRunner: ...

    @property
    def grace_seconds(self) -> float | None: ...

    @property
    def job_root(self) -> str: ...

    @property
    def stager(self) -> LocalStager: ...

    def job_dir(self, name: str) -> str: ...

    def describe(self, name: str) -> dict[str, Any]: ...


def stored_plan(job_dir: str, name: str) -> JobPlan:
    """The job's plan again, from its stored request, by the one derivation (no checks).

    Raises:
        JobError: ``request.json`` is missing or damaged (naming it and what is wrong).
    """
    request_file = os.path.join(job_dir, "request.json")
    request = read_record(name, request_file)
    problem = status_problem(dict(request, TrainingJobStatus=IN_PROGRESS))
    if problem:
        raise damaged_record(name, request_file, problem)
    return plan_request(request, stored=True)


def finish_orphan(jobs: LocalJobs, name: str, reason: str | None = None) -> dict[str, Any]:
    """End a job whose client process is gone, as the client would have; returns its description.

    The caller holds the job's name lock. The job is taken up from its record and
    stored request, its hosts are stopped (SIGTERM, SIGKILL after the grace
    period), and it ends through :func:`~launchbay.backends.local.finish.finish_job`,
    the one way a local job ends, with the outcome its hosts left behind
    (:func:`~launchbay.backends.local.finish.orphan_outcome`): ``Completed`` when
    every host had already succeeded (and the checkpoints and outputs were
    saved), else ``Failed``, saying why (``reason`` when given).
    """
    record = load_status(jobs.job_root, name)
    if JobState.from_description(record).terminal:
        return record
    plan = stored_plan(jobs.job_dir(name), name)
    layout = JobLayout(jobs.job_dir(name), plan.hosts)
    grace = grace_from(plan, jobs.grace_seconds)
    runner = jobs.runner
    job = LocalJob(
        dict(plan.request), layout, jobs.stager, grace, runner.hard_kill, plan,
        record=record,
    )  # fmt: skip
    job.host_plan = runner.host_view(plan)  # as for a live job: the stored request's plan
    logger.warning("Finishing local training job %s: its client %s is gone", name, job.client)
    started = job.secondary not in ("Starting", "Downloading")
    if started:
        runner.stop_orphan_hosts(name, layout, grace)
    finish_job(job, *orphan_outcome(job, started=started, reason=reason))
    return job.describe()


def finish_left_behind(jobs: LocalJobs, name: str) -> None:
    """Before a job directory is replaced: finish the old job if its client left it unfinished.

    The caller holds the name. Its checkpoints and outputs are saved first.
    """
    try:
        description = load_status(jobs.job_root, name)
    except JobError:
        return
    if not JobState.from_description(description).terminal:
        try:
            finish_orphan(jobs, name)
        except Exception as exc:  # the new job must still be able to start
            logger.warning("Could not finish the earlier job %s: %s", name, exc)


def reconcile(jobs: LocalJobs, name: str, description: dict[str, Any]) -> dict[str, Any]:
    """A job left unfinished with nobody holding its name is finished here and now."""
    if (
        JobState.from_description(description).terminal
        or running_job(jobs.job_dir(name)) is not None
    ):
        return description
    lock = NameLock.try_acquire(os.path.join(jobs.job_root, LOCKS_DIR, f"{name}.lock"))
    if lock is None:  # its client (or its watchdog) is at work
        return description
    try:
        return finish_orphan(jobs, name)
    finally:
        lock.release()


def runs_elsewhere(jobs: LocalJobs, name: str) -> bool:
    """Whether a host of a job this process did not start, or the process that runs it, is alive."""
    if jobs.runner.hosts_left(jobs.job_dir(name)):
        return True
    try:
        client = JobState.from_description(load_status(jobs.job_root, name)).client or ""
    except JobError:
        return False
    pid = client_pid(client)
    return pid is not None and is_alive(pid)
