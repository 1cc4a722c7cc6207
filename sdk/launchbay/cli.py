"""The ``launchbay`` command: submit YAML job specs and follow training jobs, from a shell or CI.

::

    launchbay submit job.yaml [--wait | --no-wait] [--instance-type TYPE] [--set KEY=VALUE ...]
                              [--job-name NAME] [--dry-run] [--output text|json]
                              [--stop-on-interrupt]
    launchbay validate job.yaml [--instance-type TYPE] [--set KEY=VALUE ...]
    launchbay status JOB [--output text|json]
    launchbay logs JOB [--follow]
    launchbay stop JOB
    launchbay list [--max N] [--status STATUS] [--backend all|local_process|docker|sagemaker]
    launchbay vpc up|down|show [--stack NAME] [--region R] [--cidr C]
                               [--interface-endpoints] [--timeout S] [--output text|json]
    launchbay images build pytorch|tensorflow|huggingface|sklearn|xgboost
                           --framework-version X [--pytorch-version X] [--processor cpu|gpu]
                           [--base-image IMG] [--wheelhouse DIR] [--tag T] [--ca-bundle F]
                           [--py-version py311] [--build-arg K=V ...] [--offline] [--no-cache]
                           [--reuse]
    launchbay images push IMAGE --repository URI [--tag T]
    launchbay images pull IMAGE
    launchbay images base [--tag T] [--suite S] [--sources FILE ...] [--rebuild]
    launchbay config show [--output text|json]

Exit codes (what a CI step can rely on):

* 0: the job completed (or was submitted, with ``--no-wait``); other commands succeeded;
* 1: the job failed or was stopped (the reason is on stderr), or AWS refused a call
  (for ``vpc``: the stack failed, timed out or is missing), or no such job (also with
  no AWS region configured), or a damaged local job directory (the file is named);
* 2: an invalid spec or invalid arguments (each problem names its file, line and key path),
  or an unusable ``LAUNCHBAY_HOME`` (named, with its value and what it needs);
* 130: interrupted (Ctrl-C; 143 for SIGTERM). A local job is always stopped; a
  SageMaker job only with ``--stop-on-interrupt``.

A spec with a ``tuning:`` section is a tuning job (:mod:`launchbay.cli_tuning`): the
same codes, for the tuning job's status.

With ``--output json`` stdout carries exactly one JSON object (job name, status,
model data, failure reason, timings, instance type, backend) and the job's logs go
to stderr. Jobs are found by name through the backend registry
(:mod:`launchbay.backends.registry`): local ones (``local_process`` and Docker)
under ``$LAUNCHBAY_HOME/jobs`` first, then SageMaker's.

This module is the thin outer layer: argument parsing, printing and exit codes.
The spec is :mod:`launchbay.jobspec`; the job runs through the estimator and its
backend, and every backend is driven through the same interface
(:mod:`launchbay.backends.base`), detached local runs included.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from launchbay import __version__, cli_tuning, images, jobspec, vpc
from launchbay._home import local_home
from launchbay._summary import (
    created_timestamp,
    iso_time,
    job_table,
    print_json,
    print_summary,
    summarize,
)
from launchbay.backends import registry
from launchbay.backends.base import Backend, InProcessBackend
from launchbay.errors import (
    ConfigurationError,
    ImageNotFoundError,
    JobError,
    JobFailedError,
    LaunchbayError,
    MissingDependencyError,
)
from launchbay.estimator import Estimator, validate_job_name
from launchbay.jobspec import JobSpecError
from launchbay.runtime.names import COMPLETED, JOB_STATUSES, TERMINAL_STATUSES
from launchbay.tuning.spec import has_tuning

__all__ = ["main", "build_parser", "summarize"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

logger = logging.getLogger("launchbay.cli")


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The ``launchbay`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="launchbay",
        description="Run distributed ML training jobs locally or on SageMaker.",
        epilog="Exit codes: 0 completed, 1 job failed or stopped, 2 invalid spec or "
        "arguments, 130 interrupted. See docs/ci.md and docs/jobspec.md.",
    )
    parser.add_argument("--version", action="version", version=f"launchbay {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="show debug messages on stderr"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def output_option(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--output",
            choices=("text", "json"),
            default="text",
            help="text for people; json prints one JSON object on stdout (logs go to stderr)",
        )

    def spec_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("spec", metavar="SPEC", help="the YAML job spec (docs/jobspec.md)")
        sub.add_argument(
            "--instance-type",
            metavar="TYPE",
            help="run on TYPE instead of the spec's: local_process, local, or an ml.* type",
        )
        sub.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="replace a key of the spec (dotted path, e.g. hyperparameters.epochs=3); "
            "the value is read as YAML; repeatable",
        )
        sub.add_argument("--job-name", metavar="NAME", help="the job's exact name")

    submit = commands.add_parser(
        "submit",
        help="submit the job a spec describes and (by default) follow it to the end",
        description="Submit the training job a YAML spec describes. With --wait (the default) "
        "its logs are streamed and the exit code says how it ended.",
    )
    spec_options(submit)
    submit.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="follow the job until it ends (default); --no-wait returns once it is submitted",
    )
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="print the exact CreateTrainingJob request (CreateHyperParameterTuningJob for a "
        "spec with tuning:) as JSON; upload and create nothing",
    )
    output_option(submit)
    submit.add_argument(
        "--stop-on-interrupt",
        action="store_true",
        help="on Ctrl-C, stop the SageMaker job too (local jobs are always stopped)",
    )
    submit.set_defaults(func=_cmd_submit)

    validate = commands.add_parser(
        "validate",
        help="check a spec without running anything (no AWS call)",
        description="Load and check a job spec and build its estimator; touch nothing.",
    )
    spec_options(validate)
    validate.set_defaults(func=_cmd_validate)

    status = commands.add_parser("status", help="show a job's (or tuning job's) status")
    status.add_argument("job", metavar="JOB", help="the job's (or tuning job's) name")
    output_option(status)
    status.set_defaults(func=_cmd_status)

    logs = commands.add_parser("logs", help="print a job's logs (host-prefixed lines)")
    logs.add_argument("job", metavar="JOB", help="the job's name")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the job ends"
    )
    logs.set_defaults(func=_cmd_logs)

    stop = commands.add_parser("stop", help="stop a running job (or tuning job)")
    stop.add_argument("job", metavar="JOB", help="the job's (or tuning job's) name")
    output_option(stop)
    stop.set_defaults(func=_cmd_stop)

    listing = commands.add_parser("list", help="list recent jobs, local and SageMaker")
    listing.add_argument(
        "--max", type=_positive_int, default=20, metavar="N", help="at most N jobs (default 20)"
    )
    listing.add_argument("--status", choices=JOB_STATUSES, help="only jobs in this state")
    listing.add_argument(
        "--tuning", action="store_true", help="list hyperparameter tuning jobs instead"
    )
    listing.add_argument(
        "--backend",
        choices=("all", *registry.names()),
        default="all",
        help="where to look (default: every backend: local jobs and SageMaker jobs)",
    )
    output_option(listing)
    listing.set_defaults(func=_cmd_list)

    vpc = commands.add_parser(
        "vpc",
        help="make, show or delete the training VPC (a CloudFormation stack)",
        description="Manage the training VPC made from launchbay's CloudFormation template "
        "(docs/vpc.md): private subnets in two zones, an S3 endpoint, and a security group "
        "open to itself on all ports. CloudFormation's events are printed while it works.",
    )
    actions = vpc.add_subparsers(dest="vpc_command", metavar="ACTION", required=True)

    def stack_options(sub: argparse.ArgumentParser, waits: bool) -> None:
        sub.add_argument(
            "--stack", default="launchbay-vpc", metavar="NAME", help="stack name (launchbay-vpc)"
        )
        sub.add_argument("--region", metavar="R", help="AWS region (default: the configured one)")
        if waits:
            sub.add_argument(
                "--timeout",
                type=_positive_float,
                default=1800.0,
                metavar="S",
                help="seconds to wait for CloudFormation (default 1800)",
            )

    up = actions.add_parser(
        "up", help="create the stack, or update it when the parameters changed; print its ids"
    )
    stack_options(up, waits=True)
    up.add_argument(
        "--cidr",
        metavar="C",
        help="the VPC's IPv4 CIDR, /16 to /27 (new stacks: 10.0.0.0/16; existing: unchanged)",
    )
    up.add_argument(
        "--interface-endpoints",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="add (or remove) interface endpoints for CloudWatch Logs, ECR, STS and the "
        "SageMaker API; billed hourly (new stacks: off; existing: unchanged)",
    )
    output_option(up)
    up.set_defaults(func=_cmd_vpc_up)
    down = actions.add_parser("down", help="delete the stack and wait until it is gone")
    stack_options(down, waits=True)
    down.set_defaults(func=_cmd_vpc_down)
    show = actions.add_parser("show", help="print the stack's VPC, subnets and security group")
    stack_options(show, waits=False)
    output_option(show)
    show.set_defaults(func=_cmd_vpc_show)
    _images_parser(commands)
    config = commands.add_parser(
        "config", help="SageMaker SDK defaults files launchbay applies (docs/ci.md)"
    )
    config_actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    config_show = config_actions.add_parser(
        "show", help="print the effective defaults and the file each came from"
    )
    output_option(config_show)
    config_show.add_argument(
        "--show-values",
        action="store_true",
        help="show values whose names look secret (secret, password, key, token), "
        "which are masked as *** by default, as SDK v2's log lines mask them",
    )
    config_show.set_defaults(func=_cmd_config_show)
    return parser


def _cmd_config_show(args: argparse.Namespace) -> int:
    from launchbay import _sagemaker_config

    described = _sagemaker_config.describe(show_values=args.show_values)
    if args.output == "json":
        print_json(described)
    else:
        print("\n".join(_sagemaker_config.describe_text(described)))
    return EXIT_OK


def _images_parser(commands: Any) -> None:
    """``launchbay images build|push|base`` (training images; docs/images.md)."""
    images_command = commands.add_parser(
        "images",
        help="build, push or make the base of the training images (Docker)",
        description="The training images for local Docker mode and SageMaker: Python, the "
        "framework, Open MPI with mpi4py, SSH for MPI, and the launchbay runtime (`train`). "
        "See docs/images.md.",
    )
    actions = images_command.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="build launchbay/<framework>-training:<version>-<cpu|gpu>-<py>",
        description="Build a training image through the Docker engine, showing its progress.",
    )
    build.add_argument("framework", choices=images.FRAMEWORKS, help="the framework")
    build.add_argument(
        "--framework-version", required=True, metavar="X", help="the framework's version"
    )
    build.add_argument(
        "--pytorch-version",
        metavar="X",
        help="huggingface only: the torch version under transformers (--framework-version)",
    )
    build.add_argument(
        "--processor", choices=images.PROCESSORS, default="cpu", help="cpu (default) or gpu"
    )
    build.add_argument(
        "--base-image",
        metavar="IMG",
        help="the FROM image (default: python:3.11-slim for cpu, a CUDA cuDNN runtime for gpu)",
    )
    build.add_argument(
        "--wheelhouse", metavar="DIR", help="wheels pip prefers to the index (air-gapped builds)"
    )
    build.add_argument("--tag", metavar="T", help="the image's tag (default: the launchbay name)")
    build.add_argument(
        "--ca-bundle",
        metavar="F",
        help="CA bundle for pip in the build (default: $PIP_CERT, $REQUESTS_CA_BUNDLE or "
        "$SSL_CERT_FILE when set; '' for none)",
    )
    build.add_argument(
        "--py-version",
        default=images.DEFAULT_PY_VERSION,
        metavar="PY",
        help="py311 (default), py310, ...",
    )
    build.add_argument(
        "--build-arg",
        dest="build_args",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another Docker build argument (e.g. INSTALL_EFA=0, EXTRA_INDEX_URL=...); repeatable",
    )
    build.add_argument(
        "--offline", action="store_true", help="pip installs from --wheelhouse only (no index)"
    )
    build.add_argument("--no-cache", action="store_true", help="ignore Docker's layer cache")
    build.add_argument(
        "--reuse",
        action="store_true",
        help="do nothing when the image exists and was built from the same sources",
    )
    build.set_defaults(func=_cmd_images_build)

    push = actions.add_parser(
        "push",
        help="tag an image and push it (ECR: logs in through boto3)",
        description="Tag IMAGE as URI:TAG and push it. For an ECR repository "
        "(<account>.dkr.ecr.<region>.amazonaws.com/NAME) the login goes through boto3; other "
        "registries use the Docker engine's own credentials (docker login).",
    )
    push.add_argument("image", metavar="IMAGE", help="a local image")
    push.add_argument("--repository", required=True, metavar="URI", help="the repository URI")
    push.add_argument("--tag", metavar="T", help="the pushed tag (default: IMAGE's tag)")
    push.set_defaults(func=_cmd_images_push)

    pull = actions.add_parser(
        "pull",
        help="pull an image, e.g. a built-in algorithm's (ECR: logs in through boto3)",
        description="Pull IMAGE with progress; ECR logins go through boto3 (docs/algorithms.md).",
    )
    pull.add_argument("image", metavar="IMAGE", help="the image reference")
    pull.set_defaults(func=lambda args: print(images.pull_image(args.image)) or EXIT_OK)

    base = actions.add_parser(
        "base",
        help="make a slim Debian Python base image from this machine's apt sources (no pull)",
        description="mmdebstrap a minimal Debian with python3 from this machine's apt sources "
        "and docker import it as launchbay/python-base:<python>-<suite>; for machines that "
        "cannot pull images. Prints the image's name on stdout.",
    )
    base.add_argument("--tag", metavar="T", help="the image's tag")
    base.add_argument("--suite", metavar="S", help="Debian suite (default: this machine's)")
    base.add_argument(
        "--sources",
        action="append",
        metavar="FILE",
        help="apt source file (.list or .sources); repeatable (default: this machine's)",
    )
    base.add_argument("--rebuild", action="store_true", help="make it even if it exists")
    base.set_defaults(func=_cmd_images_base)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer 1 or more, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


# --------------------------------------------------------------------------- entry point


_TERMINATED = False


def _on_sigterm(signum: int, frame: Any) -> None:
    # Handled exactly like Ctrl-C: whoever handles SIGINT now (the local backend's
    # safe flag while it waits, else KeyboardInterrupt) sees it. CI systems cancel
    # a step with SIGTERM, so the local job is stopped and nothing is left running.
    global _TERMINATED
    _TERMINATED = True
    os.kill(os.getpid(), signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    global _TERMINATED
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    _TERMINATED = False
    with _console(args.verbose):
        try:
            return int(args.func(args))
        except KeyboardInterrupt:
            _error("interrupted")
            return _interrupted_code()
        except JobSpecError as exc:
            for problem in exc.problems:
                print(f"launchbay: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
        except (ConfigurationError, MissingDependencyError) as exc:
            _error(str(exc))
            return EXIT_USAGE
        except LaunchbayError as exc:
            _error(str(exc))
            return EXIT_FAILED


@contextlib.contextmanager
def _console(verbose: bool) -> Iterator[None]:
    """Messages and warnings on stderr as ``launchbay: ...``; SIGINT/SIGTERM as interrupts.

    Everything is put back on exit, so ``main()`` can also run inside another program.
    stdout and stderr may be closed by their reader (``launchbay submit job.yaml |
    head -3``): what is written after that is dropped (:class:`_ReaderMayLeave`)
    and the command goes on, so its exit code still says how the job ended.
    """
    saved_streams = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = _ReaderMayLeave(sys.stdout), _ReaderMayLeave(sys.stderr)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    package = logging.getLogger("launchbay")
    saved_logging = (package.level, package.propagate)
    package.addHandler(handler)
    package.setLevel(logging.DEBUG if verbose else logging.INFO)
    package.propagate = False

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"launchbay: warning: {message}", file=sys.stderr)

    saved_showwarning = warnings.showwarning
    warnings.showwarning = show
    saved_signals: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        saved_signals[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        saved_signals[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        for signum, previous in saved_signals.items():
            signal.signal(signum, previous)
        warnings.showwarning = saved_showwarning
        package.removeHandler(handler)
        package.setLevel(saved_logging[0])
        package.propagate = saved_logging[1]
        sys.stdout, sys.stderr = saved_streams


class _ReaderMayLeave:
    """A text stream whose reader may go away (a closed pipe): then writes are dropped.

    On the first :class:`BrokenPipeError` the stream's file descriptor is pointed
    at ``/dev/null``, so what is still buffered, every later write and the flush
    at exit go nowhere, quietly. The command is not cut short: ``submit`` still
    follows its job to the end and exits 1 when it failed, whatever reads (or
    stopped reading) its output.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_left = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        self.reader_left = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # what was buffered goes to /dev/null now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _interrupted_code() -> int:
    return EXIT_TERMINATED if _TERMINATED else EXIT_INTERRUPTED


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prefix = "launchbay: " if record.levelno < logging.WARNING else "launchbay: warning: "
        if record.levelno >= logging.ERROR:
            prefix = "launchbay: error: "
        return prefix + record.getMessage()


