"""Every estimator argument, declared once.

Each :class:`Argument` says, in one place, everything the SDK needs to know
about one argument of :class:`~launchbay.estimator.EstimatorBase` or its
subclasses:

* its name, its default, and which class declares it (``owner``);
* its SDK v1 alias, if any (``train_instance_count`` -> ``instance_count``);
* its *kind*: what a value may be. A kind gives the check the constructor
  runs (with an error naming the argument, the value and what is accepted),
  the JSON Schema of the job-spec key of the same name, and the type of the
  stored value, which the estimator classes declare as an annotation so that
  mypy and editors see the bound attribute (a test keeps the two equal). The
  kinds and checkers are in :mod:`launchbay._kinds`;
* the CreateTrainingJob field it fills (``request``), a dotted path, with how a
  value is written there and read back from a DescribeTrainingJob response;
* how it is written to and read from a YAML job spec, where that is not the
  value itself.

Everything else is derived from :data:`ARGUMENTS`:

* the constructor's per-argument checks, v1 aliases, unknown-name errors and
  ``inspect.signature`` of every estimator class (:func:`bind`, :func:`signature`);
* the ``properties`` of the job-spec schema (:func:`spec_properties`; the file
  ``schemas/jobspec.schema.json`` is its rendering, kept equal by a test);
* ``to_yaml`` / ``from_yaml`` (:func:`to_spec`, :func:`from_spec`);
* the request fields of the request builder (:func:`request_fields`,
  :func:`launchbay._request.build_request`) and ``attach``
  (:func:`from_description`).

Rules that involve several arguments (``instance_groups`` or the pair
``instance_count``/``instance_type``, spot training and ``max_wait``, ...) are
code, in one place: :func:`launchbay._rules.check_rules`.

Adding an argument that fills a request field is one :class:`Argument` entry.
"""

from __future__ import annotations

import copy
import inspect
import logging
import reprlib
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from launchbay._kinds import (  # the kinds and checkers; the public ones re-exported
    JOB_NAME_ACCEPTED,
    JOB_NAME_PATTERN,
    LOCAL_OR_ML_INSTANCE_TYPE_PATTERN,
    LOG_LEVELS,
    MISSING,
    Bool,
    Context,
    Custom,
    Enum,
    Int,
    Kind,
    Path,
    SpecContext,
    Str,
    StrList,
    Uri,
    attach_set,
    attach_true,
    attach_truthy,
    check_checkpoint_local_path,
    check_debugger,
    check_dependencies,
    check_environment,
    check_hyperparameters,
    check_instance_groups,
    check_instance_type,
    check_json,
    check_log_level,
    check_metric_definitions,
    check_model_dir,
    check_role,
    check_tensorboard,
    check_version,
    debugger_from_description,
    debugger_from_spec,
    debugger_to_spec,
    dependencies_to_spec,
    entry_point_to_spec,
    environment_from_spec,
    format_tags,
    groups_from_request,
    groups_from_spec,
    groups_to_request,
    groups_to_spec,
    is_uri,
    log_level_from_spec,
    positive_int,
    relative,
    source_dir_to_spec,
    str_list,
    tags_from_spec,
    tags_to_spec,
    tensorboard_from_description,
    tensorboard_from_spec,
    tensorboard_to_spec,
    true_only,
)
from launchbay.debugger import ProfilerConfig, TensorBoardOutputConfig
from launchbay.debugger.requests import check_rules
from launchbay.debugger.spec import (
    PROFILER_SCHEMA,
    RULES_SCHEMA,
    profiler_from_spec,
    profiler_to_spec,
    rules_from_spec,
    rules_to_spec,
)
from launchbay.errors import ConfigurationError, UnknownArgumentError
from launchbay.inputs import INPUT_MODES

__all__ = [
    "ARGUMENTS",
    "Argument",
    "MISSING",
    "Kind",
    "bind",
    "check",
    "check_json",
    "declared",
    "from_description",
    "from_spec",
    "is_uri",
    "positive_int",
    "relative",
    "request_fields",
    "signature",
    "spec_properties",
    "str_list",
    "to_spec",
    "bound_values",
]


