"""The ``launchbay`` argument parser: every command, its options and the function that runs it.

Each command's function (``args.func``) lives in the module of its seam:
:mod:`~launchbay.cli.jobs` (training jobs, and tuning jobs through them),
:mod:`~launchbay.cli.replay` (a SageMaker job run again here),
:mod:`~launchbay.cli.vpc`, :mod:`~launchbay.cli.images` and :mod:`~launchbay.cli.config`.
"""

from __future__ import annotations

import argparse
from typing import Any

from launchbay import __version__, images
from launchbay.backends import registry
from launchbay.cli import config as config_commands
from launchbay.cli import images as images_commands
from launchbay.cli import jobs
from launchbay.cli import replay as replay_commands
from launchbay.cli import vpc as vpc_commands
from launchbay.runtime.names import JOB_STATUSES

__all__ = ["build_parser", "positive_int", "positive_float"]


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
    submit.add_argument(
        "--interrupt-after",
        metavar="ITEMS",
        help="rehearse what SageMaker does to a local job, one item per attempt: 60s,120s "
        "(spot interruptions that many seconds into training; use_spot_instances jobs), "
        "host-loss:30s (a host lost, retried up to max_retry_attempts); the spec's "
        "rehearse.interruptions, LAUNCHBAY_REHEARSE_INTERRUPTIONS (docs/local.md)",
    )
    submit.set_defaults(func=jobs.cmd_submit)

    validate = commands.add_parser(
        "validate",
        help="check a spec without running anything (no AWS call)",
        description="Load and check a job spec and build its estimator; touch nothing.",
    )
    spec_options(validate)
    validate.set_defaults(func=jobs.cmd_validate)

    status = commands.add_parser("status", help="show a job's (or tuning job's) status")
    status.add_argument("job", metavar="JOB", help="the job's (or tuning job's) name")
    output_option(status)
    status.set_defaults(func=jobs.cmd_status)

    logs = commands.add_parser("logs", help="print a job's logs (host-prefixed lines)")
    logs.add_argument("job", metavar="JOB", help="the job's name")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the job ends"
    )
    logs.set_defaults(func=jobs.cmd_logs)

    stop = commands.add_parser("stop", help="stop a running job (or tuning job)")
    stop.add_argument("job", metavar="JOB", nargs="?", help="the job's (or tuning job's) name")
    stop.add_argument(
        "--warm-pool",
        action="store_true",
        help="end this LAUNCHBAY_HOME's warm pools (keep_alive_period_in_seconds) instead; "
        "JOB, if given, names one pool as `launchbay list` shows it",
    )
    output_option(stop)
    stop.set_defaults(func=jobs.cmd_stop)

    listing = commands.add_parser("list", help="list recent jobs, local and SageMaker")
    listing.add_argument(
        "--max", type=positive_int, default=20, metavar="N", help="at most N jobs (default 20)"
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
    listing.set_defaults(func=jobs.cmd_list)
    replay_commands.add_parser(commands, positive_int)  # a SageMaker job run here

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
                type=positive_float,
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
    up.set_defaults(func=vpc_commands.cmd_vpc_up)
    down = actions.add_parser("down", help="delete the stack and wait until it is gone")
    stack_options(down, waits=True)
    down.set_defaults(func=vpc_commands.cmd_vpc_down)
    show = actions.add_parser("show", help="print the stack's VPC, subnets and security group")
    stack_options(show, waits=False)
    output_option(show)
    show.set_defaults(func=vpc_commands.cmd_vpc_show)
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
    config_show.set_defaults(func=config_commands.cmd_config_show)
    return parser


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
    build.set_defaults(func=images_commands.cmd_images_build)

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
    push.set_defaults(func=images_commands.cmd_images_push)

    pull = actions.add_parser(
        "pull",
        help="pull an image, e.g. a built-in algorithm's (ECR: logs in through boto3)",
        description="Pull IMAGE with progress; ECR logins go through boto3 (docs/algorithms.md).",
    )
    pull.add_argument("image", metavar="IMAGE", help="the image reference")
    pull.set_defaults(func=images_commands.cmd_images_pull)

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
    base.set_defaults(func=images_commands.cmd_images_base)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer 1 or more, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value
