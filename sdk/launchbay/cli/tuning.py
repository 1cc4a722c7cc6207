"""``launchbay submit/status/stop/list`` for hyperparameter tuning jobs (docs/ci.md).

A job spec with a ``tuning:`` section (:mod:`launchbay.tuning.spec`) is submitted as a
tuning job: locally (``local_process``, ``local``, ``local_gpu``) its trials run from
this process, on SageMaker through CreateHyperParameterTuningJob. ``status`` and
``stop`` find a tuning job by name: a local one from its record under
``$LAUNCHBAY_HOME/tuning``, a SageMaker one through DescribeHyperParameterTuningJob
when no training job has that name. ``list --tuning`` lists tuning jobs.

Exit codes are the training jobs': 0 the tuning job Completed, 1 it ended Failed or
Stopped (or could not be asked), 2 an invalid spec or argument, 130 (143 for
SIGTERM) interrupted: a local tuning job is then stopped (every trial), a SageMaker
one only with ``--stop-on-interrupt``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from launchbay._home import local_home
from launchbay.cli.console import EXIT_FAILED, EXIT_OK
from launchbay.cli.output import iso_time, print_json
from launchbay.errors import ConfigurationError, JobError, JobFailedError, LaunchbayError
from launchbay.tuning import local
from launchbay.tuning.sagemaker import TuningJob, counts
from launchbay.tuning.spec import located, tuner_from_spec

__all__ = [
    "submit",
    "local_job",
    "remote_job",
    "summarize_tuning",
    "show",
    "stop",
    "list_jobs",
    "tuner_from_spec",
]

_TERMINAL = ("Completed", "Failed", "Stopped")


def _say(message: str) -> None:
    print(f"launchbay: {message}", file=sys.stderr, flush=True)


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


def _print_summary(summary: Mapping[str, Any], stream: TextIO | None = None) -> None:
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


def show(job: Any, output: str, description: Mapping[str, Any] | None = None) -> int:
    """``launchbay status`` of a tuning job."""
    summary = summarize_tuning(description or job.describe(), _backend(job))
    if output == "json":
        print_json(summary)
    else:
        _print_summary(summary)
    return EXIT_OK


def _backend(job: Any) -> str:
    return "sagemaker" if isinstance(job, TuningJob) else "local"


# --------------------------------------------------------------------------- finding one


def local_job(name: str) -> local.LocalTuningJob | None:
    """The local tuning job ``name`` (its record under ``$LAUNCHBAY_HOME/tuning``), or None."""
    return local.LocalTuningJob(name) if local.exists(name) else None


def remote_job(name: str, backend: Any) -> TuningJob | None:
    """SageMaker's tuning job ``name`` (DescribeHyperParameterTuningJob answers), or None."""
    session = getattr(backend, "session", None)
    if session is None:
        return None
    job = TuningJob(session, name)
    try:
        job.describe()
    except JobError:
        return None
    return job


def stop(job: Any, output: str) -> int:
    """``launchbay stop`` of a tuning job: every running trial is stopped."""
    description = job.describe()
    status = description.get("HyperParameterTuningJobStatus")
    if status in _TERMINAL:
        _say(f"tuning job {job.name} already ended ({status}); nothing to stop")
    else:
        job.stop()  # a local one has stopped on return (its client stopped each trial)
        if isinstance(job, TuningJob):
            _say(f"stop requested for SageMaker tuning job {job.name}")
        description = job.describe()
    return show(job, output, description)


# --------------------------------------------------------------------------- submit