# SDK v2 arguments launchbay deliberately leaves out: an error says so, rather than
# "unknown argument", so a notebook author knows what to remove.
UNSUPPORTED_V2_ARGUMENTS = {
    "git_config": "clone the repository yourself and pass source_dir",
    "compiler_config": "SageMaker Training Compiler",
    "training_recipe": "training recipes",
    "recipe_overrides": "training recipes",
    "training_repository_access_mode": "private Docker registry images",
    "training_repository_credentials_provider_arn": "private Docker registry images",
    "enable_infra_check": "infrastructure check jobs",
    "enable_remote_debug": "remote debugging",
    "enable_session_tag_chaining": "session tag chaining",
    "training_plan": "training plans",
    "instance_placement_config": "UltraServer placement",
}


#: Keywords public notebooks pass to an estimator that SDK v2 takes into ``**kwargs``
#: and drops without a word (the request has no trace of them). A closed list: they
#: are accepted and dropped too, with a warning that says v2 ignores them as well and
#: names what was probably meant; any other unknown keyword stays an error.
IGNORED_AS_IN_V2 = {
    "env": "environment= (the training container's environment variables)",
    "job_name": "fit(job_name=...) (or base_job_name= for the prefix of generated names)",
    "wait": "fit(wait=...)",
    "logs": "fit(logs=...)",
    "training_steps": "hyperparameters={'training_steps': ...} (SDK v1's TensorFlow argument)",
    "evaluation_steps": "hyperparameters={'evaluation_steps': ...} (SDK v1's TensorFlow argument)",
    "model_dir": "the script saving to SM_MODEL_DIR (/opt/ml/model), which is uploaded "
    "to output_path; hyperparameters={'model_dir': ...} passes a value to the script",
    "region": "sagemaker_session=Session(region_name=...)",
    "num_classes": "hyperparameters={'num_classes': ...}",
    "keep_alive_time_in_seconds": "keep_alive_period_in_seconds=",
    "transformers_version": "the HuggingFace estimator, which takes transformers_version=",
}


def _drop_ignored(owner: str, kwargs: dict[str, Any], names: set[str], stacklevel: int) -> None:
    """Pop the :data:`IGNORED_AS_IN_V2` keywords ``owner`` does not take, warning for each."""
    for name in [n for n in kwargs if n in IGNORED_AS_IN_V2 and n not in names]:
        value = kwargs.pop(name)
        warnings.warn(
            f"{owner}() ignores {name}={reprlib.repr(value)}, as SageMaker SDK v2 does (its "
            f"estimators drop keywords they do not know): nothing of it is sent. "
            f"You probably meant {IGNORED_AS_IN_V2[name]}.",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


# --------------------------------------------------------------------------- the declaration

BASE, FRAMEWORK, ESTIMATOR, TENSORFLOW = "EstimatorBase", "Framework", "Estimator", "TensorFlow"
#: The HuggingFace estimator's own arguments; the image region SKLearn and XGBoost take.
HUGGINGFACE, IMAGE_REGION = "HuggingFace", "ImageRegion"


class Argument:
    """One estimator argument (see the module docstring).

    Attributes:
        name: The keyword (and job-spec key).
        kind: What a value may be: the constructor check and the spec schema.
        doc: One sentence: the schema's ``description`` and the docs.
        default: The value when not given.
        owner: The class that declares it (subclasses inherit it).
        v1: SDK v1's name for it (accepted with a DeprecationWarning).
        attr: The attribute it is stored in (default: ``name``).
        request: The CreateTrainingJob field it fills, as a dotted path; None when
            the estimator resolves the field itself (hyperparameters, role ...).
        to_request: stored value -> request value (None: the field is left out).
        from_request: described value -> argument value (MISSING: not given).
        resolved: The estimator resolves the field's value (with the region, the
            output path, the framework ...); ``request`` then only serves attach.
        in_spec: Whether a job spec may carry it.
        to_spec: stored value -> spec value; from_spec: spec value -> argument value.
        example: A valid non-default value (the derived tests use it).
    """

    __slots__ = (
        "attr",
        "default",
        "doc",
        "example",
        "from_request",
        "from_spec",
        "in_spec",
        "kind",
        "name",
        "owner",
        "request",
        "resolved",
        "to_request",
        "to_spec",
        "v1",
    )

    def __init__(
        self,
        name: str,
        kind: Kind,
        doc: str,
        *,
        default: Any = None,
        owner: str = BASE,
        v1: str | None = None,
        attr: str | None = None,
        request: str | None = None,
        to_request: Callable[[Any], Any] | None = None,
        from_request: Callable[[Any], Any] = attach_set,
        resolved: bool = False,
        in_spec: bool = True,
        to_spec: Callable[[Any, SpecContext], Any] | None = None,
        from_spec: Callable[[Any], Any] | None = None,
        example: Any = MISSING,
    ) -> None:
        self.name, self.kind, self.doc, self.default = name, kind, doc, default
        self.owner, self.v1, self.attr = owner, v1, attr
        self.request, self.to_request, self.from_request = request, to_request, from_request
        self.resolved, self.in_spec = resolved, in_spec
        self.to_spec, self.from_spec, self.example = to_spec, from_spec, example

    def __repr__(self) -> str:
        return f"Argument({self.name!r})"

    @property
    def attribute(self) -> str:
        return self.attr or self.name

    @property
    def type(self) -> str:
        """The stored value's type: the annotation of :attr:`attribute` on the estimator classes."""
        return self.kind.type


# The job-spec form of the arguments whose values are structures.
_URI = {"type": "string", "pattern": "^(s3|file)://.", "x-accepted": "an s3:// URI"}
_SCALARS = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}
_INSTANCE_TYPE = {
    "type": "string",
    "pattern": LOCAL_OR_ML_INSTANCE_TYPE_PATTERN,
    "x-accepted": "an ml.* instance type such as 'ml.m5.xlarge', or 'local_process', 'local', "
    "'local_gpu'",
}
_INSTANCE_GROUPS = {
    "type": "array", "minItems": 1, "items": {
        "type": "object", "additionalProperties": False,
        "required": ["instance_group_name", "instance_type", "instance_count"],
        "properties": {
            "instance_group_name": {"type": "string", "minLength": 1},
            "instance_type": _INSTANCE_TYPE,
            "instance_count": {"type": "integer", "minimum": 1}}}}  # fmt: skip
