"""The control loop of a client-driven job, shared by the local backends (``local_process``, Docker) and Ray.

:class:`LocalBackend` is the :class:`~launchbay.backends.base.Backend` facade of
the local wing (``check``/``run``/``describe``/``events``/``stop``/``list``, the
job name and root); with the modules it drives it does everything SageMaker's
control plane does for a training job, whatever runs the hosts:

1. ``run(request)`` checks the request, makes the job directory (see
   :mod:`launchbay.backends.local.layout`) and returns a
   :class:`~launchbay.job.TrainingJob` at once; a supervisor thread does the rest;
2. *Downloading*: writes each host's ``input/config/*.json``, links the
   channels, restores checkpoints (:meth:`HostRunner.prepare <launchbay.backends.local.hosts.HostRunner.prepare>`);
3. *Training*: the host runner starts one host per instance
   (:meth:`HostRunner.start <launchbay.backends.local.hosts.HostRunner.start>`). Every line a host prints goes to
   ``logs/<host>.log``, which :meth:`LocalBackend.events` reads as it grows
   (``wait()`` and ``logs`` print those events, prefixed by the host: nothing is
   dropped, however far the display falls behind);
4. the first host to exit non-zero fails the job: the other hosts are stopped
   at once (SIGTERM, SIGKILL after the grace period), every host's
   ``output/launchbay-failure.json`` is read and the earliest failure is the root
   cause; its report (or the host's ``output/failure``) becomes ``FailureReason``
   (first 1024 characters, as SageMaker);
5. *Uploading*: checkpoints are saved (in every end state: success, failure,
   stop, Ctrl-C), then ``model.tar.gz``, ``output.tar.gz`` and the failure reason
   are written under ``<output_path>/<job>/output/``, and the TensorBoard files
   (copied every few seconds while the hosts ran, :mod:`.tensorboard`) copied once more;
6. teardown (:meth:`Supervisor.teardown <launchbay.backends.local.running.Supervisor.teardown>`)
   always runs, also when the interpreter exits with jobs still running.

Steps 2 to 6 are the running job's state machine, :mod:`.running`'s; jobs left
behind by a client that died are finished by :mod:`.recovery`; jobs run by
another process (detached runners, stop requests across processes) are
:mod:`.elsewhere`'s, on :mod:`.detached`'s files. How hosts start, report their
exit codes, stop and are cleaned up is the backend's
:class:`~launchbay.backends.local.hosts.HostRunner`'s; nothing else. The job's
record, logs, signals, staging, outputs and end are the other modules of this
package's.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from launchbay._home import unusable_home_error, usable_local_home
from launchbay.backends.base import DetachedRun, InProcessBackend
from launchbay.backends.events import Event, JobEnded, JobHosts, LogLines
from launchbay.backends.local import detached, elsewhere, recovery, rehearsal, tensorboard
from launchbay.backends.local.hosts import POLL, HostRunner, grace_from, grace_value
from launchbay.backends.local.layout import (
    JobLayout,
    default_job_root,
    host_names,
)
from launchbay.backends.local.logs import LogFiles, follow_lines, log_tail
from launchbay.backends.local.record import (
    JOB_NAME_RE,
    LOCKS_DIR,
    LocalJob,
    NameLock,
    instance_types_of,
    load_status,
    make_reserve,
    warn_once,
)
from launchbay.backends.local.running import Supervisor, request_stop
from launchbay.backends.local.signals import (
    SIGTERM_STATE,
    SigintFlag,
    die_after_stopping,
    register_job,
    running_job,
    running_jobs,
    start_watchdog,
)
from launchbay.backends.local.staging import LocalStager, check_request
from launchbay.backends.local.warm_pool import pool_status_of_job
from launchbay.backends.plan import JobPlan
from launchbay.backends.state import JobState
from launchbay.errors import ConfigurationError, JobError
from launchbay.job import LogTail, TrainingJob
from launchbay.runtime.settings import DEFAULT_GRACE_SECONDS

logger = logging.getLogger("launchbay.backends.local")


__all__ = ["LocalBackend", "DEFAULT_GRACE_SECONDS", "grace_from"]


class LocalBackend(InProcessBackend):
    """Runs CreateTrainingJob requests on this machine; its :class:`HostRunner` runs the hosts.

    Args:
        session: A :class:`launchbay.Session` for ``s3://`` channels, outputs and
            checkpoints; created on first S3 use when not given.
        job_root: Where job directories go (default ``$LAUNCHBAY_HOME/jobs`` or
            ``~/.launchbay/jobs``).
        grace_seconds: Seconds between SIGTERM and SIGKILL when hosts are stopped
            (default ``$LAUNCHBAY_GRACE_SECONDS`` from the request's Environment or
            the caller's environment, else 10).
        runner: What runs the hosts (processes, containers ...); default: a new
            :attr:`runner_class`.
    """

    def __init__(
        self,
        session: Any = None,
        job_root: str | os.PathLike[str] | None = None,
        *,
        grace_seconds: float | None = None,
        runner: HostRunner | None = None,
    ) -> None:
        #: What runs the job's hosts (see launchbay.backends.local.hosts).
        if runner is None:
            runner_class = type(self).runner_class
            if runner_class is None:
                raise TypeError(f"{type(self).__name__} needs a runner: it has no runner_class")
            runner = runner_class()
        self.runner: HostRunner = runner
        self.session = session
        self._job_root = os.fspath(job_root) if job_root is not None else None
        self.grace_seconds = (
            None if grace_seconds is None else grace_value(grace_seconds, "grace_seconds")
        )
        self._stager: LocalStager | None = None

    #: What runs the hosts when no runner is given (a subclass's own kind of host).
    runner_class: ClassVar[type[HostRunner] | None] = None
    #: How a host is called in messages ("local process", "container" ...).
    host_kind = "host"
    #: The instance types whose jobs this backend runs (and owns, see :meth:`owns`).
    instance_types: tuple[str, ...] = ()
    #: Seconds between two looks at the hosts' exit codes (see :class:`.running.Supervisor`).
    poll_interval = POLL

    def __repr__(self) -> str:
        return f"{type(self).__name__}(job_root={self.job_root!r})"

    @property
    def job_root(self) -> str:
        """The directory job directories are made in."""
        root = self._job_root or default_job_root()
        return os.path.abspath(os.path.expanduser(root))

    @property
    def stager(self) -> LocalStager:
        if self._stager is None:
            self._stager = LocalStager(self.session)
        return self._stager

    # -- the Backend interface ----------------------------------------------------
    def check(self, plan: JobPlan) -> None:
        """Every refusal of a local job, before anything is made.

        The plan has already refused what this machine cannot run (more ranks
        than it runs, too few GPUs) and what no host's tree can take (a channel
        named ``.`` or ``..``, a checkpoint ``LocalPath`` outside the contract):
        :func:`launchbay.backends.plan.plan_request`.

        Raises:
            ConfigurationError: the request asks for something that cannot run
                locally (FileSystemInput channels, Pipe mode ...), a TensorBoard
                ``LocalPath`` a host's tree cannot take, or a grace period that is
                not a finite number of seconds from 0 to 3600.
            InputError: a ``file://`` channel path does not exist.
        """
        super().check(plan)
        check_request(plan)
        tensorboard.check_request(plan)
        grace_from(plan, self.grace_seconds)
        rehearsal.check(plan, plan.hosts)

    def run(self, plan: JobPlan) -> TrainingJob:
        """Check the plan, start the job in the background and return its handle at once.

        Raises:
            ConfigurationError: the request asks for something that cannot run
                locally (FileSystemInput channels, Pipe mode, more hosts than GPUs ...),
                a channel named ``.`` or ``..``, a checkpoint ``LocalPath`` a host's tree
                cannot take, or a grace period that is not a finite number of seconds
                from 0 to 3600.
            InputError: a ``file://`` channel path does not exist.
            JobError: a job of that name is still running here.
        """
        self.check(plan)
        request = copy.deepcopy(dict(plan.request))
        name = plan.name
        # 120 s when spot interruptions are rehearsed and no grace is set, as SageMaker gives
        grace = rehearsal.interruption_grace(plan, self.grace_seconds) or grace_from(
            plan, self.grace_seconds
        )
        hosts = list(plan.hosts)
        gpus = {h: list(ids) for h, ids in plan.gpus.items()} if plan.gpus is not None else None
        self.runner.check_can_run(plan)
        name_lock = self._claim_name(name)
        try:
            recovery.finish_left_behind(self, name)
            layout = JobLayout.create(self.job_root, name, hosts)
            layout.write_request(request)
            make_reserve(layout.status_file)
            job = LocalJob(request, layout, self.stager, grace, self.runner.hard_kill, plan)
            job.gpus = gpus
            job.host_plan = self.runner.host_view(plan)
        except BaseException:
            name_lock.release()
            raise
        job.name_lock = name_lock
        job.watchdog = start_watchdog(type(self), self.job_root, job)
        register_job(job)
        supervisor = Supervisor(self.runner, self.poll_interval)
        job.thread = threading.Thread(
            target=supervisor.supervise, args=(job,), name=f"launchbay-job-{name}", daemon=True
        )
        job.thread.start()
        logger.info(
            "Started local training job %s: %d host(s), job directory %s",
            name,
            len(hosts),
            layout.job_dir,
        )
        return TrainingJob(name, self)

    def _claim_name(self, name: str) -> NameLock:
        """Take the job name on this machine, or refuse it while a job of that name runs.

        The name is held by an exclusive ``flock`` on ``<job root>/.locks/<name>.lock``
        for as long as the job runs in this process; the kernel lets it go when
        the process dies, so a crashed client never blocks the name. A job whose
        client is gone but whose hosts still run (they are being stopped) keeps
        the name too.

        The host runner may refuse the name too (:meth:`HostRunner.check_name`: Docker
        containers named after the job that run for another job directory).

        A detached runner (:meth:`run_detached`) took the name before it started
        this process and handed the lock down (:meth:`NameLock.adopt`): it is kept.

        Raises:
            ConfigurationError: the job root cannot be made or written
                (``LAUNCHBAY_HOME``, or the ``job_root`` argument).
            JobError: a job of that name runs (in this process or another one).
        """
        job_dir = self.job_dir(name)
        path = os.path.join(self._usable_job_root(), LOCKS_DIR, f"{name}.lock")
        handed = NameLock.adopt(name, path)
        if handed is not None:
            return handed
        lock = NameLock.try_acquire(path)
        if lock is None or self._hosts_left(name):
            if lock is not None:
                lock.release()
            raise JobError(
                f"A local training job named {name!r} is still running ({self._who_runs(name)}; "
                f"job directory {job_dir}). SageMaker refuses a duplicate job name, and so "
                "does a local run: its directory and processes are left alone. Accepted: "
                f"another job_name, or stop that job first (launchbay stop {name})."
            )
        try:
            self.runner.check_name(name, job_dir)
        except BaseException:
            lock.release()
            raise
        return lock

    def _usable_job_root(self) -> str:
        """:attr:`job_root` and its ``.locks``, made if missing.

        Raises:
            ConfigurationError: naming ``LAUNCHBAY_HOME`` (or ``job_root`` when
                given), its value and what is needed, when they cannot be made.
        """
        root = self.job_root
        try:
            if self._job_root is None:
                usable_local_home()
            os.makedirs(os.path.join(root, LOCKS_DIR), exist_ok=True)
        except OSError as exc:
            if self._job_root is None:
                raise unusable_home_error(root, exc) from exc
            raise ConfigurationError.invalid(
                "job_root",
                self._job_root,
                "a directory this user can create and write to",
                reason=f"{root} cannot be used: {exc.strerror or exc}",
            ) from exc
        return root

    def finish_orphan(self, name: str, reason: str | None = None) -> dict[str, Any]:
        """End a job whose client process is gone, as the client would have; returns its description.

        The caller holds the job's name lock; see
        :func:`launchbay.backends.local.recovery.finish_orphan` (the watchdog and
        the CLI call this).
        """
        return recovery.finish_orphan(self, name, reason)

    def _who_runs(self, name: str) -> str:
        try:
            description = self._load(name)
        except JobError:
            return "its status is not written yet"
        state = JobState.from_description(description)
        return f"status {state.status}, started by process {state.client or 'an unknown process'}"

    def _hosts_left(self, name: str) -> bool:
        """Whether anything that ran a host of job ``name`` is still alive (after its client)."""
        return self.runner.hosts_left(self.job_dir(name))

    def describe(self, name: str) -> dict[str, Any]:
        """The job's DescribeTrainingJob-shaped description (plus ``LocalJobDir``)."""
        job = self._find(name)
        found = (
            job.describe() if job is not None else recovery.reconcile(self, name, self._load(name))
        )
        warm = pool_status_of_job(self.job_dir(name), name)  # a job with a warm pool (Docker)
        return {**found, "WarmPoolStatus": warm} if warm else found

    def events(
        self, name: str, *, lines: bool = True, status: bool = True, follow: bool = True
    ) -> Iterator[Event]:
        """The job's log lines as events (``logs/<host>.log``); with ``follow``, until it ends.

        A job this process runs is followed line by line. Ctrl-C while following
        it stops every host (SIGTERM, SIGKILL after the grace period), waits for
        the checkpoints to be saved, marks the job Stopped and re-raises
        :class:`KeyboardInterrupt`; Ctrl-C again kills the hosts at once. A job
        another process runs is followed through its status file: with
        ``status`` (a wait) its lines come once it has ended, otherwise as they
        are written. Local jobs give no status events (their hosts' lines say
        what happens).

        Raises:
            JobError: there is no local job of that name.
        """
        job = self._find(name)
        if job is not None and follow:
            yield JobHosts(name, tuple(job.hosts))
            yield from self._follow_own(job, LogFiles(job.layout) if lines else None)
            return
        description = self.describe(name)
        hosts = host_names(description)
        yield JobHosts(name, tuple(hosts))
        files = LogFiles(JobLayout(self.job_dir(name), tuple(hosts)))
        if not follow:
            yield from files.all_lines()
            return
        if status:
            description = elsewhere.wait_for_end(self, name, description)
            if lines:
                yield from files.all_lines()
            yield JobEnded(description)
            return
        gone = 0
        while True:
            description = self.describe(name)
            state = JobState.from_description(description)
            finished = state.terminal
            while True:
                found, progressed = files.new_lines(final=finished)
                if found:
                    yield LogLines(tuple(found))
                if not progressed:
                    break
            if finished:
                yield JobEnded(description)
                return
            gone = gone + 1 if state.training and not recovery.runs_elsewhere(self, name) else 0
            if gone >= 3:  # no host process for a while: whoever ran the job is gone
                return
            time.sleep(0.5)

    def _follow_own(self, job: LocalJob, files: LogFiles | None) -> Iterator[Event]:
        """Follow a job this process runs to its end (Ctrl-C stops it: see :meth:`events`)."""
        with SigintFlag() as interrupts:
            try:
                yield from follow_lines(job, files, interrupts)
            except KeyboardInterrupt:
                logger.warning(
                    "Interrupted: stopping local training job %s (Ctrl-C again to kill at once)",
                    job.name,
                )
                job.stop_reason = job.stop_reason or "interrupted (KeyboardInterrupt)"
                job.stop_requested.set()
                job.changed.set()
                while True:
                    try:
                        yield from follow_lines(job, files, interrupts)
                        break
                    except KeyboardInterrupt:
                        job.force_kill.set()
                raise
        if SIGTERM_STATE["stopping"] and threading.current_thread() is threading.main_thread():
            die_after_stopping(running_jobs())  # SIGTERM stopped the job: now obey it
        yield JobEnded(job.describe())

    def stop(self, name: str) -> None:
        """Stop the job (SIGTERM to every host, SIGKILL after the grace period) and wait.

        Returns once the hosts are gone and checkpoints and outputs are saved;
        the job ends Stopped. Stopping a finished job does nothing. A job another
        process runs is stopped through that process when it accepts stop requests
        (:meth:`accept_stops`, e.g. ``launchbay submit``): SIGTERM, then this
        waits until the job has ended.

        Raises:
            JobError: another process runs the job and does not accept stop
                requests (stop it there), or the job did not end in time.
        """
        job = self._find(name)
        if job is None:
            elsewhere.stop_elsewhere(self, name)
            return
        if job.done.is_set():
            return
        request_stop(job, "stopped by request (stop())")
        job.done.wait()

    def list_jobs(self, max_results: int = 20, status: str | None = None) -> list[dict[str, Any]]:
        """Local jobs under :attr:`job_root`, newest first, as ListTrainingJobs summaries.

        Each summary has ``TrainingJobName``, ``TrainingJobArn``, ``TrainingJobStatus``,
        ``SecondaryStatus``, ``CreationTime``, ``LastModifiedTime``,
        ``TrainingEndTime`` (once ended) and ``LocalJobDir``; a job run by a live
        detached runner (``fit(wait=False)``, ``launchbay submit --no-wait``) has
        ``LocalDetached: True``. ``status`` keeps the jobs in that state only.
        """
        try:
            names = os.listdir(self.job_root)
        except OSError:
            return []
        summaries = []
        keys = (
            "TrainingJobName",
            "TrainingJobArn",
            "TrainingJobStatus",
            "SecondaryStatus",
            "CreationTime",
            "LastModifiedTime",
            "TrainingEndTime",
            "LocalJobDir",
        )
        for name in sorted(names):
            if not self.owns(name):
                continue
            try:
                description = self.describe(name)
            except JobError as exc:  # a damaged job directory: say so, list the others
                warn_once(self.job_dir(name), f"{exc} It is left out of the list.")
                continue
            state = JobState.from_description(description)
            if status is not None and state.status != status:
                continue
            summary = {k: description[k] for k in keys if k in description}
            if not state.terminal:
                summary["LocalDetached"] = detached.is_detached(name)
            summaries.append(summary)

        def created(summary: dict[str, Any]) -> float:
            value = JobState.from_description(summary).creation_time
            return value.timestamp() if value is not None else 0.0

        summaries.sort(key=created, reverse=True)
        return summaries[: max(int(max_results), 0)]

    def job_dir(self, name: str) -> str:
        """The job directory of ``name``."""
        return os.path.join(self.job_root, name)

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a job under :attr:`job_root` of one of :attr:`instance_types`.

        The local backends share the job root; a job's instance type (its
        ``status.json``'s ``ResourceConfig``, else ``request.json``'s) says which of
        them runs it.

        A job whose instance type cannot be read from ``status.json`` nor
        ``request.json`` (a damaged job directory) is owned by every local
        backend: it is a local job, and :meth:`describe` says what is wrong with it.
        """
        if not JOB_NAME_RE.match(name) or not os.path.lexists(self.job_dir(name)):
            return False
        types = instance_types_of(os.path.join(self.job_dir(name), "status.json"))
        if types is None:
            types = instance_types_of(os.path.join(self.job_dir(name), "request.json"))
        if types is None:
            return True
        return any(t in self.instance_types for t in types)

    def accept_stops(self, name: str) -> None:
        """Let :meth:`stop` in another process reach this one: SIGTERM, handled as Ctrl-C.

        Only for a process that treats SIGTERM as an interrupt of the job it
        waits for (``launchbay submit``); see :mod:`launchbay.backends.local.detached`.
        """
        detached.register(name)

    def run_detached(self, name: str, command: Sequence[str]) -> DetachedRun:
        """Run ``command`` (a process that runs job ``name`` and accepts stop requests) detached.

        The name is taken here first (refused while a job of that name runs, see
        :meth:`_claim_name`), so nothing of a running job (its runner file, its
        output) is touched; the lock is handed down to ``command``, whose own
        claim adopts it. Returns once the job's status is written, the process
        exited, or it is still starting after the start wait (see
        :class:`~launchbay.backends.base.DetachedRun` and :mod:`.detached`).

        Raises:
            JobError: a job of that name is running.
        """
        lock = self._claim_name(name)
        return detached.start(
            name, command, os.path.join(self.job_dir(name), "status.json"), lock=lock
        )

    def start_detached(self, plan: JobPlan) -> TrainingJob:
        """Check the plan, then run its job in a runner process of its own; return its handle.

        What ``fit(wait=False)`` does with a local job: the job outlives this
        process, as a SageMaker job outlives its client. The runner
        (:mod:`launchbay.backends.local.detached_runner`) runs the stored request
        as :meth:`run` would here and accepts stop requests (:meth:`stop` from any
        process); ``MaxRuntimeInSeconds`` bounds it there.

        Raises:
            ConfigurationError, InputError: as :meth:`run`, before anything starts.
            JobError: a job of that name is running, or the runner exited before
                the job started (naming its output).
        """
        self.check(plan)
        self.runner.check_can_run(plan)
        name = plan.name
        lock = self._claim_name(name)
        elsewhere.start_runner(self, plan, lock)
        return TrainingJob(name, self)

    # -- lookup -------------------------------------------------------------------
    def _find(self, name: str) -> LocalJob | None:
        return running_job(self.job_dir(name))

    def _load(self, name: str) -> dict[str, Any]:
        """The job's ``status.json``, checked (see :func:`~launchbay.backends.local.record.load_status`).

        Raises:
            JobError: there is no such job, or its directory or ``status.json``
                is damaged (the message names the file and what is wrong).
        """
        return load_status(self.job_root, name)

    def failure_log_tail(
        self, name: str, description: Mapping[str, Any] | None = None, lines: int = 20
    ) -> LogTail | None:
        """The last ``lines`` lines the failing host printed (``logs/<host>.log``), or None."""
        if description is None:
            description = self.describe(name)
        host = JobState.from_description(description).failed_host
        if not host:
            return None
        path = JobLayout(self.job_dir(name), (str(host),)).log_file(str(host))
        tail = log_tail(path, lines)
        return LogTail(str(host), path, tail) if tail else None
