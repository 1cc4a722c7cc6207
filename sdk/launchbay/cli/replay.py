"""``launchbay replay JOB``: run a SageMaker training job again on this machine.

The job's description, code archive, hyperparameters, environment and channels
become a local job (:mod:`launchbay.replay`; docs/rehearsing.md). What cannot be
mapped is said on stderr (``launchbay: warning: Replay of JOB: ...``) before it
starts; a failing host's traceback is shown, and the exit code says how it ended,
as ``launchbay submit`` does.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from launchbay import replay
from launchbay.backends import registry
from launchbay.backends.base import InProcessBackend
from launchbay.cli.console import EXIT_FAILED, EXIT_OK, error, info, interrupted_code
from launchbay.cli.lookup import job_backend
from launchbay.cli.output import report, report_end, summarize
from launchbay.errors import JobFailedError, LaunchbayError
from launchbay.job import TrainingJob
from launchbay.runtime.names import LOCAL_PROCESS

__all__ = ["add_parser", "cmd_replay"]


def add_parser(commands: Any, positive_int: Any) -> None:
    """``launchbay replay JOB [--instance-type T] [--instance-count N] [--input C=URI ...]``."""
    sub = commands.add_parser(
        "replay",
        help="run a SageMaker job again on this machine (its code, hyperparameters, "
        "environment, channels)",
        description="Read a SageMaker training job's description, download its code archive "
        "and run the same entry point with the same hyperparameters, environment, "
        "distribution and channels (or the ones given) as a local job. What cannot be "
        "mapped here (a GPU type's GPUs, a VPC, ...) is said first. See docs/rehearsing.md.",
    )
    sub.add_argument("job", metavar="JOB", help="the SageMaker training job's name")
    sub.add_argument(
        "--instance-type",
        choices=replay.REPLAY_INSTANCE_TYPES,
        default=LOCAL_PROCESS,
        help="local_process (default: process groups here), or local/local_gpu (containers "
        "of the job's own image)",
    )
    sub.add_argument(
        "--instance-count", type=positive_int, metavar="N", help="hosts (default: the job's)"
    )
    sub.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="CHANNEL=URI",
        help="use URI (s3://, file:// or a local path) for CHANNEL instead of the job's; "
        "a new name adds a channel; repeatable",
    )
    sub.add_argument("--job-name", metavar="NAME", help="the local job's name")
    sub.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="follow the job until it ends (default); --no-wait runs it detached",
    )
    sub.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people; json prints one JSON object on stdout (logs go to stderr)",
    )
    sub.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    json_mode = args.output == "json"
    source = job_backend(args.job)  # a clear error for an unknown job or no AWS region
    planned = replay.plan_replay(
        args.job,
        sagemaker_session=getattr(source, "session", None),
        description=source.describe(args.job),
        instance_type=args.instance_type,
        instance_count=args.instance_count,
        inputs=args.inputs,
        job_name=args.job_name,
    )
    backend = registry.backend_for_plan(planned.plan)
    if not isinstance(backend, InProcessBackend):  # every replay instance type runs here
        raise LaunchbayError(f"{backend.name} cannot run a replay here")
    stdout = sys.stdout
    if not args.wait:
        detached = backend.start_detached(planned.plan)
        info(f"replaying {args.job} as local training job {detached.name} (detached)")
        report(summarize(detached.describe(), backend.name), stdout, json_mode, submitted=True)
        return EXIT_OK
    job: TrainingJob | None = None
    try:
        with contextlib.redirect_stdout(sys.stderr if json_mode else stdout):
            job = backend.run(planned.plan)
            info(f"replaying {args.job} as local training job {job.name} ({backend.name})")
            backend.accept_stops(job.name)  # `launchbay stop` may send SIGTERM here
            try:
                job.wait(logs="All")
                code = EXIT_OK
            except JobFailedError as exc:
                error(str(exc))
                code = EXIT_FAILED
            summary = summarize(job.describe(), backend.name)
    except KeyboardInterrupt:
        if job is not None:
            with contextlib.suppress(KeyboardInterrupt, LaunchbayError):
                job.stop()
                error(f"interrupted: local training job {job.name} was stopped")
        return interrupted_code()
    return report_end(code, summary, stdout, json_mode)
