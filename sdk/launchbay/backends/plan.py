"""Where a job runs and on which hosts: one rule, read from the request's resources.

Every part that must know where a job runs (the estimator's ``is_local``, its
local capacity check, ``fit()``, ``launchbay validate``/``submit``, the
registry) asks :func:`place` (from the estimator's arguments) or
:func:`place_request` (from a CreateTrainingJob request's ``ResourceConfig``);
both apply the same rule, so they cannot disagree:

* one instance type, ``instance_type``: its backend (``local_process``,
  ``docker`` for ``local``/``local_gpu``, ``sagemaker`` for ``ml.*``);
* ``instance_groups``: the backend of their types, which must all be run by the
  same backend. Local groups must also share one local type (a local job's
  hosts are all processes, or all containers with or without GPUs). A mix of
  local and ``ml.*`` groups is refused, naming the groups.

:func:`plan_request` turns a finished request into a :class:`JobPlan`: the wire
request as it is, plus the placement, the hosts and each host's instance type,
so a backend never derives them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.runtime.names import LOCAL_INSTANCE_TYPES

__all__ = ["Placement", "JobPlan", "place", "place_request", "plan_request"]


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
    instance type of each, group by group.
    """

    request: Mapping[str, Any]
    placement: Placement
    hosts: tuple[str, ...]
    host_types: tuple[str, ...]

    @property
    def backend(self) -> str:
        """The registry name of the backend that runs the job."""
        return self.placement.backend

    @property
    def local(self) -> bool:
        """True when the job runs on this machine."""
        return self.placement.local


def _backend_of(instance_type: str) -> str:
    from launchbay.backends import registry  # small; the backends themselves load on use

    return registry.backend_name_for(instance_type)


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
        backend = _backend_of(instance_type)
        return Placement(backend, instance_type, instance_type in LOCAL_INSTANCE_TYPES)
    groups = [(_group_field(g, "name"), _group_field(g, "type")) for g in instance_groups]
    types = [t for _, t in groups]
    backends = {t: _backend_of(t) for t in types}
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


def place_request(request: Mapping[str, Any]) -> Placement:
    """The placement of a CreateTrainingJob request (its ``ResourceConfig``), by :func:`place`."""
    resources = request.get("ResourceConfig") or {}
    return place(resources.get("InstanceType"), resources.get("InstanceGroups") or None)


def plan_request(request: Mapping[str, Any]) -> JobPlan:
    """The :class:`JobPlan` of a finished request: placement, hosts and their types."""
    placement = place_request(request)
    resources = request.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    host_types: list[str] = []
    if groups:
        for group in groups:
            host_types += [str(group.get("InstanceType"))] * int(group.get("InstanceCount") or 0)
    else:
        host_types = [str(resources.get("InstanceType"))] * int(resources.get("InstanceCount") or 1)
    hosts = tuple(f"algo-{i}" for i in range(1, len(host_types) + 1))
    return JobPlan(request, placement, hosts, tuple(host_types))
