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
    launchbay replay JOB [--instance-type local_process|local|local_gpu] [--instance-count N]
                         [--input CHANNEL=URI ...] [--job-name NAME] [--no-wait]
                         [--output text|json]
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

A spec with a ``tuning:`` section is a tuning job (:mod:`launchbay.cli.tuning`): the
same codes, for the tuning job's status.

With ``--output json`` stdout carries exactly one JSON object (job name, status,
model data, failure reason, timings, instance type, backend) and the job's logs go
to stderr. Jobs are found by name through the backend registry
(:mod:`launchbay.backends.registry`): local ones (``local_process`` and Docker)
under ``$LAUNCHBAY_HOME/jobs`` first, then SageMaker's (:mod:`launchbay.cli.lookup`).

This package is the thin outer layer: argument parsing, printing and exit codes, cut
at its seams:

* :mod:`~launchbay.cli.parser`: every command and option (``args.func`` runs it);
* :mod:`~launchbay.cli.jobs`: training jobs (submit, validate, status, logs, stop, list);
* :mod:`~launchbay.cli.replay`: ``replay``, a SageMaker job run again here (docs/rehearsing.md);
* :mod:`~launchbay.cli.tuning`: tuning jobs (a spec with ``tuning:``, ``list --tuning``);
* :mod:`~launchbay.cli.lookup`: what a job name names, and which backend knows it;
* :mod:`~launchbay.cli.vpc`, :mod:`~launchbay.cli.images`, :mod:`~launchbay.cli.config`:
  ``launchbay vpc``, ``images`` and ``config``;
* :mod:`~launchbay.cli.output`: what is printed about jobs (text, ``--output json``);
* :mod:`~launchbay.cli.console`: exit codes, stderr messages, signals, closed pipes.

The spec is :mod:`launchbay.jobspec`; the job runs through the estimator and its
backend, and every backend is driven through the same interface
(:mod:`launchbay.backends.base`), detached local runs included.
"""

from __future__ import annotations

import sys

from launchbay.cli.console import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    console,
    error,
    interrupted_code,
)
from launchbay.cli.output import summarize
from launchbay.cli.parser import build_parser
from launchbay.errors import ConfigurationError, LaunchbayError, MissingDependencyError
from launchbay.jobspec import JobSpecError

__all__ = ["main", "build_parser", "summarize"]


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    with console(args.verbose):
        try:
            return int(args.func(args))
        except KeyboardInterrupt:
            error("interrupted")
            return interrupted_code()
        except JobSpecError as exc:
            for problem in exc.problems:
                print(f"launchbay: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
        except (ConfigurationError, MissingDependencyError) as exc:
            error(str(exc))
            return EXIT_USAGE
        except LaunchbayError as exc:
            error(str(exc))
            return EXIT_FAILED
