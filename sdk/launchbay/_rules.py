"""The rules an estimator's arguments must keep together: the cross-field rules, in one place.

Functions over the bound arguments (an estimator, typed as
:class:`~launchbay._bound.BoundArguments`). Each argument's own check is its kind's
(:mod:`launchbay.arguments`); what involves several arguments (``instance_groups``
or the pair ``instance_count`` / ``instance_type``, spot training and ``max_wait``,
the role of a SageMaker job, the VPC, the code and a framework's versions) is
:func:`check_rules`, and each argument is checked against the request field it
fills (:func:`check_request_fields`, :func:`check_request`).

What differs between estimator classes stays a method of the class, called here
through the object: a framework's own rules (``_check_framework_rules()``, whose
common part is :func:`check_framework_rules`) and how a user hyperparameter is
encoded (``_encode_user_hyperparameter()``). :class:`~launchbay.estimator.EstimatorBase`
calls these functions at construction (its ``_check_rules()``, which a class with
rules of its own to check first extends, as SKLearn does) and for every job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from launchbay import _request, _request_rules, _resolve, code, image_uris
from launchbay._bound import BoundArguments
from launchbay.debugger import DebuggerHookConfig
from launchbay.errors import ConfigurationError
from launchbay.inputs import check_uri
from launchbay.session import LocalExecutionRole
from launchbay.vpc import VpcConfig

__all__ = [
    "check_framework_rules",
    "check_hyperparameters",
    "check_request",
    "check_request_fields",
    "check_rules",
    "validate_code",
]


def check_rules(args: BoundArguments) -> None:
    """The rules that involve several arguments, for every estimator class, in one place."""
    # Resources: instance_groups, or the pair instance_type/instance_count.
    if args.instance_groups is not None:
        if args.instance_count is not None or args.instance_type is not None:
            raise ConfigurationError(
                "instance_groups cannot be combined with instance_count/instance_type: give "
                f"either instance_groups (got {args.instance_groups!r}) or the pair.",
                argument="instance_groups",
                value=args.instance_groups,
            )
        args.placement  # noqa: B018 - refuses groups that no one backend runs
    else:
        if args.instance_type is None:
            raise ConfigurationError(
                "instance_type is required: accepted an ml.* type such as 'ml.m5.xlarge', "
                "or 'local_process', 'local', 'local_gpu'.",
                argument="instance_type",
            )
        if args.instance_count is None:
            raise ConfigurationError(
                "instance_count is required: accepted an integer 1 or more.",
                argument="instance_count",
            )
    # Spot training and max_wait.
    max_wait = args.max_wait
    max_run = args.max_run
    if args.use_spot_instances and (
        max_wait is None or (max_run is not None and max_wait < max_run)
    ):
        raise ConfigurationError(
            f"Invalid max_wait={max_wait!r} with use_spot_instances=True: spot training needs "
            f"max_wait >= max_run ({args.max_run} seconds), the time to wait for spot capacity "
            "plus the run. Accepted: an integer of at least max_run.",
            argument="max_wait",
            value=max_wait,
        )
    if max_wait is not None and not args.use_spot_instances:
        raise ConfigurationError(
            f"Invalid max_wait={max_wait!r}: max_wait applies only to spot training. "
            "Accepted: set use_spot_instances=True, or leave max_wait unset.",
            argument="max_wait",
            value=max_wait,
        )
    # The role: required for SageMaker jobs, a real one.
    role = args.role
    if role is None and not args.is_local:
        raise ConfigurationError(
            "role is required for SageMaker jobs: accepted an IAM role ARN such as "
            "'arn:aws:iam::123456789012:role/SageMakerRole' or a role name.",
            argument="role",
        )
    if isinstance(role, LocalExecutionRole) and not args.is_local:
        raise ConfigurationError(
            f"role={str(role)!r} is the placeholder get_execution_role() returns outside "
            f"a SageMaker notebook; instance_type={args.instance_type!r} runs on SageMaker, "
            "which needs a real role. Accepted: an IAM role ARN such as "
            "'arn:aws:iam::123456789012:role/SageMakerRole' (or set "
            "LAUNCHBAY_EXECUTION_ROLE), or a local instance type "
            "('local', 'local_gpu', 'local_process').",
            argument="role",
            value=str(role),
        )
    args.role = None if role is None else str(role)
    # The VPC: vpc_config, or subnets and security_group_ids, both.
    if args.vpc_config is not None:
        if args.subnets is not None or args.security_group_ids is not None:
            raise ConfigurationError(
                "vpc_config cannot be combined with subnets/security_group_ids: give either "
                f"vpc_config (got {args.vpc_config!r}) or subnets and security_group_ids.",
                argument="vpc_config",
                value=args.vpc_config,
            )
        config = VpcConfig.from_value(args.vpc_config)
        args.subnets = list(config.subnets)
        args.security_group_ids = list(config.security_group_ids)
        args.vpc_config = None  # kept as subnets and security_group_ids
    if (args.subnets is None) != (args.security_group_ids is None):
        given, missing = (
            ("subnets", "security_group_ids")
            if args.subnets is not None
            else ("security_group_ids", "subnets")
        )
        raise ConfigurationError(
            f"{given} is set but {missing} is not: a VPC configuration needs both subnets "
            "and security_group_ids.",
            argument=missing,
        )
    # The code: an entry point for source_dir/dependencies; a framework needs one.
    entry_point = args.entry_point
    if entry_point is not None and entry_point.startswith("s3://"):
        raise ConfigurationError.invalid(
            "entry_point",
            entry_point,
            "the path of a local script (an s3:// URI is not accepted)",
        )
    if entry_point is None and (args.source_dir is not None or args.dependencies):
        raise ConfigurationError(
            "source_dir/dependencies are given without entry_point: accepted an entry_point "
            "script (relative to source_dir) to run.",
            argument="entry_point",
        )
    if entry_point is not None:
        validate_code(args)
    if args._framework_name is not None:
        args._check_framework_rules()  # the estimator class's hook
    elif args._image_required and args.image_uri is None:
        raise ConfigurationError(
            "image_uri is required for the generic Estimator: accepted a Docker image URI "
            "such as '123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image:latest' (or use "
            "launchbay.pytorch.PyTorch / launchbay.tensorflow.TensorFlow).",
            argument="image_uri",
        )


def check_framework_rules(args: BoundArguments) -> None:
    """A framework estimator: an entry point, and an image or a known version.

    What ``Framework._check_framework_rules()`` checks unless a framework class
    replaces it (SKLearn, XGBoost, MXNet, Hugging Face).
    """
    framework_version = getattr(args, "framework_version", None)
    py_version = getattr(args, "py_version", None)
    if args.entry_point is None:
        raise ConfigurationError(
            f"entry_point is required for {type(args).__name__}: accepted the path of the "
            "training script, e.g. entry_point='train.py' with source_dir='src'.",
            argument="entry_point",
        )
    framework = args._framework_name
    if framework is None:  # the generic estimator: no framework rules
        return
    if args.image_uri is None and (framework_version is None or py_version is None):
        missing = "framework_version" if framework_version is None else "py_version"
        accepted = (
            f"one of {image_uris.supported_versions(framework)}"
            if missing == "framework_version"
            else "a Python version tag such as 'py311'"
        )
        raise ConfigurationError(
            f"{missing} is required when image_uri is not given: {accepted} (or pass image_uri).",
            argument=missing,
        )
    image_uris.check_version_rules(framework, framework_version, py_version, args.image_uri)


def validate_code(args: BoundArguments) -> None:
    """The entry point, source_dir and dependencies exist, and the hosts can run the script."""
    entry_point = args.entry_point
    if entry_point is None:  # no code to validate
        return
    staged = ("s3://", "file://") if args.is_local else ("s3://",)
    if isinstance(args.source_dir, str) and args.source_dir.startswith(staged):
        # A staged sourcedir.tar.gz; file:// for a local job (what attach() gives back
        # for a local job: the archive fit() staged under LAUNCHBAY_HOME).
        check_uri(args.source_dir, "source_dir", allow_file=args.is_local)
        script = os.fspath(entry_point)
    else:
        code.validate_code(entry_point, args.source_dir, args.dependencies)
        source_dir = None if args.source_dir is None else os.fspath(args.source_dir)
        script = code.resolve_entry_point(entry_point, source_dir)[1]
    # The name the hosts run (sagemaker_program), by the runtime's own rule (imported here:
    # the runtime's code module is not needed until an estimator is made).
    from launchbay.runtime.code import ENTRY_POINT_ACCEPTED, entry_point_problem

    problem = entry_point_problem(script)
    if problem:
        shown = "" if script == args.entry_point else f" (run as {script!r})"
        raise ConfigurationError.invalid(
            "entry_point",
            args.entry_point,
            ENTRY_POINT_ACCEPTED + ", relative to source_dir when that is given",
            reason=f"Its name{shown} {problem}: the hosts would refuse to run it",
        )


def check_hyperparameters(args: BoundArguments, values: Mapping[str, Any]) -> None:
    """The user's hyperparameters, encoded as sent, within CreateTrainingJob's limits."""
    encoded = {k: args._encode_user_hyperparameter(v) for k, v in values.items()}
    _request_rules.check_value("hyperparameters", encoded, "HyperParameters")


def check_request_fields(args: BoundArguments) -> None:
    """Every argument checked against the request field it fills (docs/compatibility.md).

    The request is built with placeholders for what is only known at fit() (job
    name, expanded role, default output path, image); fit() and the dry run check
    the finished request again.
    """
    local = args.is_local
    check_hyperparameters(args, args._hyperparameters)
    if args.volume_kms_key is not None:
        _request_rules.check_value(
            "volume_kms_key", args.volume_kms_key, "ResourceConfig", "VolumeKmsKeyId"
        )
    if args.output_kms_key is not None:
        _request_rules.check_value(
            "output_kms_key", args.output_kms_key, "OutputDataConfig", "KmsKeyId"
        )
    if args.checkpoint_local_path is not None:
        _request_rules.check_value(
            "checkpoint_local_path", args.checkpoint_local_path, "CheckpointConfig", "LocalPath"
        )
    if args.role is not None and args.role.startswith("arn:") and not local:
        _request_rules.check_value("role", args.role, "RoleArn")
    _request_rules.check_value(
        "model_channel_name", args.model_channel_name, "InputDataConfig", "[]", "ChannelName"
    )
    output = args.output_path or "s3://placeholder/"
    debug = (
        args.debugger_hook_config.to_request_dict(output)
        if isinstance(args.debugger_hook_config, DebuggerHookConfig)
        else None
    )
    request = _request.build_request(
        _resolve.request_spec(
            args,
            job_name="placeholder",
            role="arn:aws:iam::000000000000:role/placeholder",
            image_uri=args.image_uri or "placeholder",
            input_mode=args.input_mode,
            hyperparameters={},
            channels=None,
            output_path=output,
            enable_sagemaker_metrics=args.enable_sagemaker_metrics,
            enable_network_isolation=args._enable_network_isolation,
            debug_hook_config=debug,
        )
    )
    _request_rules.check_request(request, local=local)


def check_request(args: BoundArguments, request: dict[str, Any]) -> None:
    """The hyperparameters launchbay adds, counted with the user's (named so).

    The finished request itself is checked once, where its plan is made
    (:func:`launchbay.backends.plan.plan_request`).
    """
    hyperparameters = request.get("HyperParameters") or {}
    if len(hyperparameters) > 100:
        added = sorted(set(hyperparameters) - set(args._hyperparameters))
        raise ConfigurationError(
            f"Invalid hyperparameters: {len(args._hyperparameters)} given, and launchbay adds "
            f"{len(added)} for the job ({', '.join(added)}), {len(hyperparameters)} in all. "
            "Accepted: at most 100 hyperparameters in all (CreateTrainingJob HyperParameters); "
            f"give at most {100 - len(added)}.",
            argument="hyperparameters",
            value=len(args._hyperparameters),
        )