_TAGS = {"anyOf": [
    _SCALARS,
    {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["Key", "Value"],
        "properties": {"Key": {"type": "string"}, "Value": {"type": "string"}}}}]}  # fmt: skip
_METRICS = {"type": "array", "items": {
    "type": "object", "additionalProperties": False, "required": ["Name", "Regex"],
    "properties": {"Name": {"type": "string"}, "Regex": {"type": "string"}}}}  # fmt: skip
_DEBUGGER = {"anyOf": [{"type": "boolean"}, {
    "type": "object", "additionalProperties": False, "properties": {
        "s3_output_path": _URI,
        "container_local_output_path": {"type": "string"},
        "hook_parameters": _SCALARS,
        "collection_configs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1},
                           "parameters": _SCALARS}}}}}]}  # fmt: skip
_TENSORBOARD = {
    "type": "object", "additionalProperties": False, "required": ["s3_output_path"],
    "properties": {
        "s3_output_path": _URI,
        "container_local_output_path": {
            "type": "string", "pattern": "^/",
            "x-accepted": "an absolute path such as /opt/ml/output/tensorboard"}}}  # fmt: skip
_STRING = {"type": "string"}
_NON_EMPTY = {"type": "string", "minLength": 1}


def _check_rules(name: str, value: Any, ctx: Context) -> Any:
    return check_rules(name, value)


def _check_profiler(name: str, value: Any, ctx: Context) -> Any:
    if value is None:
        return None
    if not isinstance(value, ProfilerConfig):
        raise ConfigurationError.invalid(name, value, "a ProfilerConfig (from launchbay.debugger)")
    if not ctx.local and str(value.s3_output_path or "")[:7].lower() == "file://":
        raise ConfigurationError.invalid(
            f"{name}.s3_output_path",
            value.s3_output_path,
            "an s3:// URI (file:// only for local_process, local and local_gpu jobs)",
        )
    return value


def _no_compiler(name: str, value: Any, ctx: Context) -> Any:
    """SageMaker Training Compiler (another image, its own hyperparameters) is out of scope."""
    if value is not None:
        raise ConfigurationError.invalid(
            name,
            value,
            "None (leave it out)",
            reason="SageMaker Training Compiler is out of scope for launchbay: its images, "
            "hyperparameters and launcher (pytorchxla) are not reproduced",
        )
    return value