def _error(message: str) -> None:
    lines = str(message).splitlines() or [""]
    print(f"launchbay: error: {lines[0]}", file=sys.stderr)
    for line in lines[1:]:
        print(f"  {line}" if line else "", file=sys.stderr)


def _info(message: str) -> None:
    print(f"launchbay: {message}", file=sys.stderr)


# --------------------------------------------------------------------------- backends


def _job_backend(name: str) -> Backend:
    """The backend that knows job ``name`` (the registry asks local ones first).

    Raises:
        JobError: no local job has that name and the remote backend cannot be
            asked (no AWS region configured, boto3 missing): no such job.
    """
    validate_job_name(name, "JOB")
    backend = registry.backend_for_job(name)
    if not isinstance(backend, InProcessBackend):
        why = _cannot_ask(backend)
        if why:
            raise JobError(
                f"No training job named {name!r}: there is no local job of that name (under "
                f"{os.path.join(local_home(), 'jobs')}), and {_REMOTE_NAMES.get(backend.name, backend.name)} "
                f"was not asked because {why}."
            )
    return backend


_REMOTE_NAMES = {"sagemaker": "SageMaker"}


def _cannot_ask(backend: Backend) -> str | None:
    """Why the remote ``backend`` cannot be asked about a job (no region, no boto3), or None."""
    session = getattr(backend, "session", None)
    if session is None:
        return None
    try:
        region = session.boto_region_name
    except MissingDependencyError as exc:
        return str(exc)
    except ConfigurationError:
        return (
            "no AWS region is configured (set AWS_REGION or AWS_DEFAULT_REGION, or a region "
            "in ~/.aws/config)"
        )
    return None if region else "no AWS region is configured"


