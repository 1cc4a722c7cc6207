"""Estimators: SageMaker-SDK-v2-compatible arguments turned into one CreateTrainingJob request.

The estimator owns defaults, validation and naming. It resolves everything that
needs the outside world (region, default bucket, code location, image URI) and
hands plain values to :func:`launchbay._request.build_request`, the one pure
function that makes the request for every backend. ``fit()`` stages the code
and gives the finished request to a backend; it never changes what the dry run
(:meth:`EstimatorBase.create_training_job_request`) showed.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import re
import time
import warnings
from collections.abc import Mapping
from typing import Any

from launchbay import (
    _attach,
    _request,
    _request_rules,
    _sagemaker_config,
    arguments,
    backends,
    code,
    image_uris,
    jobspec,
)
from launchbay._home import local_home, usable_local_home
from launchbay._instances import version_tuple
from launchbay._logs import show_logs
from launchbay._request_rules import JOB_NAME_RE
from launchbay.backends.plan import (
    JobPlan,
    Placement,
    Resources,
    place,
    plan_request,
    resolve_resources,
)
from launchbay.debugger import DebuggerHookConfig
from launchbay.distribution import Distribution, parse_distribution
from launchbay.errors import ConfigurationError
from launchbay.inputs import channels_from_inputs, check_uri
from launchbay.runtime.code import ENTRY_POINT_ACCEPTED, entry_point_problem
from launchbay.runtime.names import HP, LOCAL_GPU, LOCAL_INSTANCE_TYPES, LOCAL_PROCESS
from launchbay.s3uri import is_s3_uri, parse_s3_uri
from launchbay.session import LocalExecutionRole, Session
from launchbay.vpc import VpcConfig

__all__ = ["EstimatorBase", "Estimator", "Framework"]

logger = logging.getLogger("launchbay.estimator")

NETWORK_ISOLATION_CODE_PATH = _request.NETWORK_ISOLATION_CODE_PATH

DEBUGGER_UNSUPPORTED_REGIONS = (
    "us-iso-east-1",
    "us-isob-east-1",
    "ap-southeast-3",
    "ap-southeast-4",
    "eu-south-2",
    "me-central-1",
    "ap-south-2",
    "eu-central-2",
    "us-gov-east-1",
)
PROFILER_UNSUPPORTED_REGIONS = DEBUGGER_UNSUPPORTED_REGIONS


#: Seconds a generated name's claim file is kept (see :func:`name_from_base`).
_NAME_CLAIM_SECONDS = 300.0
_last_stamp_ms = 0


def _stamp(ms: int) -> str:
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(seconds)) + f"-{millis:03d}"


def _names_dir() -> str:
    return os.path.join(local_home(), "names")


def _forget_old_claims(directory: str, now: float) -> None:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if now - entry.stat().st_mtime > _NAME_CLAIM_SECONDS:
                os.unlink(entry.path)
        except OSError:
            continue


def _claim(directory: str, name: str) -> bool:
    """Atomically claim ``name`` on this machine (False: another caller has it)."""
    try:
        os.close(
            os.open(os.path.join(directory, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        )
    except FileExistsError:
        return False
    return True


def name_from_base(base: str, max_length: int = 63) -> str:
    """``base`` trimmed, with a millisecond UTC timestamp appended (as SDK v2 names jobs).

    Names stay in SDK v2's pattern (``<base>-YYYY-MM-DD-HH-MM-SS-mmm``) and never
    repeat on this machine: within a process the millisecond only goes up, and
    across processes each name is claimed by an exclusive create of
    ``<local home>/names/<name>``; a name already claimed takes the next
    millisecond. Claims older than a few minutes are removed. If the claim
    directory cannot be written, the in-process guarantee alone holds.
    """
    global _last_stamp_ms
    now = time.time()
    ms = max(int(math.floor(now * 1000)), _last_stamp_ms + 1)
    directory = _names_dir()
    try:
        os.makedirs(directory, exist_ok=True)
        _forget_old_claims(directory, now)
        usable = True
    except OSError:
        usable = False
    for _ in range(10_000):
        stamp = _stamp(ms)
        name = f"{base[: max_length - len(stamp) - 1]}-{stamp}"
        try:
            if not usable or _claim(directory, name):
                break
        except OSError:
            break
        ms += 1
    _last_stamp_ms = ms
    return name


def base_name_from_image(image: str) -> str:
    """The repository name of an image URI: ``.../pytorch-training:2.3`` -> ``pytorch-training``."""
    match = re.match(r"^(.+/)?([^:/]+)(:[^:]+)?$", image)
    return match.group(2) if match else image


def validate_job_name(name: Any, argument: str = "job_name") -> str:
    if not isinstance(name, str) or not JOB_NAME_RE.match(name):
        raise ConfigurationError.invalid(
            argument,
            name,
            "1-63 characters: letters, digits and hyphens, starting with a letter or digit "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})",
        )
    return name


#: Distributions that install each framework's module, most common first.
_FRAMEWORK_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": (
        "tensorflow",
        "tensorflow-cpu",
        "tensorflow-gpu",
        "tensorflow-intel",
        "tensorflow-macos",
    ),
}


class EstimatorBase:
    """What every estimator shares: SDK v2's arguments, validation and the request.

    The arguments are declared once, in :mod:`launchbay.arguments`: the
    constructor binds and checks them from there, then applies the rules that
    involve several of them (:meth:`_check_rules`). Subclasses set
    ``_framework_name``, which declared arguments they take (``_owners``), their
    positional arguments (``_positional``, SDK v2's order) and how user
    hyperparameters are encoded.
    """

    _framework_name: str | None = None
    _owners: tuple[str, ...] = (arguments.BASE,)
    _positional: tuple[str, ...] = ("role", "instance_count", "instance_type")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = arguments.signature(cls)  # type: ignore[attr-defined]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        declared = arguments.declared(type(self))
        raw = arguments.bind(type(self), args, kwargs, stacklevel=3)
        # SageMaker SDK defaults files fill what was not given, as in SDK v2 (issue 26).
        raw = _sagemaker_config.estimator_defaults(type(self), args, kwargs, raw)
        values = arguments.check(declared, raw, _local_before_checks(raw))
        for argument in declared:
            setattr(self, argument.attribute, values[argument.name])
        self.latest_training_job: Any = None
        self._current_job_name: str | None = None
        #: The inputs and job name of the job spec this estimator came from (from_yaml).
        self.spec_inputs: Any = None
        self.spec_job_name: str | None = None
        self._check_rules()
        self.distribution_config: Distribution = self._parse_distribution()
        self._check_request_fields()

    # -- construction helpers -------------------------------------------------

    @property
    def placement(self) -> Placement:
        """Where this estimator's jobs run: the one rule of :mod:`launchbay.plan`.

        Raises:
            ConfigurationError: instance groups that no one backend runs (local
                and ``ml.*`` mixed, or two local types).
        """
        return place(self.instance_type, self.instance_groups)

    @property
    def is_local(self) -> bool:
        """True when the jobs run on this machine (a local instance type, or local groups)."""
        return self.placement.local

    def _check_rules(self) -> None:
        """The rules that involve several arguments, for every estimator class, in one place."""
        # Resources: instance_groups, or the pair instance_type/instance_count.
        if self.instance_groups is not None:
            if self.instance_count is not None or self.instance_type is not None:
                raise ConfigurationError(
                    "instance_groups cannot be combined with instance_count/instance_type: give "
                    f"either instance_groups (got {self.instance_groups!r}) or the pair.",
                    argument="instance_groups",
                    value=self.instance_groups,
                )
            self.placement  # noqa: B018 - refuses groups that no one backend runs
        else:
            if self.instance_type is None:
                raise ConfigurationError(
                    "instance_type is required: accepted an ml.* type such as 'ml.m5.xlarge', "
                    "or 'local_process', 'local', 'local_gpu'.",
                    argument="instance_type",
                )
            if self.instance_count is None:
                raise ConfigurationError(
                    "instance_count is required: accepted an integer 1 or more.",
                    argument="instance_count",
                )
        # Spot training and max_wait.
        max_wait = self.max_wait
        if self.use_spot_instances and (max_wait is None or max_wait < self.max_run):
            raise ConfigurationError(
                f"Invalid max_wait={max_wait!r} with use_spot_instances=True: spot training needs "
                f"max_wait >= max_run ({self.max_run} seconds), the time to wait for spot capacity "
                "plus the run. Accepted: an integer of at least max_run.",
                argument="max_wait",
                value=max_wait,
            )
        if max_wait is not None and not self.use_spot_instances:
            raise ConfigurationError(
                f"Invalid max_wait={max_wait!r}: max_wait applies only to spot training. "
                "Accepted: set use_spot_instances=True, or leave max_wait unset.",
                argument="max_wait",
                value=max_wait,
            )
        # The role: required for SageMaker jobs, a real one.
        role = self.role
        if role is None and not self.is_local:
            raise ConfigurationError(
                "role is required for SageMaker jobs: accepted an IAM role ARN such as "
                "'arn:aws:iam::123456789012:role/SageMakerRole' or a role name.",
                argument="role",
            )
        if isinstance(role, LocalExecutionRole) and not self.is_local:
            raise ConfigurationError(
                f"role={str(role)!r} is the placeholder get_execution_role() returns outside "
                f"a SageMaker notebook; instance_type={self.instance_type!r} runs on SageMaker, "
                "which needs a real role. Accepted: an IAM role ARN such as "
                "'arn:aws:iam::123456789012:role/SageMakerRole' (or set "
                "LAUNCHBAY_EXECUTION_ROLE), or a local instance type "
                "('local', 'local_gpu', 'local_process').",
                argument="role",
                value=str(role),
            )
        self.role = None if role is None else str(role)
        # The VPC: vpc_config, or subnets and security_group_ids, both.
        if self.vpc_config is not None:
            if self.subnets is not None or self.security_group_ids is not None:
                raise ConfigurationError(
                    "vpc_config cannot be combined with subnets/security_group_ids: give either "
                    f"vpc_config (got {self.vpc_config!r}) or subnets and security_group_ids.",
                    argument="vpc_config",
                    value=self.vpc_config,
                )
            config = VpcConfig.from_value(self.vpc_config)
            self.subnets = list(config.subnets)
            self.security_group_ids = list(config.security_group_ids)
            self.vpc_config = None  # kept as subnets and security_group_ids
        if (self.subnets is None) != (self.security_group_ids is None):
            given, missing = (
                ("subnets", "security_group_ids")
                if self.subnets is not None
                else ("security_group_ids", "subnets")
            )
            raise ConfigurationError(
                f"{given} is set but {missing} is not: a VPC configuration needs both subnets "
                "and security_group_ids.",
                argument=missing,
            )
        # The code: an entry point for source_dir/dependencies; a framework needs one.
        entry_point = self.entry_point
        if entry_point is not None and entry_point.startswith("s3://"):
            raise ConfigurationError.invalid(
                "entry_point",
                entry_point,
                "the path of a local script (an s3:// URI is not accepted)",
            )
        if entry_point is None and (self.source_dir is not None or self.dependencies):
            raise ConfigurationError(
                "source_dir/dependencies are given without entry_point: accepted an entry_point "
                "script (relative to source_dir) to run.",
                argument="entry_point",
            )
        if entry_point is not None:
            self._validate_code()
        if self._framework_name is not None:
            self._check_framework_rules()
        elif isinstance(self, Estimator) and self.image_uri is None:
            raise ConfigurationError(
                "image_uri is required for the generic Estimator: accepted a Docker image URI "
                "such as '123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image:latest' (or use "
                "launchbay.pytorch.PyTorch / launchbay.tensorflow.TensorFlow).",
                argument="image_uri",
            )

    def _check_framework_rules(self) -> None:
        """A framework estimator: an entry point, and an image or a known version."""
        framework_version = getattr(self, "framework_version", None)
        py_version = getattr(self, "py_version", None)
        if self.entry_point is None:
            raise ConfigurationError(
                f"entry_point is required for {type(self).__name__}: accepted the path of the "
                "training script, e.g. entry_point='train.py' with source_dir='src'.",
                argument="entry_point",
            )
        if self.image_uri is None and (framework_version is None or py_version is None):
            missing = "framework_version" if framework_version is None else "py_version"
            accepted = (
                f"one of {image_uris.supported_versions(self._framework_name)}"
                if missing == "framework_version"
                else "a Python version tag such as 'py311'"
            )
            raise ConfigurationError(
                f"{missing} is required when image_uri is not given: {accepted} (or pass "
                "image_uri).",
                argument=missing,
            )
        image_uris.check_version_rules(
            self._framework_name, framework_version, py_version, self.image_uri
        )

    def _validate_code(self) -> None:
        if isinstance(self.source_dir, str) and self.source_dir.startswith("s3://"):
            check_uri(self.source_dir, "source_dir", allow_file=False)
            script = os.fspath(self.entry_point)
        else:
            code.validate_code(self.entry_point, self.source_dir, self.dependencies)
            source_dir = None if self.source_dir is None else os.fspath(self.source_dir)
            script = code._resolve_entry_point(self.entry_point, source_dir)[1]
        # The name the hosts run (sagemaker_program), by the runtime's own rule.
        problem = entry_point_problem(script)
        if problem:
            shown = "" if script == self.entry_point else f" (run as {script!r})"
            raise ConfigurationError.invalid(
                "entry_point",
                self.entry_point,
                ENTRY_POINT_ACCEPTED + ", relative to source_dir when that is given",
                reason=f"Its name{shown} {problem}: the hosts would refuse to run it",
            )

    def _parse_distribution(self) -> Distribution:
        if self._distribution_arg is None:
            return Distribution(instance_type=self.instance_type, framework=self._framework_name)
        return parse_distribution(
            self._distribution_arg,
            framework=self._framework_name,
            framework_version=getattr(self, "framework_version", None),
            py_version=getattr(self, "py_version", None),
            image_uri=self.image_uri,
            instance_type=self.instance_type,
            entry_point=self.entry_point,
            instance_groups=self.instance_groups,
        )

    @property
    def distribution(self) -> dict[str, Any]:
        """The ``distribution`` dict as given (a copy)."""
        return copy.deepcopy(self._distribution_arg) if self._distribution_arg else {}

    # -- hyperparameters -------------------------------------------------------

    def set_hyperparameters(self, **kwargs: Any) -> None:
        """Add or replace hyperparameters (values must be JSON-serialisable)."""
        arguments.check_json(kwargs)
        merged = {**self._hyperparameters, **copy.deepcopy(kwargs)}
        self._check_hyperparameters(merged)
        self._hyperparameters = merged

    def _check_hyperparameters(self, values: Mapping[str, Any]) -> None:
        """The user's hyperparameters, encoded as sent, within CreateTrainingJob's limits."""
        encoded = {k: self._encode_user_hyperparameter(v) for k, v in values.items()}
        _request_rules.check_value("hyperparameters", encoded, "HyperParameters")

    def _check_request_fields(self) -> None:
        """Every argument checked against the request field it fills (docs/compatibility.md).

        The request is built with placeholders for what is only known at fit() (job
        name, expanded role, default output path, image); fit() and the dry run check
        the finished request again.
        """
        local = self.is_local
        self._check_hyperparameters(self._hyperparameters)
        if self.volume_kms_key is not None:
            _request_rules.check_value(
                "volume_kms_key", self.volume_kms_key, "ResourceConfig", "VolumeKmsKeyId"
            )
        if self.output_kms_key is not None:
            _request_rules.check_value(
                "output_kms_key", self.output_kms_key, "OutputDataConfig", "KmsKeyId"
            )
        if self.checkpoint_local_path is not None:
            _request_rules.check_value(
                "checkpoint_local_path", self.checkpoint_local_path, "CheckpointConfig", "LocalPath"
            )
        if self.role is not None and self.role.startswith("arn:") and not local:
            _request_rules.check_value("role", self.role, "RoleArn")
        _request_rules.check_value(
            "model_channel_name", self.model_channel_name, "InputDataConfig", "[]", "ChannelName"
        )
        output = self.output_path or "s3://placeholder/"
        debug = (
            self.debugger_hook_config.to_request_dict(output)
            if isinstance(self.debugger_hook_config, DebuggerHookConfig)
            else None
        )
        request = _request.build_request(
            self._request_spec(
                job_name="placeholder",
                role="arn:aws:iam::000000000000:role/placeholder",
                image_uri=self.image_uri or "placeholder",
                input_mode=self.input_mode,
                hyperparameters={},
                channels=None,
                output_path=output,
                enable_sagemaker_metrics=self.enable_sagemaker_metrics,
                enable_network_isolation=self._enable_network_isolation,
                debug_hook_config=debug,
            )
        )
        _request_rules.check_request(request, local=local)

    def _encode_user_hyperparameter(self, value: Any) -> str:
        return json.dumps(value)

    def hyperparameters(self) -> dict[str, str]:
        """The user's hyperparameters as they are sent (strings), without sagemaker_* keys."""
        return {k: self._encode_user_hyperparameter(v) for k, v in self._hyperparameters.items()}

    def _extra_hyperparameters(self, job_name: str, output_path: str) -> dict[str, Any]:
        """Framework keys added after the distribution's (TensorFlow's model_dir)."""
        return {}

    # -- the request -----------------------------------------------------------

    @property
    def session(self) -> Any:
        if self.sagemaker_session is None:
            self.sagemaker_session = Session()
        return self.sagemaker_session

    def enable_network_isolation(self) -> bool:
        return self._enable_network_isolation

    def training_image_uri(self) -> str:
        if not self.image_uri:
            raise ConfigurationError(
                "image_uri is required for the generic Estimator: accepted a Docker image URI "
                "such as '123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image:latest'.",
                argument="image_uri",
            )
        return self.image_uri

    def _job_name(self, job_name: str | None) -> str:
        if job_name is not None:
            return validate_job_name(job_name)
        base = self.base_job_name or base_name_from_image(self.training_image_uri())
        return name_from_base(base)

    def _default_output_path(self) -> tuple[str, bool]:
        """(output_path, whether it came from the session's default bucket and prefix)."""
        if self.output_path is not None:
            return self.output_path, False
        if self.is_local:
            return local_home_uri("output") + "/", False
        session = self.session
        prefix = session.default_bucket_prefix
        path = f"s3://{session.default_bucket_name()}/"
        if prefix:
            path += prefix.strip("/") + "/"
        return path, True

    def _code_location(self, output_path: str, from_default: bool) -> tuple[str, str]:
        """(bucket-or-file-root, key prefix) under which the code tarball is stored."""
        if self.code_location is not None:
            location = self.code_location
        elif self.is_local and not output_path.startswith("s3://"):
            return local_home_uri(), ""
        elif output_path.startswith("s3://") and from_default:
            location = output_path
        elif output_path.startswith("s3://"):
            bucket, _ = parse_s3_uri(output_path, argument="output_path")
            return bucket, ""
        else:
            location = output_path
        if location.startswith("s3://"):
            bucket, key = parse_s3_uri(location, argument="code_location")
            return bucket, key.strip("/")
        return location.rstrip("/"), ""

    def _package(self) -> Any:
        return code.package_code(self.entry_point, self.source_dir, self.dependencies)

    def _code_uri(self, bundle: Any, root: str, prefix: str) -> str:
        if root.startswith("file://"):
            return f"{root}/source/{bundle.sha256}/sourcedir.tar.gz"
        return code.code_s3_uri(root, prefix, bundle)

    def _plan(self, inputs: Any, job_name: str | None) -> tuple[JobPlan, Any, str | None]:
        """Resolve everything and build the job's plan: (plan, code bundle, code URI).

        Where the job runs and on which hosts comes first
        (:func:`launchbay.backends.plan.resolve_resources`): a local job this
        machine cannot run (too many ranks, too few GPUs) is refused before its
        code is packaged, and the GPUs are looked for once.
        """
        resources = self.resources()
        name = self._job_name(job_name)
        region = self._region()
        output_path, from_default = self._default_output_path()
        image = self.training_image_uri()

        bundle = code_uri = None
        script_hps: dict[str, Any] = {}
        if self.entry_point is not None:
            if isinstance(self.source_dir, str) and self.source_dir.startswith("s3://"):
                code_uri = self.source_dir
                script = self.entry_point
            else:
                bundle = self._package()
                root, prefix = self._code_location(output_path, from_default)
                code_uri = self._code_uri(bundle, root, prefix)
                script = bundle.script_name
            script_hps = {
                HP.SUBMIT_DIRECTORY: (
                    NETWORK_ISOLATION_CODE_PATH if self.enable_network_isolation() else code_uri
                ),
                HP.PROGRAM: script,
                HP.CONTAINER_LOG_LEVEL: self.container_log_level,
                HP.JOB_NAME: name,
                HP.REGION: region,
            }

        hyperparameters = self.hyperparameters()
        hyperparameters.update({k: json.dumps(v) for k, v in script_hps.items()})
        hyperparameters.update(
            {k: json.dumps(v) for k, v in self.distribution_config.to_hyperparameters().items()}
        )
        hyperparameters.update(
            {k: json.dumps(v) for k, v in self._extra_hyperparameters(name, output_path).items()}
        )

        channels = channels_from_inputs(inputs, allow_file=self.is_local)
        extra_channels = []
        if self.model_uri:
            extra_channels.append(
                (self.model_channel_name, self.model_uri, "application/x-sagemaker-model", "File")
            )
        if self.enable_network_isolation() and code_uri is not None:
            extra_channels.append(("code", code_uri, None, None))
        for channel_name, uri, content_type, mode in extra_channels:
            channels = _request.add_channel(channels, channel_name, uri, content_type, mode)

        input_mode = self.input_mode
        if inputs is not None and hasattr(inputs, "config") and "InputMode" in inputs.config:
            input_mode = inputs.config["InputMode"]

        request = _request.build_request(
            self._request_spec(
                job_name=name,
                role=self._role_arn(),
                image_uri=image,
                input_mode=input_mode,
                hyperparameters=hyperparameters,
                channels=channels,
                output_path=output_path,
                enable_sagemaker_metrics=self._sagemaker_metrics(),
                enable_network_isolation=self.enable_network_isolation(),
                debug_hook_config=self._debug_hook_request(region, output_path),
                profiler_config=self._profiler_request(region, output_path),
            )
        )
        # The defaults files' volume KMS key and tags, merged as SDK v2's session does.
        request = _sagemaker_config.apply_to_request(
            request, _sagemaker_config.config_for(self.sagemaker_session)
        )
        self._check_request(request)
        return plan_request(request, resources=resources), bundle, code_uri

    def _request_spec(self, **resolved: Any) -> _request.RequestSpec:
        """The request spec: the fields this estimator's arguments fill, and what was resolved.

        The argument -> request field mapping is the declaration's
        (:func:`launchbay.arguments.request_fields`), for the dry check at
        construction and for :meth:`_plan`.
        """
        return _request.RequestSpec(fields=arguments.request_fields(self), **resolved)

    def _check_request(self, request: dict[str, Any]) -> None:
        """The finished request against what CreateTrainingJob accepts."""
        hyperparameters = request.get("HyperParameters") or {}
        if len(hyperparameters) > 100:
            added = sorted(set(hyperparameters) - set(self._hyperparameters))
            raise ConfigurationError(
                f"Invalid hyperparameters: {len(self._hyperparameters)} given, and launchbay adds "
                f"{len(added)} for the job ({', '.join(added)}), {len(hyperparameters)} in all. "
                "Accepted: at most 100 hyperparameters in all (CreateTrainingJob HyperParameters); "
                f"give at most {100 - len(added)}.",
                argument="hyperparameters",
                value=len(self._hyperparameters),
            )
        _request_rules.check_request(request, local=self.is_local)

    def resources(self) -> Resources:
        """Where the jobs run and on which hosts; refuses a local job this machine cannot run.

        :func:`launchbay.backends.plan.resolve_resources` for this estimator's
        instance type and count (or groups) and its distribution's processes per
        host (named in errors by its key), without building a request: what
        ``launchbay validate`` checks, and the first step of the dry run and ``fit()``.

        Raises:
            ConfigurationError: more ranks than this machine runs, or too few GPUs
                for a local job (docs/local.md).
        """
        config = self.distribution_config
        per_host, where = None, None
        for section, sub in (("torch_distributed", config.torch_distributed),
                             ("smdistributed", config.dataparallel), ("mpi", config.mpi)):  # fmt: skip
            if sub is not None and sub.processes_per_host:
                per_host = sub.processes_per_host
                where = (
                    "distribution['smdistributed']['dataparallel']['processes_per_host']"
                    if section == "smdistributed"
                    else f"distribution[{section!r}]['processes_per_host']"
                )
                break
        if self.instance_groups:
            resources: dict[str, Any] = {
                "InstanceGroups": [g.to_request_dict() for g in self.instance_groups]
            }
        else:
            resources = {"InstanceType": self.instance_type, "InstanceCount": self.instance_count}
        return resolve_resources(resources, per_host, processes_argument=where)

    def _backend(self, plan: JobPlan) -> Any:
        """The backend the plan is placed on, with this estimator's session."""
        session = self.sagemaker_session if plan.local else self.session
        return backends.backend_for_plan(plan, session)

    def _region(self) -> str:
        if self.is_local and self.sagemaker_session is None:
            # Local runs need no AWS: take the configured region if any, never ask boto3.
            return (
                os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
            )
        return self.session.boto_region_name

    def _role_arn(self) -> str:
        if self.role is None:
            return "arn:aws:iam::000000000000:role/launchbay-local"
        if "/" in self.role or self.is_local:
            return self.role
        return self.session.expand_role(self.role)

    def _sagemaker_metrics(self) -> bool | None:
        return self.enable_sagemaker_metrics

    def _debugger_allowed(self) -> bool:
        """Framework rules that turn the default debugger hook off."""
        return True

    def _debug_hook_request(self, region: str, output_path: str) -> dict[str, Any] | None:
        config = self.debugger_hook_config
        if region.lower() in DEBUGGER_UNSUPPORTED_REGIONS:
            if config:
                raise ConfigurationError(
                    f"debugger_hook_config is set, but SageMaker Debugger is not available in "
                    f"region {region!r}. Accepted: debugger_hook_config=False in that region, or "
                    "a region outside " + ", ".join(DEBUGGER_UNSUPPORTED_REGIONS) + ".",
                    argument="debugger_hook_config",
                    value=config,
                )
            return None
        if config is False or not self._debugger_allowed():
            return None
        return (config or DebuggerHookConfig()).to_request_dict(output_path)

    def _profiler_request(self, region: str, output_path: str) -> dict[str, Any]:
        disabled = (
            self.disable_profiler
            or region.lower() in PROFILER_UNSUPPORTED_REGIONS
            or any(t.startswith("ml.trn") for t in self._instance_types())
        )
        if disabled:
            return {"DisableProfiler": True}
        return {"S3OutputPath": output_path, "DisableProfiler": False}

    def _instance_types(self) -> list[str]:
        if self.instance_groups:
            return [g.instance_type for g in self.instance_groups]
        return [self.instance_type]

    def create_training_job_request(
        self, inputs: Any = None, job_name: str | None = None
    ) -> dict[str, Any]:
        """The exact CreateTrainingJob request ``fit()`` would send; uploads nothing.

        The code tarball is packaged in memory to compute its content hash, which
        names its S3 key; nothing is written to S3 and no bucket is created.
        """
        plan, _, _ = self._plan(inputs, job_name)
        self._backend(plan).check(plan)  # the refusals fit() would meet, before anything starts
        return dict(plan.request)

    # -- running -----------------------------------------------------------------

    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: str | bool | None = "All",
        job_name: str | None = None,
    ) -> Any:
        """Stage code and start the training job; with ``wait`` follow it to the end.

        Args:
            inputs: Channels: an S3 URI, a :class:`~launchbay.inputs.TrainingInput`,
                or a dict of channel name to either.
            wait: Follow the job until it ends (status changes and logs); with
                ``False``, return as soon as the job is created.
            logs: SDK v2's values: ``"All"``/``True`` shows every host's log lines
                with the status, ``"None"``/``False``/``None`` the status only.
            job_name: The job's name (default: base name plus a timestamp).

        Returns the :class:`launchbay.job.TrainingJob` handle (also kept as
        ``latest_training_job``).

        Raises:
            JobFailedError: with ``wait``, the job ended Failed or Stopped; it
                carries the failure reason and the failing host's last log lines.
        """
        show_logs(logs)  # a bad value fails before anything is submitted
        if inputs is None:  # an estimator from a job spec keeps the spec's inputs and name
            inputs = self.spec_inputs
        if job_name is None:
            job_name = self.spec_job_name
        plan, bundle, code_uri = self._plan(inputs, job_name)
        if plan.placement.instance_type == LOCAL_PROCESS:
            self._check_installed_framework()
        backend = self._backend(plan)
        backend.check(plan)  # every refusal before the code is staged
        self._stage(dict(plan.request), bundle, code_uri)
        job = backend.run(plan)
        self.latest_training_job = job
        self._current_job_name = job.name
        if wait:
            job.wait(logs=logs)
        return job

    def _check_installed_framework(self) -> None:
        """local_process runs this Python: warn when its framework differs from the asked one."""
        import importlib.metadata

        framework = self._framework_name
        wanted = getattr(self, "framework_version", None)
        if not framework or not wanted:
            return
        package = {"pytorch": "torch", "tensorflow": "tensorflow"}[framework]
        # The module comes from several distributions (tensorflow-cpu on PyPI, ...).
        installed = None
        for distribution in _FRAMEWORK_DISTRIBUTIONS[package]:
            try:
                installed = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        if installed is None:
            warnings.warn(
                f"framework_version={wanted!r} asks for {framework}, but {package} is not "
                "installed in this Python; the local_process job runs here.",
                UserWarning,
                stacklevel=3,
            )
            return
        want = version_tuple(wanted)
        if version_tuple(installed)[: len(want)] != want:
            warnings.warn(
                f"framework_version={wanted!r} but this Python has {package} {installed}; the "
                "local_process job runs with the installed version.",
                UserWarning,
                stacklevel=3,
            )

    def _stage(self, request: dict[str, Any], bundle: Any, code_uri: str | None) -> None:
        """Create the default bucket if the job uses it, and store the code once."""
        output = request["OutputDataConfig"]["S3OutputPath"]
        s3_code = bundle is not None and is_s3_uri(code_uri)
        buckets = {parse_s3_uri(output, argument="output_path")[0]} if is_s3_uri(output) else set()
        if s3_code:
            buckets.add(parse_s3_uri(code_uri, argument="code_location")[0])
        if buckets and (self.output_path is None or self.code_location is None):
            if self.session.default_bucket_name() in buckets:
                self.session.default_bucket()
        if s3_code:
            code_bucket = parse_s3_uri(code_uri, argument="code_location")[0]
            same_bucket = is_s3_uri(output) and parse_s3_uri(output)[0] == code_bucket
            kms_key = self.output_kms_key if same_bucket else None
            code.stage_code(self.session, bundle, code_uri, kms_key=kms_key)
        elif bundle is not None and code_uri and code_uri.startswith("file://"):
            code.stage_code_file(bundle, code_uri)

    @property
    def model_data(self) -> str | None:
        """The model artifact URI of the latest job (``.../output/model.tar.gz``).

        ``None`` before any job, or for a failed job that left no artifact.
        """
        if self.latest_training_job is None:
            return None
        return self.latest_training_job.model_data

    def latest_job_debugger_artifacts_path(self) -> str | None:
        """Where the latest job's debugger hook output went: ``<S3OutputPath>/<job>/debug-output``.

        ``S3OutputPath`` is the request's ``DebugHookConfig`` one (the hook config's
        ``s3_output_path``, else the job's ``output_path``). An ``s3://`` URI is returned as
        is; for a ``file://`` one (where local jobs copied every host's tensors) the plain
        local path is returned, so that ``smdebug.trials.create_trial(path)`` reads it as
        SDK v2 users call it. ``None`` when the job ran without a debugger hook config.

        Raises:
            ConfigurationError: no job has run from this estimator yet.
        """
        if self.latest_training_job is None:
            raise ConfigurationError.invalid(
                "latest_training_job",
                None,
                "a job started by fit() (or attach()) before asking for its debugger artifacts",
            )
        hook = self.latest_training_job.describe().get("DebugHookConfig") or {}
        target = hook.get("S3OutputPath")
        if not target:
            return None
        path = "/".join([target.rstrip("/"), self.latest_training_job.name, "debug-output"])
        return path.removeprefix("file://")

    @classmethod
    def attach(
        cls,
        training_job_name: str,
        sagemaker_session: Any = None,
        model_channel_name: str = "model",
    ) -> Any:
        """Rebuild an estimator from a running or finished SageMaker training job.

        The job's description gives back the arguments (see
        :mod:`launchbay._attach`): ``create_training_job_request(job_name=<same
        name>)`` of the result reproduces the job's request, and
        ``latest_training_job`` is the job, so ``.wait()``, ``.model_data`` and
        ``.stop()`` work.

        Args:
            training_job_name: The job's name.
            sagemaker_session: The :class:`launchbay.Session` (default: a new one).
            model_channel_name: The channel that carried ``model_uri``, if any.

        Raises:
            JobError: the job cannot be described (no such job, no permission).
            ConfigurationError: the job ran another framework's image.
        """
        return _attach.attach(cls, training_job_name, sagemaker_session, model_channel_name)

    # -- job specs (YAML) ----------------------------------------------------------

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], **overrides: Any) -> EstimatorBase:
        """Build the estimator a YAML job spec describes (see docs/jobspec.md).

        ``Estimator.from_yaml`` returns the class the spec names (``framework:
        pytorch`` -> :class:`~launchbay.pytorch.PyTorch`, ``tensorflow`` ->
        :class:`~launchbay.tensorflow.TensorFlow`, else the generic
        :class:`Estimator`); ``PyTorch.from_yaml`` insists on its framework.
        ``${VAR}`` references are filled from the environment and relative paths
        resolve against the spec file's directory. ``overrides`` are estimator
        arguments that replace the spec's (``instance_type="local_process"``,
        ``sagemaker_session=...``; ``inputs``/``job_name`` too).

        The spec's ``inputs`` and ``job_name`` are kept as ``spec_inputs`` and
        ``spec_job_name``, which ``fit()`` uses when it is given none.

        Raises:
            launchbay.jobspec.JobSpecError: the spec is invalid; the message names
                the file, line and key path of each problem.
        """
        return cls.from_spec(jobspec.load(path), **overrides)

    @classmethod
    def from_spec(
        cls, spec: jobspec.JobSpec, *, resolve_vpc: bool = True, **overrides: Any
    ) -> EstimatorBase:
        """Make the estimator a loaded :class:`~launchbay.jobspec.JobSpec` describes.

        ``overrides`` are estimator arguments (and ``inputs``/``job_name``).
        ``vpc: {stack: NAME}`` becomes ``vpc_config`` by reading the stack now (an
        AWS call), unless ``resolve_vpc`` is false (then the estimator has no VPC:
        what ``launchbay validate`` checks) or ``vpc_config`` is among ``overrides``.

        Raises:
            JobSpecError: the spec names another framework, or the estimator refused
                an argument (located at its key).
            ProvisioningError: the ``vpc`` stack is missing or unusable.
        """
        chosen = _spec_class(spec, cls)
        inputs = overrides.pop("inputs") if "inputs" in overrides else spec.inputs()
        job_name = overrides.pop("job_name", None) or spec.job_name
        kwargs = spec.estimator_kwargs()
        if resolve_vpc and spec.vpc_stack is not None and "vpc_config" not in overrides:
            kwargs["vpc_config"] = spec.vpc_config(session=overrides.get("sagemaker_session"))
        kwargs.update(overrides)
        try:
            estimator = chosen(**kwargs)
        except ConfigurationError as exc:
            raise spec.error_for(exc) from exc
        estimator.spec_inputs = inputs
        estimator.spec_job_name = job_name
        return estimator

    def to_yaml(self, path: str | os.PathLike[str]) -> None:
        """Write this estimator as a YAML job spec that :meth:`from_yaml` reads back.

        Arguments at their default are left out; paths under the spec's directory
        are written relative to it; ``spec_inputs``/``spec_job_name`` are included
        when set. The session is not part of a spec.
        """
        directory = os.path.dirname(os.path.abspath(os.fspath(path)))
        jobspec.dump(jobspec.spec_from_estimator(self, directory), path)