A = Argument
# fmt: off
ARGUMENTS: tuple[Argument, ...] = (
    # -- what runs
    A("image_uri", Str("a Docker image URI"),
      "Training image URI. Required without framework; with framework it replaces the "
      "official image.",
      v1="image_name", request="AlgorithmSpecification.TrainingImage",
      resolved=True, from_request=lambda v: MISSING,  # training_image_uri(); attach: by hand
      example="123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image:1"),
    A("framework_version", Custom(_NON_EMPTY, check_version, type="str | None"),
      "Framework version, e.g. '2.3' (quote it: 2.10 unquoted is the number 2.1).",
      owner=FRAMEWORK, example="2.3"),
    A("py_version", Custom({"type": "string", "pattern": "^py[0-9]+$",
                            "x-accepted": "a Python version tag such as 'py311'"}, check_version,
                           type="str | None"),
      "Python version tag of the image, e.g. py311.", owner=FRAMEWORK, example="py311"),
    A("entry_point", Path("the path of a local script (a str or os.PathLike)"),
      "The training script: relative to source_dir when that is given, else to the spec "
      "file's directory.", to_spec=entry_point_to_spec),
    A("source_dir", Path("the path of a local directory (a str or os.PathLike), or an s3:// "
                         "URI of a sourcedir.tar.gz"),
      "Directory packaged as sourcedir.tar.gz (relative to the spec file's directory), or the "
      "s3:// URI of an archive already staged.", to_spec=source_dir_to_spec),
    A("dependencies", Custom(StrList().schema, check_dependencies, type="list[str]"),
      "Extra files or directories put at the archive root (relative to the spec file's "
      "directory).", to_spec=dependencies_to_spec),
    # -- identity and resources
    A("role", Custom(_NON_EMPTY, check_role, type="str | None"),
      "IAM role ARN (or role name) SageMaker assumes. Required for ml.* instance types; "
      "optional locally.", request="RoleArn", resolved=True),
    A("instance_type", Custom(_INSTANCE_TYPE, check_instance_type, type="str | None"),
      "An ml.* instance type (a SageMaker job), local_process / local / local_gpu (this "
      "machine) or ray (a Ray cluster, docs/ray.md).", v1="train_instance_type", request="ResourceConfig.InstanceType"),
    A("instance_count", Int(minimum=1), "Number of instances (hosts). Default 1.",
      v1="train_instance_count", request="ResourceConfig.InstanceCount"),
    A("instance_groups", Custom(_INSTANCE_GROUPS, check_instance_groups,
                                     type="list[InstanceGroup] | None"),
      "Heterogeneous cluster: instance groups instead of instance_type/instance_count.",
      request="ResourceConfig.InstanceGroups", to_request=groups_to_request,
      from_request=groups_from_request, to_spec=groups_to_spec, from_spec=groups_from_spec),
    A("keep_alive_period_in_seconds", Int(minimum=0, maximum=21600),
      "Warm pool keep-alive period (0-21600 seconds).",
      request="ResourceConfig.KeepAlivePeriodInSeconds", example=600),
    A("volume_size", Int(minimum=0), "EBS volume size in GB (default 30).", default=30,
      v1="train_volume_size", request="ResourceConfig.VolumeSizeInGB", example=100),
    A("volume_kms_key", Custom(_STRING, type="str | None"), "KMS key for the training volume.",  # checked as sent
      v1="train_volume_kms_key", request="ResourceConfig.VolumeKmsKeyId",
      from_request=attach_truthy, example="arn:aws:kms:us-west-2:123456789012:key/volume"),
    A("max_run", Int(minimum=1), "Maximum run time in seconds (default 86400).",
      default=24 * 60 * 60, v1="train_max_run", request="StoppingCondition.MaxRuntimeInSeconds",
      from_request=attach_truthy, example=3600),
    A("input_mode", Enum(values=INPUT_MODES), "Default input mode of the channels.",
      default="File", request="AlgorithmSpecification.TrainingInputMode", resolved=True,
      from_request=lambda v: v or "File", example="FastFile"),
    # -- locations
    A("output_path", Uri(), "Where model.tar.gz and output.tar.gz go (s3://, or file:// for "
      "local runs). Default: the session's default bucket (local: $LAUNCHBAY_HOME/output).",
      request="OutputDataConfig.S3OutputPath", resolved=True, example="s3://bucket/output"),
    A("output_kms_key", Custom(_STRING, type="str | None"), "KMS key for the outputs.",  # checked as sent
      request="OutputDataConfig.KmsKeyId", from_request=attach_truthy,
      example="arn:aws:kms:us-west-2:123456789012:key/output"),
    A("code_location", Uri(), "Where the code archive is stored (s3:// or file://).",
      example="s3://bucket/code"),
    A("base_job_name", Str(JOB_NAME_ACCEPTED, pattern=JOB_NAME_PATTERN),
      "Prefix of generated job names (a timestamp is appended).", example="my-base"),
    A("disable_output_compression", Bool(), "Upload outputs uncompressed.", default=False,
      request="OutputDataConfig.CompressionType", to_request=lambda v: "NONE" if v else None,
      from_request=lambda v: True if v == "NONE" else MISSING, example=True),
    A("checkpoint_s3_uri", Uri(), "Where checkpoints are synced (s3://, or file:// locally).",
      request="CheckpointConfig.S3Uri", from_request=attach_truthy,
      example="s3://bucket/checkpoints"),
    A("checkpoint_local_path",
      Custom({"type": "string", "pattern": "^/",
              "x-accepted": "an absolute path such as /opt/ml/checkpoints"},
             check_checkpoint_local_path, type="str | None"),
      "Checkpoint directory inside the container (default /opt/ml/checkpoints).",
      request="CheckpointConfig.LocalPath", from_request=attach_truthy),
    A("model_uri", Uri("an s3:// URI (or file:// for local runs)"),
      "A model archive given to the job as the model channel.", example="s3://bucket/model.tgz"),
    A("model_channel_name", Custom(_NON_EMPTY, type="str"), "Channel name of model_uri (default 'model').",
      default="model"),  # checked as the channel name it becomes
    # -- network
    A("subnets", StrList(), "VPC subnet ids (with security_group_ids).",
      request="VpcConfig.Subnets"),
    A("security_group_ids", StrList(), "VPC security group ids (with subnets).",
      request="VpcConfig.SecurityGroupIds"),
    A("vpc_config", Custom(type="VpcConfig | Mapping[str, Any] | None"), "A launchbay.vpc.VpcConfig (or SDK v2's dict), instead of "
      "subnets/security_group_ids.", in_spec=False),
    A("enable_network_isolation", Bool(), "Run the container without network access.",
      default=False, attr="_enable_network_isolation", request="EnableNetworkIsolation",
      resolved=True, from_request=attach_true),
    A("encrypt_inter_container_traffic", Bool(), "Encrypt traffic between instances.",
      default=False, request="EnableInterContainerTrafficEncryption", to_request=true_only,
      from_request=attach_true, example=True),
    # -- spot and retries
    A("use_spot_instances", Bool(unset=False, allow_none=False),
      "Managed spot training (needs max_wait).", default=False, v1="train_use_spot_instances",
      request="EnableManagedSpotTraining", to_request=true_only, from_request=attach_true),
    A("max_wait", Int(minimum=1), "Seconds to wait for spot capacity plus the run (>= max_run).",
      v1="train_max_wait", request="StoppingCondition.MaxWaitTimeInSeconds",
      to_request=lambda v: v or None, from_request=attach_truthy),
    A("max_retry_attempts", Int(minimum=1, maximum=30),
      "Automatic retries of a failed job (1-30).", request="RetryStrategy.MaximumRetryAttempts",
      example=3),
    # -- the container
    A("environment", Custom({"type": "object", "additionalProperties": {
        "type": ["string", "number"]}}, check_environment, type="dict[str, str] | None"),
      "Environment variables of the training container (numbers are turned into strings).",
      request="Environment", to_request=dict, from_request=lambda v: dict(v) if v else MISSING,
      from_spec=environment_from_spec, example={"MY_FLAG": "1"}),
    A("tags", Custom(_TAGS, format_tags, type="list[dict[str, str]] | None"),
      "Tags: a mapping of key to value, or a list of {Key, Value}.",
      request="Tags", to_request=copy.deepcopy,
      from_request=lambda v: MISSING,  # DescribeTrainingJob does not return tags
      to_spec=tags_to_spec, from_spec=tags_from_spec, example={"team": "ml"}),
    A("metric_definitions", Custom(_METRICS, check_metric_definitions,
                                          type="list[dict[str, str]] | None"),
      "Metrics scraped from the logs.", request="AlgorithmSpecification.MetricDefinitions",
      to_request=copy.deepcopy, example=[{"Name": "loss", "Regex": "loss=([0-9.]+)"}]),
    A("enable_sagemaker_metrics", Bool(unset=None), "SageMaker time-series metrics.",
      request="AlgorithmSpecification.EnableSageMakerMetricsTimeSeries", resolved=True),
    A("container_log_level", Custom({"anyOf": [{"type": "integer"}, {"enum": list(LOG_LEVELS)}]},
                                    check_log_level, type="int"),
      "Log level of the training toolkit: a number or a name such as INFO or DEBUG.",
      default=logging.INFO, from_spec=log_level_from_spec),  # request: a hyperparameter
    A("container_entry_point", StrList(allow_empty=True), "Overrides the image's entry point.",
      request="AlgorithmSpecification.ContainerEntrypoint", to_request=list,
      example=["python", "train.py"]),
    A("container_arguments", StrList(allow_empty=True),
      "Arguments given to the image's entry point.",
      request="AlgorithmSpecification.ContainerArguments", to_request=list,
      example=["--epochs", "2"]),
    # -- debugger and profiler (their request fields depend on the region and output path)
    A("debugger_hook_config", Custom(_DEBUGGER, check_debugger,
                                           type="DebuggerHookConfig | Literal[False] | None"),
      "SageMaker Debugger: false turns it off; true (or leaving it out) keeps the default hook; "
      "a mapping configures it.", request="DebugHookConfig", resolved=True,
      from_request=debugger_from_description, to_spec=debugger_to_spec,
      from_spec=debugger_from_spec, example=False),
    A("tensorboard_output_config", Custom(_TENSORBOARD, check_tensorboard,
                                          type="TensorBoardOutputConfig | None"),
      "TensorBoard: the directory the script writes TensorBoard files to (container_local_"
      "output_path, default /opt/ml/output/tensorboard), copied to "
      "<s3_output_path>/<job>/tensorboard-output while the job runs.",
      request="TensorBoardOutputConfig", to_request=lambda c: c.to_request_dict(),
      from_request=tensorboard_from_description, to_spec=tensorboard_to_spec,
      from_spec=tensorboard_from_spec,
      example=TensorBoardOutputConfig("s3://bucket/tensorboard", "/opt/tensorboard")),
    A("rules", Custom(RULES_SCHEMA, _check_rules, type="list[RuleBase] | None"),
      "Debugger rules (Rule, ProfilerRule): sent as DebugRuleConfigurations and "
      "ProfilerRuleConfigurations; local jobs evaluate them here.",
      request="DebugRuleConfigurations", resolved=True, from_request=lambda v: MISSING,
      to_spec=rules_to_spec, from_spec=rules_from_spec),
    A("profiler_config", Custom(PROFILER_SCHEMA, _check_profiler, type="ProfilerConfig | None"),
      "SageMaker Profiler settings (ProfilerConfig): system metrics interval, framework "
      "profiling.", request="ProfilerConfig", resolved=True, from_request=lambda v: MISSING,
      to_spec=profiler_to_spec, from_spec=profiler_from_spec),
    A("disable_profiler", Bool(), "Turn SageMaker Profiler off.", default=False,
      request="ProfilerConfig.DisableProfiler", resolved=True, from_request=attach_true,
      example=True),
    # -- what the script gets (hyperparameters are sent JSON-encoded, with sagemaker_* keys)
    A("hyperparameters", Custom({"type": "object"}, check_hyperparameters,
                                       type="dict[str, Any]"),
      "Hyperparameters: any YAML scalars, lists or mappings (sent JSON-encoded).",
      attr="_hyperparameters", request="HyperParameters", resolved=True,
      from_request=lambda v: MISSING,  # sent JSON-encoded with sagemaker_* keys; attach: by hand
      to_spec=lambda value, ctx: dict(value) or None,
      example={"epochs": 2}),
    A("distribution", Custom({"$ref": "#/$defs/distribution"},  # distribution.schema_defs()
                               type="dict[str, Any] | None"),
      "The distribution dict, as the Estimator takes it, e.g. {torch_distributed: {enabled: "
      "true}}.", v1="distributions", attr="_distribution_arg",
      to_spec=lambda value, ctx: value or None),
    A("model_dir", Custom({"anyOf": [_NON_EMPTY, {"const": False}]}, check_model_dir,
                             type="str | Literal[False] | None"),
      "TensorFlow only: the model_dir hyperparameter (a URI or path), or false to leave it out.",
      owner=TENSORFLOW, example=False),
    # -- HuggingFace: the versions of its image (transformers_version is its framework_version)
    A("transformers_version", Custom(_NON_EMPTY, check_version, type="str | None"),
      "HuggingFace only: the transformers version of the image, e.g. '4.36.0'.",
      owner=HUGGINGFACE, example="4.36.0"),
    A("pytorch_version", Custom(_NON_EMPTY, check_version, type="str | None"),
      "HuggingFace only: the PyTorch version of the image (or tensorflow_version).",
      owner=HUGGINGFACE, example="2.1.0"),
    A("tensorflow_version", Custom(_NON_EMPTY, check_version, type="str | None"),
      "HuggingFace only: the TensorFlow version of the image (or pytorch_version).",
      owner=HUGGINGFACE),
    A("compiler_config", Custom(checker=_no_compiler, type="None"),
      "HuggingFace only: SageMaker Training Compiler, which launchbay does not run (None only).",
      owner=HUGGINGFACE, in_spec=False),
    A("image_uri_region", Custom(_NON_EMPTY, check_version, type="str | None"),
      "SKLearn and XGBoost: the region of the official image (default: the session's).",
      owner=IMAGE_REGION, example="us-east-1"),
    # -- not part of a job's description
    A("sagemaker_session", Custom(type="Session | None"), "The launchbay.Session (default: a new one).",
      in_spec=False),
)
# fmt: on
del A