def _backend_name(estimator: Any) -> str:
    """The registry name of the backend that runs ``estimator``'s jobs (the one rule)."""
    return str(estimator.placement.backend)


# --------------------------------------------------------------------------- submit


def _load_spec(args: argparse.Namespace) -> Any:
    values = {"instance_type": args.instance_type, "job_name": args.job_name}
    return jobspec.load(args.spec, overrides=args.overrides, values=values)


def _cmd_validate(args: argparse.Namespace) -> int:
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
        tuner = cli_tuning.tuner_from_spec(spec, estimator)
        print(f"{args.spec}: tuning: {tuner.strategy} search of {tuner.objective_metric_name}")
    print(
        f"{args.spec}: valid ({type(estimator).__name__} on {spec.instance_type}, "
        f"job name: {spec.job_name or 'generated at submission'}"
        + (f", VPC of stack {spec.vpc_stack} read at submission" if spec.vpc_stack else "")
        + ")"
    )
    return EXIT_OK


def _cmd_submit(args: argparse.Namespace) -> int:
    spec = _load_spec(args)
    estimator = Estimator.from_spec(spec)
    if has_tuning(spec):  # a tuning job over the spec's training job (docs/tuning.md)
        return cli_tuning.submit(args, spec, estimator)
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
                estimator._runs_jobs_here = True  # this process runs it: never detached again
                job = estimator.fit(inputs, wait=False, job_name=job_name)
            except ConfigurationError as exc:
                raise spec.error_for(exc) from exc
            _info(f"submitted training job {job.name} ({job.backend.name})")
            if isinstance(job.backend, InProcessBackend):
                # This process treats SIGTERM as Ctrl-C: `launchbay stop JOB` may use it.
                job.backend.accept_stops(job.name)
            if not args.wait:
                summary = summarize(job.describe(), job.backend.name)
                _report(summary, stdout, json_mode, submitted=True)
                return EXIT_OK
            try:
                job.wait(logs="All")
                code = EXIT_OK
            except JobFailedError as exc:
                _error(str(exc))
                code = EXIT_FAILED
            summary = summarize(job.describe(), job.backend.name)
    except KeyboardInterrupt:
        return _interrupted(args, job, stdout, json_mode)
    if code == EXIT_OK and summary["status"] != COMPLETED:
        _error(f"training job {summary['job_name']} ended with status {summary['status']}")
        code = EXIT_FAILED
    if code != EXIT_OK and not json_mode:
        summary = dict(summary, failure_reason=None)  # already on stderr, in full
    _report(summary, stdout, json_mode)
    return code


