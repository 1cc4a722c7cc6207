"""Tuning jobs on this machine: trials as local jobs, searched, limited, followed and stopped.

:func:`start` runs a :class:`~launchbay.tuning.plan.TuningPlan` of local
estimators (docs/tuning.md, "Locally"). A scheduler thread (:class:`_Engine`)
asks the strategy's searcher (:mod:`launchbay.tuning.search`) for values, runs
each trial as ``Estimator.fit()`` runs a request (``plan_request`` then the
local backend), at most ``parallel`` at once: ``max_parallel_jobs``, capped by
what this machine runs (the rank limit over all running trials, and each trial
its own share of the GPUs: on 4 GPUs, 1-GPU trials run 4 at a time on disjoint
GPUs). Each trial's objective is the last value of its objective metric, read
from its ``metrics.jsonl`` (:mod:`launchbay.metrics`, recorded from its logs
by the local backend); early stopping and Hyperband stop trials that fall behind
(:mod:`launchbay.tuning.stopping`). The completion criteria end the search early.

The tuning job's record is ``<LAUNCHBAY_HOME>/tuning/<name>/tuning.json``:
its DescribeHyperParameterTuningJob description and its trials, rewritten as
they change, so ``HyperparameterTuner.attach(name)``, ``analytics()`` and a
warm start read it from any process. Stopping (``stop()``, Ctrl-C while
following, SIGTERM to the client, the interpreter exiting) stops every running
trial as the local backend stops a job (SIGTERM, the grace period, checkpoints
saved), each ends Stopped, and no new trial starts. A client that was killed
leaves its trials to their watchdogs; its record reads Stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime as _dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from launchbay._home import local_dir, local_home
from launchbay.backends import backend_for_plan
from launchbay.backends.local.record import CLIENT_ID, client_pid
from launchbay.backends.local.signals import SigintFlag, sigterm_received
from launchbay.backends.plan import JobPlan, plan_request
from launchbay.backends.state import JobState
from launchbay.errors import JobError
from launchbay.metrics import MetricsReader
from launchbay.runtime.for_client import is_alive
from launchbay.tuning.plan import TuningPlan
from launchbay.tuning.sagemaker import NamedTuningJob, follow
from launchbay.tuning.scheduler import plan_slots
from launchbay.tuning.search import Searcher, make_searcher
from launchbay.tuning.stopping import CONVERGENCE_WINDOW, Stopper, better, make_stopper

__all__ = ["LocalTuningJob", "start", "record_path", "exists", "CONVERGENCE_WINDOW"]

logger = logging.getLogger("launchbay.tuning.local")

_TERMINAL = ("Completed", "Failed", "Stopped")
_TICK = 0.2
#: Seconds the engine waits for a trial's metrics file to be final once the trial ended (the
#: local backend ends a job only after its recorder ended: a safety net, not a schedule).
_METRICS_WAIT = 5.0


def record_path(name: str) -> str:
    """``<LAUNCHBAY_HOME>/tuning/<name>/tuning.json``."""
    return os.path.join(local_home(), "tuning", name, "tuning.json")


def exists(name: str) -> bool:
    """Whether a local tuning job of that name has a record here."""
    return os.path.isfile(record_path(name))


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, _dt.datetime) else value


_TIME_KEYS = ("CreationTime", "TrainingStartTime", "TrainingEndTime", "LastModifiedTime",
              "HyperParameterTuningEndTime")  # fmt: skip


def _to_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return _iso(value)


def _from_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k: _dt.datetime.fromisoformat(v)
            if k in _TIME_KEYS and isinstance(v, str)
            else _from_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


@dataclasses.dataclass
class _Trial:
    number: int
    name: str
    definition: str | None
    values: dict[str, str]
    key: Any = None
    handle: Any = None
    job_dir: str | None = None
    status: str = "InProgress"
    created: _dt.datetime = dataclasses.field(default_factory=_now)
    start: _dt.datetime | None = None
    end: _dt.datetime | None = None
    failure: str | None = None
    steps: list[float] = dataclasses.field(default_factory=list)
    checked: int = 0
    value: float | None = None
    stopping: bool = False
    early_stopped: bool = False
    slot: int | None = None
    gpus: dict[str, list[str]] | None = None

    def summary(self, plan: TuningPlan) -> dict[str, Any]:
        """The TrainingJobSummary of ListTrainingJobsForHyperParameterTuningJob."""
        out: dict[str, Any] = {
            "TrainingJobName": self.name,
            "TrainingJobArn": f"arn:aws:sagemaker:local:000000000000:training-job/{self.name}",
            "TuningJobName": plan.name,
            "CreationTime": self.created,
            "TrainingJobStatus": self.status,
            "TunedHyperParameters": dict(self.values),
        }
        if plan.multi:
            out["TrainingJobDefinitionName"] = self.definition
        if self.start:
            out["TrainingStartTime"] = self.start
        if self.end:
            out["TrainingEndTime"] = self.end
        if self.failure:
            out["FailureReason"] = self.failure
        if self.value is not None:
            out["FinalHyperParameterTuningJobObjectiveMetric"] = {
                "MetricName": plan.definition(self.definition).objective_metric_name,
                "Value": self.value,
            }
        if self.status == "InProgress":
            out["ObjectiveStatus"] = "Pending"
        else:
            out["ObjectiveStatus"] = "Succeeded" if self.value is not None else "Failed"
        out["LocalJobDir"] = self.job_dir
        out["LocalEarlyStopped"] = self.early_stopped
        if self.gpus is not None:
            out["LocalGpus"] = self.gpus
        out["LocalDefinition"] = self.definition
        return out


class _Engine:
    """The scheduler of one local tuning job (a thread of the client process)."""

    def __init__(
        self, plan: TuningPlan, session: Any, history: list[dict[str, Any]], parents_best: Any
    ) -> None:
        self.plan = plan
        self.session = session
        self.history = history
        self.parents_best = parents_best
        self.searcher: Searcher = make_searcher(plan, history)
        self.stopper: Stopper = make_stopper(plan)
        self.trials: list[_Trial] = []
        self.lock = threading.RLock()
        self.stop_requested = threading.Event()
        self.done = threading.Event()
        self.status = "InProgress"
        self.failure: str | None = None
        self.created = _now()
        self.ended: _dt.datetime | None = None
        self.exhausted = False
        self.stop_reason: str | None = None
        self.bases = {d.name: plan_request(d.training_request) for d in plan.definitions}
        self.slots = plan_slots(plan.name, plan.max_parallel_jobs, self.bases.values())
        self.parallel = self.slots.parallel
        self.stoppers: list[threading.Thread] = []
        self.thread = threading.Thread(target=self._run, name=f"launchbay-tuning-{plan.name}",
                                       daemon=True)  # fmt: skip
        self._at_exit = False
        self.dir = local_dir("tuning", plan.name)

    # -- the loop ---------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            started = time.monotonic()
            limit = self.plan.max_runtime_in_seconds
            while True:
                self._refresh()
                if sigterm_received() and not self.stop_requested.is_set():
                    # SIGTERM to this process stops its local jobs (launchbay.backends.local.signals)
                    self.stop_reason = "the client process received SIGTERM"
                    self.stop_requested.set()
                if self._stop_file_seen():
                    self.stop_reason = self.stop_reason or "stop requested by another process"
                    self.stop_requested.set()
                if (
                    limit
                    and time.monotonic() - started > limit
                    and not self.stop_requested.is_set()
                ):
                    self.stop_reason = f"MaxRuntimeInSeconds ({limit} s) reached"
                    self.stop_requested.set()
                if self.stop_requested.is_set():
                    self._stop_all()
                    with self.lock:
                        self.status = "Stopped"
                    break
                running = self._running()
                if not running and not self._may_launch():
                    self._finish()
                    break
                while len(self._running()) < self.parallel and self._may_launch():
                    self._launch()
                self._save()
                self.stop_requested.wait(_TICK)
        except Exception as exc:  # the engine must always end the tuning job
            logger.exception("Tuning job %s: unexpected error", self.plan.name)
            with self.lock:
                self.status, self.failure = "Failed", f"InternalError: {type(exc).__name__}: {exc}"
            with contextlib.suppress(Exception):
                self._stop_all()
        finally:
            with self.lock:
                self.ended = _now()
            self._save()
            self.done.set()

    def _running(self) -> list[_Trial]:
        return [t for t in self.trials if t.status == "InProgress"]

    def _may_launch(self) -> bool:
        """Whether another trial may start (limits, criteria, what the searcher has left)."""
        if self.exhausted or self.stop_requested.is_set():
            return False
        if self.plan.max_jobs is not None and len(self.trials) >= self.plan.max_jobs:
            return False
        return not self._criteria_met()

    def _criteria_met(self) -> bool:
        best = self._best()
        reason = self.stopper.stops_search(None if best is None else best.value)
        if reason is not None:
            self.stop_reason = reason
            return True
        return False

    def _finish(self) -> None:
        with self.lock:
            scored = [t for t in self.trials if t.value is not None]
            if self.trials and not scored:
                first = next((t for t in self.trials if t.failure), None)
                self.status = "Failed"
                self.failure = (
                    f"All training jobs failed. First: {first.name}: {first.failure}"
                    if first is not None
                    else "No objective metric was found in any training job's logs: check "
                    "that metric_definitions' regexes match the lines the script prints."
                )
            else:
                self.status = "Completed"

    # -- trials -------------------------------------------------------------------
    def _launch(self) -> None:
        asked = self.searcher.ask()
        if asked is None:
            self.exhausted = True
            return
        definition, values, key = asked
        number = len(self.trials) + 1
        encoded = self.plan.encode(values, definition)
        request = self.plan.trial_request(encoded, number, definition=definition)
        slot = self.slots.take()
        trial = _Trial(number, request["TrainingJobName"], definition, encoded, key, slot=slot)
        trial.gpus = self.slots.gpus[slot]
        base = self.bases[definition]
        gpus = None if trial.gpus is None else {h: tuple(g) for h, g in trial.gpus.items()}
        job_plan: JobPlan = base.with_request(request, gpus=gpus)
        with self.lock:
            self.trials.append(trial)
        try:
            trial.handle = backend_for_plan(job_plan, self.session).run(job_plan)
            trial.job_dir = JobState.from_description(trial.handle.describe()).job_dir
        except Exception as exc:  # a trial that cannot start fails; the search goes on
            logger.warning("Training job %s could not start: %s", trial.name, exc)
            self._ended(trial, "Failed", f"ClientError: {exc}")
        self._register_exit()
        logger.info("Started training job %s of tuning job %s", trial.name, self.plan.name)

    def _register_exit(self) -> None:
        # After the local backend registered its own exit handler: atexit runs this one first,
        # so no trial starts while the backend stops those that run.
        if not self._at_exit:
            self._at_exit = True
            atexit.register(self._at_interpreter_exit)

    def _at_interpreter_exit(self) -> None:
        if not self.done.is_set():
            self.stop_reason = self.stop_reason or "the Python process that started it exited"
            self.stop_requested.set()
            self.done.wait(120)

    def _refresh(self) -> None:
        # Each trial's metrics file is read from where the last look stopped (one reader per
        # running trial, kept on the engine from the first look).
        readers: dict[str, MetricsReader] = vars(self).setdefault("_metrics_readers", {})
        plan = self.plan
        for trial in self._running():
            if trial.handle is None:
                continue
            state = JobState.from_description(trial.handle.describe())
            status = state.status
            trial.start = state.start_time or trial.start
            incomplete = None
            if trial.job_dir:
                final = status in _TERMINAL
                reader = readers.setdefault(trial.name, MetricsReader(trial.job_dir))
                # A local job ends once its recorder has read its logs to their end (or
                # written why not): this wait only covers a recorder that did neither.
                deadline = time.monotonic() + (_METRICS_WAIT if final else 0)
                while True:
                    reader.read()
                    if not final or reader.final or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                metric = plan.definition(trial.definition).objective_metric_name
                trial.steps = reader.values.get(metric, [])  # grows with the reader's reads
                if self.stopper.watches_trials:
                    self._check_stopping(trial)  # the rules look at every value in turn
                if final and (reader.incomplete or not reader.final):
                    # the last value read is not the job's last: no objective, and why
                    incomplete = reader.incomplete or (
                        f"{reader.path} was not final {_METRICS_WAIT:g} s after the job ended"
                    )
                    trial.steps = []
            if status in _TERMINAL:
                trial.end = state.end_time
                self._ended(trial, str(status), state.failure_reason)
                readers.pop(trial.name, None)
                if incomplete and status != "Failed":
                    trial.failure = (
                        f"No objective metric value: the metrics of training job {trial.name} "
                        f"are incomplete: {incomplete}"
                    )

    def _check_stopping(self, trial: _Trial) -> None:
        while trial.checked < len(trial.steps) and not trial.stopping:
            trial.checked += 1
            others = [t for t in self.trials if t is not trial]
            ended = [t.steps for t in others if t.status in _TERMINAL]
            running = [t.steps for t in others if t.status not in _TERMINAL]
            if self.stopper.stops_trial(trial.steps[: trial.checked], ended, running):
                logger.info("Stopping training job %s early at step %d", trial.name, trial.checked)
                trial.stopping = trial.early_stopped = True
                self._stop_trial(trial)

    def _stop_trial(self, trial: _Trial) -> None:
        thread = threading.Thread(target=trial.handle.stop, name=f"launchbay-stop-{trial.name}",
                                  daemon=True)  # fmt: skip
        thread.start()
        self.stoppers.append(thread)

    def _ended(self, trial: _Trial, status: str, failure: str | None) -> None:
        with self.lock:
            trial.status = status
            trial.end = trial.end or _now()
            trial.failure = failure if status == "Failed" else None
            trial.value = trial.steps[-1] if trial.steps and status != "Failed" else None
            if trial.slot is not None:
                self.slots.give_back(trial.slot)
                trial.slot = None
        self.searcher.tell(trial.key, trial.value)
        if status == "Failed":
            logger.warning("Training job %s failed: %s", trial.name, failure)
        previous = self._best(exclude=trial)
        self.stopper.trial_ended(trial.value, None if previous is None else previous.value)

    def _best(self, exclude: _Trial | None = None) -> _Trial | None:
        best = None
        for trial in self.trials:
            if trial is exclude or trial.value is None or trial.status == "InProgress":
                continue
            if best is None or better(trial.value, best.value, self.plan.objective_type):  # type: ignore[arg-type]  # best has a value
                best = trial
        return best

    def _stop_all(self) -> None:
        """Stop every running trial at once (each gets the grace period) and wait for all."""
        for trial in self._running():
            if trial.handle is not None and not trial.stopping:
                trial.stopping = True
                self._stop_trial(trial)
        for thread in self.stoppers:
            thread.join()
        for _ in range(50):
            self._refresh()
            if not [t for t in self._running() if t.handle is not None]:
                break
            time.sleep(_TICK)
        for trial in self._running():  # never started
            self._ended(trial, "Stopped", None)

    def _stop_file_seen(self) -> bool:
        return os.path.exists(os.path.join(self.dir, "stop-requested"))

    # -- the record -----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        with self.lock:
            plan = self.plan
            out: dict[str, Any] = {
                "HyperParameterTuningJobName": plan.name,
                "HyperParameterTuningJobArn": (
                    f"arn:aws:sagemaker:local:000000000000:hyper-parameter-tuning-job/{plan.name}"
                ),
                "HyperParameterTuningJobConfig": json.loads(
                    json.dumps(plan.request["HyperParameterTuningJobConfig"])
                ),
                "HyperParameterTuningJobStatus": self.status,
                "CreationTime": self.created,
                "LastModifiedTime": _now(),
            }
            for key in ("TrainingJobDefinition", "TrainingJobDefinitions", "WarmStartConfig",
                        "Autotune"):  # fmt: skip
                if key in plan.request:
                    out[key] = json.loads(json.dumps(plan.request[key]))
            if self.ended:
                out["HyperParameterTuningEndTime"] = self.ended
            if self.failure:
                out["FailureReason"] = self.failure
            statuses = [t.status for t in self.trials]
            out["TrainingJobStatusCounters"] = {
                "Completed": statuses.count("Completed"),
                "InProgress": statuses.count("InProgress"),
                "RetryableError": 0,
                "NonRetryableError": statuses.count("Failed"),
                "Stopped": statuses.count("Stopped"),
            }
            summaries = [t.summary(plan) for t in self.trials]
            objective = [s["ObjectiveStatus"] for s in summaries]
            out["ObjectiveStatusCounters"] = {
                "Succeeded": objective.count("Succeeded"),
                "Pending": objective.count("Pending"),
                "Failed": objective.count("Failed"),
            }
            best = self._best()
            if best is not None:
                out["BestTrainingJob"] = best.summary(plan)
            overall = _pick_best(
                [s for s in [out.get("BestTrainingJob"), self.parents_best] if s],
                plan.objective_type,
            )
            if plan.warm_start_parents and overall is not None:
                out["OverallBestTrainingJob"] = overall
            out["LocalTuningDir"] = self.dir
            out["LocalClient"] = CLIENT_ID
            out["LocalParallelTrainingJobs"] = self.parallel
            if self.stop_reason:
                out["LocalStopReason"] = self.stop_reason
            if self.history:
                out["LocalWarmStartTrainingJobs"] = len(self.history)
            out["LocalTrainingJobs"] = summaries
            return out

    def _save(self) -> None:
        """Write ``tuning.json`` atomically, 0600: it holds every definition's ``environment=``."""
        record = _to_json(self.describe())
        path = os.path.join(self.dir, "tuning.json")
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a leftover temp file of another mode is made private too
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _pick_best(summaries: list[Mapping[str, Any]], objective_type: str) -> dict[str, Any] | None:
    best = None
    for summary in summaries:
        value = (summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value")
        if value is None:
            continue
        if best is None or better(value, best[0], objective_type):
            best = (value, summary)
    return None if best is None else dict(best[1])


# -- the handle ---------------------------------------------------------------------------
#: The tuning jobs this process runs, by their record's path (a name is one job per
#: ``LAUNCHBAY_HOME``: a process that moves to another home never reads these jobs there).
_ENGINES: dict[str, _Engine] = {}


class LocalTuningJob(NamedTuningJob):
    """A local tuning job, by name: the same handle as :class:`launchbay.tuning.sagemaker.TuningJob`.

    In the process that runs it, it reads the scheduler; elsewhere its record
    (``<LAUNCHBAY_HOME>/tuning/<name>/tuning.json``).
    """

    #: The tuning backend it came from (:func:`launchbay.tuning.backends.tuning_backend_of`).
    tuning_backend = "local"

    def __init__(self, name: str, *, stream: TextIO | None = None) -> None:
        self.name = name
        self.stream = stream

    @property
    def _engine(self) -> _Engine | None:
        return _ENGINES.get(record_path(self.name))

    def describe(self) -> dict[str, Any]:
        """The DescribeHyperParameterTuningJob-shaped description (plus ``LocalTrainingJobs``).

        Raises:
            JobError: no local tuning job of that name, or its record cannot be read.
        """
        engine = self._engine
        if engine is not None:
            return engine.describe()
        path = record_path(self.name)
        try:
            with open(path, encoding="utf-8") as f:
                description = _from_json(json.load(f))
        except FileNotFoundError as exc:
            raise JobError(
                f"No local tuning job named {self.name!r} under {os.path.dirname(os.path.dirname(path))}."
            ) from exc
        except (OSError, ValueError) as exc:
            raise JobError(
                f"The record of local tuning job {self.name!r} ({path}) cannot be read: {exc}"
            ) from exc
        return _reconcile(description)

    def training_jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every trial's TrainingJobSummary (``status``: only those with that status)."""
        found = list(self.describe().get("LocalTrainingJobs") or [])
        return [s for s in found if status is None or JobState.from_description(s).status == status]

    def stop(self) -> None:
        """Stop the tuning job: every running trial is stopped (checkpoints saved); returns once all ended."""
        engine = self._engine
        if engine is not None:
            if not engine.done.is_set():
                engine.stop_reason = engine.stop_reason or "stopped by request (stop_tuning_job())"
                engine.stop_requested.set()
                engine.done.wait()
            return
        description = self.describe()
        if description["HyperParameterTuningJobStatus"] in _TERMINAL:
            logger.info("Tuning job %s is already stopped or not running.", self.name)
            return
        with open(os.path.join(os.path.dirname(record_path(self.name)), "stop-requested"), "w"):
            pass
        while self.describe()["HyperParameterTuningJobStatus"] not in _TERMINAL:
            time.sleep(0.5)

    def wait(self, poll: float = 0.5) -> dict[str, Any]:
        """Follow the job to its end with one progress line; return its last description.

        Ctrl-C stops the tuning job (every running trial, as :meth:`stop`) and
        re-raises :class:`KeyboardInterrupt`.

        Raises:
            JobFailedError: the tuning job ended Failed (its reason in the message).
        """

        def pause() -> None:
            engine = self._engine
            if engine is not None:
                engine.done.wait(poll)
            else:
                time.sleep(poll)

        with SigintFlag() as interrupts:
            return follow(
                self.name,
                self.describe,
                pause,
                self.stream,
                interrupt_message=(
                    f"Interrupted: stopping tuning job {self.name} and its running training jobs"
                ),
                interrupted=interrupts.pending,
                on_interrupt=self.stop,
            )


def _reconcile(description: dict[str, Any]) -> dict[str, Any]:
    """A record whose client is gone while it ran reads Stopped (its trials: their own records)."""
    if description.get("HyperParameterTuningJobStatus") in _TERMINAL:
        return description
    pid = client_pid(str(description.get("LocalClient") or ""))
    if pid is None or is_alive(pid):
        return description
    from launchbay.backends import registry

    description["HyperParameterTuningJobStatus"] = "Stopped"
    description["LocalStopReason"] = "the process that ran it is gone"
    counters = dict.fromkeys(("Completed", "InProgress", "RetryableError", "NonRetryableError",
                              "Stopped"), 0)  # fmt: skip
    for summary in description.get("LocalTrainingJobs") or []:
        status = JobState.from_description(summary).described("status")
        if status == "InProgress":
            try:
                found = registry.backend_for_job(summary["TrainingJobName"]).describe(
                    summary["TrainingJobName"]
                )
                now = JobState.from_description(found)
                status = "Stopped" if now.status is None else str(now.status)
            except Exception:  # its directory is gone: it ran no longer
                status = "Stopped"
            if status == "InProgress":
                status = "Stopped"
            summary["TrainingJobStatus"] = status
            summary["ObjectiveStatus"] = "Failed"
        if status is None:  # a trial without a status: the record is damaged
            raise KeyError("TrainingJobStatus")
        counters["NonRetryableError" if status == "Failed" else status] += 1
    description["TrainingJobStatusCounters"] = counters
    return description


def _warm_start(plan: TuningPlan) -> tuple[list[dict[str, Any]], Any]:
    """The parents' trials (``definition``, ``values``, ``value``) and their best summary.

    A parent's record (``tuning.json``) may have been edited or damaged: a trial whose
    entry is not a mapping, whose tuned values are not a mapping, or whose objective
    value is not a finite number is skipped with a warning naming the record, the
    trial and what is accepted; so is a best training job of that kind.

    Raises:
        JobError: a parent is not a local tuning job here (naming it and where it was
            looked for), or its record cannot be read as a tuning job's record (naming
            the file and what is wrong).
    """
    import math

    def objective(summary: Mapping[str, Any], path: str, what: str) -> tuple[bool, Any]:
        """``(usable, value)``: the summary's objective value, None when it has none."""
        metric = summary.get("FinalHyperParameterTuningJobObjectiveMetric")
        if metric is None:
            return True, None
        value = metric.get("Value") if isinstance(metric, Mapping) else metric
        if value is None and isinstance(metric, Mapping):
            return True, None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            logger.warning(
                "Warm start: skipping %s of %s: FinalHyperParameterTuningJobObjectiveMetric "
                "= %.200r; accepted: a mapping whose Value is a finite number",
                what, path, metric,
            )  # fmt: skip
            return False, None
        return True, float(value)

    history: list[dict[str, Any]] = []
    bests = []
    for parent in plan.warm_start_parents:
        if not exists(parent):
            raise JobError(
                f"Warm start parent {parent!r} of tuning job {plan.name!r} is not a local tuning "
                f"job here (no {record_path(parent)}). Accepted: names of local tuning jobs "
                "run under this LAUNCHBAY_HOME."
            )
        path = record_path(parent)
        damaged = (
            f"Warm start parent {parent!r} of tuning job {plan.name!r}: its record {path} is "
            "damaged ({}). Accepted: the tuning.json a local tuning job wrote."
        )
        try:
            description = LocalTuningJob(parent).describe()
        except JobError:
            raise
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            raise JobError(damaged.format(f"{type(exc).__name__}: {exc}")) from exc
        if not isinstance(description, Mapping):
            raise JobError(damaged.format(f"it holds {type(description).__name__}, not a mapping"))
        trials = description.get("LocalTrainingJobs") or []
        if not isinstance(trials, list):
            raise JobError(damaged.format(f"LocalTrainingJobs = {trials!r:.200}, not a list"))
        best = description.get("BestTrainingJob")
        if isinstance(best, Mapping):
            if objective(best, path, "BestTrainingJob")[0]:
                bests.append(best)
        elif best:
            logger.warning(
                "Warm start: skipping BestTrainingJob of %s: %.200r is not a mapping", path, best
            )
        for index, summary in enumerate(trials):
            what = f"LocalTrainingJobs[{index}]"
            if not isinstance(summary, Mapping):
                logger.warning(
                    "Warm start: skipping %s of %s: %.200r is not a mapping", what, path, summary
                )
                continue
            name = summary.get("TrainingJobName")
            what = f"{what} ({name})" if isinstance(name, str) else what
            usable, value = objective(summary, path, what)
            if not usable:
                continue
            values = summary.get("TunedHyperParameters") or {}
            definition = summary.get("LocalDefinition")
            if not isinstance(values, Mapping) or not (
                definition is None or isinstance(definition, str)
            ):
                logger.warning(
                    "Warm start: skipping %s of %s: TunedHyperParameters = %.200r, "
                    "LocalDefinition = %.200r; accepted: a mapping of names to values and a "
                    "definition name (or none)",
                    what, path, values, definition,
                )  # fmt: skip
                continue
            history.append(
                {
                    "definition": definition,
                    "values": {str(k): v for k, v in values.items()},
                    "value": value,
                    "name": name if isinstance(name, str) else None,
                }
            )
    return history, _pick_best(bests, plan.objective_type)


_SUBMIT = "sagemaker_submit_directory"


def _keep_code(plan: TuningPlan, directory: str) -> None:
    """Unpack each definition's staged ``sourcedir.tar.gz`` into ``<tuning dir>/code/<n>``.

    ``attach`` rebuilds each estimator with that folder as its ``source_dir`` (an
    estimator takes a local folder or an ``s3://`` archive, not a ``file://`` one).
    Unpacked with the one safe extraction, with the code archive's rule (refused
    whole), only its owner's: folders 0700, files 0600 (0700 if executable).
    """
    import tarfile

    from launchbay.runtime.archive import safe_extract
    from launchbay.runtime.errors import TrainingSetupError

    for index, item in enumerate(plan.definitions):
        raw = item.static_hyperparameters.get(_SUBMIT)
        try:
            uri = json.loads(raw) if raw else None
        except ValueError:
            uri = raw
        if not isinstance(uri, str) or not uri.startswith("file://"):
            continue
        target = os.path.join(directory, "code", str(index))
        try:
            safe_extract(uri.removeprefix("file://"), target, whole=True, private=True)
        except (OSError, TrainingSetupError, tarfile.TarError) as exc:
            logger.warning("The code of tuning job %s is not kept for attach: %s", plan.name, exc)
        with contextlib.suppress(OSError):
            os.chmod(os.path.join(directory, "code"), 0o700)


def attachable(details: dict[str, Any]) -> dict[str, Any]:
    """A local tuning job's description with each definition's code as its kept folder."""
    directory = os.path.dirname(record_path(str(details["HyperParameterTuningJobName"])))
    definitions = details.get("TrainingJobDefinitions") or [details.get("TrainingJobDefinition")]
    if details.get("TrainingJobDefinitions"):  # the plan's order: sorted by name
        definitions = sorted(definitions, key=lambda d: str(d.get("DefinitionName")))
    for index, definition in enumerate(definitions):
        kept = os.path.join(directory, "code", str(index))
        static = (definition or {}).get("StaticHyperParameters") or {}
        if _SUBMIT in static and os.path.isdir(kept):
            static[_SUBMIT] = json.dumps(kept)
    return details


def start(
    plan: TuningPlan, *, stage: Callable[[], None], session: Any, wait: bool,
    stream: TextIO | None = None,
) -> LocalTuningJob:  # fmt: skip
    """Run ``plan``'s trials here; return the handle (after following it, with ``wait``).

    Raises:
        JobError: a local tuning job of that name exists already, or a warm start
            parent is not a local tuning job here.
        JobFailedError: with ``wait``, the tuning job ended Failed.
    """
    key = record_path(plan.name)
    if key in _ENGINES and not _ENGINES[key].done.is_set() or exists(plan.name):
        raise JobError(
            f"A local tuning job named {plan.name!r} exists already ({record_path(plan.name)}). "
            "SageMaker refuses a duplicate tuning job name, and so does a local run. Accepted: "
            "another job_name or base_tuning_job_name."
        )
    history, parents_best = _warm_start(plan)
    engine = _Engine(plan, session, history, parents_best)
    stage()
    _keep_code(plan, engine.dir)
    engine._save()
    _ENGINES[key] = engine
    logger.info(
        "Started local tuning job %s: %s strategy, up to %s training jobs, %d at once",
        plan.name, plan.strategy, plan.max_jobs or "every grid", engine.parallel,
    )  # fmt: skip
    engine.start()
    handle = LocalTuningJob(plan.name, stream=stream)
    if wait:
        handle.wait()
    return handle
