"""Where a job runs and on which hosts: one rule, read from the request's resources.

Every part that must know where a job runs (the estimator's ``is_local``, its
local capacity check, ``fit()``, ``launchbay validate``/``submit``, the
registry) asks :func:`place`, from the estimator's arguments or (through
:func:`resolve_resources`) from a CreateTrainingJob request's ``ResourceConfig``,
so they cannot disagree:

* one instance type, ``instance_type``: its backend (``local_process``,
  ``docker`` for ``local``/``local_gpu``, ``sagemaker`` for ``ml.*``);
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
from dataclasses import dataclass
from typing import Any

from launchbay import _request_rules
from launchbay.errors import ConfigurationError
from launchbay.runtime.names import HP, LOCAL, LOCAL_GPU, LOCAL_INSTANCE_TYPES, LOCAL_PROCESS

#: How a request names its processes per host, when no estimator argument does.
PROCESSES_HYPERPARAMETER = f"processes_per_host (hyperparameter {HP.MPI_PROCESSES_PER_HOST})"

__all__ = [
    "Placement",
    "JobPlan",
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
    ``local``, ``local_gpu``), the one ``ml.*`` type, or ``None`` for ``ml.*``
    instance groups (SageMaker takes each group's own type).
    """

    backend: str
    instance_type: str | None
    local: bool


@dataclass(frozen=True)
class JobPlan:
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

    @property
    def backend(self) -> str:
        """The registry name of the backend that runs the job."""
        return self.placement.backend

    @property
    def local(self) -> bool:
        """True when the job runs on this machine."""
        return self.placement.local


#: Instance type -> backend name for the types of this machine (the registry adds
#: those of backends it registers); every ``ml.*`` type goes to :data:`REMOTE_BACKEND`.
INSTANCE_TYPE_BACKENDS: dict[str, str] = {
    LOCAL_PROCESS: "local_process",
    LOCAL: "docker",
    LOCAL_GPU: "docker",
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
        return Placement(backend, instance_type, instance_type in LOCAL_INSTANCE_TYPES)
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
        return Placement(backends[local[0]], local[0], True)
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
    if placement.local and placement.instance_type is not None:
        # The local wing's capacity rules, imported for a local job only.
        from launchbay.backends.local.capacity import check_local_ranks, split_gpus

        # Every rank runs on this machine: refused before a host is even named.
        check_local_ranks(
            placement.instance_type,
            sum(count for _, count in counted),
            processes_per_host,
            hosts_argument="instance_count",
            processes_argument=where,
        )
    host_types = tuple(t for t, count in counted for _ in range(count))
    hosts = tuple(f"algo-{i}" for i in range(1, len(host_types) + 1))
    if placement.local and placement.instance_type is not None:
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
) -> JobPlan:
    """The :class:`JobPlan` of a finished request: placement, hosts, processes and GPUs.

    ``resources``: what :func:`resolve_resources` already made for this request
    (the estimator's early check); otherwise they are resolved from the request
    here, with ``processes_argument`` and ``environ`` as there.

    The request is checked here, once, against what CreateTrainingJob accepts
    (:func:`launchbay._request_rules.check_request`, with SageMaker's own needs
    for a job placed there), so the dry run, ``fit()``, the CLI and the tuner
    refuse the same requests with the same messages. ``check=False`` only for a
    request read back from a job's own record (it was checked when planned).

    Raises:
        ConfigurationError: as :func:`resolve_resources`, a processes per host
            hyperparameter that is not an integer 1 or more, and a request the
            service (or, for a local job, this machine) would refuse.
    """
    if resources is None:
        where = processes_argument or PROCESSES_HYPERPARAMETER
        resources = resolve_resources(
            request.get("ResourceConfig") or {},
            processes_per_host_of(request, where),
            processes_argument=where,
            environ=environ,
        )
    if check:
        _request_rules.check_request(request, local=resources.placement.local)
    return JobPlan(
        request,
        resources.placement,
        resources.hosts,
        resources.host_types,
        resources.processes_per_host,
        resources.processes_argument,
        resources.gpus,
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
