"""The Debugger rules of a local job, evaluated in processes of their own (niced), as SageMaker does.

The local backends (:mod:`launchbay.backends.local.rules`) start one process for all the
job's debugging rules, and one per profiling rule, with each rule's ``RuleParameters``
from the request. A debugging rule runs as smdebug runs it in SageMaker's rule
container: its class (a built-in one of :mod:`launchbay.debugger.builtin_rules`, or
``rule_to_invoke`` of a custom rule's source file) is made with the base trial
(``smdebug.trials.create_trial`` over the job's debug output, one trial shared by the
rules) and the other parameters as keyword strings, then
``smdebug.rules.rule_invoker.invoke_rule`` walks the steps while the job runs and to
its end, one step of each rule in turn. ``RuleEvaluationConditionMet`` is ``IssuesFound``, the end of the data
``NoIssuesFound``, anything else ``Error`` (with the traceback's last lines).

``ProfilerReport`` waits for the job's end, then reads the system metrics back with
smdebug's ``LocalSystemMetricsReader`` and writes a short report. The status is
written to the ``out`` file (JSON, atomically) at each change. docs/debugger.md.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from typing import Any

__all__ = ["IN_PROGRESS", "NICE", "RESERVED_PARAMETERS", "rule_main", "write_status"]

IN_PROGRESS, ISSUES_FOUND, NO_ISSUES_FOUND, ERROR = (
    "InProgress",
    "IssuesFound",
    "NoIssuesFound",
    "Error",
)
#: A rule process's niceness (added to the client's).
NICE = 19
#: ``RuleParameters`` that configure the rule's job, not the rule class.
RESERVED_PARAMETERS = ("rule_to_invoke", "source_s3_uri", "action_json", "start_step", "end_step")
#: Most characters of ``StatusDetails``.
DETAILS_LIMIT = 1024
#: Modules a rule process never imports: smdebug imports the frameworks it finds (seconds of
#: CPU each) to learn a rank, which a rule reading saved tensors does not need.
_FRAMEWORKS = ("torch", "tensorflow", "horovod", "mxnet", "xgboost", "smdistributed")
_EXTRA = "pip install 'launchbay[debugger]'"
_NO_ISSUES = "No issue found in the job's steps"


def write_status(path: str, name: str, status: str, details: str | None = None) -> None:
    """Write the rule's status record (``RuleConfigurationName`` ...) to ``path``, atomically."""
    record: dict[str, Any] = {
        "RuleConfigurationName": name,
        "RuleEvaluationStatus": status,
        "LastModifiedTime": _dt.datetime.now(_dt.timezone.utc).isoformat(),
    }
    if details:
        record["StatusDetails"] = (
            details[-DETAILS_LIMIT:] if len(details) > DETAILS_LIMIT else details
        )
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(record, f)
    os.replace(temporary, path)


def _shortened(exc: BaseException) -> str:
    """The exception and its traceback's last lines, within :data:`DETAILS_LIMIT`."""
    lines = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    head = f"{type(exc).__name__}: {exc}"
    kept: list[str] = []
    for line in reversed(lines[:-1]):
        if len(head) + sum(len(k) + 1 for k in kept) + len(line) > DETAILS_LIMIT - 40:
            break
        kept.insert(0, line)
    return head + "\n" + "\n".join(kept)


def _import_smdebug() -> Any:
    for module in _FRAMEWORKS:
        sys.modules.setdefault(module, None)  # type: ignore[arg-type]  # "import x" then fails
    import smdebug.rules.rule_invoker as invoker

    return invoker


