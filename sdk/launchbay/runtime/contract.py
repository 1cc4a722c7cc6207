"""The SageMaker training container contract, both sides in one module.

SageMaker (or a local backend) writes a host's configuration under a base
directory (``/opt/ml``, or ``$SAGEMAKER_BASE_DIR``); the runtime reads it and
exports the SM_* variables training scripts expect. Everything here is a plain
function of its inputs: nothing mutates ``os.environ``.

Reader side::

    p = paths()                      # every contract path under the base dir
    env = training_env()             # read config files, detect GPUs/CPUs
    variables = env_vars(env)        # SM_* exactly as sagemaker-training exports them
    argv_tail = env.user_args()      # --key value ... as the toolkit formats them

Writer side (local backends)::

    write_host_config(base_dir, request, current_host="algo-2", hosts=["algo-1", "algo-2"])

turns a CreateTrainingJob request into the files SageMaker writes on that host:
``hyperparameters.json``, ``resourceconfig.json``, ``inputdataconfig.json`` and,
when the request has them, ``debughookconfig.json`` and ``checkpointconfig.json``.

Container paths inside configs (``/opt/ml/...``, e.g. the debug hook's
``LocalPath``, or a hyperparameter such as TensorFlow's ``model_dir``) are
rewritten under the base dir when it is not ``/opt/ml``, so a local process
never needs ``/opt/ml``. Formats of SM_* values follow the
toolkit: strings as is, ``None`` as the empty string, anything else as compact
sorted JSON; user arguments are ``--key value`` sorted by key (``-k`` for
one-letter keys), dicts become ``k=v,k2=v2``.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from launchbay.runtime._cpus import detect_num_cpus
from launchbay.runtime.names import HP, LOCAL

__all__ = [
    "BASE_DIR_ENV",
    "DEFAULT_BASE_DIR",
    "ContractPaths",
    "TrainingEnv",
    "base_dir",
    "paths",
    "rewrite_container_path",
    "CHANNEL_NAME_ACCEPTED",
    "CHECKPOINT_PATH_ACCEPTED",
    "DEFAULT_TENSORBOARD_PATH",
    "tensorboard_config_for",
    "channel_name_problem",
    "checkpoint_path_problem",
    "normalise_checkpoint_path",
    "check_request_paths",
    "read_hyperparameters",
    "host_hyperparameters",
    "decode_hyperparameters",
    "read_resource_config",
    "read_input_data_config",
    "read_debug_hook_config",
    "read_checkpoint_config",
    "write_host_config",
    "resource_config_for",
    "input_data_config_for",
    "debug_hook_config_for",
    "checkpoint_config_for",
    "training_env",
    "env_vars",
    "to_env_vars",
    "to_env_value",
    "to_cmd_args",
    "detect_gpus",
    "detect_num_gpus",
    "detect_num_cpus",
    "detect_num_neurons",
]

logger = logging.getLogger("launchbay.runtime")

DEFAULT_BASE_DIR = "/opt/ml"
BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
DEFAULT_GROUP = "homogeneousCluster"
DEFAULT_INTERFACE = "eth0"
DEFAULT_TENSORS_PATH = "/opt/ml/output/tensors"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
#: CreateTrainingJob's ``TensorBoardOutputConfig.LocalPath`` default.
DEFAULT_TENSORBOARD_PATH = "/opt/ml/output/tensorboard"

# Hyperparameters the toolkit treats as its own (stripped from user args and
# not reported as framework parameters); every other ``sagemaker_*`` key is a
# framework parameter.
SAGEMAKER_PREFIX = HP.PREFIX
RESERVED_HYPERPARAMETERS = (
    HP.PROGRAM,
    HP.SUBMIT_DIRECTORY,
    HP.ENABLE_CLOUDWATCH_METRICS,
    HP.REGION,
    HP.CONTAINER_LOG_LEVEL,
    HP.JOB_NAME,
    "default_user_module_name",
    "_tuning_objective_metric",
    "sagemaker_s3_output",
)

# Framework parameters that put the current instance group into distribution.
DISTRIBUTION_FLAGS = (
    HP.MPI_ENABLED,
    HP.PARAMETER_SERVER_ENABLED,
    HP.SMDDP_ENABLED,
    HP.PYTORCH_DDP_ENABLED,
    HP.PYTORCH_XLA_ENABLED,
    HP.MWMS_ENABLED,
    HP.TORCH_DISTRIBUTED_ENABLED,
)


# --------------------------------------------------------------------------- paths


def base_dir(environ: Mapping[str, str] | None = None) -> str:
    """The contract's base directory: ``$SAGEMAKER_BASE_DIR`` if set, else ``/opt/ml``."""
    environ = os.environ if environ is None else environ
    return environ.get(BASE_DIR_ENV) or DEFAULT_BASE_DIR