def _report(
    summary: Mapping[str, Any], stdout: TextIO, json_mode: bool, submitted: bool = False
) -> None:
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


def _interrupted(args: argparse.Namespace, job: Any, stdout: TextIO, json_mode: bool) -> int:
    """Ctrl-C during submit: stop the job where that is the rule, report, exit 130."""
    if job is None:
        _error("interrupted before the job was submitted")
        return _interrupted_code()
    local = isinstance(job.backend, InProcessBackend)
    try:
        if local:
            # The local backend stops the job itself when Ctrl-C lands while it waits;
            # this also covers an interrupt between submission and waiting.
            job.stop()
            _error(f"interrupted: local training job {job.name} was stopped")
        elif args.stop_on_interrupt:
            job.stop()
            _error(f"interrupted: stop requested for SageMaker training job {job.name}")
        else:
            _error(
                f"interrupted: SageMaker training job {job.name} keeps running "
                f"(stop it with `launchbay stop {job.name}`, or pass --stop-on-interrupt)"
            )
        summary = summarize(job.describe(), job.backend.name)
    except KeyboardInterrupt:
        return _interrupted_code()
    except LaunchbayError as exc:
        _error(str(exc))
        return _interrupted_code()
    if json_mode:
        print_json(summary, stdout)
    return _interrupted_code()


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
        _error(f"the local job {name} did not start (see {run.log_path})")
        return EXIT_USAGE if run.exit_code == EXIT_USAGE else EXIT_FAILED
    _info(f"submitted local training job {name} (runner pid {run.pid}, output in {run.log_path})")
    if run.starting:
        # Still staging (code, channels, an image): submitted, not failed. Its status
        # is written once the runner has made the job; until then its output says how
        # it is going.
        _info(
            f"local training job {name} is still starting; `launchbay status {name}` shows it "
            f"once it is set up (until then see {run.log_path})"
        )
        description = dict(request, TrainingJobStatus="InProgress", SecondaryStatus="Starting")
    else:
        description = backend.describe(name)
    _report(summarize(description, backend.name), sys.stdout,
            args.output == "json", submitted=True)  # fmt: skip
    return EXIT_OK


