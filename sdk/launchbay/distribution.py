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
``sagemaker_*`` keys SDK v2 would send for the same dict (before JSON encoding).

Stricter than SDK v2 (which silently ignores these): unknown keys, values of the
wrong type, negative or zero counts, and ``mpi`` together with
``torch_distributed`` are errors. One documented extension: ``processes_per_host``
inside ``torch_distributed`` and ``smdistributed.dataparallel`` sets the processes
per host and is sent as ``sagemaker_mpi_num_of_processes_per_host``.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from launchbay._instances import instance_family, version_tuple
from launchbay.errors import DistributionError

__all__ = [
    "Distribution",
    "MPIConfig",
    "SMDataParallelConfig",
    "SMModelParallelConfig",
    "TorchDistributedConfig",
    "ParameterServerConfig",
    "MultiWorkerMirroredStrategyConfig",
    "parse_distribution",
    "LOCAL_INSTANCE_TYPES",
    "is_gpu_instance",
    "is_trainium_instance",
]

logger = logging.getLogger("launchbay.distribution")

LOCAL_INSTANCE_TYPES = ("local", "local_gpu", "local_process")

# Facts from the reference SDK: which versions its images support for each strategy.
SMDDP_FRAMEWORK_VERSIONS = {
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
TORCH_DISTRIBUTED_GPU_VERSIONS = (
    "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1",
    "2.5.1", "2.6.0", "2.7.1", "2.8.0",
)  # fmt: skip
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS = (
    "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0",
)  # fmt: skip
SMDDP_INCOMPATIBLE_IMAGE_TAGS = ("2.0.1-gpu-py310-cu121",)
SINGLE_GPU_INSTANCE_TYPES = ("ml.p2.xlarge", "ml.p3.2xlarge")
MWMS_MIN_TF_VERSION = (2, 9)

_STRATEGIES = (
    "mpi",
    "smdistributed",
    "torch_distributed",
    "pytorchddp",
    "parameter_server",
    "multi_worker_mirrored_strategy",
    "instance_groups",
)

# SDK v2's checks on smdistributed modelparallel parameters (the parts we can check).
_MP_CHOICES = {
    "pipeline": ("simple", "interleaved", "_only_forward"),
    "placement_strategy": ("spread", "cluster"),
    "optimize": ("speed", "memory"),
}
_MP_POSITIVE = ("microbatches", "partitions", "active_microbatches")
_MP_BOOL = (
    "auto_partition",
    "contiguous",
    "load_partition",
    "horovod",
    "ddp",
    "deterministic_server",
)


def _instance_family(instance_type: str | None) -> str:
    return instance_family(instance_type) if isinstance(instance_type, str) else ""


def is_gpu_instance(instance_type: str | None) -> bool:
    """True for ml.p*/ml.g* instance types and ``local_gpu`` (the reference SDK's rule)."""
    return instance_type == "local_gpu" or _instance_family(instance_type).startswith(("p", "g"))


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


def _path(*keys: str) -> str:
    return "distribution" + "".join(f"[{k!r}]" for k in keys)


def _check_keys(value: Any, allowed: Sequence[str], *keys: str) -> Mapping[str, Any]:
    where = _path(*keys)
    if not isinstance(value, Mapping):
        raise DistributionError(
            f"Invalid {where}={value!r}: expected a dict with keys from {sorted(allowed)}.",
            argument=where,
            value=value,
        )
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise DistributionError(
                f"Unknown key {key!r} in {where}.{hint} Accepted keys: {sorted(allowed)}.",
                argument=_path(*keys, str(key)),
                value=value[key],
            )
    return value


def _get_bool(section: Mapping[str, Any], key: str, *keys: str, default: bool = False) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise DistributionError(
            f"Invalid {_path(*keys, key)}={value!r}: expected True or False.",
            argument=_path(*keys, key),
            value=value,
        )
    return value


def _get_count(section: Mapping[str, Any], key: str, *keys: str) -> int | None:
    value = section.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DistributionError(
            f"Invalid {_path(*keys, key)}={value!r}: expected a positive integer (1 or more).",
            argument=_path(*keys, key),
            value=value,
        )
    return value


def _get_str(section: Mapping[str, Any], key: str, *keys: str) -> str:
    value = section.get(key, "")
    if not isinstance(value, str):
        raise DistributionError(
            f"Invalid {_path(*keys, key)}={value!r}: expected a string of mpirun options.",
            argument=_path(*keys, key),
            value=value,
        )
    return value


@dataclass(frozen=True)
class MPIConfig:
    """``{"mpi": {...}}``: mpirun across hosts."""

    enabled: bool = False
    processes_per_host: int | None = None
    custom_mpi_options: str = ""

    def to_hyperparameters(self) -> dict[str, Any]:
        hps: dict[str, Any] = {"sagemaker_mpi_enabled": self.enabled}
        if self.processes_per_host:
            hps["sagemaker_mpi_num_of_processes_per_host"] = self.processes_per_host
        hps["sagemaker_mpi_custom_mpi_options"] = self.custom_mpi_options
        return hps


@dataclass(frozen=True)
class SMDataParallelConfig:
    """``{"smdistributed": {"dataparallel": {...}}}`` (and its alias ``pytorchddp``)."""

    enabled: bool = False
    custom_mpi_options: str = ""
    processes_per_host: int | None = None

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {
            "sagemaker_distributed_dataparallel_enabled": self.enabled,
            "sagemaker_instance_type": instance_type,
        }
        if self.enabled:
            hps["sagemaker_distributed_dataparallel_custom_mpi_options"] = self.custom_mpi_options
        if self.processes_per_host:
            hps["sagemaker_mpi_num_of_processes_per_host"] = self.processes_per_host
        return hps


@dataclass(frozen=True)
class SMModelParallelConfig:
    """``{"smdistributed": {"modelparallel": {...}}}``."""

    enabled: bool = False
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {}
        if self.enabled:
            hps["mp_parameters"] = dict(self.parameters)
        hps["sagemaker_distributed_dataparallel_enabled"] = False
        hps["sagemaker_instance_type"] = instance_type
        return hps


@dataclass(frozen=True)
class TorchDistributedConfig:
    """``{"torch_distributed": {...}}``: torchrun on every host."""

    enabled: bool = False
    processes_per_host: int | None = None

    def to_hyperparameters(self, instance_type: str | None) -> dict[str, Any]:
        hps: dict[str, Any] = {"sagemaker_torch_distributed_enabled": self.enabled}
        if instance_type is not None:
            hps["sagemaker_instance_type"] = instance_type
        if self.processes_per_host:
            hps["sagemaker_mpi_num_of_processes_per_host"] = self.processes_per_host
        return hps


@dataclass(frozen=True)
class ParameterServerConfig:
    """``{"parameter_server": {...}}``: TensorFlow parameter servers."""

    enabled: bool = False

    def to_hyperparameters(self) -> dict[str, Any]:
        return {"sagemaker_parameter_server_enabled": self.enabled}


@dataclass(frozen=True)
class MultiWorkerMirroredStrategyConfig:
    """``{"multi_worker_mirrored_strategy": {...}}``: TensorFlow MWMS."""

    enabled: bool = False

    def to_hyperparameters(self) -> dict[str, Any]:
        return {"sagemaker_multi_worker_mirrored_strategy_enabled": self.enabled}


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

    @property
    def launcher(self) -> str:
        """The launcher this distribution asks for: torchrun, mpi, smddp, ps, mwms or plain."""
        if self.torch_distributed and self.torch_distributed.enabled:
            return "torchrun"
        if self.dataparallel and self.dataparallel.enabled:
            return "smddp"
        if self.mpi and self.mpi.enabled:
            return "mpi"
        if self.parameter_server and self.parameter_server.enabled:
            return "parameter_server"
        if self.multi_worker_mirrored_strategy and self.multi_worker_mirrored_strategy.enabled:
            return "multi_worker_mirrored_strategy"
        return "plain"

    def to_hyperparameters(self) -> dict[str, Any]:
        """The ``sagemaker_*`` (and ``mp_parameters``) hyperparameters, not yet JSON-encoded."""
        torch_enabled = bool(self.torch_distributed and self.torch_distributed.enabled)
        if self.framework == "pytorch" and torch_enabled:
            # The reference SDK sends only the torch keys here, plus the smdistributed
            # ones when both are given (torch_distributed + modelparallel on p5).
            hps: dict[str, Any] = self._generic() if self.smdistributed else {}
            hps.update(self.torch_distributed.to_hyperparameters(self.instance_type))
            return hps
        hps = self._generic()
        if torch_enabled:  # generic estimator with a custom image
            hps.update(self.torch_distributed.to_hyperparameters(self.instance_type))
        return hps

    def _generic(self) -> dict[str, Any]:
        hps: dict[str, Any] = {}
        if self.instance_groups is not None:
            hps["sagemaker_distribution_instance_groups"] = list(self.instance_groups)
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


def _parse_mp_parameters(value: Any) -> dict[str, Any]:
    where = _path("smdistributed", "modelparallel", "parameters")
    if isinstance(value, Mapping):
        params = dict(value)
    elif isinstance(value, str) and os.path.isfile(value):
        try:
            with open(value, encoding="utf-8") as fh:
                params = json.load(fh)
        except (OSError, ValueError) as exc:
            raise DistributionError(
                f"Invalid {where}={value!r}: the file is not readable JSON ({exc}).",
                argument=where,
                value=value,
            ) from exc
        if not isinstance(params, dict):
            raise DistributionError(
                f"Invalid {where}={value!r}: the JSON file must hold an object.",
                argument=where,
                value=value,
            )
    else:
        raise DistributionError(
            f"Invalid {where}={value!r}: expected a dict or the path of an existing JSON file.",
            argument=where,
            value=value,
        )

    def bad(key: str, accepted: str) -> DistributionError:
        return DistributionError(
            f"Invalid {where}[{key!r}]={params[key]!r}: expected {accepted}.",
            argument=f"{where}[{key!r}]",
            value=params[key],
        )

    for key, choices in _MP_CHOICES.items():
        if key in params and params[key] not in choices:
            raise bad(key, f"one of {list(choices)}")
    for key in _MP_POSITIVE:
        if key in params and (
            isinstance(params[key], bool) or not isinstance(params[key], int) or params[key] < 1
        ):
            raise bad(key, "a positive integer")
    for key in _MP_BOOL:
        if key in params and not isinstance(params[key], bool):
            raise bad(key, "True or False")
    if "partition_file" in params and not isinstance(params["partition_file"], str):
        raise bad("partition_file", "a string")
    if params.get("auto_partition") is False and "default_partition" not in params:
        raise DistributionError(
            f"{where}: 'default_partition' must be given when 'auto_partition' is False.",
            argument=where,
            value=value,
        )
    if "default_partition" in params:
        partitions = params.get("partitions")
        default = params["default_partition"]
        if not isinstance(default, int) or not isinstance(partitions, int) or default >= partitions:
            raise bad("default_partition", "an integer below 'partitions'")
    if "memory_weight" in params:
        weight = params["memory_weight"]
        if not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
            raise bad("memory_weight", "a number between 0.0 and 1.0")
    for key in ("ddp_port", "ddp_dist_backend"):
        if key in params and "ddp" not in params:
            raise DistributionError(
                f"{where}: {key!r} needs 'ddp' to be set as well.", argument=where, value=value
            )
    if "ddp_port" in params and (
        isinstance(params["ddp_port"], bool)
        or not isinstance(params["ddp_port"], int)
        or params["ddp_port"] < 0
    ):
        raise bad("ddp_port", "a port number (a non-negative integer)")
    if params.get("horovod") and params.get("ddp"):
        raise DistributionError(
            f"{where}: 'ddp' and 'horovod' cannot both be enabled.", argument=where, value=value
        )
    return params


def _parse_smdistributed(
    value: Any,
) -> tuple[SMDataParallelConfig | None, SMModelParallelConfig | None]:
    section = _check_keys(value, ("dataparallel", "modelparallel"), "smdistributed")
    if len(section) > 1:
        raise DistributionError(
            f"Invalid {_path('smdistributed')}={dict(section)!r}: use one smdistributed strategy "
            "at a time. Accepted: {'dataparallel': {...}} or {'modelparallel': {...}}.",
            argument=_path("smdistributed"),
            value=value,
        )
    dataparallel = modelparallel = None
    if "dataparallel" in section:
        keys = ("smdistributed", "dataparallel")
        dp = _check_keys(
            section["dataparallel"], ("enabled", "custom_mpi_options", "processes_per_host"), *keys
        )
        dataparallel = SMDataParallelConfig(
            enabled=_get_bool(dp, "enabled", *keys),
            custom_mpi_options=_get_str(dp, "custom_mpi_options", *keys),
            processes_per_host=_get_count(dp, "processes_per_host", *keys),
        )
    if "modelparallel" in section:
        keys = ("smdistributed", "modelparallel")
        mp = _check_keys(section["modelparallel"], ("enabled", "parameters"), *keys)
        enabled = _get_bool(mp, "enabled", *keys)
        params = _parse_mp_parameters(mp.get("parameters", {})) if enabled else {}
        modelparallel = SMModelParallelConfig(enabled=enabled, parameters=params)
    return dataparallel, modelparallel


def _group_names(value: Any, estimator_groups: Sequence[Any] | None) -> tuple[str, ...]:
    where = _path("instance_groups")
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise DistributionError(
            f"Invalid {where}={value!r}: expected a list of InstanceGroup objects or group names.",
            argument=where,
            value=value,
        )
    known = {getattr(g, "instance_group_name", None): g for g in (estimator_groups or [])}
    if value and not known:
        raise DistributionError(
            f"Invalid {where}={value!r}: the estimator has no instance_groups. "
            "Accepted: groups given to the estimator's instance_groups argument.",
            argument=where,
            value=value,
        )
    if len(value) > len(known) or (len(known) > 1 and len(value) != 1):
        raise DistributionError(
            f"Invalid {where}={value!r}: name exactly one of the estimator's instance_groups "
            f"{sorted(known)} as the training group.",
            argument=where,
            value=value,
        )
    names = []
    for item in value:
        name = getattr(item, "instance_group_name", item)
        if name not in known:
            raise DistributionError(
                f"Invalid {where} entry {name!r}: not one of the estimator's instance groups. "
                f"Accepted: {sorted(known)}.",
                argument=where,
                value=value,
            )
        names.append(name)
    return tuple(names)


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
    ``Estimator``, whose image is the user's). Raises :class:`DistributionError`
    naming the key, the value given and what is accepted.
    """
    if distribution is None:
        distribution = {}
    if not isinstance(distribution, Mapping):
        raise DistributionError(
            f"Invalid distribution={distribution!r}: expected a dict such as "
            "{'torch_distributed': {'enabled': True}} with keys from "
            f"{list(_STRATEGIES)}.",
            argument="distribution",
            value=distribution,
        )
    if "pytorchxla" in distribution:
        raise DistributionError(
            "distribution['pytorchxla'] is only used with SageMaker Training Compiler, which "
            f"launchbay does not support. Accepted keys: {list(_STRATEGIES)}.",
            argument=_path("pytorchxla"),
            value=distribution["pytorchxla"],
        )
    _check_keys(distribution, _STRATEGIES)
    dist = dict(distribution)

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

    if "mpi" in dist:
        section = _check_keys(
            dist["mpi"], ("enabled", "processes_per_host", "custom_mpi_options"), "mpi"
        )
        fields["mpi"] = MPIConfig(
            enabled=_get_bool(section, "enabled", "mpi"),
            processes_per_host=_get_count(section, "processes_per_host", "mpi"),
            custom_mpi_options=_get_str(section, "custom_mpi_options", "mpi"),
        )
    if "smdistributed" in dist:
        fields["dataparallel"], fields["modelparallel"] = _parse_smdistributed(
            dist["smdistributed"]
        )
    if "torch_distributed" in dist:
        section = _check_keys(
            dist["torch_distributed"], ("enabled", "processes_per_host"), "torch_distributed"
        )
        fields["torch_distributed"] = TorchDistributedConfig(
            enabled=_get_bool(section, "enabled", "torch_distributed"),
            processes_per_host=_get_count(section, "processes_per_host", "torch_distributed"),
        )
    if "parameter_server" in dist:
        section = _check_keys(dist["parameter_server"], ("enabled",), "parameter_server")
        fields["parameter_server"] = ParameterServerConfig(
            enabled=_get_bool(section, "enabled", "parameter_server")
        )
    if "multi_worker_mirrored_strategy" in dist:
        section = _check_keys(
            dist["multi_worker_mirrored_strategy"], ("enabled",), "multi_worker_mirrored_strategy"
        )
        fields["multi_worker_mirrored_strategy"] = MultiWorkerMirroredStrategyConfig(
            enabled=_get_bool(section, "enabled", "multi_worker_mirrored_strategy")
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
                and (itype == "local_gpu" or _instance_family(itype).startswith("p"))
                and itype not in SINGLE_GPU_INSTANCE_TYPES
            ):
                logger.warning(
                    "parameter_server on multi-GPU instance %s runs one worker per host, so not "
                    "every GPU is used.",
                    itype,
                )