def rewrite_container_path(path: str, base: str) -> str:
    """Map a container path (``/opt/ml/...``) under ``base``; other paths are kept.

    >>> rewrite_container_path("/opt/ml/checkpoints", "/tmp/job/algo-1")
    '/tmp/job/algo-1/checkpoints'
    """
    if not path:
        return path
    norm_base = os.path.normpath(base)
    if norm_base == DEFAULT_BASE_DIR:
        return path
    if path == DEFAULT_BASE_DIR:
        return norm_base
    if path.startswith(DEFAULT_BASE_DIR + "/"):
        return os.path.join(norm_base, path[len(DEFAULT_BASE_DIR) + 1 :])
    return path


# --------------------------------------------------------------------------- path rules
# What a request may name inside a host's tree. The client checks these before a job
# starts (fit(), the dry run, ``launchbay validate``, the local backends); the writer
# below refuses them again, so nothing is ever made or removed outside a channel's or
# the checkpoints' own directory.

CHANNEL_NAME_ACCEPTED = (
    "1 to 64 letters, digits, '.', '-' and '_' (CreateTrainingJob's ChannelName), other "
    "than '.' and '..' (a channel is the directory input/data/<name>)"
)

#: The contract's directories a checkpoint directory may neither be, hold nor lie in.
_CONTRACT_DIRS = ("input", "code", "model", "output")

CHECKPOINT_PATH_ACCEPTED = (
    f"an absolute path such as {DEFAULT_CHECKPOINT_PATH} (the default), without '..' "
    f"segments, that is neither / nor {DEFAULT_BASE_DIR} and neither holds nor lies in "
    + ", ".join(f"{DEFAULT_BASE_DIR}/{d}" for d in _CONTRACT_DIRS)
)


