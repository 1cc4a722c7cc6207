"""What ``launchbay`` prints about jobs: the summary of one job (text and ``--output json``),
the table of ``launchbay list`` and the JSON every ``--output json`` writes
(:func:`print_json`, for training and tuning jobs alike). Pure functions of
DescribeTrainingJob / ListTrainingJobs dicts, and of DescribeHyperParameterTuningJob /
ListHyperParameterTuningJobs dicts for tuning jobs; :mod:`launchbay.cli.jobs` and
:mod:`launchbay.cli.tuning` own the commands.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from launchbay.cli.console import EXIT_FAILED, EXIT_OK, error
from launchbay.job import rule_statuses
from launchbay.runtime.names import COMPLETED
from launchbay.tuning.sagemaker import counts

__all__ = [
    "summarize",
    "print_summary",
    "attempts_summary",
    "job_table",
    "created_timestamp",
    "iso_time",
    "json_default",
    "print_json",
    "report",
    "summarize_tuning",
    "print_tuning_summary",
    "tuning_row",
    "tuning_table",
]


def iso_time(value: Any) -> str | None:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    return str(value) if value else None


def json_default(value: Any) -> Any:
    """What JSON output makes of a value ``json`` has no form for: ISO 8601 for dates and
    times (boto3 gives ``datetime``), else its ``str``."""
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    return str(value)


def print_json(value: Any, stream: TextIO | None = None) -> None:
    """``value`` as indented JSON on ``stream`` (stdout), flushed: every ``--output json``."""
    stream = stream or sys.stdout
    stream.write(json.dumps(value, indent=2, default=json_default) + "\n")
    stream.flush()


def summarize(description: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """The JSON summary of a DescribeTrainingJob response (``--output json``)."""
    resources = description.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    count: int | None
    if groups:
        instance_type = groups[0].get("InstanceType")
        count = sum(int(g.get("InstanceCount") or 0) for g in groups)
    else:
        instance_type = resources.get("InstanceType")
        count = resources.get("InstanceCount")
    summary = {
        "job_name": description.get("TrainingJobName"),
        "status": description.get("TrainingJobStatus"),
        "secondary_status": description.get("SecondaryStatus"),
        "model_data": (description.get("ModelArtifacts") or {}).get("S3ModelArtifacts"),
        "failure_reason": description.get("FailureReason"),
        "timings": {
            "created": iso_time(description.get("CreationTime")),
            "start": iso_time(description.get("TrainingStartTime")),
            "end": iso_time(description.get("TrainingEndTime")),
            "training_seconds": description.get("TrainingTimeInSeconds"),
            "billable_seconds": description.get("BillableTimeInSeconds"),
        },
        "instance_type": instance_type,
        "instance_count": count,
        "backend": backend,
    }
    if description.get("LocalJobDir"):
        summary["local_job_dir"] = description["LocalJobDir"]
    rules = rule_statuses(description)
    if rules:
        summary["rules"] = [
            {"name": r.get("RuleConfigurationName"), "status": r.get("RuleEvaluationStatus"),
             "details": r.get("StatusDetails")}
            for r in rules
        ]  # fmt: skip
    attempts = attempts_summary(description)
    if attempts is not None:  # a local job run again: spot interruptions rehearsed, retries
        summary["attempts"] = attempts
    return summary


def attempts_summary(description: Mapping[str, Any]) -> dict[str, Any] | None:
    """A local job's attempts (``LocalAttempts``: spot interruptions rehearsed, retries), or
    None for a job run once: their counts, and whether each restart's script read the
    checkpoints restored for it, said in one line (``text``)."""
    attempts = [a for a in description.get("LocalAttempts") or [] if isinstance(a, Mapping)]
    if len(attempts) < 2:
        return None
    interruptions = sum(1 for a in attempts if a.get("EndedWith") == "Interrupted")
    retries = sum(1 for a in attempts if a.get("StartedAfter") == "Retry")
    counts = [
        f"{interruptions} interruption{'s' if interruptions != 1 else ''}" if interruptions else "",
        f"{retries} retr{'ies' if retries != 1 else 'y'}" if retries else "",
    ]
    parts = [", ".join(c for c in counts if c)]
    restarts = [a for a in attempts[1:] if a.get("RestoredCheckpointFiles")]
    watched = [a for a in restarts if "CheckpointFilesRead" in a]
    each = "each restart" if len(attempts) > 2 else "the restart"
    if restarts and len(watched) == len(restarts):
        read = [int(a.get("CheckpointFilesRead") or 0) for a in watched]
        if not any(read):
            parts.append(f"after {each} the script opened none of the restored checkpoint files")
        elif all(read):
            parts.append(f"after {each} the script opened its restored checkpoint files")
        else:
            parts.append(
                "the script opened none of the restored checkpoint files after restart "
                + ", ".join(
                    str(int(a.get("Attempt") or 1) - 1)
                    for a in watched
                    if not a.get("CheckpointFilesRead")
                )
            )
    elif len(attempts) > 1 and not restarts:
        parts.append("no checkpoint files were restored")
    return {
        "attempts": len(attempts),
        "interruptions": interruptions,
        "retries": retries,
        "checkpoint_files_read": [a.get("CheckpointFilesRead") for a in attempts[1:]],
        "text": "; ".join(p for p in parts if p),
    }


def print_summary(summary: Mapping[str, Any], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    timings = summary.get("timings") or {}
    rows = [
        ("Job", summary.get("job_name")),
        ("Status", _status_text(summary)),
        ("Where", f"{summary.get('backend')}, {summary.get('instance_count')} x "
                  f"{summary.get('instance_type')}"),
        ("Created", timings.get("created")),
        ("Started", timings.get("start")),
        ("Ended", timings.get("end")),
        ("Training", _seconds(timings.get("training_seconds"))),
        ("Billable", _seconds(timings.get("billable_seconds"))),
        ("Model", summary.get("model_data")),
        ("Job dir", summary.get("local_job_dir")),
        ("Reason", summary.get("failure_reason")),
        ("Attempts", (summary.get("attempts") or {}).get("text")),
        ("Rules", "\n".join(f"{r['name']}: {r['status']}" + (f" - {r['details']}" if r.get("details") else "")
                            for r in summary.get("rules") or []) or None),
    ]  # fmt: skip
    for label, value in rows:
        if value is None:
            continue
        text = str(value).replace("\n", "\n" + " " * 11)
        stream.write(f"{label + ':':<10} {text}\n")
    stream.flush()


def _status_text(summary: Mapping[str, Any]) -> str:
    status = str(summary.get("status"))
    secondary = summary.get("secondary_status")
    return f"{status} ({secondary})" if secondary and secondary != status else status


def _seconds(value: Any) -> str | None:
    return None if value is None else f"{value} s"


def created_timestamp(job: Mapping[str, Any]) -> float:
    value = job.get("CreationTime")
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        return value.timestamp()
    return 0.0


def job_table(jobs: list[dict[str, Any]]) -> Iterator[str]:
    rows = [("NAME", "STATUS", "CREATED", "BACKEND")]
    for job in jobs:
        created = job.get("CreationTime")
        if isinstance(created, _dt.datetime):
            created = created.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        rows.append(
            (
                str(job.get("TrainingJobName")),
                str(job.get("TrainingJobStatus")),
                str(created or "-"),
                str(job["Backend"]) + (" (detached)" if job.get("LocalDetached") else ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        yield "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()


def report_end(code: int, summary: Mapping[str, Any], stdout: TextIO, json_mode: bool) -> int:
    """A followed training job's end: its summary on ``stdout`` (:func:`report`), a job not
    ``Completed`` said on stderr; returns the exit code (``code``, or failed for such a job)."""
    if code == EXIT_OK and summary["status"] != COMPLETED:
        error(f"training job {summary['job_name']} ended with status {summary['status']}")
        code = EXIT_FAILED
    if code != EXIT_OK and not json_mode:
        summary = dict(summary, failure_reason=None)  # already on stderr, in full
    report(summary, stdout, json_mode)
    return code


def report(
    summary: Mapping[str, Any], stdout: TextIO, json_mode: bool, submitted: bool = False
) -> None:
    """A training job's summary on ``stdout``: one JSON object, or the text (with how to
    follow it when it was just ``submitted``)."""
    if json_mode:
        print_json(summary, stdout)
        return
    if submitted:
        stdout.write(
            f"Submitted {summary['job_name']}: follow it with `launchbay logs "
            f"{summary['job_name']} --follow`, see it with `launchbay status "
            f"{summary['job_name']}`.\n"
        )
    print_summary(summary, stdout)


# --------------------------------------------------------------------------- tuning jobs


def summarize_tuning(description: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """The tuning job in a few fields (``--output json``'s object)."""
    best = description.get("BestTrainingJob") or {}
    final = best.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    config = description.get("HyperParameterTuningJobConfig") or {}
    return {
        "tuning_job_name": description.get("HyperParameterTuningJobName"),
        "status": description.get("HyperParameterTuningJobStatus"),
        "strategy": config.get("Strategy"),
        "trials": counts(description),
        "best_training_job": best.get("TrainingJobName"),
        "objective_metric": final.get("MetricName"),
        "objective_value": final.get("Value"),
        "best_hyperparameters": best.get("TunedHyperParameters"),
        "failure_reason": description.get("FailureReason"),
        "stop_reason": description.get("LocalStopReason"),
        "created": iso_time(description.get("CreationTime")),
        "end": iso_time(description.get("HyperParameterTuningEndTime")),
        "backend": backend,
    }


def print_tuning_summary(summary: Mapping[str, Any], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    trials = ", ".join(f"{n} {state}" for state, n in summary["trials"].items())
    lines = [
        f"Tuning job: {summary['tuning_job_name']} ({summary['backend']})",
        f"Status:     {summary['status']}",
        f"Trials:     {trials}",
    ]
    if summary["best_training_job"]:
        lines.append(
            f"Best:       {summary['best_training_job']} "
            f"{summary['objective_metric']}={summary['objective_value']}"
        )
        values = summary.get("best_hyperparameters") or {}
        lines.append("Values:     " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())))
    for key, label in (("failure_reason", "Reason"), ("stop_reason", "Ended by")):
        if summary.get(key):
            lines.append(f"{label + ':':<11} {summary[key]}")
    stream.write("\n".join(lines) + "\n")
    stream.flush()


def tuning_row(description: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """A tuning job in the listing (``list --tuning --output json``'s items)."""
    return {
        "tuning_job_name": description.get("HyperParameterTuningJobName"),
        "status": description.get("HyperParameterTuningJobStatus"),
        "strategy": description.get("Strategy")
        or (description.get("HyperParameterTuningJobConfig") or {}).get("Strategy"),
        "trials": counts(description),
        "created": iso_time(description.get("CreationTime")),
        "end": iso_time(description.get("HyperParameterTuningEndTime")),
        "backend": backend,
    }


def tuning_table(rows: list[tuple[dict[str, Any], str]]) -> Iterator[str]:
    """The lines of ``launchbay list --tuning``: (description, backend) pairs as a table."""
    table = [("NAME", "STATUS", "TRIALS", "CREATED", "BACKEND")]
    for description, backend in rows:
        item = tuning_row(description, backend)
        trials = item["trials"]
        table.append((
            str(item["tuning_job_name"]), str(item["status"]),
            f"{trials['completed']}/{sum(trials.values())}", str(item["created"] or "-"), backend,
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    for row in table:
        yield "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