# --------------------------------------------------------------------------- status, logs, stop, list


def _tuning_job(name: str) -> Any:
    """Tuning job ``name``: a local one, else SageMaker's when no training job has that name."""
    found: Any = cli_tuning.local_job(name)
    if found is not None:
        return found
    backend = _job_backend(name)
    if isinstance(backend, InProcessBackend):
        return None
    try:
        backend.describe(name)
    except JobError:
        found = cli_tuning.remote_job(name, backend)
        if found is None:
            raise
    return found


def _cmd_status(args: argparse.Namespace) -> int:
    tuning = _tuning_job(args.job)
    if tuning is not None:
        return cli_tuning.show(tuning, args.output)
    backend = _job_backend(args.job)
    summary = summarize(backend.describe(args.job), backend.name)
    if args.output == "json":
        print_json(summary)
    else:
        print_summary(summary)
    return EXIT_OK


def _cmd_logs(args: argparse.Namespace) -> int:
    _job_backend(args.job).print_logs(args.job, follow=args.follow, stream=sys.stdout)
    return EXIT_OK


def _cmd_stop(args: argparse.Namespace) -> int:
    tuning = _tuning_job(args.job)
    if tuning is not None:
        return cli_tuning.stop(tuning, args.output)
    backend = _job_backend(args.job)
    description = backend.describe(args.job)
    status = description.get("TrainingJobStatus")
    if status in TERMINAL_STATUSES:
        _info(f"training job {args.job} already ended ({status}); nothing to stop")
    else:
        backend.stop(args.job)  # a local job has stopped on return; a remote one is stopping
        if not isinstance(backend, InProcessBackend):
            _info(f"stop requested for {backend.name} training job {args.job}")
        description = backend.describe(args.job)
    summary = summarize(description, backend.name)
    if args.output == "json":
        print_json(summary)
    else:
        print_summary(summary)
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    if args.tuning:
        remote = tuple(
            n
            for n in registry.names()
            if not issubclass(registry.backend_class(n), InProcessBackend)
        )
        return cli_tuning.list_jobs(
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
            _info(f"{name} jobs not listed: {str(exc).splitlines()[0]}")
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
                ]
            }
        )
        return EXIT_OK
    for line in job_table(jobs):
        print(line)
    return EXIT_OK