def _by_name() -> dict[str, Argument]:
    # Read from ARGUMENTS on each call: the table is the only source (tests extend it).
    return {a.name: a for a in ARGUMENTS}


def v1_names() -> dict[str, str]:
    """SDK v1 name -> argument name."""
    return {a.v1: a.name for a in ARGUMENTS if a.v1}


def declared(cls: type) -> list[Argument]:
    """The arguments ``cls`` takes, in declaration order."""
    owners = getattr(cls, "_owners", (BASE,))
    excluded = getattr(cls, "_excluded", ())  # an owner's argument a class does not take
    return [a for a in ARGUMENTS if a.owner in owners and a.name not in excluded]


def default(cls: type, argument: Argument) -> Any:
    """``argument``'s default for ``cls``: the class's own (``_defaults``), else the table's."""
    return getattr(cls, "_defaults", {}).get(argument.name, argument.default)


def get(name: str) -> Argument:
    """The declaration of ``name``."""
    return _by_name()[name]


# --------------------------------------------------------------------------- the constructor


def signature(cls: type) -> inspect.Signature:
    """``cls``'s signature: its positional arguments first (SDK v2's order), then the rest."""
    params = []
    arguments = declared(cls)
    by_name = _by_name()
    positional = [by_name[n] for n in getattr(cls, "_positional", ())]
    rest = [a for a in arguments if a not in positional]
    for arg in positional:
        params.append(
            inspect.Parameter(
                arg.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default(cls, arg)
            )
        )
    for arg in rest:
        params.append(
            inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, default=default(cls, arg))
        )
    return inspect.Signature(params)