def _rule_class(config: dict[str, Any], parameters: dict[str, str]) -> Any:
    name = parameters.get("rule_to_invoke") or config["name"]
    source = parameters.get("source_s3_uri")
    if source:
        if source.startswith("s3://"):
            raise ValueError(
                f"the custom rule's source {source} is on S3: a local job reads a local file"
            )
        spec = importlib.util.spec_from_file_location(f"custom_rule_{config['name']}", source)
        if spec is None or spec.loader is None:
            raise ValueError(f"the custom rule's source {source} cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not hasattr(module, name):
            raise ValueError(
                f"the custom rule's source {source} defines no {name!r} (rule_to_invoke)"
            )
        return getattr(module, name)
    from launchbay.debugger.builtin_rules import BUILTIN_RULES

    if name not in BUILTIN_RULES:
        raise LookupError(
            f"{name} is not evaluated in local jobs (its code is in SageMaker's rule container); "
            f"local jobs evaluate {', '.join(sorted(BUILTIN_RULES))} and custom rules"
        )
    return BUILTIN_RULES[name]


class _Quiet:
    """Drops the two lines smdebug's invoker logs per call: it is called once per rule and step."""

    def filter(self, record: Any) -> bool:
        message = str(record.msg)
        return not message.startswith(("Started execution of rule", "Ended execution of rule"))


#: Seconds between two listings of the debug output's index while the job runs.
REFRESH_SECONDS = 1.0
#: Bytes of tensor values kept for the other rules at the same step.
SHARED_VALUES_BYTES = 64 << 20


def _shared_by_the_rules(trial: Any) -> Any:
    """``trial``, made cheap to share: the index listed at most once a second, values read once.

    smdebug lists the whole index directory each time a rule asks whether a step is
    there, once per rule and step: quadratic in the job's steps, and most of what
    rules cost. A step is found at most :data:`REFRESH_SECONDS` later (smdebug
    itself waits 2 s between looks at a step not yet written); once the end marker
    is there, every look lists again, so the last steps are never missed.

    Rules that read the same tensor at the same step (VanishingGradient and
    ExplodingTensor both read every gradient) get one read of it: the last values
    read are kept, up to :data:`SHARED_VALUES_BYTES`, and each rule gets a copy.
    """
    refresh = trial.refresh_data
    end_marker = os.path.join(str(trial.path), "training_job_end.ts")
    last = [-REFRESH_SECONDS]

    def refresh_data() -> None:
        now = time.monotonic()
        if now - last[0] >= REFRESH_SECONDS or os.path.exists(end_marker):
            last[0] = now
            refresh()

    trial.refresh_data = refresh_data
    reader = trial.index_reader
    fetch = reader.fetch_tensor_value
    kept: collections.OrderedDict[tuple[str, int, int], Any] = collections.OrderedDict()
    size = [0]

    def fetch_tensor_value(location: Any) -> Any:
        key = (str(location.event_file_name), int(location.start_idx), int(location.length))
        value = kept.get(key)
        if value is None:
            value = fetch(location)
            kept[key] = value
            size[0] += int(getattr(value, "nbytes", 0))
            while size[0] > SHARED_VALUES_BYTES and len(kept) > 1:
                size[0] -= int(getattr(kept.popitem(last=False)[1], "nbytes", 0))
        else:
            kept.move_to_end(key)
        return value.copy() if hasattr(value, "copy") else value

    reader.fetch_tensor_value = fetch_tensor_value
    return trial


def _evaluate_debug_rules(config: dict[str, Any]) -> None:
    """Every debugging rule of the job, over one smdebug trial, step by step; statuses written.

    One process reads the debug output once for all rules (imports, index refreshes),
    where a process per rule read it once each: that is most of what rules cost the
    job's CPU. Each rule is still its smdebug class, called through smdebug's invoker
    for one step at a time (``invoke_rule(rule, start_step=s, end_step=s + 1)``), so a
    rule sees exactly the steps, waits and exceptions it sees in SageMaker's rule
    container. A rule that finds issues or fails is done; the others go on.
    """
    rules: list[dict[str, Any]] = list(config["rules"])
    # smdebug waits a second after the end marker for late files; the client writes the
    # marker of the gathered output only once every host's files are in it.
    os.environ.setdefault("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")
    # An error before any rule runs (smdebug's imports, the trial) is every rule's: rule_main.
    invoker = _import_smdebug()
    from smdebug.core.logger import get_logger
    from smdebug.exceptions import NoMoreData, RuleEvaluationConditionMet
    from smdebug.trials import create_trial

    get_logger().addFilter(_Quiet())
    trial = _shared_by_the_rules(create_trial(config["trial"], name=config["job"]))
    active: list[tuple[dict[str, Any], Any, int, int | None]] = []
    for entry in rules:
        parameters = {str(k): str(v) for k, v in (entry.get("parameters") or {}).items()}
        kwargs = {
            k: v
            for k, v in parameters.items()
            if k not in RESERVED_PARAMETERS and not k.startswith("other_trial")
        }
        try:
            rule = _rule_class(entry, parameters)(trial, **kwargs)
            start = int(parameters.get("start_step") or 0)
            end = int(parameters["end_step"]) if parameters.get("end_step") else None
        except Exception as exc:  # this rule is Error; the others run
            write_status(entry["out"], entry["name"], ERROR, _shortened(exc))
            continue
        print(f"Rule {entry['name']}: {type(rule).__name__} from step {start}", flush=True)
        active.append((entry, rule, start, end))
    step = min((start for _, _, start, _ in active), default=0)
    while active:
        for item in list(active):
            entry, rule, start, end = item
            if end is not None and step >= end:
                done: tuple[str, str] = (NO_ISSUES_FOUND, _NO_ISSUES)
            elif step < start:
                continue
            else:
                try:
                    invoker.invoke_rule(
                        rule, start_step=step, end_step=step + 1, raise_eval_cond=True
                    )
                    continue
                except RuleEvaluationConditionMet as exc:
                    finding = getattr(rule, "finding", "")
                    done = (
                        ISSUES_FOUND,
                        f"RuleEvaluationConditionMet: {exc}" + (f": {finding}" if finding else ""),
                    )
                except NoMoreData:  # the data ended: for every rule, at this very step
                    for other, *_ in active:
                        write_status(other["out"], other["name"], NO_ISSUES_FOUND, _NO_ISSUES)
                    return
                except Exception as exc:  # the rule failed: Error, never the job nor the others
                    done = (ERROR, _shortened(exc))
            write_status(entry["out"], entry["name"], *done)
            active.remove(item)
        step += 1


def _wait_for_end() -> None:
    """Until the client says ``end`` or closes the pipe (the job's hosts have ended)."""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        if ready:
            return


def _profiler_report(config: dict[str, Any]) -> tuple[str, str]:
    name = config["parameters"].get("rule_to_invoke") or config["name"]
    if name != "ProfilerReport":
        raise LookupError(
            f"{name} is not evaluated in local jobs: profiling rules other than ProfilerReport "
            "need SageMaker's framework metrics and rule container"
        )
    _wait_for_end()
    _import_smdebug()
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    reader = LocalSystemMetricsReader(config["profiler_dir"])
    events = reader.get_events(0, int((time.time() + 120) * 1e6))
    report = system_report(events)
    folder = os.path.join(config["rule_output"], "profiler-output")
    os.makedirs(os.path.join(folder, "profiler-reports"), exist_ok=True)
    with open(
        os.path.join(folder, "profiler-reports", "OverallSystemUsage.json"), "w", encoding="utf-8"
    ) as f:
        json.dump(report["hosts"], f, indent=2)
    path = os.path.join(folder, "profiler-report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(report["text"])
    idle = sum(len(h["idle_periods"]) for h in report["hosts"].values())
    return NO_ISSUES_FOUND, (
        f"Local report of the system metrics ({len(report['hosts'])} host(s), {idle} idle "
        f"period(s)): {path}. Framework metrics and the other profiling rules need SageMaker."
    )


#: A sample whose mean CPU (and GPU, where there is one) utilisation is below this is idle.
IDLE_PERCENT = 10.0
#: Seconds of idle samples in a row that make an idle period.
IDLE_SECONDS = 2.0


def system_report(events: list[Any]) -> dict[str, Any]:
    """Utilisation per host and idle periods from smdebug's system events; ``{"hosts", "text"}``."""
    samples: dict[str, dict[float, dict[str, list[float]]]] = {}
    for event in events:
        by_time = samples.setdefault(event.node_id, {}).setdefault(round(event.timestamp, 3), {})
        key = "memory" if event.dimension == "Memory" else event.dimension
        by_time.setdefault(key, []).append(float(event.value))
    hosts: dict[str, Any] = {}
    lines = [
        "# ProfilerReport (local)",
        "",
        "System metrics of each host (this machine's, shared by the hosts).",
        "",
    ]
    for host in sorted(samples):
        times = sorted(samples[host])
        cpu = [_mean(samples[host][t].get("CPUUtilization")) or 0.0 for t in times]
        gpu = [_mean(samples[host][t].get("GPUUtilization")) for t in times]
        memory = [_mean(samples[host][t].get("memory")) for t in times]
        idle_periods, start = [], None
        for t, c, g in zip(times + [None], cpu + [100.0], gpu + [100.0], strict=True):
            idle = c < IDLE_PERCENT and (g is None or g < IDLE_PERCENT)
            if idle and start is None:
                start = t
            elif not idle and start is not None:
                last = times[times.index(t) - 1] if t is not None else times[-1]
                if last - start >= IDLE_SECONDS:
                    idle_periods.append([start, last])
                start = None
        gpus = [g for g in gpu if g is not None]
        hosts[host] = {
            "samples": len(times),
            "seconds": round(times[-1] - times[0], 1) if times else 0.0,
            "cpu_mean": round(_mean(cpu) or 0.0, 1),
            "cpu_max": round(max(cpu, default=0.0), 1),
            "memory_mean": round(_mean(memory) or 0.0, 1),
            "memory_max": round(max((m for m in memory if m is not None), default=0.0), 1),
            "gpu_mean": round(_mean(gpus) or 0.0, 1) if gpus else None,
            "idle_periods": idle_periods,
        }
        h = hosts[host]
        lines.append(
            f"- {host}: {h['samples']} samples over {h['seconds']} s; CPU {h['cpu_mean']}% mean, "
            f"{h['cpu_max']}% max; memory {h['memory_mean']}% mean; "
            + (f"GPU {h['gpu_mean']}% mean; " if gpus else "no GPU; ")
            + f"{len(idle_periods)} idle period(s) (CPU/GPU below {IDLE_PERCENT:g}% for {IDLE_SECONDS:g} s or more)"
        )
    lines += [
        "",
        "Needs SageMaker: framework metrics (step times, data loading, Python profiling) and the",
        "profiling rules built on them (CPUBottleneck, IOBottleneck, GPUMemoryIncrease, StepOutlier,",
        "BatchSize, LoadBalancing, LowGPUUtilization, MaxInitializationTime), and the HTML report.",
    ]
    return {"hosts": hosts, "text": "\n".join(lines) + "\n"}


def _mean(values: list[float | None] | list[float] | None) -> float | None:
    kept = [v for v in values or [] if v is not None]
    return sum(kept) / len(kept) if kept else None


def _watch_parent() -> None:
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(3)  # the client went away: nobody reads this rule's status


def rule_main(argument: str) -> int:
    """A rule process: ``argument`` is JSON with ``kind`` and ``job``.

    ``kind`` ``debug``: every debugging rule of the job, ``rules`` (each with ``name``,
    ``parameters`` and ``out``, the file its status is written to) over ``trial``.
    ``kind`` ``profiler``: one profiling rule, ``name``, ``parameters``, ``out``,
    ``profiler_dir`` and ``rule_output``.
    """
    config = json.loads(argument)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(OSError, AttributeError):  # Linux: CPU only when nothing else wants it
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the client's to handle
    threading.Thread(target=_watch_parent, daemon=True).start()
    rules = config["rules"] if config["kind"] == "debug" else [config]
    for entry in rules:
        write_status(entry["out"], entry["name"], IN_PROGRESS)
    try:
        if importlib.util.find_spec("smdebug") is None:
            raise ImportError(f"smdebug is not installed in {sys.executable}: {_EXTRA}")
        if config["kind"] == "debug":
            _evaluate_debug_rules(config)  # writes each rule's verdict once its rules run
            return 0
        status, details = _profiler_report(config)
    except ImportError as exc:
        status, details = ERROR, f"Rules need smdebug ({_EXTRA}): {_shortened(exc)}"
    except Exception as exc:  # the rule (or the rules' setup) failed: Error, never the job
        status, details = ERROR, _shortened(exc)
    for entry in rules:
        write_status(entry["out"], entry["name"], status, details)
    return 0
