"""``launchbay submit/status/stop/list`` for hyperparameter tuning jobs (docs/ci.md).

A job spec with a ``tuning:`` section (:mod:`launchbay.tuning.spec`) is submitted as a
tuning job: locally (``local_process``, ``local``, ``local_gpu``) its trials run from
this process, on SageMaker through CreateHyperParameterTuningJob. ``status`` and
``stop`` of a name that :func:`launchbay.cli.lookup.find_job` says is a tuning job
(a local one from its record under ``$LAUNCHBAY_HOME/tuning``, a SageMaker one through
DescribeHyperParameterTuningJob when no training job has that name) come here.
``list --tuning`` lists tuning jobs. What is printed is :mod:`launchbay.cli.output`'s.

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
from typing import Any

from launchbay._home import local_home
from launchbay.cli.console import EXIT_FAILED, EXIT_OK, info
from launchbay.cli.output import (
    print_json,
    print_tuning_summary,
    summarize_tuning,
    tuning_row,
    tuning_table,
)
from launchbay.errors import ConfigurationError, JobError, JobFailedError, LaunchbayError
from launchbay.tuning import local
from launchbay.tuning.sagemaker import TuningJob
from launchbay.tuning.spec import located, tuner_from_spec

__all__ = ["submit", "show", "stop", "list_jobs", "backend_name"]

_TERMINAL = ("Completed", "Failed", "Stopped")


def show(job: Any, output: str, description: Mapping[str, Any] | None = None) -> int:
    """``launchbay status`` of a tuning job."""
    summary = summarize_tuning(description or job.describe(), backend_name(job))
    if output == "json":
        print_json(summary)
    else:
        print_tuning_summary(summary)
    return EXIT_OK


def backend_name(job: Any) -> str:
    """Where tuning job ``job`` runs, as summaries say it: ``sagemaker`` or ``local``."""
    return "sagemaker" if isinstance(job, TuningJob) else "local"


def stop(job: Any, output: str, description: Mapping[str, Any] | None = None) -> int:
    """``launchbay stop`` of a tuning job: every running trial is stopped.

    ``description``: the job's, when the caller has just asked for it.
    """
    description = description or job.describe()
    status = description.get("HyperParameterTuningJobStatus")
    if status in _TERMINAL:
        info(f"tuning job {job.name} already ended ({status}); nothing to stop")
    else:
        job.stop()  # a local one has stopped on return (its client stopped each trial)
        if isinstance(job, TuningJob):
            info(f"stop requested for SageMaker tuning job {job.name}")
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
            info(f"submitted tuning job {job.name} ({backend_name(job)})")
            if not args.wait:
                summary = summarize_tuning(job.describe(), backend_name(job))
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
                info(str(exc))
                code = EXIT_FAILED
            summary = summarize_tuning(job.describe(), backend_name(job))
    except KeyboardInterrupt:
        _interrupted(args, job)
        raise
    if code == EXIT_OK and summary["status"] != "Completed":
        info(f"tuning job {summary['tuning_job_name']} ended with status {summary['status']}")
        code = EXIT_FAILED
    if json_mode:
        print_json(summary, stdout)
    else:
        print_tuning_summary(summary, stdout)
    return code


def _interrupted(args: argparse.Namespace, job: Any) -> None:
    """Ctrl-C (or SIGTERM) during submit: stop the job where that is the rule."""
    if job is None:
        return
    if not isinstance(job, TuningJob):
        job.stop()  # already stopped when the interrupt came while following it
        info(f"interrupted: local tuning job {job.name} and its trials were stopped")
    elif args.stop_on_interrupt:
        job.stop()
        info(f"interrupted: stop requested for SageMaker tuning job {job.name}")
    else:
        info(
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
            info(f"sagemaker tuning jobs not listed: {str(exc).splitlines()[0]}")
    if args.status:
        rows = [r for r in rows if r[0].get("HyperParameterTuningJobStatus") == args.status]
    rows.sort(key=lambda r: _timestamp(r[0].get("CreationTime")), reverse=True)
    rows = rows[: args.max]
    if args.output == "json":
        print_json({"tuning_jobs": [tuning_row(d, b) for d, b in rows]})
        return EXIT_OK
    for line in tuning_table(rows):
        print(line)
    return EXIT_OK


def _aws_errors() -> tuple[type[BaseException], ...]:
    """botocore's error classes (none without botocore: then nothing reached AWS)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return ()
    return (BotoCoreError, ClientError)


def _timestamp(value: Any) -> float:
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return _dt.datetime.fromisoformat(value).timestamp()
    return 0.0
