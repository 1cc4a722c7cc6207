"""The ``distribution`` argument: parse, validate, and turn into hyperparameters.

A user writes the same dicts as for SageMaker Python SDK v2::

    {"mpi": {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "-x X"}}
    {"smdistributed": {"dataparallel": {"enabled": True}}}
    {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {...}}},
     "mpi": {"enabled": True}}
    {"torch_distributed": {"enabled": True}}
    {"pytorchddp": {"enabled": True}}          # alias of smdistributed dataparallel
    {"parameter_server": {"enabled": True}}
    {"multi_worker_mirrored_strategy": {"enabled": True}}
    {"instance_groups": [InstanceGroup(...)], "mpi": {...}}

:func:`parse_distribution` makes one validation pass and returns a typed
:class:`Distribution`; its :meth:`Distribution.to_hyperparameters` gives the
``sagemaker_*`` keys SDK v2 would send for the same dict (before JSON encoding),
and :func:`distribution_from_hyperparameters` reads them back (for ``attach``).

Keys and value types are the JSON Schema ``schemas/distribution.schema.json``
(:func:`schema`), checked with jsonschema, imported on the first non-empty
distribution; its ``x-accepted`` texts word the errors. The rules that involve
other arguments (framework, versions, instance types, strategies that exclude
each other) are code here, in :func:`_validate` and beside the configs they build.

Stricter than SDK v2 (which silently ignores these): unknown keys, values of the
wrong type, negative or zero counts, and ``mpi`` together with
``torch_distributed`` are errors. One documented extension: ``processes_per_host``
inside ``torch_distributed`` and ``smdistributed.dataparallel`` sets the processes
per host and is sent as ``sagemaker_mpi_num_of_processes_per_host``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from launchbay._instances import instance_family, version_tuple
from launchbay.errors import DistributionError
from launchbay.runtime.names import HP, LOCAL_GPU, LOCAL_INSTANCE_TYPES

__all__ = [
    "Distribution",
    "MPIConfig",
    "SMDataParallelConfig",
    "SMModelParallelConfig",
    "TorchDistributedConfig",
    "ParameterServerConfig",
    "MultiWorkerMirroredStrategyConfig",
    "parse_distribution",
    "check_strategies",
    "FRAMEWORK_STRATEGIES",
    "distribution_from_hyperparameters",
    "schema",
    "schema_defs",
    "LOCAL_INSTANCE_TYPES",
    "is_gpu_instance",
    "is_trainium_instance",
]

logger = logging.getLogger("launchbay.distribution")

# LOCAL_INSTANCE_TYPES is re-exported from launchbay.runtime.names for older imports.
MP_PARAMETERS = "mp_parameters"  # modelparallel's hyperparameter (not a sagemaker_* key)

# Facts from the reference SDK: which versions its images support for each strategy.
SMDDP_FRAMEWORK_VERSIONS: dict[str, tuple[str, ...]] = {
    "tensorflow": (
        "2.3", "2.3.1", "2.3.2", "2.4", "2.4.1", "2.4.3", "2.5", "2.5.0", "2.5.1", "2.6",
        "2.6.0", "2.6.2", "2.6.3", "2.7", "2.7.1", "2.8", "2.8.0", "2.9", "2.9.1", "2.9.2",
        "2.10", "2.10.1", "2.11", "2.11.0",
    ),
    "pytorch": (
        "1.6", "1.6.0", "1.7", "1.7.1", "1.8", "1.8.0", "1.8.1", "1.9", "1.9.0", "1.9.1",
        "1.10", "1.10.0", "1.10.2", "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1",
        "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0",
    ),
}  # fmt: skip
TORCH_DISTRIBUTED_GPU_VERSIONS: tuple[str, ...] = (
    "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1",
    "2.5.1", "2.6.0", "2.7.1", "2.8.0",
)  # fmt: skip
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS: tuple[str, ...] = (
    "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0",
)  # fmt: skip
SMDDP_INCOMPATIBLE_IMAGE_TAGS = ("2.0.1-gpu-py310-cu121",)
#: The strategies (top-level keys) each framework estimator takes, as SDK v2's does; the
#: frameworks not named here (pytorch, tensorflow, the generic Estimator) have their own rules.
FRAMEWORK_STRATEGIES: dict[str, tuple[str, ...]] = {
    "huggingface": ("pytorchddp", "torch_distributed", "smdistributed", "mpi", "instance_groups"),
    "mxnet": ("parameter_server", "mpi"),
    "sklearn": (),
    "xgboost": (),
}
SINGLE_GPU_INSTANCE_TYPES = ("ml.p2.xlarge", "ml.p3.2xlarge")
MWMS_MIN_TF_VERSION = (2, 9)


def _instance_family(instance_type: str | None) -> str:
    return instance_family(instance_type) if isinstance(instance_type, str) else ""


def is_gpu_instance(instance_type: str | None) -> bool:
    """True for ml.p*/ml.g* instance types and ``local_gpu`` (the reference SDK's rule)."""
    return instance_type == LOCAL_GPU or _instance_family(instance_type).startswith(("p", "g"))


def is_trainium_instance(instance_type: str | None) -> bool:
    """True for ml.trn* instance types."""
    return _instance_family(instance_type).startswith("trn")


def _version_in(version: str | None, supported: Sequence[str]) -> bool:
    """Exact match, or a short version ("2.3") whose newest patch is supported."""
    if version in supported:
        return True
    want = version_tuple(version)
    return (
        bool(want)
        and len(want) < 3
        and any(version_tuple(v)[: len(want)] == want for v in supported)
    )


def _path(*keys: Any) -> str:
    return "distribution" + "".join(f"[{k!r}]" for k in keys)


# ------------------------------------------------------------------ the schema


@functools.cache
def schema() -> dict[str, Any]:
    """The ``distribution`` JSON Schema (``launchbay/schemas/distribution.schema.json``).

    Loaded once and shared: do not modify the returned dict. Its ``$defs`` names all
    start with ``distribution.``, so another schema can merge them into its own
    ``$defs`` and use the root as ``{"$ref": "#/$defs/distribution"}``.
    """
    import importlib.resources  # only when a distribution is given (a few ms at import)

    text = (
        importlib.resources.files("launchbay")
        .joinpath("schemas/distribution.schema.json")
        .read_text(encoding="utf-8")
    )
    return json.loads(text)


def schema_defs() -> dict[str, Any]:
    """:func:`schema` as ``$defs`` entries for another schema (the job spec's).

    The root is ``"distribution"``, the rest keep their ``distribution.*`` names; once
    merged into the host schema's root ``$defs``, ``{"$ref": "#/$defs/distribution"}``
    validates a distribution and every ``$ref`` inside resolves. Fresh copies.
    """
    doc = copy.deepcopy(schema())
    defs = doc.pop("$defs")
    root = {k: v for k, v in doc.items() if k not in ("$schema", "$id")}
    return {"distribution": root, **defs}


def _strategies() -> list[str]:
    """The top-level keys, in the schema's order."""
    return list(schema()["properties"])


def _is_int(_checker: Any, value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: Any, value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(_checker, value)


@functools.cache
def _validator() -> Any:
    """A 2020-12 validator for :func:`schema` with Python's types.

    Unlike plain JSON Schema, ``2.0`` is not an integer and NaN/infinity are not
    numbers: a count of ``2.0`` was never accepted, and no NaN can be sent as JSON.
    """
    # Deferred: jsonschema (with referencing, rpds, attrs) costs more to import than
    # all of launchbay, and only a non-empty distribution needs it.
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine_many({"integer": _is_int, "number": _is_number})
    return jsonschema.validators.extend(base, type_checker=checker)(schema())


def _plain(value: Any) -> Any:
    """``value`` as JSON-like data: mappings as dicts, tuples as lists, InstanceGroups as names."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    name = getattr(value, "instance_group_name", None)
    return name if isinstance(name, str) else value


def _value_at(roots: Sequence[Any], keys: Sequence[Any]) -> Any:
    """The value at ``keys`` in the first of ``roots`` that has it (the caller's own first)."""
    for root in roots:
        try:
            for key in keys:
                root = root[key]
        except (KeyError, IndexError, TypeError):
            continue
        return root
    return None


def _accepted(node: Mapping[str, Any]) -> str:
    """What a schema node accepts, in words (its ``x-accepted`` or its keys or values)."""
    keys = list(node.get("properties", {}))
    text = node.get("x-accepted")
    if text:
        return str(text).replace("{keys}", repr(keys))
    if "enum" in node:
        return f"one of {list(node['enum'])}"
    return f"a dict with keys from {sorted(keys)}"


def _check_schema(given: Any, plain: Any) -> None:
    """Raise the first schema error (the shallowest) as a :class:`DistributionError`."""
    errors = sorted(_validator().iter_errors(plain), key=lambda e: len(e.absolute_path))
    if not errors:
        return
    error = errors[0]
    keys = tuple(error.absolute_path)
    node = error.schema if isinstance(error.schema, Mapping) else {}
    where = _path(*keys)
    if error.validator == "additionalProperties":
        allowed = list(node.get("properties", {}))
        key = next(k for k in error.instance if k not in allowed)
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DistributionError(
            f"Unknown key {key!r} in {where}.{hint} Accepted keys: {sorted(allowed)}.",
            argument=_path(*keys, str(key)),
            value=_value_at((given, plain), (*keys, key)),
        )
    value = _value_at((given, plain), keys)
    raise DistributionError(
        f"Invalid {where}={value!r}: expected {_accepted(node)}.", argument=where, value=value
    )


@dataclass(frozen=True)
class MPIConfig:
    """``{"mpi": {...}}``: mpirun across hosts."""

    enabled: bool = False
    processes_per_host: int | None = None
    custom_mpi_options: str = ""

    def to_hyperparameters(self) -> dict[str, Any]:
        hps: dict[str, Any] = {HP.MPI_ENABLED: self.enabled}
        if self.processes_per_host:
            hps[HP.MPI_PROCESSES_PER_HOST] = self.processes_per_host
        hps[HP.MPI_CUSTOM_OPTIONS] = self.custom_mpi_options
        return hps


@dataclass(frozen=True)
class SMDataParallelConfig:
    """``{"smdistributed": {"dataparallel": {...}}}`` (and its alias ``pytorchddp``)."""

    enabled: bool = False
    custom_mpi_options: str = ""
    processes_per_host: int | None = None

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {
            HP.SMDDP_ENABLED: self.enabled,
            HP.INSTANCE_TYPE: instance_type,
        }
        if self.enabled:
            hps[HP.SMDDP_CUSTOM_MPI_OPTIONS] = self.custom_mpi_options
        if self.processes_per_host:
            hps[HP.MPI_PROCESSES_PER_HOST] = self.processes_per_host
        return hps


@dataclass(frozen=True)
class SMModelParallelConfig:
    """``{"smdistributed": {"modelparallel": {...}}}``."""

    enabled: bool = False
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {}
        if self.enabled:
            hps[MP_PARAMETERS] = dict(self.parameters)
        hps[HP.SMDDP_ENABLED] = False
        hps[HP.INSTANCE_TYPE] = instance_type
        return hps


@dataclass(frozen=True)
class TorchDistributedConfig:
    """``{"torch_distributed": {...}}``: torchrun on every host."""

    enabled: bool = False
    processes_per_host: int | None = None

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {HP.TORCH_DISTRIBUTED_ENABLED: self.enabled}
        if instance_type is not None:
            hps[HP.INSTANCE_TYPE] = instance_type
        if self.processes_per_host:
            hps[HP.MPI_PROCESSES_PER_HOST] = self.processes_per_host
        return hps


@dataclass(frozen=True)
class ParameterServerConfig:
    """``{"parameter_server": {...}}``: TensorFlow parameter servers."""

    enabled: bool = False

    def to_hyperparameters(self) -> dict[str, Any]:
        return {HP.PARAMETER_SERVER_ENABLED: self.enabled}


@dataclass(frozen=True)
class MultiWorkerMirroredStrategyConfig:
    """``{"multi_worker_mirrored_strategy": {...}}``: TensorFlow MWMS."""

    enabled: bool = False

    def to_hyperparameters(self) -> dict[str, Any]:
        return {HP.MWMS_ENABLED: self.enabled}


@dataclass(frozen=True)
class Distribution:
    """A validated ``distribution``: each strategy the user named, typed."""

    instance_type: str | None = None
    framework: str | None = None
    mpi: MPIConfig | None = None
    dataparallel: SMDataParallelConfig | None = None
    modelparallel: SMModelParallelConfig | None = None
    torch_distributed: TorchDistributedConfig | None = None
    parameter_server: ParameterServerConfig | None = None
    multi_worker_mirrored_strategy: MultiWorkerMirroredStrategyConfig | None = None
    instance_groups: tuple[str, ...] | None = None

    @property
    def is_empty(self) -> bool:
        return not any(
            (
                self.mpi,
                self.dataparallel,
                self.modelparallel,
                self.torch_distributed,
                self.parameter_server,
                self.multi_worker_mirrored_strategy,
                self.instance_groups is not None,
            )
        )

    @property
    def smdistributed(self) -> SMDataParallelConfig | SMModelParallelConfig | None:
        return self.dataparallel or self.modelparallel

    def to_hyperparameters(self) -> dict[str, Any]:
        """The ``sagemaker_*`` (and ``mp_parameters``) hyperparameters, not yet JSON-encoded."""
        torch = self.torch_distributed
        torch_enabled = torch if torch is not None and torch.enabled else None
        if self.framework == "pytorch" and torch_enabled is not None:
            # The reference SDK sends only the torch keys here, plus the smdistributed
            # ones when both are given (torch_distributed + modelparallel on p5).
            hps: dict[str, Any] = self._generic() if self.smdistributed else {}
            hps.update(torch_enabled.to_hyperparameters(self.instance_type))
            return hps
        hps = self._generic()
        if torch_enabled is not None:  # generic estimator with a custom image
            hps.update(torch_enabled.to_hyperparameters(self.instance_type))
        return hps

    def _generic(self) -> dict[str, Any]:
        hps: dict[str, Any] = {}
        if self.instance_groups is not None:
            hps[HP.DISTRIBUTION_INSTANCE_GROUPS] = list(self.instance_groups)
        if self.parameter_server:
            hps.update(self.parameter_server.to_hyperparameters())
        if self.mpi:
            hps.update(self.mpi.to_hyperparameters())
        smd = self.smdistributed
        if smd:
            hps.update(smd.to_hyperparameters(self.instance_type))
        if self.multi_worker_mirrored_strategy:
            hps.update(self.multi_worker_mirrored_strategy.to_hyperparameters())
        return hps


def distribution_from_hyperparameters(hps: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``distribution`` dict whose hyperparameters are ``hps`` (decoded values).

    The reverse of :meth:`Distribution.to_hyperparameters`, used by ``attach``: the
    dict it returns makes the same hyperparameters. ``pytorchddp`` comes back as
    ``smdistributed.dataparallel`` and InstanceGroups as their names.
    ``sagemaker_mpi_num_of_processes_per_host`` is sent by several strategies; it is
    given back to torch_distributed, else mpi, else smdistributed dataparallel.
    """
    distribution: dict[str, Any] = {}
    per_host = hps.get(HP.MPI_PROCESSES_PER_HOST)
    per_host_taken = False

    def with_per_host(section: dict[str, Any]) -> dict[str, Any]:
        nonlocal per_host_taken
        if per_host is not None and not per_host_taken:
            section["processes_per_host"] = per_host
            per_host_taken = True
        return section

    def with_options(section: dict[str, Any], key: str) -> dict[str, Any]:
        if hps.get(key):
            section["custom_mpi_options"] = hps[key]
        return section

    if HP.PYTORCH_DDP_ENABLED in hps:  # the HuggingFace estimator's pytorchddp
        distribution["pytorchddp"] = with_per_host({"enabled": bool(hps[HP.PYTORCH_DDP_ENABLED])})
    if HP.TORCH_DISTRIBUTED_ENABLED in hps:
        distribution["torch_distributed"] = with_per_host(
            {"enabled": bool(hps[HP.TORCH_DISTRIBUTED_ENABLED])}
        )
    if HP.MPI_ENABLED in hps:
        section = with_options({"enabled": bool(hps[HP.MPI_ENABLED])}, HP.MPI_CUSTOM_OPTIONS)
        distribution["mpi"] = with_per_host(section)
    if MP_PARAMETERS in hps:
        distribution["smdistributed"] = {
            "modelparallel": {"enabled": True, "parameters": hps[MP_PARAMETERS]}
        }
    elif HP.SMDDP_ENABLED in hps:
        section = with_options(
            {"enabled": bool(hps[HP.SMDDP_ENABLED])}, HP.SMDDP_CUSTOM_MPI_OPTIONS
        )
        distribution["smdistributed"] = {"dataparallel": with_per_host(section)}
    if HP.PARAMETER_SERVER_ENABLED in hps:
        distribution["parameter_server"] = {"enabled": bool(hps[HP.PARAMETER_SERVER_ENABLED])}
    if HP.MWMS_ENABLED in hps:
        distribution["multi_worker_mirrored_strategy"] = {"enabled": bool(hps[HP.MWMS_ENABLED])}
    if HP.DISTRIBUTION_INSTANCE_GROUPS in hps:
        distribution["instance_groups"] = list(hps[HP.DISTRIBUTION_INSTANCE_GROUPS])
    return distribution or None


def _load_mp_parameters(path: str) -> dict[str, Any]:
    """The JSON object in a modelparallel ``parameters`` file."""
    where = _path("smdistributed", "modelparallel", "parameters")
    if not os.path.isfile(path):
        raise DistributionError(
            f"Invalid {where}={path!r}: expected a dict or the path of an existing JSON file.",
            argument=where,
            value=path,
        )
    try:
        with open(path, encoding="utf-8") as fh:
            params = json.load(fh)
    except (OSError, ValueError) as exc:
        raise DistributionError(
            f"Invalid {where}={path!r}: the file is not readable JSON ({exc}).",
            argument=where,
            value=path,
        ) from exc
    if not isinstance(params, dict):
        raise DistributionError(
            f"Invalid {where}={path!r}: the JSON file must hold an object.",
            argument=where,
            value=path,
        )
    return params


def _check_mp_parameters(params: Mapping[str, Any]) -> None:
    """The rules between modelparallel parameters (their types are the schema's)."""
    where = _path("smdistributed", "modelparallel", "parameters")
    if params.get("auto_partition") is False and "default_partition" not in params:
        raise DistributionError(
            f"{where}: 'default_partition' must be given when 'auto_partition' is False.",
            argument=where,
            value=dict(params),
        )
    if "default_partition" in params:
        partitions = params.get("partitions")
        default = params["default_partition"]
        if not isinstance(partitions, int) or default >= partitions:
            raise DistributionError(
                f"Invalid {where}['default_partition']={default!r}: expected an integer "
                "below 'partitions'.",
                argument=f"{where}['default_partition']",
                value=default,
            )
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in params and "ddp" not in params:
            raise DistributionError(
                f"{where}: {key!r} needs 'ddp' to be set as well.",
                argument=where,
                value=dict(params),
            )
    if params.get("horovod") and params.get("ddp"):
        raise DistributionError(
            f"{where}: 'ddp' and 'horovod' cannot both be enabled.",
            argument=where,
            value=dict(params),
        )


def _smdistributed(
    section: Mapping[str, Any],
) -> tuple[SMDataParallelConfig | None, SMModelParallelConfig | None]:
    if len(section) > 1:
        raise DistributionError(
            f"Invalid {_path('smdistributed')}={dict(section)!r}: use one smdistributed strategy "
            "at a time. Accepted: {'dataparallel': {...}} or {'modelparallel': {...}}.",
            argument=_path("smdistributed"),
            value=dict(section),
        )
    dataparallel = modelparallel = None
    if "dataparallel" in section:
        dataparallel = SMDataParallelConfig(**section["dataparallel"])
    if "modelparallel" in section:
        mp = section["modelparallel"]
        enabled = mp.get("enabled", False)
        params = mp.get("parameters", {}) if enabled else {}
        if enabled:
            _check_mp_parameters(params)
        modelparallel = SMModelParallelConfig(enabled=enabled, parameters=params)
    return dataparallel, modelparallel


def _group_names(names: Sequence[str], estimator_groups: Sequence[Any] | None) -> tuple[str, ...]:
    where = _path("instance_groups")
    # Names as the groups carry them: strings, once the estimator's arguments are checked.
    known: dict[Any, Any] = {
        getattr(g, "instance_group_name", None): g for g in (estimator_groups or [])
    }
    if names and not known:
        raise DistributionError(
            f"Invalid {where}={names!r}: the estimator has no instance_groups. "
            "Accepted: groups given to the estimator's instance_groups argument.",
            argument=where,
            value=names,
        )
    if len(names) > len(known) or (len(known) > 1 and len(names) != 1):
        raise DistributionError(
            f"Invalid {where}={names!r}: name exactly one of the estimator's instance_groups "
            f"{sorted(known)} as the training group.",
            argument=where,
            value=names,
        )
    for name in names:
        if name not in known:
            raise DistributionError(
                f"Invalid {where} entry {name!r}: not one of the estimator's instance groups. "
                f"Accepted: {sorted(known)}.",
                argument=where,
                value=names,
            )
    return tuple(names)


def _checked(distribution: Any) -> dict[str, Any]:
    """``distribution`` as plain data whose keys and types the schema accepts.

    A modelparallel ``parameters`` file is read and its object checked in its place.
    """
    if isinstance(distribution, Mapping) and "pytorchxla" in distribution:
        raise DistributionError(
            "distribution['pytorchxla'] is only used with SageMaker Training Compiler, which "
            f"launchbay does not support. Accepted keys: {_strategies()}.",
            argument=_path("pytorchxla"),
            value=distribution["pytorchxla"],
        )
    plain = _plain(distribution)
    _check_schema(distribution, plain)
    mp = plain.get("smdistributed", {}).get("modelparallel", {})
    if mp.get("enabled") and isinstance(mp.get("parameters"), str):
        mp["parameters"] = _load_mp_parameters(mp["parameters"])
        _check_schema(distribution, plain)
    return plain


def check_strategies(distribution: Mapping[str, Any] | None, framework: str) -> None:
    """Refuse a ``distribution`` key the ``framework`` estimator does not take.

    Raises:
        DistributionError: naming the key, its value and the keys accepted (none for
            the single-process frameworks, whose v2 estimators drop the argument).
    """
    allowed = FRAMEWORK_STRATEGIES.get(framework)
    if allowed is None or not distribution:
        return
    for key in distribution:
        if key not in allowed:
            accepted = (
                ", ".join(repr(k) for k in allowed)
                if allowed
                else f"no distribution: {framework} jobs run the script once per host"
            )
            raise DistributionError(
                f"Invalid {_path(key)}={distribution[key]!r}: the {framework} estimator does not "
                f"take this strategy. Accepted: {accepted}.",
                argument=_path(key),
                value=distribution[key],
            )


def parse_distribution(
    distribution: Mapping[str, Any] | None,
    *,
    framework: str | None,
    framework_version: str | None = None,
    py_version: str | None = None,
    image_uri: str | None = None,
    instance_type: str | None = None,
    entry_point: str | None = None,
    instance_groups: Sequence[Any] | None = None,
) -> Distribution:
    """Validate ``distribution`` once and return it typed.

    ``framework`` is ``"pytorch"``, ``"tensorflow"`` or ``None`` (the generic
    ``Estimator``, whose image is the user's). Keys and types are checked against
    :func:`schema`; the rules that involve the other arguments are checked here.
    Raises :class:`DistributionError` naming the key, the value given and what is
    accepted.
    """
    if distribution is None or (isinstance(distribution, Mapping) and not distribution):
        dist: dict[str, Any] = {}  # nothing to check: no schema, no jsonschema import
    else:
        dist = _checked(distribution)

    if "pytorchddp" in dist:
        if framework == "tensorflow":
            raise DistributionError(
                "distribution['pytorchddp'] is a PyTorch strategy; the TensorFlow estimator "
                "accepts mpi, smdistributed, parameter_server and multi_worker_mirrored_strategy.",
                argument=_path("pytorchddp"),
                value=dist["pytorchddp"],
            )
        if "smdistributed" in dist:
            raise DistributionError(
                "distribution has both 'pytorchddp' and 'smdistributed': pytorchddp is an alias "
                "of smdistributed dataparallel, so give one of them.",
                argument="distribution",
                value=distribution,
            )
        dist["smdistributed"] = {"dataparallel": dist.pop("pytorchddp")}

    local = instance_type in LOCAL_INSTANCE_TYPES
    fields: dict[str, Any] = {"instance_type": instance_type, "framework": framework}
    # The schema's keys are the configs' field names.
    if "mpi" in dist:
        fields["mpi"] = MPIConfig(**dist["mpi"])
    if "smdistributed" in dist:
        fields["dataparallel"], fields["modelparallel"] = _smdistributed(dist["smdistributed"])
    if "torch_distributed" in dist:
        fields["torch_distributed"] = TorchDistributedConfig(**dist["torch_distributed"])
    if "parameter_server" in dist:
        fields["parameter_server"] = ParameterServerConfig(**dist["parameter_server"])
    if "multi_worker_mirrored_strategy" in dist:
        fields["multi_worker_mirrored_strategy"] = MultiWorkerMirroredStrategyConfig(
            **dist["multi_worker_mirrored_strategy"]
        )
    if "instance_groups" in dist:
        fields["instance_groups"] = _group_names(dist["instance_groups"], instance_groups)
    elif instance_groups and len(instance_groups) == 1 and not local:
        fields["instance_groups"] = (instance_groups[0].instance_group_name,)
    elif instance_groups and len(instance_groups) > 1:
        raise DistributionError(
            "With several instance_groups, distribution['instance_groups'] must name the one "
            f"group that trains. Accepted: one of {[g.instance_group_name for g in instance_groups]}.",
            argument=_path("instance_groups"),
            value=None,
        )

    parsed = Distribution(**fields)
    _validate(parsed, dist, framework, framework_version, py_version, image_uri, instance_type,
              entry_point, instance_groups)  # fmt: skip
    return parsed


def _validate(
    d: Distribution,
    dist: Mapping[str, Any],
    framework: str | None,
    framework_version: str | None,
    py_version: str | None,
    image_uri: str | None,
    instance_type: str | None,
    entry_point: str | None,
    instance_groups: Sequence[Any] | None,
) -> None:
    local = instance_type in LOCAL_INSTANCE_TYPES
    torch_enabled = bool(d.torch_distributed and d.torch_distributed.enabled)
    mpi_enabled = bool(d.mpi and d.mpi.enabled)
    dp_enabled = bool(d.dataparallel and d.dataparallel.enabled)
    group_types = [getattr(g, "instance_type", None) for g in instance_groups or []]
    types = group_types if d.instance_groups else [instance_type]

    for strategy, config in (("mpi", d.mpi), ("torch_distributed", d.torch_distributed)):
        if config is not None and not config.enabled:
            logger.warning(
                "distribution[%r] is given without enabled=True: that strategy is off.", strategy
            )

    if mpi_enabled and torch_enabled:
        raise DistributionError(
            "distribution enables both 'mpi' and 'torch_distributed'; they are two launchers for "
            "the same processes (SDK v2 silently drops mpi here). Accepted: one of them.",
            argument="distribution",
            value=dict(dist),
        )

    if any(is_trainium_instance(t) for t in types):
        keys = [k for k in dist if k != "instance_groups"]
        if keys and keys != ["torch_distributed"]:
            raise DistributionError(
                f"Invalid distribution keys {keys} for Trainium instance_type={instance_type!r}: "
                "Trainium instances accept only ['torch_distributed'].",
                argument="distribution",
                value=dict(dist),
            )

    if dp_enabled:
        if not instance_type and not d.instance_groups:
            raise DistributionError(
                "smdistributed dataparallel needs an instance_type. Accepted: a GPU instance type "
                "such as 'ml.p4d.24xlarge', or 'local_gpu'/'local'/'local_process'.",
                argument="instance_type",
                value=instance_type,
            )
        if not image_uri and not local and framework in SMDDP_FRAMEWORK_VERSIONS:
            supported = SMDDP_FRAMEWORK_VERSIONS[framework]
            if not _version_in(framework_version, supported):
                raise DistributionError(
                    f"Invalid framework_version={framework_version!r} for smdistributed "
                    f"dataparallel: its {framework} images exist for {list(supported)}.",
                    argument="framework_version",
                    value=framework_version,
                )
            if "py3" not in str(py_version):
                raise DistributionError(
                    f"Invalid py_version={py_version!r} for smdistributed dataparallel: "
                    "accepted py3 versions such as 'py310'.",
                    argument="py_version",
                    value=py_version,
                )

    if d.torch_distributed is not None and framework == "tensorflow":
        raise DistributionError(
            "distribution['torch_distributed'] is PyTorch-only; the TensorFlow estimator accepts "
            "mpi, smdistributed, parameter_server and multi_worker_mirrored_strategy.",
            argument=_path("torch_distributed"),
            value=dist.get("torch_distributed"),
        )
    if torch_enabled:
        if not image_uri and framework == "pytorch":
            if "py3" not in str(py_version):
                raise DistributionError(
                    f"Invalid py_version={py_version!r} for torch_distributed: accepted py3 "
                    "versions such as 'py311'.",
                    argument="py_version",
                    value=py_version,
                )
            for itype in types:
                if itype in LOCAL_INSTANCE_TYPES:
                    continue
                if is_gpu_instance(itype):
                    supported = TORCH_DISTRIBUTED_GPU_VERSIONS
                elif is_trainium_instance(itype):
                    supported = TORCH_DISTRIBUTED_TRAINIUM_VERSIONS
                else:
                    raise DistributionError(
                        f"Invalid instance_type={itype!r} for torch_distributed: accepted GPU "
                        "(ml.p*, ml.g*) and Trainium (ml.trn*) instance types, or the local "
                        "types 'local', 'local_gpu' and 'local_process'.",
                        argument="instance_type",
                        value=itype,
                    )
                if not _version_in(framework_version, supported):
                    raise DistributionError(
                        f"Invalid framework_version={framework_version!r} for torch_distributed "
                        f"on {itype}: accepted {list(supported)}.",
                        argument="framework_version",
                        value=framework_version,
                    )
        if entry_point is not None and not str(entry_point).endswith(".py"):
            raise DistributionError(
                f"Invalid entry_point={entry_point!r} for torch_distributed: torchrun launches "
                "Python programs only. Accepted: a path ending in '.py'.",
                argument="entry_point",
                value=entry_point,
            )

    if d.smdistributed is not None:
        if not torch_enabled and any("p5.48xlarge" in str(t) for t in types):
            raise DistributionError(
                f"smdistributed on instance_type={instance_type!r} needs torch_distributed: "
                "SMDataParallel and SMModelParallel do not support p5 instances on their own. "
                "Accepted: add {'torch_distributed': {'enabled': True}}.",
                argument="instance_type",
                value=instance_type,
            )
        for tag in SMDDP_INCOMPATIBLE_IMAGE_TAGS:
            if image_uri and tag in image_uri and not torch_enabled:
                raise DistributionError(
                    f"Invalid image_uri={image_uri!r} for smdistributed: images tagged {tag} "
                    "do not support SMDataParallel or SMModelParallel.",
                    argument="image_uri",
                    value=image_uri,
                )

    if d.multi_worker_mirrored_strategy and d.multi_worker_mirrored_strategy.enabled:
        if framework != "tensorflow":
            raise DistributionError(
                "distribution['multi_worker_mirrored_strategy'] is TensorFlow-only. Accepted "
                "with the TensorFlow estimator.",
                argument=_path("multi_worker_mirrored_strategy"),
                value=dist["multi_worker_mirrored_strategy"],
            )
        if framework_version and version_tuple(framework_version) < MWMS_MIN_TF_VERSION:
            raise DistributionError(
                f"Invalid framework_version={framework_version!r} for "
                "multi_worker_mirrored_strategy: accepted TensorFlow 2.9 or newer.",
                argument="framework_version",
                value=framework_version,
            )
        clash = [k for k in ("smdistributed", "parameter_server") if k in dist]
        if clash:
            raise DistributionError(
                f"multi_worker_mirrored_strategy cannot be combined with {clash}. Accepted: "
                "multi_worker_mirrored_strategy alone.",
                argument="distribution",
                value=dict(dist),
            )

    if d.instance_groups and not (mpi_enabled or dp_enabled):
        raise DistributionError(
            "distribution['instance_groups'] needs a strategy that uses it: accepted with "
            "mpi or smdistributed dataparallel enabled.",
            argument=_path("instance_groups"),
            value=list(d.instance_groups),
        )

    if d.parameter_server and d.parameter_server.enabled:
        for itype in types:
            if (
                isinstance(itype, str)
                and (itype == LOCAL_GPU or _instance_family(itype).startswith("p"))
                and itype not in SINGLE_GPU_INSTANCE_TYPES
            ):
                logger.warning(
                    "parameter_server on multi-GPU instance %s runs one worker per host, so not "
                    "every GPU is used.",
                    itype,
                )
