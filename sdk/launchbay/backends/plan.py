"""Where a job runs and on which hosts: one rule, read from the request's resources.

Every part that must know where a job runs (the estimator's ``is_local``, its
local capacity check, ``fit()``, ``launchbay validate``/``submit``, the
registry) asks :func:`place`, from the estimator's arguments or (through
:func:`resolve_resources`) from a CreateTrainingJob request's ``ResourceConfig``,
so they cannot disagree:

* one instance type, ``instance_type``: its backend (``local_process``,
  ``docker`` for ``local``/``local_gpu``, ``ray`` for ``ray``: a Ray cluster,
  ``sagemaker`` for ``ml.*``);
* ``instance_groups``: the backend of their types, which must all be run by the
  same backend. Local groups must also share one local type (a local job's
  hosts are all processes, or all containers with or without GPUs). A mix of
  local and ``ml.*`` groups is refused, naming the groups.

:func:`plan_request` turns a finished request into a :class:`JobPlan`: the wire
request as it is, plus the placement, the hosts and each host's instance type,
the processes per host (read once from the request) and, for a local job, each
host's share of this machine's GPUs (looked for once), so a backend never
derives them again. A backend's ``check(plan)`` then refuses what it cannot run,
and ``run(plan)`` runs it; the dry run, ``fit()``, the CLI and ``attach`` all go
through :func:`plan_request`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from launchbay import _request_rules
from launchbay._capacity import check_local_ranks, split_gpus
from launchbay.errors import ConfigurationError
from launchbay.runtime.contract import (
    DEFAULT_CHECKPOINT_PATH,
    DEFAULT_TENSORBOARD_PATH,
    DEFAULT_TENSORS_PATH,
    normalise_checkpoint_path,
)
from launchbay.runtime.names import (
    HP,
    LOCAL,
    LOCAL_GPU,
    LOCAL_INSTANCE_TYPES,
    LOCAL_PROCESS,
    RAY,
    THIS_MACHINE_INSTANCE_TYPES,
)

#: How a request names its processes per host, when no estimator argument does.
PROCESSES_HYPERPARAMETER = f"processes_per_host (hyperparameter {HP.MPI_PROCESSES_PER_HOST})"

__all__ = [
    "Placement",
    "JobPlan",
    "Channel",
    "Synced",
    "JobFields",
    "request_fields",
    "PROCESSES_HYPERPARAMETER",
    "INSTANCE_TYPE_BACKENDS",
    "REMOTE_BACKEND",
    "backend_name_for",
    "place",
    "plan_request",
    "Resources",
    "resolve_resources",
    "processes_per_host_of",
]


@dataclass(frozen=True)
class Placement:
    """Which backend runs a job, and the instance type its backend is made for.

    ``instance_type`` is the local type every host has (``local_process``,
    ``local``, ``local_gpu``, ``ray``), the one ``ml.*`` type, or ``None`` for ``ml.*``
    instance groups (SageMaker takes each group's own type).

    Two facts, never one: ``client_driven`` (the job's control loop runs in this
    process: processes, containers, a Ray cluster; SageMaker's runs on SageMaker) and
    ``on_this_machine`` (its hosts run here, so this machine's capacity and GPUs
    limit it: not so for a Ray cluster's nodes).
    """

    backend: str
    instance_type: str | None
    client_driven: bool
    on_this_machine: bool = False

    @property
    def local(self) -> bool:
        """``client_driven``, by the name the estimator's ``is_local`` and the rules use."""
        return self.client_driven


@dataclass(frozen=True)
class Channel:
    """One input channel, as a local backend stages it.

    ``uri`` is the channel's ``S3Uri`` (``s3://`` or ``file://``; ``""`` for a file
    system), ``input_mode`` its own mode or else the job's, ``sharded`` whether its
    objects are split between the hosts (``ShardedByS3Key``), ``file_system`` the
    ``FileSystemDataSource`` of a FileSystemInput (which runs only on SageMaker).
    """

    name: str
    uri: str
    input_mode: str
    sharded: bool = False
    data_type: str = "S3Prefix"
    file_system: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Synced:
    """A directory of each host copied to or from ``uri``: checkpoints, TensorBoard
    files, the debugger's tensors. ``local_path`` is where a host sees it, default
    filled in (``/opt/ml/checkpoints`` ...); ``given_path`` is the request's own
    ``LocalPath`` (``None``: the default)."""

    uri: str
    local_path: str
    given_path: str | None = None


_Fields = TypeVar("_Fields", bound="JobFields")


@dataclass(frozen=True, kw_only=True)
class JobFields:
    """What the backends read of a request, derived once (:func:`request_fields`).

    A :class:`JobPlan` is one: ``plan.channels``, ``plan.output_path`` ... The local
    wing takes these, never the request's keys; :meth:`of` derives them from a bare
    request (a test's, or a request read back from disk) the same way.
    """

    #: ``TrainingJobName``.
    job_name: str = ""
    #: ``InputDataConfig``, channel by channel.
    channels: tuple[Channel, ...] = ()
    #: ``OutputDataConfig``: where the outputs go, their KMS key, whether
    #: ``model.tar.gz`` is made (``CompressionType`` other than ``NONE``).
    output_path: str = ""
    output_kms_key: str | None = None
    compress_outputs: bool = True
    #: ``CheckpointConfig``, ``TensorBoardOutputConfig``, ``DebugHookConfig`` (or ``None``).
    checkpoint: Synced | None = None
    tensorboard: Synced | None = None
    debug_hook: Synced | None = None
    #: ``Environment`` and ``HyperParameters`` (strings, as sent).
    environment: Mapping[str, str] = field(default_factory=dict)
    hyperparameters: Mapping[str, str] = field(default_factory=dict)
    #: ``StoppingCondition.MaxRuntimeInSeconds`` (``None``: no limit).
    max_run: int | None = None
    #: ``EnableManagedSpotTraining``, ``StoppingCondition.MaxWaitTimeInSeconds`` (``None``:
    #: none) and ``RetryStrategy.MaximumRetryAttempts`` (0: no retry).
    spot: bool = False
    max_wait: int | None = None
    max_retries: int = 0
    #: ``AlgorithmSpecification``: the image, the job's input mode, metric definitions.
    image: str = ""
    input_mode: str = "File"
    metric_definitions: tuple[Mapping[str, Any], ...] = ()
    #: ``EnableNetworkIsolation``.
    network_isolation: bool = False
    #: Where the code package is (``sagemaker_submit_directory``, decoded), if any.
    submit_directory: str | None = None
    #: ``DebugRuleConfigurations``, ``ProfilerRuleConfigurations`` and ``ProfilerConfig``
    #: as sent (local jobs evaluate the rules: launchbay.backends.local.rules).
    debug_rules: tuple[Mapping[str, Any], ...] = ()
    profiler_rules: tuple[Mapping[str, Any], ...] = ()
    profiler: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, source: JobFields | Mapping[str, Any]) -> JobFields:
        """``source`` itself when it is a plan (or fields), else its fields derived."""
        if isinstance(source, JobFields):
            return source
        return JobFields(**request_fields(source))

    def host_view(self: _Fields) -> _Fields:
        """The fields as the hosts' trees look on this machine when each ``LocalPath``
        is mounted from its default place (containers): the given paths dropped."""

        def default(synced: Synced | None, path: str) -> Synced | None:
            return None if synced is None else Synced(synced.uri, path)

        return replace(
            self,
            checkpoint=default(self.checkpoint, DEFAULT_CHECKPOINT_PATH),
            tensorboard=default(self.tensorboard, DEFAULT_TENSORBOARD_PATH),
            debug_hook=default(self.debug_hook, DEFAULT_TENSORS_PATH),
        )


@dataclass(frozen=True)
class JobPlan(JobFields):
    """A job resolved once: the wire request, where it runs, and its hosts.

    ``request`` is exactly what ``create_training_job`` takes (SDK v2 parity);
    ``hosts`` are ``algo-1`` ... ``algo-N`` in order, and ``host_types`` the
    instance type of each, group by group. ``processes_per_host`` is the
    distribution's (``None``: the launcher's default), named in errors as
    ``processes_argument``. ``gpus`` is each local host's GPU device ids
    (``None``: the job's hosts get no GPUs; always ``None`` on SageMaker).
    """

    request: Mapping[str, Any]
    placement: Placement
    hosts: tuple[str, ...]
    host_types: tuple[str, ...]
    processes_per_host: int | None = None
    processes_argument: str = PROCESSES_HYPERPARAMETER
    gpus: Mapping[str, tuple[str, ...]] | None = None

    @property
    def name(self) -> str:
        """The job's name (``TrainingJobName``)."""
        return str(self.request["TrainingJobName"])

    def with_request(self, request: Mapping[str, Any], **changes: Any) -> JobPlan:
        """This plan for another request on the same resources (a tuning trial's): the
        request's fields derived again (:func:`request_fields`), then ``changes``.

        Never ``dataclasses.replace(plan, request=...)``: the derived fields would
        still be the old request's.
        """
        return replace(self, request=request, **{**request_fields(request), **changes})

    @property
    def backend(self) -> str:
        """The registry name of the backend that runs the job."""
        return self.placement.backend

    @property
    def local(self) -> bool:
        """True when the job is client-driven (its control loop runs in this process)."""
        return self.placement.client_driven

    @property
    def on_this_machine(self) -> bool:
        """True when the job's hosts run on this machine (its capacity and GPUs apply)."""
        return self.placement.on_this_machine


#: Instance type -> backend name for the types of this machine (the registry adds
#: those of backends it registers); every ``ml.*`` type goes to :data:`REMOTE_BACKEND`.
INSTANCE_TYPE_BACKENDS: dict[str, str] = {
    LOCAL_PROCESS: "local_process",
    LOCAL: "docker",
    LOCAL_GPU: "docker",
    RAY: "ray",
}
REMOTE_BACKEND = "sagemaker"


def backend_name_for(instance_type: str | None) -> str:
    """The name of the backend that runs ``instance_type``.

    ``None`` (a job described by instance groups of ``ml.*`` types) is SageMaker's.

    Raises:
        ConfigurationError: an instance type no backend runs, naming the accepted ones.
    """
    if instance_type is None or (
        isinstance(instance_type, str) and instance_type.startswith("ml.")
    ):
        return REMOTE_BACKEND
    name = INSTANCE_TYPE_BACKENDS.get(instance_type) if isinstance(instance_type, str) else None
    if name is None:
        accepted = ", ".join([*INSTANCE_TYPE_BACKENDS, "or an ml.* type such as ml.m5.xlarge"])
        raise ConfigurationError.invalid("instance_type", instance_type, accepted)
    return name


def place(instance_type: str | None, instance_groups: Sequence[Any] | None) -> Placement:
    """The placement of a job given as ``instance_type`` or ``instance_groups`` (objects
    with ``instance_group_name``/``instance_type``, or request dicts).

    Raises:
        ConfigurationError: an unknown instance type, or groups that no one
            backend runs (local and ``ml.*`` mixed, or two local types).
    """
    if not instance_groups:
        if instance_type is None:
            raise ConfigurationError(
                "instance_type is required: accepted an ml.* type such as 'ml.m5.xlarge', or "
                "'local_process', 'local', 'local_gpu'.",
                argument="instance_type",
            )
        backend = backend_name_for(instance_type)
        return Placement(
            backend,
            instance_type,
            instance_type in LOCAL_INSTANCE_TYPES,
            instance_type in THIS_MACHINE_INSTANCE_TYPES,
        )
    groups = [(_group_field(g, "name"), _group_field(g, "type")) for g in instance_groups]
    types = [t for _, t in groups]
    backends = {t: backend_name_for(t) for t in types}
    local = [t for t in types if t in LOCAL_INSTANCE_TYPES]
    described = ", ".join(f"{n!r}: {t!r}" for n, t in groups)
    if local and len(local) != len(types):
        raise ConfigurationError(
            f"Invalid instance_groups ({described}): local and ml.* instance types are mixed. "
            "A job runs in one place: on this machine or on SageMaker. Accepted: groups whose "
            "types are all local (one of local_process, local, local_gpu) or all ml.* types.",
            argument="instance_groups",
            value=described,
        )
    if local:
        if len(set(local)) != 1:
            raise ConfigurationError(
                f"Invalid instance_groups ({described}): a local job's hosts are all processes "
                "or all containers, of one local type. Accepted: the same local instance type "
                "(local_process, local or local_gpu) in every group.",
                argument="instance_groups",
                value=described,
            )
        here = local[0] in THIS_MACHINE_INSTANCE_TYPES
        return Placement(backends[local[0]], local[0], True, here)
    names = set(backends.values())
    if len(names) != 1:
        raise ConfigurationError(
            f"Invalid instance_groups ({described}): their types are run by different "
            f"backends ({', '.join(sorted(names))}). Accepted: types one backend runs.",
            argument="instance_groups",
            value=described,
        )
    backend = names.pop()
    only = types[0] if len(set(types)) == 1 else None
    return Placement(backend, only, False)


def _group_field(group: Any, field: str) -> str:
    if isinstance(group, Mapping):
        key = {"name": "InstanceGroupName", "type": "InstanceType"}[field]
        return str(group.get(key) or "")
    attribute = {"name": "instance_group_name", "type": "instance_type"}[field]
    return str(getattr(group, attribute, "") or "")


@dataclass(frozen=True)
class Resources:
    """A job's placement and hosts, checked against this machine when it runs here.

    What :func:`resolve_resources` makes from the request's ``ResourceConfig`` and
    processes per host, before anything else of the job is resolved: the
    estimator asks for it first, so a job this machine cannot run is refused
    before its code is packaged; :func:`plan_request` then keeps it in the plan.
    """

    placement: Placement
    hosts: tuple[str, ...]
    host_types: tuple[str, ...]
    processes_per_host: int | None
    processes_argument: str
    gpus: Mapping[str, tuple[str, ...]] | None


def resolve_resources(
    resource_config: Mapping[str, Any],
    processes_per_host: int | None,
    *,
    processes_argument: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Resources:
    """Placement, hosts and, for a local job, its rank limit and GPU shares (looked for once).

    ``processes_argument`` names the processes per host in errors (the estimator
    gives its distribution key); ``environ`` is where ``CUDA_VISIBLE_DEVICES``
    is read (default: this process's).

    Raises:
        ConfigurationError: resources no one backend runs (:func:`place`), an
            instance count that is not an integer 1 or more, more ranks than this
            machine runs, or GPUs that cannot give each local host its own share.
    """
    placement = place(
        resource_config.get("InstanceType"), resource_config.get("InstanceGroups") or None
    )
    groups = resource_config.get("InstanceGroups") or []
    counted = [(str(g.get("InstanceType")), g.get("InstanceCount")) for g in groups] or [
        (str(resource_config.get("InstanceType")), resource_config.get("InstanceCount", 1))
    ]
    for _, count in counted:
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigurationError.invalid(
                "instance_count", count, "an integer 1 or more (one host each)"
            )
    where = processes_argument or PROCESSES_HYPERPARAMETER
    gpus = None
    # A Ray job's hosts are the cluster's nodes, not this machine: the Ray backend
    # checks the cluster's nodes and resources instead (docs/ray.md).
    on_this_machine = placement.on_this_machine
    if on_this_machine and placement.instance_type is not None:
        # Every rank runs on this machine: refused before a host is even named.
        check_local_ranks(
            placement.instance_type,
            sum(count for _, count in counted),
            processes_per_host,
            hosts_argument="instance_count",
            processes_argument=where,
        )
    host_types = tuple(t for t, count in counted for _ in range(count))
    hosts = algo_hosts(len(host_types))
    if on_this_machine and placement.instance_type is not None:
        split = split_gpus(
            placement.instance_type,
            len(hosts),
            processes_per_host,
            environ=environ,
            processes_argument=where,
        )
        if split is not None:
            gpus = {host: tuple(ids) for host, ids in zip(hosts, split, strict=True)}
    return Resources(placement, hosts, host_types, processes_per_host, where, gpus)


def plan_request(
    request: Mapping[str, Any],
    *,
    resources: Resources | None = None,
    processes_argument: str | None = None,
    environ: Mapping[str, str] | None = None,
    check: bool = True,
    stored: bool = False,
) -> JobPlan:
    """The :class:`JobPlan` of a finished request: placement, hosts, processes and GPUs.

    ``resources``: what :func:`resolve_resources` already made for this request
    (the estimator's early check); otherwise they are resolved from the request
    here, with ``processes_argument`` and ``environ`` as there.

    The request is checked here, once, against what CreateTrainingJob accepts
    (:func:`launchbay._request_rules.check_request`, with SageMaker's own needs
    for a job placed there), so the dry run, ``fit()``, the CLI and the tuner
    refuse the same requests with the same messages.

    ``stored``: the request is read back from a job's own record (a detached job,
    a job finished by another process, a watchdog): it was checked and its
    resources resolved when it was planned, so neither is done again (no capacity
    check, no GPU lookup: ``gpus`` is ``None``); the request's fields are derived
    the same way (:func:`request_fields`).

    Raises:
        ConfigurationError: as :func:`resolve_resources`, a processes per host
            hyperparameter that is not an integer 1 or more, and a request the
            service (or, for a local job, this machine) would refuse.
    """
    if resources is None and stored:
        resources = _stored_resources(request, processes_argument or PROCESSES_HYPERPARAMETER)
    if resources is None:
        where = processes_argument or PROCESSES_HYPERPARAMETER
        resources = resolve_resources(
            request.get("ResourceConfig") or {},
            processes_per_host_of(request, where),
            processes_argument=where,
            environ=environ,
        )
    if check and not stored:
        _request_rules.check_request(request, local=resources.placement.local)
    return JobPlan(
        request,
        resources.placement,
        resources.hosts,
        resources.host_types,
        resources.processes_per_host,
        resources.processes_argument,
        resources.gpus,
        **request_fields(request),
    )


def request_fields(request: Mapping[str, Any]) -> dict[str, Any]:
    """What the backends read of a request, as :class:`JobPlan`'s typed fields: the one
    place that reads them (:func:`plan_request` calls it; so does a plan rebuilt from a
    job's stored request)."""
    algorithm = request.get("AlgorithmSpecification") or {}
    job_mode = str(algorithm.get("TrainingInputMode") or "File")
    channels = []
    for channel in request.get("InputDataConfig") or []:
        source = channel.get("DataSource") or {}
        s3 = source.get("S3DataSource") or {}
        channels.append(
            Channel(
                name=str(channel.get("ChannelName")),
                uri=str(s3.get("S3Uri") or ""),
                input_mode=str(channel.get("InputMode") or job_mode),
                sharded=s3.get("S3DataDistributionType") == "ShardedByS3Key",
                data_type=str(s3.get("S3DataType") or "S3Prefix"),
                file_system=source.get("FileSystemDataSource"),
            )
        )
    output = request.get("OutputDataConfig") or {}

    def synced(key: str, uri_key: str, default: str) -> Synced | None:
        config = request.get(key)
        if not config:
            return None
        given = config.get("LocalPath") or None
        path = normalise_checkpoint_path(given) if given else default
        return Synced(str(config.get(uri_key) or ""), path, given)

    max_run = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    max_wait = (request.get("StoppingCondition") or {}).get("MaxWaitTimeInSeconds")
    retries = (request.get("RetryStrategy") or {}).get("MaximumRetryAttempts")
    hyperparameters = {str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()}
    raw_code = hyperparameters.get(HP.SUBMIT_DIRECTORY)
    try:
        code = json.loads(raw_code) if raw_code is not None else None
    except ValueError:
        code = raw_code
    return {
        "job_name": str(request.get("TrainingJobName") or ""),
        "channels": tuple(channels),
        "output_path": str(output.get("S3OutputPath") or ""),
        "output_kms_key": output.get("KmsKeyId") or None,
        "compress_outputs": output.get("CompressionType") != "NONE",
        "checkpoint": synced("CheckpointConfig", "S3Uri", DEFAULT_CHECKPOINT_PATH),
        "tensorboard": synced("TensorBoardOutputConfig", "S3OutputPath", DEFAULT_TENSORBOARD_PATH),
        # The debugger's LocalPath is the hook's own (not normalised as a checkpoint's).
        "debug_hook": _debug_hook(request.get("DebugHookConfig")),
        "environment": {str(k): str(v) for k, v in (request.get("Environment") or {}).items()},
        "hyperparameters": hyperparameters,
        "max_run": max_run if isinstance(max_run, int) and not isinstance(max_run, bool) else None,
        "spot": request.get("EnableManagedSpotTraining") is True,
        "max_wait": max_wait if _is_int(max_wait) else None,
        "max_retries": retries if _is_int(retries) else 0,
        "image": str(algorithm.get("TrainingImage") or ""),
        "input_mode": job_mode,
        "metric_definitions": tuple(algorithm.get("MetricDefinitions") or ()),
        "network_isolation": bool(request.get("EnableNetworkIsolation")),
        "submit_directory": str(code) if code else None,
        "debug_rules": tuple(request.get("DebugRuleConfigurations") or ()),
        "profiler_rules": tuple(request.get("ProfilerRuleConfigurations") or ()),
        "profiler": request.get("ProfilerConfig") or None,
    }


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _debug_hook(hook: Mapping[str, Any] | None) -> Synced | None:
    if not hook:
        return None
    given = hook.get("LocalPath") or None
    return Synced(str(hook.get("S3OutputPath") or ""), given or DEFAULT_TENSORS_PATH, given)


def instance_count_of(resource_config: Mapping[str, Any]) -> int:
    """How many hosts a ``ResourceConfig`` asks for: its instance count, or its groups' total."""
    groups = resource_config.get("InstanceGroups") or []
    if groups:
        return sum(int(g.get("InstanceCount") or 0) for g in groups)
    return int(resource_config.get("InstanceCount") or 1)


def algo_hosts(count: int) -> tuple[str, ...]:
    """``algo-1`` ... ``algo-N``: the one place a job's host names are made (SageMaker's names)."""
    return tuple(f"algo-{i}" for i in range(1, count + 1))


def _stored_resources(request: Mapping[str, Any], where: str) -> Resources:
    """The placement and hosts of a request already planned once (no capacity check)."""
    config = request.get("ResourceConfig") or {}
    groups = config.get("InstanceGroups") or []
    placement = place(config.get("InstanceType"), groups or None)
    counted = [(str(g.get("InstanceType")), int(g.get("InstanceCount") or 1)) for g in groups] or [
        (str(config.get("InstanceType")), int(config.get("InstanceCount") or 1))
    ]
    host_types = tuple(t for t, count in counted for _ in range(count))
    hosts = algo_hosts(len(host_types))
    return Resources(
        placement, hosts, host_types, processes_per_host_of(request, where), where, None
    )


def processes_per_host_of(request: Mapping[str, Any], argument: str) -> int | None:
    """The request's processes per host (its hyperparameter, JSON-encoded), read once.

    Raises:
        ConfigurationError: a value that is not an integer 1 or more, named ``argument``.
    """
    raw = (request.get("HyperParameters") or {}).get(HP.MPI_PROCESSES_PER_HOST)
    if raw is None:
        return None
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = raw
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError.invalid(argument, raw, "an integer 1 or more")
    return value