class Estimator(EstimatorBase):
    """The generic estimator: any training image (``image_uri`` required).

    As in SDK v2, hyperparameters are JSON-encoded when ``source_dir`` is given and
    sent with ``str()`` otherwise. ``distribution`` is accepted too (SDK v2 silently
    drops it here): an image running the launchbay runtime or the SageMaker training
    toolkit honours it.
    """

    _owners = (arguments.BASE, arguments.ESTIMATOR)
    _positional = ("image_uri", "role", "instance_count", "instance_type")

    def _encode_user_hyperparameter(self, value: Any) -> str:
        return json.dumps(value) if self.source_dir else str(value)


class Framework(EstimatorBase):
    """Base of the framework estimators: script mode, official images, version rules."""

    _owners = (arguments.BASE, arguments.FRAMEWORK)
    _positional = (
        "entry_point",
        "framework_version",
        "py_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
    )
    _metrics_min_version: tuple[int, ...] = ()

    def _sagemaker_metrics(self) -> bool | None:
        if self.enable_sagemaker_metrics is not None:
            return self.enable_sagemaker_metrics
        if (
            self.framework_version
            and version_tuple(self.framework_version) >= self._metrics_min_version
        ):
            return True
        return None

    def _debugger_allowed(self) -> bool:
        # SDK v2: smdebug does not support distributed jobs with checkpointing; its
        # framework estimators always count as "distributed" here.
        return not (self.checkpoint_s3_uri and self.checkpoint_local_path)

    def training_image_uri(self) -> str:
        if self.image_uri:
            return self.image_uri
        if self.is_local:
            # Local runs use the images `launchbay images build` makes (local_process
            # runs no image at all; the name only documents the environment).
            processor = "gpu" if self.instance_type == LOCAL_GPU else "cpu"
            return (
                f"launchbay/{self._framework_name}-training:"
                f"{self.framework_version}-{processor}-{self.py_version}"
            )
        return image_uris.training_image_uri(
            self._framework_name,
            self.framework_version,
            self.py_version,
            self._instance_types()[0],
            self._region(),
            distribution=self.distribution,
        )


