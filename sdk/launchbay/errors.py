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
    │       ├── ImagePushError               the registry refused the push or the login
    │       └── ImagePullError               the registry refused the pull or the login
    ├── HostingNotAvailableError             deploy()/create_model()/transformer()/register()
    │   (NotImplementedError)                with no SageMaker SDK v2 to hand over to, or a local job
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
    "ImagePullError",
    "HostingNotAvailableError",
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


#: Names SageMaker SDK v2 users write for an argument that has another name, which
#: difflib's ratio is too far from to find (``env`` -> ``environment``): the argument
#: they meant. Used only where that argument is one of the valid names; v1 names
#: (``train_instance_count``, ``distributions``) are not here, they are accepted.
MEANT_ARGUMENTS: dict[str, str] = {
    "env": "environment",
    "envs": "environment",
    "env_vars": "environment",
    "environment_variables": "environment",
    "hyperparameter": "hyperparameters",
    "hyper_parameters": "hyperparameters",
    "hparams": "hyperparameters",
    "hps": "hyperparameters",
    "params": "hyperparameters",
    "entrypoint": "entry_point",
    "script": "entry_point",
    "entry_script": "entry_point",
    "source": "source_dir",
    "src": "source_dir",
    "src_dir": "source_dir",
    "source_directory": "source_dir",
    "code_dir": "source_dir",
    "instance_size": "instance_type",
    "num_instances": "instance_count",
    "instances": "instance_count",
    "node_count": "instance_count",
    "nodes": "instance_count",
    "num_nodes": "instance_count",
    "image": "image_uri",
    "image_url": "image_uri",
    "training_image": "image_uri",
    "container_image": "image_uri",
    "distributed": "distribution",
    "role_arn": "role",
    "execution_role": "role",
    "session": "sagemaker_session",
    "sm_session": "sagemaker_session",
    "version": "framework_version",
    "torch_version": "framework_version",
    "python_version": "py_version",
    "python": "py_version",
    "output_dir": "output_path",
    "output_uri": "output_path",
    "output_s3_uri": "output_path",
    "checkpoint_uri": "checkpoint_s3_uri",
    "max_runtime": "max_run",
    "max_runtime_in_seconds": "max_run",
    "timeout": "max_run",
    "volume_size_in_gb": "volume_size",
    "spot": "use_spot_instances",
    "use_spot": "use_spot_instances",
    "spot_instances": "use_spot_instances",
    "network_isolation": "enable_network_isolation",
    "metrics": "metric_definitions",
    "subnet_ids": "subnets",
    "security_groups": "security_group_ids",
    "log_level": "container_log_level",
    "keep_alive": "keep_alive_period_in_seconds",
    "warm_pool": "keep_alive_period_in_seconds",
}

#: Names that are no argument's, with where what they ask for goes instead.
_ELSEWHERE: dict[str, str] = {
    **{
        name: f"{name!r} is an argument of fit(), not of the estimator"
        for name in ("inputs", "wait", "logs", "job_name", "experiment_config")
    },
    "requirements": (
        "Put a requirements.txt in source_dir: it is installed before the entry point runs "
        "(in local_process with LAUNCHBAY_INSTALL_REQUIREMENTS=1)"
    ),
}


def suggestion(name: str, valid: Iterable[str]) -> str | None:
    """The valid name a user who wrote ``name`` most likely meant, or ``None``.

    :data:`MEANT_ARGUMENTS` first (when its argument is among ``valid``), then the
    closest name by :func:`difflib.get_close_matches`.
    """
    valid = sorted(valid)
    meant = MEANT_ARGUMENTS.get(name) or MEANT_ARGUMENTS.get(name.lower().replace("-", "_"))
    if meant is not None and meant in valid:
        return meant
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return close[0] if close else None


class UnknownArgumentError(ConfigurationError, TypeError):
    """An unknown keyword argument (a typo must never be ignored)."""

    @classmethod
    def for_name(cls, owner: str, name: str, valid: Iterable[str]) -> UnknownArgumentError:
        meant = None if name in _ELSEWHERE else suggestion(name, valid)
        if meant is not None:
            hint = f" Did you mean {meant!r}?"
        else:
            hint = f" {_ELSEWHERE[name]}." if name in _ELSEWHERE else ""
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


class ImagePullError(ImageError):
    """The registry refused the pull, or logging in to it failed (the message says how to pull by hand)."""


class HostingNotAvailableError(LaunchbayError, NotImplementedError):
    """A call after training (``deploy``, ``create_model`` ...) that launchbay does not serve.

    The message says where the model is and what to install or call instead.
    """


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