# --------------------------------------------------------------------------- vpc


def _print_vpc(args: argparse.Namespace, config: Any) -> None:
    if args.output == "json":
        print_json(
            {
                "stack": args.stack,
                "vpc_id": config.vpc_id,
                "subnets": list(config.subnets),
                "security_group_ids": list(config.security_group_ids),
            }
        )
        return
    print(f"stack:              {args.stack}")
    print(f"vpc_id:             {config.vpc_id}")
    print(f"subnets:            {', '.join(config.subnets)}")
    print(f"security_group_ids: {', '.join(config.security_group_ids)}")


def _cmd_vpc_up(args: argparse.Namespace) -> int:
    config = vpc.provision(
        args.stack,
        args.region,
        cidr=args.cidr,
        interface_endpoints=args.interface_endpoints,
        timeout=args.timeout,
        progress=True,
    )
    _print_vpc(args, config)
    return EXIT_OK


def _cmd_vpc_show(args: argparse.Namespace) -> int:
    _print_vpc(args, vpc.describe(args.stack, args.region))
    return EXIT_OK


def _cmd_vpc_down(args: argparse.Namespace) -> int:
    if vpc.teardown(args.stack, args.region, timeout=args.timeout, progress=True):
        _info(f"deleted stack {args.stack}")
    else:
        _info(f"no stack {args.stack}: nothing to delete")
    return EXIT_OK


# --------------------------------------------------------------------------- images


def _cmd_images_build(args: argparse.Namespace) -> int:
    build_args: dict[str, str] = {}
    for item in args.build_args:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigurationError.invalid("--build-arg", item, "KEY=VALUE")
        build_args[key] = value
    tag = images.build_image(
        args.framework,
        args.framework_version,
        args.processor,
        base_image=args.base_image,
        wheelhouse=args.wheelhouse,
        tag=args.tag,
        ca_bundle=args.ca_bundle,
        py_version=args.py_version,
        reuse=args.reuse,
        build_args=build_args,
        offline=args.offline,
        nocache=args.no_cache,
        pytorch_version=args.pytorch_version,
    )
    print(tag)
    return EXIT_OK


def _cmd_images_push(args: argparse.Namespace) -> int:
    print(images.push_image(args.image, args.repository, tag=args.tag))
    return EXIT_OK


def _cmd_images_base(args: argparse.Namespace) -> int:
    print(
        images.build_base_image(
            args.tag, suite=args.suite, sources=args.sources, reuse=not args.rebuild
        )
    )
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
