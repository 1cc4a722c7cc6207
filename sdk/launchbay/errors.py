"""The launchbay exception tree.

Every error a user can cause is one of these; third-party errors (botocore,
OSError from a transfer) are translated at the boundary with ``raise ... from``.

::

    LaunchbayError
    ├── ConfigurationError (ValueError)      bad arguments: names the argument,
    │   │                                    the value given and what is accepted
    │   ├── UnknownArgumentError (TypeError) an unknown keyword, with a suggestion
    │   ├── DistributionError                a bad ``distribution`` dict
    │   ├── InputError                       a bad channel / S3 or file URI
    │   └── ImageNotFoundError               no image for framework/version/py
    ├── MissingDependencyError (ImportError) an optional extra is not installed
    ├── TransferError (RuntimeError)         an S3 upload/download failed
    ├── ProvisioningError (RuntimeError)     a CloudFormation stack (launchbay.vpc)
    │                                        failed, timed out or is missing
    ├── DockerError (RuntimeError)           the Docker engine cannot be reached,
    │   │                                    refused a call, or an image build failed
    │   └── ImageError                       building or pushing a training image failed
    │       ├── ImageBuildError              a build step failed (quotes its last lines)
    │       └── ImagePushError               the registry refused the push or the login
    └── JobError (RuntimeError)              a submitted job could not be started
        └── JobFailedError                   the job ended Failed or Stopped
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TypeVar

__all__ = [
    "LaunchbayError",
    "ConfigurationError",
    "UnknownArgumentError",
    "DistributionError",
    "InputError",
    "ImageNotFoundError",
    "MissingDependencyError",
    "TransferError",
    "ProvisioningError",
    "DockerError",
    "ImageError",
    "ImageBuildError",
    "ImagePushError",
    "JobError",
    "JobFailedError",
]


class LaunchbayError(Exception):
    """Root of every launchbay exception."""


#: ``ImageNotFoundError.invalid(...)`` is an ImageNotFoundError, not just a ConfigurationError.
_ConfigErrorT = TypeVar("_ConfigErrorT", bound="ConfigurationError")


class ConfigurationError(LaunchbayError, ValueError):
    """An argument has a value launchbay cannot accept."""

    def __init__(self, message: str, *, argument: str | None = None, value: object = None):
        super().__init__(message)
        self.argument = argument
        self.value = value

    @classmethod
    def invalid(
        cls: type[_ConfigErrorT], argument: str, value: object, accepted: str, *, reason: str = ""
    ) -> _ConfigErrorT:
        """Build the standard message: argument, value given, what is accepted."""
        why = f" {reason.rstrip('.')}." if reason else ""
        return cls(
            f"Invalid {argument}={value!r}.{why} Accepted: {accepted}.",
            argument=argument,
            value=value,
        )


class UnknownArgumentError(ConfigurationError, TypeError):
    """An unknown keyword argument (a typo must never be ignored)."""

    @classmethod
    def for_name(cls, owner: str, name: str, valid: Iterable[str]) -> UnknownArgumentError:
        valid = sorted(valid)
        close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return cls(
            f"{owner} got an unexpected keyword argument {name!r}.{hint}",
            argument=name,
        )


class DistributionError(ConfigurationError):
    """The ``distribution`` argument is invalid."""


class InputError(ConfigurationError):
    """A channel input, S3 URI or file URI is invalid."""


class ImageNotFoundError(ConfigurationError):
    """No training image is known for the requested framework, version and Python."""


class MissingDependencyError(LaunchbayError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    @classmethod
    def for_module(cls, module: str, extra: str, feature: str) -> MissingDependencyError:
        return cls(
            f"{feature} needs the {module!r} package, which is not installed. "
            f"Install it with: pip install 'launchbay[{extra}]'"
        )


class TransferError(LaunchbayError, RuntimeError):
    """Uploading to or downloading from S3 failed."""


class ProvisioningError(LaunchbayError, RuntimeError):
    """A CloudFormation stack could not be created, updated, read or deleted.

    The message names the stack and its region and, for a failed stack, quotes
    the first failed resource's status reason.

    Attributes:
        stack_name: The stack's name.
        region: The stack's region.
        status: The stack's last known status (``""`` when unknown or missing).
        reason: The first failure reason found (``""`` when there is none).
    """

    def __init__(
        self,
        message: str,
        *,
        stack_name: str = "",
        region: str = "",
        status: str = "",
        reason: str = "",
    ):
        super().__init__(message)
        self.stack_name = stack_name
        self.region = region
        self.status = status
        self.reason = reason


class DockerError(LaunchbayError, RuntimeError):
    """The Docker engine cannot be reached, refused a call, or an image build or push failed.

    The message says what was asked of the engine and what it answered.
    """


class ImageError(DockerError):
    """Building or pushing a training image failed."""


class ImageBuildError(ImageError):
    """A build step failed.

    Attributes:
        tag: The image that was being built.
        step: The failing step (``"Step 7/21 : RUN ..."``), or ``""``.
        log_tail: The step's last output lines (also in the message).
    """

    def __init__(
        self, message: str, *, tag: str = "", step: str = "", log_tail: Iterable[str] = ()
    ):
        super().__init__(message)
        self.tag = tag
        self.step = step
        self.log_tail = list(log_tail)


class ImagePushError(ImageError):
    """The registry refused the push, or logging in to it failed."""


class JobError(LaunchbayError, RuntimeError):
    """A training job could not be created or followed."""


class JobFailedError(JobError):
    """A training job ended in the Failed or Stopped state.

    Attributes:
        job_name: The training job's name.
        status: ``"Failed"`` or ``"Stopped"``.
        reason: The job's ``FailureReason`` (``""`` when it has none).
        log_host: The host whose last log lines are in ``log_tail`` (the one that
            failed first, as far as its logs tell), or ``None``.
        log_tail: The last log lines of ``log_host`` (also in the message).
    """

    def __init__(
        self,
        message: str,
        *,
        job_name: str = "",
        status: str = "",
        reason: str = "",
        log_host: str | None = None,
        log_tail: Iterable[str] = (),
    ):
        super().__init__(message)
        self.job_name = job_name
        self.status = status
        self.reason = reason
        self.log_host = log_host
        self.log_tail = list(log_tail)
