"""``launchbay submit|validate|status|logs|stop|list`` of training jobs.

A spec with a ``tuning:`` section, and a name that names a tuning job, are handed to
:mod:`launchbay.cli.tuning`: what a name names (a training job and the backend that
knows it, or a tuning job) is :func:`launchbay.cli.lookup.find_job`'s one answer. The
job runs through the estimator and its backend, and every backend is driven through
the same interface (:mod:`launchbay.backends.base`), detached local runs included.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import Any, TextIO

from launchbay import jobspec
from launchbay.backends import registry
from launchbay.backends.base import InProcessBackend
from launchbay.backends.local import rehearsal
from launchbay.cli import tuning, warm_pools
from launchbay.cli.console import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    error,
    info,
    interrupted_code,
)
from launchbay.cli.lookup import TuningJobFound, find_job, job_backend
from launchbay.cli.output import (
    created_timestamp,
    iso_time,
    job_table,
    print_json,
    print_summary,
    report,
    report_end,
    summarize,
)
from launchbay.errors import (
    ConfigurationError,
    ImageNotFoundError,
    JobFailedError,
    LaunchbayError,
    MissingDependencyError,
)
from launchbay.estimator import Estimator
from launchbay.runtime.names import TERMINAL_STATUSES
from launchbay.tuning.spec import has_tuning, tuner_from_spec

__all__ = [
    "cmd_validate",
    "cmd_submit",
    "cmd_status",
    "cmd_logs",
    "cmd_stop",
    "cmd_list",
]

logger = logging.getLogger(__name__)


def _backend_name(estimator: Any) -> str:
    """The registry name of the backend that runs ``estimator``'s jobs (the one rule)."""
    return str(estimator.placement.backend)


def _load_spec(args: argparse.Namespace) -> Any:
    values: dict[str, Any] = {"instance_type": args.instance_type, "job_name": args.job_name}
    interruptions = getattr(args, "interrupt_after", None)
    if interruptions is not None:  # submit --interrupt-after: the spec's rehearse (docs/local.md)
        rehearsal.parse(interruptions, "--interrupt-after")  # refused naming the option
        values["rehearse"] = {"interruptions": interruptions}
    return jobspec.load(args.spec, overrides=args.overrides, values=values)


def cmd_validate(args: argparse.Namespace) -> int:
    spec = _load_spec(args)
    estimator = Estimator.from_spec(spec, resolve_vpc=False)  # validate makes no AWS call
    try:  # a local job this machine cannot run is refused here too (docs/local.md)
        estimator.resources()
    except ConfigurationError as exc:
        raise spec.error_for(exc) from exc
    if not estimator.is_local:
        # The image tables are local data: a wrong framework_version/py_version shows
        # here. Without a configured region (or boto3) the check is left to submit.
        try:
            estimator.training_image_uri()
        except ImageNotFoundError as exc:
            raise spec.error_for(exc) from exc
        except (ConfigurationError, MissingDependencyError) as exc:
            logger.debug("Image check skipped: %s", exc)
    if has_tuning(spec):  # the tuner's own checks too (no AWS call)
        tuner = tuner_from_spec(spec, estimator)
        print(f"{args.spec}: tuning: {tuner.strategy} search of {tuner.objective_metric_name}")
    print(
        f"{args.spec}: valid ({type(estimator).__name__} on {spec.instance_type}, "
        f"job name: {spec.job_name or 'generated at submission'}"
        + (f", VPC of stack {spec.vpc_stack} read at submission" if spec.vpc_stack else "")
        + ")"
    )
    return EXIT_OK