def _local_before_checks(raw: Mapping[str, Any]) -> bool:
    """Whether the arguments as given ask for a local job (before they are checked).

    The rule of :func:`launchbay.plan.place`; arguments it cannot read yet (a
    wrong type) count as not local, and their own check names them.
    """
    try:
        return place(raw.get("instance_type"), raw.get("instance_groups")).local
    except (ConfigurationError, TypeError, AttributeError):
        return raw.get("instance_type") in LOCAL_INSTANCE_TYPES


def local_home_uri(*parts: str) -> str:
    """``file://`` URI under the local root: ``$LAUNCHBAY_HOME`` or ``~/.launchbay``."""
    return "file://" + os.path.join(usable_local_home(), *parts)  # refuses an unusable one


#: Framework estimators by the job spec's ``framework``: imported when a spec names one.
#: (The framework modules import this one; importing them here, lazily, is the one
#: place this module reaches up a layer.)
FRAMEWORK_CLASSES = {
    "pytorch": ("launchbay.pytorch", "PyTorch"),
    "tensorflow": ("launchbay.tensorflow", "TensorFlow"),
}


def _spec_class(spec: jobspec.JobSpec, requested: type) -> type[EstimatorBase]:
    """The estimator class ``spec`` asks for, checked against the class ``from_yaml`` was called on."""
    import importlib

    if spec.framework in FRAMEWORK_CLASSES:
        module, name = FRAMEWORK_CLASSES[spec.framework]
        chosen: type[EstimatorBase] = getattr(importlib.import_module(module), name)
    else:
        chosen = Estimator
    if requested in (EstimatorBase, Estimator, Framework):
        if requested is Framework and not spec.framework:
            raise jobspec.JobSpecError(
                [spec.problem((), "Framework.from_yaml needs framework: pytorch or tensorflow")]
            )
        return chosen
    wanted = requested._framework_name  # type: ignore[attr-defined]
    if wanted == spec.framework or (
        spec.framework is None and (wanted is not None or issubclass(requested, Estimator))
    ):
        return requested
    raise jobspec.JobSpecError(
        [
            spec.problem(
                ("framework",),
                f"{requested.__name__}.from_yaml cannot build framework: {spec.framework}. "
                "Use Estimator.from_yaml to build whatever the spec describes.",
            )
        ]
    )
