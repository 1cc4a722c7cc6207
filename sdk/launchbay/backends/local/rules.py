"""Debugger rules and the profiler's system metrics of a local job, on this machine.

:func:`start_rules` starts, for a job whose request has ``DebugRuleConfigurations``,
``ProfilerRuleConfigurations`` or a profiler interval:

* one **rule process** for all the debugging rules, and one per profiling rule
  (:mod:`launchbay.debugger.evaluate`, niced, in this Python), which evaluate the rules
  with smdebug over the job's debug output while the job runs and write each rule's
  status to ``<job dir>/rules/<rule>.json``;
* the **system monitor** (:mod:`launchbay.debugger.system_metrics`, niced) when the
  profiler records: ``<job dir>/profiler-output/system/...``;
* a thread that links every host's new debug tensors into one tree
  (``<job dir>/rules/debug-output``, what SageMaker's rule container reads from S3;
  smdebug's end-of-job marker only once every host wrote it), reads the statuses into the
  job's description (``DebugRuleEvaluationStatuses``, ``ProfilerRuleEvaluationStatuses``)
  and carries out a rule's actions when it finds issues: ``StopTraining`` stops the job
  (``stop(reason)``: the backend's stop, which ends the job through ``finish_job``),
  ``Email``/``SMS`` are logged as what SNS would have sent.

:meth:`RuleRunner.finish` (the hosts have ended) lets the rules read to the end, at most
:data:`FINISH_SECONDS`; a rule still running then is ``Stopped``. A rule that fails is
``Error``; nothing here ever fails the job. docs/debugger.md.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from launchbay.backends.local.record import LocalJob
from launchbay.runtime.contract import rewrite_container_path

logger = logging.getLogger("launchbay.backends.local")

__all__ = ["FINISH_SECONDS", "RuleRunner", "start_rules"]

#: Seconds the rules get to read the job's data to its end once the hosts ended.
FINISH_SECONDS = 60.0
#: Seconds between two looks at the tensors and the statuses.
POLL_SECONDS = 1.0
_END_MARKER = "training_job_end.ts"
_TERMINAL = ("IssuesFound", "NoIssuesFound", "Error", "Stopped")
_DEBUG, _PROFILER = "DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses"
_CHILD = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from launchbay.debugger.{module} import {main}; sys.exit({main}(sys.argv[1]))"
)


def _spawn(
    module: str, main: str, config: Mapping[str, Any], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CHILD.format(root=root, module=module, main=main),
            json.dumps(config),
        ],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # Ctrl-C in the client's terminal is the client's
        close_fds=True,
        env=dict(os.environ, SMDEBUG_LOG_LEVEL=os.environ.get("SMDEBUG_LOG_LEVEL", "info")),
    )


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


class _Rule:
    def __init__(self, entry: Mapping[str, Any], kind: str, folder: str) -> None:
        self.name = str(entry["RuleConfigurationName"])
        self.kind = kind
        self.parameters = {str(k): str(v) for k, v in (entry.get("RuleParameters") or {}).items()}
        self.out = os.path.join(folder, f"{self.name}.json")
        # The debugging rules share one process, and its log.
        self.log = os.path.join(
            folder, "debug-rules.log" if kind == "debug" else f"{self.name}.log"
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.status: dict[str, Any] = {
            "RuleConfigurationName": self.name, "RuleEvaluationStatus": "InProgress",
            "LastModifiedTime": _now(),
        }  # fmt: skip
        self.acted = False

    def read(self) -> bool:
        """Take the status the rule process wrote; whether it changed."""
        try:
            with open(self.out, encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            return False
        if record.get("RuleEvaluationStatus") == self.status.get("RuleEvaluationStatus") and (
            record.get("StatusDetails") == self.status.get("StatusDetails")
        ):
            return False
        with contextlib.suppress(TypeError, ValueError):
            record["LastModifiedTime"] = _dt.datetime.fromisoformat(record["LastModifiedTime"])
        self.status = record
        return True

    def set(self, status: str, details: str) -> None:
        self.status = {
            "RuleConfigurationName": self.name, "RuleEvaluationStatus": status,
            "StatusDetails": details, "LastModifiedTime": _now(),
        }  # fmt: skip

    @property
    def done(self) -> bool:
        return self.status.get("RuleEvaluationStatus") in _TERMINAL


class RuleRunner:
    """The rules and the system monitor of one local job (see :func:`start_rules`)."""

    def __init__(self, job: LocalJob, stop: Callable[[str], None]) -> None:
        self.job = job
        self.stop = stop
        plan = job.host_plan
        job_dir = job.layout.job_dir
        self.folder = os.path.join(job_dir, "rules")
        self.mirror = os.path.join(self.folder, "debug-output")
        self.profiler_dir = os.path.join(job_dir, "profiler-output")
        hook = plan.debug_hook
        self.sources = (
            sorted(
                {rewrite_container_path(hook.local_path, job.layout.host_dir(h)) for h in job.hosts}
            )
            if hook is not None
            else []
        )
        self.rules = [_Rule(e, "debug", self.folder) for e in plan.debug_rules]
        self.rules += [_Rule(e, "profiler", self.folder) for e in plan.profiler_rules]
        profiler = plan.profiler or {}
        self.interval = profiler.get("ProfilingIntervalInMilliseconds")
        records = not profiler.get("DisableProfiler") and (self.interval or plan.profiler_rules)
        self.monitor: subprocess.Popen[bytes] | None = None
        self._records = bool(records)
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"launchbay-rules-{job.name}", daemon=True
        )
        self._logs: list[IO[bytes]] = []

    def start(self) -> RuleRunner:
        os.makedirs(self.mirror, exist_ok=True)
        job_dir = self.job.layout.job_dir
        debug = [r for r in self.rules if r.kind == "debug"]
        # One process reads the debug output for every debugging rule (one trial, read once).
        groups = [debug] if debug else []
        groups += [[r] for r in self.rules if r.kind == "profiler"]
        for group in groups:
            entries = [
                {
                    "name": r.name, "parameters": r.parameters, "out": r.out,
                    "rule_output": os.path.join(job_dir, "rule-output", r.name),
                }
                for r in group
            ]  # fmt: skip
            config: dict[str, Any] = {
                "kind": group[0].kind, "job": self.job.name, "trial": self.mirror,
                "profiler_dir": self.profiler_dir,
            }  # fmt: skip
            config.update({"rules": entries} if group[0].kind == "debug" else entries[0])
            try:
                log = open(group[0].log, "ab")  # noqa: SIM115  # closed in finish()
                self._logs.append(log)
                proc = _spawn("evaluate", "rule_main", config, log)
            except OSError as exc:
                for rule in group:
                    rule.set("Error", f"The rule process could not start: {exc}")
                continue
            for rule in group:
                rule.proc = proc
        if self._records:
            try:
                log = open(os.path.join(self.folder, "system-monitor.log"), "ab")  # noqa: SIM115
                self._logs.append(log)
                monitor: dict[str, Any] = {
                    "dir": self.profiler_dir,
                    "hosts": list(self.job.hosts),
                    "interval_ms": self.interval or 500,
                }
                self.monitor = _spawn("system_metrics", "monitor_main", monitor, log)
            except OSError as exc:
                logger.warning("System metrics of job %s are not recorded: %s", self.job.name, exc)
        self._publish()
        self._thread.start()
        return self

    # -- while the job runs ---------------------------------------------------------
    def _loop(self) -> None:
        while not self._stopped.wait(POLL_SECONDS):
            try:
                self._turn(final=False)
            except Exception as exc:  # the job runs on; the rules only lose their view
                logger.warning("Debugger rules of job %s: %s", self.job.name, exc)

    def _turn(self, final: bool) -> None:
        self._link_tensors(final)
        changed = False
        for rule in self.rules:
            if rule.read():
                changed = True
                self._changed(rule)
        if changed:
            self._publish()

    def _link_tensors(self, final: bool) -> None:
        """Every host's new tensor files into the one tree the rules read (hard links)."""
        ended = 0
        for source in self.sources:
            for folder, dirs, files in os.walk(source):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                rel = os.path.relpath(folder, source)
                for name in files:
                    if name.endswith(".tmp"):
                        continue  # smdebug renames a file into place once it is whole
                    if name == _END_MARKER and rel == ".":
                        ended += 1
                        continue
                    target = os.path.normpath(os.path.join(self.mirror, rel, name))
                    if not os.path.exists(target):
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        try:
                            os.link(os.path.join(folder, name), target)
                        except OSError:
                            shutil.copy2(os.path.join(folder, name), target)
        marker = os.path.join(self.mirror, _END_MARKER)
        if (final or (self.sources and ended == len(self.sources))) and not os.path.exists(marker):
            with open(marker, "w", encoding="ascii") as f:
                f.write(str(time.time()))

    def _changed(self, rule: _Rule) -> None:
        status = rule.status.get("RuleEvaluationStatus")
        details = rule.status.get("StatusDetails") or ""
        log = logger.warning if status in ("IssuesFound", "Error") else logger.info
        log(
            "Job %s, rule %s: %s%s",
            self.job.name,
            rule.name,
            status,
            f" ({details})" if details else "",
        )
        if status == "IssuesFound" and not rule.acted:
            rule.acted = True
            self._act(rule, details)

    def _act(self, rule: _Rule, details: str) -> None:
        """The rule's actions (``action_json``), as SageMaker's rule container carries them out."""
        raw = rule.parameters.get("action_json") or "[]"
        try:  # SDK v2 sends the JSON with its quotes escaped (backslash, quote)
            actions = json.loads(raw.replace('\\"', '"'))
        except ValueError:
            actions = []
        for action in actions if isinstance(actions, list) else [actions]:
            if not isinstance(action, Mapping):
                continue
            kind = str(action.get("name", "")).lower()
            if kind == "stoptraining" and self.job.name.startswith(
                str(action.get("training_job_prefix") or "")
            ):
                logger.warning(
                    "Rule %s found issues: its StopTraining action stops job %s",
                    rule.name,
                    self.job.name,
                )
                self.stop(
                    f"rule {rule.name} found issues and its StopTraining action stopped the job: {details}"
                )
            elif kind in ("email", "sms"):
                logger.warning(
                    "Rule %s found issues: its %s action would have sent, through SNS, to %s: "
                    "'Rule %s of training job %s: IssuesFound. %s' (local jobs send nothing)",
                    rule.name, "Email" if kind == "email" else "SMS", action.get("endpoint"),
                    rule.name, self.job.name, details,
                )  # fmt: skip

    def _publish(self) -> None:
        statuses: dict[str, list[dict[str, Any]]] = {}
        for rule in self.rules:
            key = _DEBUG if rule.kind == "debug" else _PROFILER
            statuses.setdefault(key, []).append(dict(rule.status))
        with self.job.lock:
            self.job.rule_statuses = statuses
        self.job.save()

    # -- the end --------------------------------------------------------------------
    def finish(
        self, cancel: threading.Event | None = None, timeout: float = FINISH_SECONDS
    ) -> None:
        """The hosts have ended: let the rules read to the end (at most ``timeout``). Never raises."""
        try:
            self._finish(cancel, timeout)
        except Exception as exc:  # the job must still end
            logger.error("The Debugger rules of job %s could not be ended: %s", self.job.name, exc)
        finally:
            for proc in [*self._rule_procs(), self.monitor]:
                if proc is not None and proc.poll() is None:
                    with contextlib.suppress(OSError):
                        proc.kill()
                    proc.wait()
            for log in self._logs:
                log.close()

    def _finish(self, cancel: threading.Event | None, timeout: float) -> None:
        self._stopped.set()
        self._thread.join(10)
        if self.monitor is not None:
            self._tell_end(self.monitor)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.monitor.wait(10)
        self._turn(final=True)
        for proc in self._rule_procs():
            self._tell_end(proc)
            # the job is over: leave SCHED_IDLE (still nice 19) so a busy machine cannot starve them
            with contextlib.suppress(OSError, AttributeError):
                os.sched_setscheduler(proc.pid, os.SCHED_OTHER, os.sched_param(0))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (cancel is not None and cancel.is_set()):
            self._turn(final=True)
            if all(r.proc is None or r.proc.poll() is not None for r in self.rules):
                break
            time.sleep(0.2)
        self._turn(final=True)
        why = (
            "the job was killed at once"
            if cancel is not None and cancel.is_set()
            else f"it had not finished {timeout:g} s after the job ended"
        )
        for rule in self.rules:
            if rule.done:
                continue
            if rule.proc is not None and rule.proc.poll() is None:
                rule.set("Stopped", f"The rule was stopped: {why}.")
            else:
                code = rule.proc.returncode if rule.proc is not None else None
                rule.set(
                    "Error",
                    f"The rule process ended (exit code {code}) without a verdict; see {rule.log}",
                )
            self._changed(rule)
        self._publish()

    def _rule_procs(self) -> list[subprocess.Popen[bytes]]:
        """The rule processes, each once (the debugging rules share one)."""
        return list({id(r.proc): r.proc for r in self.rules if r.proc is not None}.values())

    @staticmethod
    def _tell_end(proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.write(b"end\n")
                proc.stdin.close()


def start_rules(job: LocalJob, stop: Callable[[str], None]) -> RuleRunner | None:
    """Start the job's rules and system monitor (None when it has neither). Never raises."""
    plan = job.host_plan
    profiler = plan.profiler or {}
    records = not profiler.get("DisableProfiler") and profiler.get(
        "ProfilingIntervalInMilliseconds"
    )
    if not plan.debug_rules and not plan.profiler_rules and not records:
        return None
    try:
        return RuleRunner(job, stop).start()
    except Exception as exc:  # the job runs without its rules
        logger.error("The Debugger rules of job %s could not start: %s", job.name, exc)
        return None