def channel_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a channel here (to follow "it"), or ``None``.

    CreateTrainingJob's ChannelName pattern (``[A-Za-z0-9.\\-_]+``) admits ``.``
    and ``..``, but a channel is the directory ``input/data/<name>``: those two
    name ``input/data`` itself and ``input``, which staging the channel would
    replace.
    """
    if name in (".", ".."):
        what = "input/data itself" if name == "." else "the input directory"
        return f"names no directory of its own (input/data/{name} is {what})"
    return None


def normalise_checkpoint_path(path: str) -> str:
    """``path`` without ``.`` segments, doubled or trailing slashes (``posixpath.normpath``)."""
    norm = posixpath.normpath(path)
    return "/" + norm.lstrip("/") if norm.startswith("/") else norm


def checkpoint_path_problem(path: object) -> str | None:
    """Why ``path`` cannot be ``CheckpointConfig.LocalPath`` (to follow "it"), or ``None``.

    The checkpoint directory is restored before the job and saved after it, and
    a local host sees ``/opt/ml/...`` under its own directory. So it must be
    absolute, without ``..`` (``/opt/ml/../..`` would leave the host's tree),
    not ``/``, not ``/opt/ml`` or above it, and apart from the directories the
    contract owns (``/opt/ml/input`` with the job's configuration, ``code``,
    ``model``, ``output``): restoring checkpoints there would hand the next job
    the previous job's hyperparameters.
    """
    if not isinstance(path, str):
        return f"is {type(path).__name__}, not a string"
    if not path.startswith("/"):
        return "is not an absolute path"
    if ".." in path.split("/"):
        return "has '..' segments"
    norm = normalise_checkpoint_path(path)
    if norm == "/":
        return "is the root directory"
    base = DEFAULT_BASE_DIR
    if norm == base or base.startswith(norm + "/"):
        return f"is {base}" if norm == base else f"holds {base}"
    for name in _CONTRACT_DIRS:
        owned = f"{base}/{name}"
        if norm == owned or norm.startswith(owned + "/"):
            return f"lies in {owned}, which the container contract owns"
    return None


def check_request_paths(request: Mapping[str, Any]) -> None:
    """Refuse channel names and a checkpoint ``LocalPath`` a host's tree cannot take.

    Raises:
        ValueError: naming the request field, the value, why, and what is accepted.
    """
    for channel in request.get("InputDataConfig") or []:
        name = channel.get("ChannelName") if isinstance(channel, Mapping) else None
        problem = channel_name_problem(name)
        if problem:
            raise ValueError(
                f"Invalid channel name {name!r} (InputDataConfig ChannelName): it {problem}. "
                f"Accepted: {CHANNEL_NAME_ACCEPTED}."
            )
    local_path = (request.get("CheckpointConfig") or {}).get("LocalPath")
    if local_path:
        problem = checkpoint_path_problem(local_path)
        if problem:
            raise ValueError(
                f"Invalid checkpoint_local_path={local_path!r} (CheckpointConfig LocalPath): "
                f"it {problem}. Accepted: {CHECKPOINT_PATH_ACCEPTED}."
            )


@dataclass(frozen=True)
class ContractPaths:
    """Every path of the container contract under one base directory."""

    base_dir: str
    input_dir: str
    input_config_dir: str
    input_data_dir: str
    model_dir: str
    output_dir: str
    output_data_dir: str
    output_intermediate_dir: str
    code_dir: str
    checkpoints_dir: str
    tensors_dir: str
    ranks_dir: str
    hyperparameters_file: str
    resource_config_file: str
    input_data_config_file: str
    debug_hook_config_file: str
    checkpoint_config_file: str
    tensorboard_config_file: str
    failure_file: str
    failure_json_file: str
    success_file: str

    def channel_dir(self, channel: str) -> str:
        """The directory holding a channel's data: ``<base>/input/data/<channel>``."""
        return os.path.join(self.input_data_dir, channel)

    def container_path(self, path: str) -> str:
        """Rewrite a ``/opt/ml/...`` path under this base dir (see :func:`rewrite_container_path`)."""
        return rewrite_container_path(path, self.base_dir)


def paths(base: str | None = None) -> ContractPaths:
    """All contract paths under ``base`` (default: :func:`base_dir`)."""
    base = os.path.normpath(base or base_dir())
    input_dir = os.path.join(base, "input")
    config = os.path.join(input_dir, "config")
    output = os.path.join(base, "output")
    return ContractPaths(
        base_dir=base,
        input_dir=input_dir,
        input_config_dir=config,
        input_data_dir=os.path.join(input_dir, "data"),
        model_dir=os.path.join(base, "model"),
        output_dir=output,
        output_data_dir=os.path.join(output, "data"),
        output_intermediate_dir=os.path.join(output, "intermediate"),
        code_dir=os.path.join(base, "code"),
        checkpoints_dir=os.path.join(base, "checkpoints"),
        tensors_dir=os.path.join(output, "tensors"),
        ranks_dir=os.path.join(output, "ranks"),
        hyperparameters_file=os.path.join(config, "hyperparameters.json"),
        resource_config_file=os.path.join(config, "resourceconfig.json"),
        input_data_config_file=os.path.join(config, "inputdataconfig.json"),
        debug_hook_config_file=os.path.join(config, "debughookconfig.json"),
        checkpoint_config_file=os.path.join(config, "checkpointconfig.json"),
        tensorboard_config_file=os.path.join(config, "tensorboardoutputconfig.json"),
        failure_file=os.path.join(output, "failure"),
        failure_json_file=os.path.join(output, "launchbay-failure.json"),
        success_file=os.path.join(output, "success"),
    )


# --------------------------------------------------------------------------- readers


def _read_json(path: str, default: Any = None) -> Any:
    if default is not None and not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def decode_hyperparameters(raw: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-decode each value (values are sent as JSON strings); keep it as is if that fails."""
    decoded: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (ValueError, TypeError):
            decoded[key] = value
    return decoded


def host_hyperparameters(raw: Mapping[str, Any], seen_base: str) -> dict[str, Any]:
    """``raw`` with each value that is a container path rewritten under ``seen_base``.

    A host that does not see ``/opt/ml`` (a local process) gets its own
    directories: TensorFlow's ``model_dir`` of ``/opt/ml/model`` (sent JSON-encoded)
    becomes ``<host dir>/model``. Other values are kept as sent.
    """
    result: dict[str, Any] = {}
    for key, value in raw.items():
        result[key] = value
        if not isinstance(value, str):
            continue
        try:
            decoded, encoded = json.loads(value), True
        except ValueError:
            decoded, encoded = value, False
        if not isinstance(decoded, str):
            continue
        mapped = rewrite_container_path(decoded, seen_base)
        if mapped != decoded:
            result[key] = json.dumps(mapped) if encoded else mapped
    return result


def read_hyperparameters(p: ContractPaths | None = None) -> dict[str, Any]:
    """Decoded ``hyperparameters.json`` (empty when the file is absent)."""
    p = p or paths()
    return decode_hyperparameters(_read_json(p.hyperparameters_file, {}))


def read_resource_config(p: ContractPaths | None = None) -> dict[str, Any]:
    """``resourceconfig.json``; when absent, a one-host config named after this machine.

    The fallback mirrors what the toolkit creates when it runs outside SageMaker.
    """
    p = p or paths()
    if os.path.exists(p.resource_config_file):
        return _read_json(p.resource_config_file)
    host = socket.gethostname()
    return {
        "current_host": host,
        "hosts": [host],
        "current_instance_group": DEFAULT_GROUP,
        "instance_groups": [
            {"instance_group_name": DEFAULT_GROUP, "instance_type": LOCAL, "hosts": [host]}
        ],
    }


def read_input_data_config(p: ContractPaths | None = None) -> dict[str, Any]:
    """``inputdataconfig.json`` (empty when absent)."""
    p = p or paths()
    return _read_json(p.input_data_config_file, {})


def _read_with_local_path(p: ContractPaths, path: str, default: str) -> dict[str, Any] | None:
    """A config file whose ``LocalPath`` (or ``default``) is mapped under the base dir."""
    if not os.path.exists(path):
        return None
    config = dict(_read_json(path))
    config["LocalPath"] = p.container_path(config.get("LocalPath") or default)
    return config


def read_debug_hook_config(p: ContractPaths | None = None) -> dict[str, Any] | None:
    """``debughookconfig.json`` with ``LocalPath`` mapped under the base dir, or ``None``."""
    p = p or paths()
    return _read_with_local_path(p, p.debug_hook_config_file, DEFAULT_TENSORS_PATH)


def read_checkpoint_config(p: ContractPaths | None = None) -> dict[str, Any] | None:
    """``checkpointconfig.json`` with ``LocalPath`` mapped under the base dir, or ``None``."""
    p = p or paths()
    return _read_with_local_path(p, p.checkpoint_config_file, DEFAULT_CHECKPOINT_PATH)


# --------------------------------------------------------------------------- writer


def resource_config_for(
    request: Mapping[str, Any], current_host: str, hosts: list[str]
) -> dict[str, Any]:
    """The ``resourceconfig.json`` SageMaker writes on ``current_host`` for ``request``.

    Hosts are given to instance groups in order (``algo-1`` ... to the first
    group's ``InstanceCount`` hosts, and so on), as SageMaker names them.
    """
    if current_host not in hosts:
        raise ValueError(f"current_host={current_host!r} is not one of hosts={hosts!r}")
    resources = request.get("ResourceConfig") or {}
    groups_spec = resources.get("InstanceGroups") or []
    groups: list[dict[str, Any]] = []
    if groups_spec:
        total = sum(int(g.get("InstanceCount", 0)) for g in groups_spec)
        if total != len(hosts):
            raise ValueError(
                f"ResourceConfig.InstanceGroups count {total} instances but {len(hosts)} hosts "
                f"were given ({hosts!r})"
            )
        start = 0
        for spec in groups_spec:
            count = int(spec.get("InstanceCount", 0))
            groups.append(
                {
                    "instance_group_name": spec["InstanceGroupName"],
                    "instance_type": spec.get("InstanceType", LOCAL),
                    "hosts": list(hosts[start : start + count]),
                }
            )
            start += count
    else:
        groups.append(
            {
                "instance_group_name": DEFAULT_GROUP,
                "instance_type": resources.get("InstanceType", LOCAL),
                "hosts": list(hosts),
            }
        )
    current = next(g for g in groups if current_host in g["hosts"])
    return {
        "current_host": current_host,
        "current_instance_type": current["instance_type"],
        "current_group_name": current["instance_group_name"],
        "hosts": list(hosts),
        "instance_groups": groups,
        "network_interface_name": DEFAULT_INTERFACE,
    }


def input_data_config_for(request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputdataconfig.json`` for ``request``: one entry per channel."""
    default_mode = (request.get("AlgorithmSpecification") or {}).get("TrainingInputMode", "File")
    config: dict[str, Any] = {}
    for channel in request.get("InputDataConfig") or []:
        source = (channel.get("DataSource") or {}).get("S3DataSource") or {}
        entry: dict[str, Any] = {}
        if channel.get("ContentType"):
            entry["ContentType"] = channel["ContentType"]
        entry["TrainingInputMode"] = channel.get("InputMode") or default_mode
        entry["S3DistributionType"] = source.get("S3DataDistributionType") or "FullyReplicated"
        entry["RecordWrapperType"] = channel.get("RecordWrapperType") or "None"
        config[channel["ChannelName"]] = entry
    return config


def debug_hook_config_for(request: Mapping[str, Any], base: str) -> dict[str, Any] | None:
    """The ``debughookconfig.json`` for ``request`` (``None`` without DebugHookConfig)."""
    hook = request.get("DebugHookConfig")
    if not hook:
        return None
    config = dict(hook)
    config["LocalPath"] = rewrite_container_path(
        hook.get("LocalPath") or DEFAULT_TENSORS_PATH, base
    )
    return config


def checkpoint_config_for(request: Mapping[str, Any], base: str) -> dict[str, Any] | None:
    """The ``checkpointconfig.json`` for ``request`` (``None`` without CheckpointConfig)."""
    checkpoint = request.get("CheckpointConfig")
    if not checkpoint:
        return None
    local_path = normalise_checkpoint_path(checkpoint.get("LocalPath") or DEFAULT_CHECKPOINT_PATH)
    return {
        "LocalPath": rewrite_container_path(local_path, base),
        "S3Uri": checkpoint.get("S3Uri", ""),
    }


def tensorboard_config_for(request: Mapping[str, Any], base: str) -> dict[str, Any] | None:
    """The ``tensorboardoutputconfig.json`` (smdebug reads its ``LocalPath``) for ``request``."""
    config = request.get("TensorBoardOutputConfig")
    if not config:
        return None
    local_path = normalise_checkpoint_path(config.get("LocalPath") or DEFAULT_TENSORBOARD_PATH)
    return {**config, "LocalPath": rewrite_container_path(local_path, base)}


def _write_json(path: str, obj: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=False)
    os.replace(tmp, path)


def write_host_config(
    base: str,
    request: Mapping[str, Any],
    current_host: str,
    hosts: list[str],
    *,
    container_base: str | None = None,
) -> None:
    """Write the config files SageMaker writes on ``current_host`` and create the contract dirs.

    ``request`` is a CreateTrainingJob request (the dict boto3 takes). The files
    go under ``base``; the paths written *into* them (checkpoint and tensor
    ``LocalPath``) are those a host sees under ``container_base``: ``base`` itself
    for a local process, ``/opt/ml`` for a container whose ``/opt/ml`` is ``base``
    mounted (then the checkpoint dir made here is ``<base>/checkpoints``, which
    the container gets at its ``LocalPath``).

    Raises:
        ValueError: a channel name or checkpoint ``LocalPath`` the tree cannot take
            (:func:`check_request_paths`); nothing is written then.
    """
    check_request_paths(request)
    p = paths(base)
    seen_base = p.base_dir if container_base is None else os.path.normpath(container_base)
    for directory in (
        p.input_config_dir,
        p.input_data_dir,
        p.model_dir,
        p.output_data_dir,
        p.output_intermediate_dir,
        p.checkpoints_dir,
    ):
        os.makedirs(directory, exist_ok=True)
    _write_json(
        p.hyperparameters_file,
        host_hyperparameters(request.get("HyperParameters") or {}, seen_base),
    )
    _write_json(p.resource_config_file, resource_config_for(request, current_host, hosts))
    _write_json(p.input_data_config_file, input_data_config_for(request))
    checkpoint = checkpoint_config_for(request, seen_base)
    tensorboard = tensorboard_config_for(request, seen_base)
    optional = (
        (p.debug_hook_config_file, debug_hook_config_for(request, seen_base)),
        (p.checkpoint_config_file, checkpoint),
        (p.tensorboard_config_file, tensorboard),
    )
    for path, config in optional:
        if config is None:
            if os.path.exists(path):
                os.remove(path)
        else:
            _write_json(path, config)
    if checkpoint and container_base is None:
        os.makedirs(checkpoint["LocalPath"], exist_ok=True)
    if tensorboard:  # a container gets <base>/output/tensorboard at its LocalPath
        made = tensorboard["LocalPath"] if container_base is None else p.output_dir + "/tensorboard"
        if made.startswith(p.base_dir + os.sep):  # a path outside the host's tree is the script's
            os.makedirs(made, exist_ok=True)


# --------------------------------------------------------------------------- detection


def _listed_gpus(root: str = "/") -> list[tuple[str, str]]:
    """Every GPU of this machine as ``(index, UUID or "")``, in the driver's order.

    ``nvidia-smi --list-gpus`` (lines ``GPU 0: NAME (UUID: GPU-...)``, as the toolkit
    asks); when nvidia-smi is missing, the driver's ``<root>/proc/driver/nvidia/gpus``
    entries, else the ``<root>/dev/nvidia<N>`` device files. nvidia-smi failing
    (no driver) means no GPU.
    """
    try:
        output = subprocess.run(
            ["nvidia-smi", "--list-gpus"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except FileNotFoundError:
        pass
    except (OSError, subprocess.SubprocessError):
        return []
    else:
        found: list[tuple[str, str]] = []
        for line in output.split("\n"):
            if not line.startswith("GPU "):
                continue
            index = line[4:].split(":", 1)[0].strip()
            uuid = ""
            if "(UUID:" in line:
                uuid = line.rsplit("(UUID:", 1)[1].strip().rstrip(")").strip()
            found.append((index if index.isdigit() else str(len(found)), uuid))
        return found
    try:
        entries = os.listdir(os.path.join(root, "proc", "driver", "nvidia", "gpus"))
    except OSError:
        entries = []
    if entries:
        return [(str(i), "") for i in range(len(entries))]
    try:
        devices = os.listdir(os.path.join(root, "dev"))
    except OSError:
        return []
    numbers = sorted(int(d[6:]) for d in devices if d.startswith("nvidia") and d[6:].isdigit())
    return [(str(n), "") for n in numbers]


def detect_gpus(environ: Mapping[str, str] | None = None, *, root: str = "/") -> list[str]:
    """The device ids of the GPUs this process may use, in order.

    Every GPU the driver lists (see :func:`_listed_gpus`), narrowed by
    ``CUDA_VISIBLE_DEVICES`` when ``environ`` (default ``os.environ``) sets it:
    its entries, in its order, given as indices or UUIDs; empty or ``-1`` means
    none. As CUDA does, the list stops at the first entry that names no GPU here,
    so a ``CUDA_VISIBLE_DEVICES`` left set on a machine without GPUs finds none.
    """
    environ = os.environ if environ is None else environ
    listed = _listed_gpus(root)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [index for index, _uuid in listed]
    known = {index for index, _uuid in listed} | {uuid for _index, uuid in listed if uuid}
    chosen: list[str] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry not in known or entry in chosen:
            break
        chosen.append(entry)
    return chosen


def detect_num_gpus(environ: Mapping[str, str] | None = None, *, root: str = "/") -> int:
    """How many GPUs this host's training uses: ``len(detect_gpus(environ))``.

    The toolkit counts ``nvidia-smi --list-gpus`` lines; launchbay counts only the
    ones ``CUDA_VISIBLE_DEVICES`` leaves visible, so a local host given its share
    of the machine's GPUs (docs/local.md) sets ``SM_NUM_GPUS`` and its process
    count from that share.
    """
    return len(detect_gpus(environ, root=root))


def detect_num_neurons(instance_type: str) -> int:
    """Neuron cores, as the toolkit counts them (``neuron-ls -j``; 64 on trn2.48xlarge)."""
    if "trn2.48xlarge" in instance_type:
        return 64
    try:
        output = subprocess.run(
            ["neuron-ls", "-j"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        return sum(int(item.get("nc_count", 0)) for item in json.loads(output))
    except (OSError, subprocess.SubprocessError, ValueError, TypeError, AttributeError):
        return 0


# --------------------------------------------------------------------------- formatting


def to_env_value(value: Any) -> str:
    """Format one value as the toolkit does for SM_* variables."""
    if isinstance(value, bytes):
        return value.decode("latin1")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def to_env_vars(mapping: Mapping[str, Any]) -> dict[str, str]:
    """``{"model_dir": "/x"}`` -> ``{"SM_MODEL_DIR": "/x"}`` (values by :func:`to_env_value`)."""
    return {f"SM_{str(key).upper()}": to_env_value(value) for key, value in mapping.items() if key}


def _arg_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("latin1")
    return str(value)


def to_cmd_args(mapping: Mapping[str, Any]) -> list[str]:
    """Hyperparameters as command-line arguments, formatted as the toolkit formats them.

    Keys are sorted; ``--key`` (``-k`` for a one-letter key); dict values become
    ``k=v`` pairs joined by commas; other values ``str(value)`` (``None`` -> "").
    """
    args: list[str] = []
    for key in sorted(mapping):
        name = _arg_text(key)
        args.append(("--" if len(name) > 1 else "-") + name if name else "")
        value = mapping[key]
        if hasattr(value, "items"):
            args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            args.append(_arg_text(value))
    return args


# --------------------------------------------------------------------------- environment


@dataclass(frozen=True)
class TrainingEnv:
    """A read-only snapshot of one host's training environment (the toolkit's Environment)."""

    paths: ContractPaths
    hyperparameters: dict[str, Any]
    additional_framework_parameters: dict[str, Any]
    sagemaker_hyperparameters: dict[str, Any]
    resource_config: dict[str, Any]
    input_data_config: dict[str, Any]
    hosts: list[str]
    current_host: str
    current_instance_type: str
    current_instance_group: str
    current_instance_group_hosts: list[str]
    instance_groups: list[str]
    instance_groups_dict: dict[str, Any]
    distribution_instance_groups: list[str]
    distribution_hosts: list[str]
    master_hostname: str
    network_interface_name: str
    num_gpus: int
    num_cpus: int
    num_neurons: int
    user_entry_point: str | None
    module_name: str | None
    module_dir: str
    log_level: Any
    framework_module: str | None
    job_name: str | None
    is_modelparallel_enabled: Any
    is_smddprun_installed: bool
    is_smddpmprun_installed: bool
    topology: list[Any] = field(default_factory=list)
    checkpoint_config: dict[str, Any] | None = None
    debug_hook_config: dict[str, Any] | None = None

    @property
    def channel_input_dirs(self) -> dict[str, str]:
        """Channel name -> data directory."""
        return {name: self.paths.channel_dir(name) for name in self.input_data_config}

    @property
    def is_master(self) -> bool:
        """Whether this host is the first host of the distribution."""
        return self.current_host == self.master_hostname

    @property
    def is_hetero(self) -> bool:
        """Whether the job has more than one instance group."""
        return len(self.instance_groups) > 1

    @property
    def checkpoint_dir(self) -> str | None:
        """The checkpoint ``LocalPath`` (under the base dir) when a checkpoint config exists."""
        return self.checkpoint_config["LocalPath"] if self.checkpoint_config else None

    @property
    def in_distribution(self) -> bool:
        """Whether this host's instance group takes part in the distribution."""
        return self.current_instance_group in self.distribution_instance_groups

    def as_dict(self) -> dict[str, Any]:
        """The toolkit's ``dict(Environment())``: the value of SM_TRAINING_ENV."""
        p = self.paths
        return {
            "additional_framework_parameters": self.additional_framework_parameters,
            "channel_input_dirs": self.channel_input_dirs,
            "current_host": self.current_host,
            "current_instance_group": self.current_instance_group,
            "current_instance_group_hosts": self.current_instance_group_hosts,
            "current_instance_type": self.current_instance_type,
            "distribution_hosts": self.distribution_hosts,
            "distribution_instance_groups": self.distribution_instance_groups,
            "framework_module": self.framework_module,
            "hosts": self.hosts,
            "hyperparameters": self.hyperparameters,
            "input_config_dir": p.input_config_dir,
            "input_data_config": self.input_data_config,
            "input_dir": p.input_dir,
            "instance_groups": self.instance_groups,
            "instance_groups_dict": self.instance_groups_dict,
            "is_hetero": self.is_hetero,
            "is_master": self.is_master,
            "is_modelparallel_enabled": self.is_modelparallel_enabled,
            "is_smddpmprun_installed": self.is_smddpmprun_installed,
            "is_smddprun_installed": self.is_smddprun_installed,
            "job_name": self.job_name,
            "log_level": self.log_level,
            "master_hostname": self.master_hostname,
            "model_dir": p.model_dir,
            "module_dir": self.module_dir,
            "module_name": self.module_name,
            "network_interface_name": self.network_interface_name,
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus,
            "num_neurons": self.num_neurons,
            "output_data_dir": p.output_data_dir,
            "output_dir": p.output_dir,
            "output_intermediate_dir": p.output_intermediate_dir,
            "resource_config": self.resource_config,
            "topology": self.topology,
            "user_entry_point": self.user_entry_point,
        }

    def user_args(self) -> list[str]:
        """The user's hyperparameters as command-line arguments (see :func:`to_cmd_args`)."""
        return to_cmd_args(self.hyperparameters)

    def processes_per_host(self) -> int:
        """``sagemaker_mpi_num_of_processes_per_host`` if given, else GPUs, else Neuron cores, else 1."""
        configured = self.additional_framework_parameters.get(HP.MPI_PROCESSES_PER_HOST)
        if configured:
            return int(configured)
        if self.num_gpus > 0:
            return self.num_gpus
        if self.num_neurons > 0:
            return self.num_neurons
        return 1


def _module_name(program: str | None) -> str | None:
    if program and program.endswith(".py"):
        return program[:-3]
    return program


def training_env(
    base: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    num_gpus: int | None = None,
    num_cpus: int | None = None,
    num_neurons: int | None = None,
) -> TrainingEnv:
    """Read the contract under ``base`` and build the host's :class:`TrainingEnv`.

    ``environ`` (default ``os.environ``) supplies the few variables the toolkit
    also reads (SAGEMAKER_PROGRAM, SAGEMAKER_TRAINING_MODULE, TRAINING_JOB_NAME,
    SM_HP_MP_PARAMETERS). Hardware counts are detected unless given.
    """
    environ = os.environ if environ is None else environ
    p = paths(base or base_dir(environ))
    resource_config = read_resource_config(p)
    input_data_config = read_input_data_config(p)
    all_hps = read_hyperparameters(p)

    sagemaker_hps = {
        k: v
        for k, v in all_hps.items()
        if k in RESERVED_HYPERPARAMETERS or k.startswith(SAGEMAKER_PREFIX)
    }
    user_hps = {k: v for k, v in all_hps.items() if k not in sagemaker_hps}
    framework = {k: v for k, v in sagemaker_hps.items() if k not in RESERVED_HYPERPARAMETERS}

    hosts = list(resource_config["hosts"])
    current_host = resource_config["current_host"]
    instance_type = resource_config.get("current_instance_type", LOCAL)
    group = resource_config.get("current_group_name", DEFAULT_GROUP)
    groups_config = resource_config.get("instance_groups", []) or []

    if HP.DISTRIBUTION_INSTANCE_GROUPS in framework:
        distribution_groups = framework[HP.DISTRIBUTION_INSTANCE_GROUPS]
    elif any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS):
        distribution_groups = [group]
    else:
        distribution_groups = []
    if groups_config:
        distribution_hosts = [
            host
            for g in groups_config
            if g["instance_group_name"] in distribution_groups
            for host in g["hosts"]
        ]
    else:
        distribution_hosts = list(hosts)
    master = distribution_hosts[0] if distribution_hosts else hosts[0]

    program_env = environ.get("SAGEMAKER_PROGRAM")
    module_name = program_env if program_env is not None else str(all_hps.get(HP.PROGRAM))
    entry_point = program_env or sagemaker_hps.get(HP.PROGRAM)
    mp_parameters = environ.get("SM_HP_MP_PARAMETERS")

    return TrainingEnv(
        paths=p,
        hyperparameters=user_hps,
        additional_framework_parameters=framework,
        sagemaker_hyperparameters=sagemaker_hps,
        resource_config=resource_config,
        input_data_config=input_data_config,
        hosts=hosts,
        current_host=current_host,
        current_instance_type=instance_type,
        current_instance_group=group,
        current_instance_group_hosts=next(
            (list(g["hosts"]) for g in groups_config if g["instance_group_name"] == group), []
        ),
        instance_groups=[g["instance_group_name"] for g in groups_config],
        instance_groups_dict={g["instance_group_name"]: g for g in groups_config},
        distribution_instance_groups=distribution_groups,
        distribution_hosts=distribution_hosts,
        master_hostname=master,
        network_interface_name=resource_config.get("network_interface_name", DEFAULT_INTERFACE),
        num_gpus=detect_num_gpus(environ) if num_gpus is None else num_gpus,
        num_cpus=detect_num_cpus() if num_cpus is None else num_cpus,
        num_neurons=detect_num_neurons(instance_type) if num_neurons is None else num_neurons,
        user_entry_point=entry_point,
        module_name=_module_name(module_name),
        module_dir=str(sagemaker_hps.get(HP.SUBMIT_DIRECTORY, p.code_dir)),
        log_level=sagemaker_hps.get(HP.CONTAINER_LOG_LEVEL, logging.INFO),
        framework_module=environ.get("SAGEMAKER_TRAINING_MODULE"),
        job_name=environ.get("TRAINING_JOB_NAME"),
        is_modelparallel_enabled=mp_parameters and mp_parameters != "{}",
        is_smddprun_installed=shutil.which("smddprun") is not None,
        is_smddpmprun_installed=shutil.which("smddpmprun") is not None,
        topology=list(resource_config.get("topology", []) or []),
        checkpoint_config=read_checkpoint_config(p),
        debug_hook_config=read_debug_hook_config(p),
    )


def env_vars(env: TrainingEnv) -> dict[str, str]:
    """The SM_* variables for ``env``: the toolkit's ``Environment.to_env_vars()`` plus ours.

    Ours: ``SM_CHECKPOINT_DIR`` (the checkpoint ``LocalPath`` under the base dir),
    only when ``checkpointconfig.json`` exists.
    """
    p = env.paths
    mapping: dict[str, Any] = {
        "hosts": env.hosts,
        "network_interface_name": env.network_interface_name,
        "hps": env.hyperparameters,
        "user_entry_point": env.user_entry_point,
        "framework_params": env.additional_framework_parameters,
        "resource_config": env.resource_config,
        "input_data_config": env.input_data_config,
        "output_data_dir": p.output_data_dir,
        "channels": sorted(env.channel_input_dirs),
        "current_host": env.current_host,
        "current_instance_type": env.current_instance_type,
        "current_instance_group": env.current_instance_group,
        "current_instance_group_hosts": env.current_instance_group_hosts,
        "instance_groups": env.instance_groups,
        "instance_groups_dict": env.instance_groups_dict,
        "distribution_instance_groups": env.distribution_instance_groups,
        "is_hetero": env.is_hetero,
        "module_name": env.module_name,
        "log_level": env.log_level,
        "framework_module": env.framework_module,
        "input_dir": p.input_dir,
        "input_config_dir": p.input_config_dir,
        "output_dir": p.output_dir,
        "num_cpus": env.num_cpus,
        "num_gpus": env.num_gpus,
        "num_neurons": env.num_neurons,
        "model_dir": p.model_dir,
        "module_dir": env.module_dir,
        "training_env": env.as_dict(),
        "user_args": env.user_args(),
        "output_intermediate_dir": p.output_intermediate_dir,
    }
    if env.topology:
        mapping["topology"] = env.topology
    for name, path in env.channel_input_dirs.items():
        mapping[f"channel_{name}"] = path
    for key, value in env.hyperparameters.items():
        mapping[f"hp_{key}"] = value
    result = to_env_vars(mapping)
    if env.checkpoint_dir:
        result["SM_CHECKPOINT_DIR"] = env.checkpoint_dir
    return result