def cmd_submit(args: argparse.Namespace) -> int:
    spec = _load_spec(args)
    estimator = Estimator.from_spec(spec)
    if has_tuning(spec):  # a tuning job over the spec's training job (docs/tuning.md)
        return tuning.submit(args, spec, estimator)
    inputs, job_name = estimator.spec_inputs, estimator.spec_job_name
    json_mode = args.output == "json"
    if args.dry_run:
        try:
            request = estimator.create_training_job_request(inputs, job_name=job_name)
        except ConfigurationError as exc:
            raise spec.error_for(exc) from exc
        print_json(request)
        return EXIT_OK
    kind = _backend_name(estimator)
    if issubclass(registry.backend_class(kind), InProcessBackend) and not args.wait:
        return _submit_detached(args, spec, estimator, kind)

    # Logs and progress go to stderr in JSON mode; stdout gets the one JSON object.
    stdout = sys.stdout
    log_stream = sys.stderr if json_mode else sys.stdout
    job = None
    try:
        with contextlib.redirect_stdout(log_stream):
            try:
                # This process runs the job and follows it: never detached (may_detach).
                job = estimator.start_job(inputs, job_name=job_name, may_detach=False)
            except ConfigurationError as exc:
                raise spec.error_for(exc) from exc
            info(f"submitted training job {job.name} ({job.backend.name})")
            if isinstance(job.backend, InProcessBackend):
                # This process treats SIGTERM as Ctrl-C: `launchbay stop JOB` may use it.
                job.backend.accept_stops(job.name)
            if not args.wait:
                summary = summarize(job.describe(), job.backend.name)
                report(summary, stdout, json_mode, submitted=True)
                return EXIT_OK
            try:
                job.wait(logs="All")
                code = EXIT_OK
            except JobFailedError as exc:
                error(str(exc))
                code = EXIT_FAILED
            summary = summarize(job.describe(), job.backend.name)
    except KeyboardInterrupt:
        return _interrupted(args, job, stdout, json_mode)
    return report_end(code, summary, stdout, json_mode)


def _interrupted(args: argparse.Namespace, job: Any, stdout: TextIO, json_mode: bool) -> int:
    """Ctrl-C during submit: stop the job where that is the rule, report, exit 130."""
    if job is None:
        error("interrupted before the job was submitted")
        return interrupted_code()
    local = isinstance(job.backend, InProcessBackend)
    try:
        if local:
            # The local backend stops the job itself when Ctrl-C lands while it waits;
            # this also covers an interrupt between submission and waiting.
            job.stop()
            error(f"interrupted: local training job {job.name} was stopped")
        elif args.stop_on_interrupt:
            job.stop()
            error(f"interrupted: stop requested for SageMaker training job {job.name}")
        else:
            error(
                f"interrupted: SageMaker training job {job.name} keeps running "
                f"(stop it with `launchbay stop {job.name}`, or pass --stop-on-interrupt)"
            )
        summary = summarize(job.describe(), job.backend.name)
    except KeyboardInterrupt:
        return interrupted_code()
    except LaunchbayError as exc:
        error(str(exc))
        return interrupted_code()
    if json_mode:
        print_json(summary, stdout)
    return interrupted_code()


# -- local --no-wait: the job runs in a detached `launchbay submit --wait` --------


def _submit_detached(args: argparse.Namespace, spec: Any, estimator: Any, kind: str) -> int:
    """Run a local job in a detached ``launchbay submit --wait``; return once it started."""
    try:
        request = estimator.create_training_job_request(
            estimator.spec_inputs, job_name=estimator.spec_job_name
        )
    except ConfigurationError as exc:
        raise spec.error_for(exc) from exc
    name = request["TrainingJobName"]
    command = [
        sys.executable, "-m", "launchbay.cli", "submit", os.path.abspath(args.spec),
        "--wait", "--output", "json", "--job-name", name,
    ]  # fmt: skip
    if args.instance_type:
        command += ["--instance-type", args.instance_type]
    for item in args.overrides:
        command += ["--set", item]
    backend = registry.create(kind)
    if not isinstance(backend, InProcessBackend):  # only jobs that live in a process detach
        raise ConfigurationError.invalid(
            "backend", kind, "a backend whose jobs run on this machine"
        )
    run = backend.run_detached(name, command)  # refused (JobError) while a job of that name runs
    if not run.started:
        sys.stderr.write(run.output)
        error(f"the local job {name} did not start (see {run.log_path})")
        return EXIT_USAGE if run.exit_code == EXIT_USAGE else EXIT_FAILED
    info(f"submitted local training job {name} (runner pid {run.pid}, output in {run.log_path})")
    if run.starting:
        # Still staging (code, channels, an image): submitted, not failed. Its status
        # is written once the runner has made the job; until then its output says how
        # it is going.
        info(
            f"local training job {name} is still starting; `launchbay status {name}` shows it "
            f"once it is set up (until then see {run.log_path})"
        )
        description = dict(request, TrainingJobStatus="InProgress", SecondaryStatus="Starting")
    else:
        description = backend.describe(name)
    report(summarize(description, backend.name), sys.stdout,
            args.output == "json", submitted=True)  # fmt: skip
    return EXIT_OK