def submit(args: argparse.Namespace, spec: Any, estimator: Any) -> int:
    """``launchbay submit`` of a spec with a ``tuning:`` section."""
    tuner = tuner_from_spec(spec, estimator)
    inputs, job_name = estimator.spec_inputs, estimator.spec_job_name
    json_mode = args.output == "json"
    if args.dry_run:
        try:
            print_json(tuner.create_tuning_job_request(inputs, job_name=job_name))
        except ConfigurationError as exc:
            raise located(spec, exc) from exc
        return EXIT_OK
    if estimator.is_local and not args.wait:
        raise ConfigurationError.invalid(
            "--no-wait", True,
            "--wait (the default) for a local tuning job: its trials run from this process. "
            "Run `launchbay submit` in the background instead, and see it with "
            "`launchbay status NAME`",
        )  # fmt: skip
    stdout = sys.stdout
    job: Any = None
    try:
        with contextlib.redirect_stdout(sys.stderr if json_mode else sys.stdout):
            try:
                tuner.fit(inputs, job_name=job_name, wait=False)
            except ConfigurationError as exc:
                raise located(spec, exc) from exc
            job = tuner.latest_tuning_job
            _say(f"submitted tuning job {job.name} ({_backend(job)})")
            if not args.wait:
                summary = summarize_tuning(job.describe(), _backend(job))
                if json_mode:
                    print_json(summary, stdout)
                else:
                    stdout.write(
                        f"Submitted {job.name}: see it with `launchbay status {job.name}`, "
                        f"stop it with `launchbay stop {job.name}`.\n"
                    )
                return EXIT_OK
            code = EXIT_OK
            try:
                job.wait()
            except JobFailedError as exc:
                _say(str(exc))
                code = EXIT_FAILED
            summary = summarize_tuning(job.describe(), _backend(job))
    except KeyboardInterrupt:
        _interrupted(args, job)
        raise
    if code == EXIT_OK and summary["status"] != "Completed":
        _say(f"tuning job {summary['tuning_job_name']} ended with status {summary['status']}")
        code = EXIT_FAILED
    if json_mode:
        print_json(summary, stdout)
    else:
        _print_summary(summary, stdout)
    return code


def _interrupted(args: argparse.Namespace, job: Any) -> None:
    """Ctrl-C (or SIGTERM) during submit: stop the job where that is the rule."""
    if job is None:
        return
    if not isinstance(job, TuningJob):
        job.stop()  # already stopped when the interrupt came while following it
        _say(f"interrupted: local tuning job {job.name} and its trials were stopped")
    elif args.stop_on_interrupt:
        job.stop()
        _say(f"interrupted: stop requested for SageMaker tuning job {job.name}")
    else:
        _say(
            f"interrupted: SageMaker tuning job {job.name} keeps running (stop it with "
            f"`launchbay stop {job.name}`, or pass --stop-on-interrupt)"
        )


# --------------------------------------------------------------------------- list


def _local_descriptions() -> list[dict[str, Any]]:
    root = os.path.join(local_home(), "tuning")
    found = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        if local.exists(name):
            try:
                found.append(local.LocalTuningJob(name).describe())
            except JobError:
                continue
    return found


def list_jobs(
    args: argparse.Namespace, sagemaker_session: Callable[[], Any], remote: tuple[str, ...]
) -> int:
    """``launchbay list --tuning``: local tuning jobs, then SageMaker's (newest first)."""
    rows: list[tuple[dict[str, Any], str]] = []
    if args.backend == "all" or args.backend not in remote:
        rows += [(d, "local") for d in _local_descriptions()]
    if args.backend == "all" or args.backend in remote:
        failures: tuple[type[BaseException], ...] = (LaunchbayError, ImportError, *_aws_errors())
        try:
            client = sagemaker_session().sagemaker_client
            kwargs: dict[str, Any] = {"MaxResults": min(args.max, 100), "SortBy": "CreationTime",
                                      "SortOrder": "Descending"}  # fmt: skip
            if args.status:
                kwargs["StatusEquals"] = args.status
            listed = client.list_hyper_parameter_tuning_jobs(**kwargs)
            rows += [
                (dict(s), "sagemaker") for s in listed.get("HyperParameterTuningJobSummaries", [])
            ]
        except failures as exc:  # reported; the listing goes on
            if args.backend != "all":
                raise JobError(f"SageMaker tuning jobs could not be listed: {exc}") from exc
            _say(f"sagemaker tuning jobs not listed: {str(exc).splitlines()[0]}")
    if args.status:
        rows = [r for r in rows if r[0].get("HyperParameterTuningJobStatus") == args.status]
    rows.sort(key=lambda r: _timestamp(r[0].get("CreationTime")), reverse=True)
    rows = rows[: args.max]
    if args.output == "json":
        print_json({"tuning_jobs": [_listed(d, b) for d, b in rows]})
        return EXIT_OK
    table = [("NAME", "STATUS", "TRIALS", "CREATED", "BACKEND")]
    for description, backend in rows:
        item = _listed(description, backend)
        trials = item["trials"]
        table.append((
            str(item["tuning_job_name"]), str(item["status"]),
            f"{trials['completed']}/{sum(trials.values())}", str(item["created"] or "-"), backend,
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _aws_errors() -> tuple[type[BaseException], ...]:
    """botocore's error classes (none without botocore: then nothing reached AWS)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return ()
    return (BotoCoreError, ClientError)


def _listed(description: Mapping[str, Any], backend: str) -> dict[str, Any]:
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


def _timestamp(value: Any) -> float:
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return _dt.datetime.fromisoformat(value).timestamp()
    return 0.0