def bind(
    cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], *, stacklevel: int = 4
) -> dict[str, Any]:
    """The raw value of every argument ``cls`` takes (defaults filled in), unchecked.

    Positional values take ``cls._positional``'s names. SDK v1 names are renamed
    with a DeprecationWarning (both names with different values is an error);
    ``script_mode`` and the keywords of :data:`IGNORED_AS_IN_V2` are dropped with a
    warning. An SDK v2 argument launchbay leaves out, or an unknown name, is an
    error naming it.
    """
    owner = cls.__name__
    positional = tuple(getattr(cls, "_positional", ()))
    if len(args) > len(positional):
        raise TypeError(
            f"{owner}() takes at most {len(positional)} positional arguments "
            f"({', '.join(positional)}) but {len(args)} were given"
        )
    kwargs = dict(kwargs)
    for name, value in zip(positional, args, strict=False):
        if name in kwargs:
            raise TypeError(f"{owner}() got multiple values for argument {name!r}")
        kwargs[name] = value
    arguments = declared(cls)
    names = {a.name for a in arguments}
    if "script_mode" in kwargs:
        kwargs.pop("script_mode")
        warnings.warn(
            "'script_mode' is deprecated and ignored: every launchbay job runs in script mode.",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    by_name = _by_name()
    for old, new in v1_names().items():
        if old not in kwargs or new not in names:
            continue
        value = kwargs.pop(old)
        current = kwargs.get(new, by_name[new].default)
        if new in kwargs and current != by_name[new].default and current != value:
            raise ConfigurationError(
                f"Both {old!r} (deprecated) and {new!r} are given, with different values "
                f"({value!r} and {current!r}). Accepted: only {new!r}.",
                argument=old,
                value=value,
            )
        warnings.warn(
            f"'{old}' is deprecated; use '{new}' instead.",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        kwargs[new] = value
    for name in kwargs:
        if name in UNSUPPORTED_V2_ARGUMENTS and name not in names:
            raise ConfigurationError(
                f"{owner} does not support SageMaker SDK v2's {name!r} "
                f"({UNSUPPORTED_V2_ARGUMENTS[name]}). Remove it to run with launchbay.",
                argument=name,
                value=kwargs[name],
            )
    _drop_ignored(owner, kwargs, names, stacklevel)
    unknown = [name for name in kwargs if name not in names]
    if unknown:
        valid = names | set(v1_names()) | {"script_mode"}
        raise UnknownArgumentError.for_name(owner, unknown[0], valid)
    return {a.name: kwargs.get(a.name, copy.deepcopy(default(cls, a))) for a in arguments}


def check(arguments: Iterable[Argument], values: Mapping[str, Any], local: bool) -> dict[str, Any]:
    """Each value checked by its kind, as stored (in declaration order)."""
    ctx = Context(local=local)
    return {a.name: a.kind.check(a.name, values[a.name], ctx) for a in arguments}


# --------------------------------------------------------------------------- job specs


def spec_properties() -> dict[str, Any]:
    """The job-spec schema's property of every argument a spec may carry."""
    props: dict[str, Any] = {}
    for arg in ARGUMENTS:
        if arg.in_spec:
            props[arg.name] = {"description": arg.doc, **copy.deepcopy(dict(arg.kind.schema))}
    return props


def bound_values(estimator: Any) -> dict[str, Any]:
    """The value of every argument ``estimator`` takes, as stored, by argument name (in order)."""
    return {a.name: getattr(estimator, a.attribute, None) for a in declared(type(estimator))}


def to_spec(values: Mapping[str, Any], base_dir: str) -> dict[str, Any]:
    """The spec keys of the argument ``values`` (name -> stored value) that differ from their
    defaults (:func:`bound_values` of an estimator)."""
    ctx = SpecContext(base_dir=base_dir, values=values)
    out: dict[str, Any] = {}
    by_name = _by_name()
    for name, value in values.items():
        arg = by_name[name]
        if not arg.in_spec:
            continue
        if value is None or value == arg.default:
            continue
        if arg.to_spec is not None:
            value = arg.to_spec(value, ctx)
            if value is None:
                continue
        out[arg.name] = copy.deepcopy(value)
    return out


def from_spec(data: Mapping[str, Any]) -> dict[str, Any]:
    """Estimator keyword arguments from a spec's argument keys (plain YAML data)."""
    out = {}
    by_name = _by_name()
    for name, value in data.items():
        value = copy.deepcopy(value)
        arg = by_name.get(name)
        if arg is not None and arg.from_spec is not None:
            value = arg.from_spec(value)
        out[name] = value
    return out


# --------------------------------------------------------------------------- the request


def _path(dotted: str) -> list[str]:
    return dotted.split(".")


def request_fields(estimator: Any) -> dict[str, Any]:
    """The request fields ``estimator``'s arguments fill: dotted path -> request value."""
    out: dict[str, Any] = {}
    for arg in declared(type(estimator)):
        if arg.request is None or arg.resolved:
            continue
        value = getattr(estimator, arg.attribute, None)
        if value is not None and arg.to_request is not None:
            value = arg.to_request(value)
        if value is not None:
            out[arg.request] = value
    return out


def put(request: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``request[a][b]...`` for ``a.b...``, making the mappings on the way."""
    *parents, leaf = _path(dotted)
    node = request
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def lookup(description: Mapping[str, Any], dotted: str) -> Any:
    """``description[a][b]...`` for ``a.b...``, None when any part is missing."""
    node: Any = description
    for key in _path(dotted):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def from_description(cls: type, description: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a DescribeTrainingJob response gives back through their request fields."""
    out: dict[str, Any] = {}
    for arg in declared(cls):
        if arg.request is None:
            continue
        value = arg.from_request(lookup(description, arg.request))
        if value is not MISSING:
            out[arg.name] = value
    return out