# --------------------------------------------------------------------------- status, logs, stop, list


def cmd_status(args: argparse.Namespace) -> int:
    found = find_job(args.job)
    if isinstance(found, TuningJobFound):
        return tuning.show(found.job, args.output, found.description)
    summary = summarize(found.describe(), found.backend.name)
    if args.output == "json":
        print_json(summary)
    else:
        print_summary(summary)
    return EXIT_OK


def cmd_logs(args: argparse.Namespace) -> int:
    job_backend(args.job).print_logs(args.job, follow=args.follow, stream=sys.stdout)
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    if args.warm_pool:
        return warm_pools.cmd_stop_pools(args)
    if not args.job:
        raise ConfigurationError(
            "launchbay stop: JOB is missing. Accepted: a job's or tuning job's name, or "
            "--warm-pool to end the warm pools."
        )
    found = find_job(args.job)
    if isinstance(found, TuningJobFound):
        return tuning.stop(found.job, args.output, found.description)
    backend = found.backend
    description = found.describe()
    status = description.get("TrainingJobStatus")
    if status in TERMINAL_STATUSES:
        info(f"training job {args.job} already ended ({status}); nothing to stop")
    else:
        backend.stop(args.job)  # a local job has stopped on return; a remote one is stopping
        if not isinstance(backend, InProcessBackend):
            info(f"stop requested for {backend.name} training job {args.job}")
        description = backend.describe(args.job)
    summary = summarize(description, backend.name)
    if args.output == "json":
        print_json(summary)
    else:
        print_summary(summary)
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    if args.tuning:
        remote = tuple(
            n
            for n in registry.names()
            if not issubclass(registry.backend_class(n), InProcessBackend)
        )
        return tuning.list_jobs(
            args, lambda: getattr(registry.create("sagemaker"), "session", None), remote
        )
    jobs: list[dict[str, Any]] = []
    for name in registry.names():
        if args.backend not in ("all", name):
            continue
        try:
            found = registry.create(name).list_jobs(max_results=args.max, status=args.status)
        except (LaunchbayError, ImportError) as exc:
            if args.backend == name:
                raise
            info(f"{name} jobs not listed: {str(exc).splitlines()[0]}")
            continue
        jobs.extend(dict(item, Backend=name) for item in found)
    jobs.sort(key=created_timestamp, reverse=True)
    jobs = jobs[: args.max]
    if args.output == "json":
        print_json(
            {
                "jobs": [
                    {
                        "job_name": j.get("TrainingJobName"),
                        "status": j.get("TrainingJobStatus"),
                        "secondary_status": j.get("SecondaryStatus"),
                        "created": iso_time(j.get("CreationTime")),
                        "end": iso_time(j.get("TrainingEndTime")),
                        "backend": j["Backend"],
                        "detached": bool(j.get("LocalDetached")),  # a detached runner runs it
                    }
                    for j in jobs
                ],
                "warm_pools": warm_pools.live_pools() if args.backend in ("all", "docker") else [],
            }
        )
        return EXIT_OK
    for line in job_table(jobs):
        print(line)
    if args.backend in ("all", "docker") and args.status is None:
        warm_pools.print_pools(warm_pools.live_pools())
    return EXIT_OK
