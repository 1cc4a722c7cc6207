"""Replay a SageMaker training job on this machine (``launchbay replay``, ``Estimator.replay``).

A job that failed on SageMaker is brought home to debug: its DescribeTrainingJob
gives back its CreateTrainingJob request (the members of botocore's request shape
that the description holds), and :func:`replay_request` turns that request into a
local one. Only what this machine needs changes; the script sees the same
entry point, hyperparameters, environment, distribution and channels:

* ``ResourceConfig``: the local instance type (``local_process`` by default, or
  ``local`` for containers) and the job's instance count (or the one given); hosts,
  processes and GPUs are then placed as for any local job. What cannot be mapped is
  said (:attr:`ReplayPlan.notes`): the SageMaker type's GPUs this machine lacks, a
  warm pool, a volume key.
* code: the archive ``sagemaker_submit_directory`` names (a network-isolated job's
  ``code`` channel) is downloaded once into ``$LAUNCHBAY_HOME/source/<sha256>/``,
  content-addressed as local jobs' code is, and the hyperparameter (or channel) names
  that copy. Every other hyperparameter is the description's, key by key,
  ``sagemaker_job_name`` included.
* channels: the job's, each replaced by ``inputs`` where one is given (a new name
  adds a channel); S3 channels are read through the local S3 cache.
* outputs, checkpoints, TensorBoard and debug output go under
  ``$LAUNCHBAY_HOME/output/<replay name>/``: a replay never writes where the
  SageMaker job wrote. A VPC, Debugger and profiler rules, the profiler, an
  experiment and remote debugging are not replayed, and the notes say so.

The local job is an ordinary one: ``launchbay status|logs|stop`` and
``Estimator.attach`` follow it, and when a host's script fails the follower shows
that rank's traceback here, as for any local job.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launchbay.backends import registry
from launchbay.backends.base import InProcessBackend
from launchbay.backends.local.layout import default_job_root
from launchbay.backends.plan import JobPlan, plan_request
from launchbay.errors import ConfigurationError, InputError, JobError
from launchbay.job import TrainingJob
from launchbay.runtime.names import DOCKER_INSTANCE_TYPES, HP, LOCAL_PROCESS
from launchbay.s3uri import is_file_uri, is_s3_uri, parse_s3_uri

__all__ = [
    "REPLAY_INSTANCE_TYPES",
    "ReplayPlan",
    "parse_inputs",
    "plan_replay",
    "replay",
    "replay_request",
    "request_from_description",
    "sagemaker_gpus",
]

logger = logging.getLogger("launchbay.replay")

#: Where a replay runs: process groups here, or containers.
REPLAY_INSTANCE_TYPES = (LOCAL_PROCESS, *DOCKER_INSTANCE_TYPES)
ARCHIVE_NAME = "sourcedir.tar.gz"
#: What a network-isolated job's ``sagemaker_submit_directory`` points into.
CODE_CHANNEL = "code"
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}$")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9\.\-_]{1,64}$")

#: GPUs per instance of SageMaker's GPU training types, by family and size (AWS's
#: instance pages); a type not here is said to have GPUs of unknown number.
_GPUS: dict[str, dict[str, int]] = {
    "p2": {"xlarge": 1, "8xlarge": 8, "16xlarge": 16},
    "p3": {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
    "p3dn": {"24xlarge": 8},
    "p4d": {"24xlarge": 8},
    "p4de": {"24xlarge": 8},
    "p5": {"48xlarge": 8},
    "p5e": {"48xlarge": 8},
    "p5en": {"48xlarge": 8},
    "g4dn": {
        **dict.fromkeys(("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"), 1),
        "12xlarge": 4,
    },
    **dict.fromkeys(
        ("g5", "g6", "g6e"),
        {
            **dict.fromkeys(("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"), 1),
            "12xlarge": 4,
            "24xlarge": 4,
            "48xlarge": 8,
        },
    ),
}

#: Request fields a replay leaves out, and why (said when the job had them).
_NOT_REPLAYED = {
    "VpcConfig": "the replay uses this machine's network, not the job's VPC",
    "DebugRuleConfigurations": "Debugger rules are not replayed",
    "ProfilerRuleConfigurations": "profiler rules are not replayed",
    "ProfilerConfig": "the profiler is not replayed",
    "ExperimentConfig": "the replay is not added to the job's experiment",
    "RemoteDebugConfig": "remote debugging is SageMaker's",
    "InfraCheckConfig": "infrastructure checks are SageMaker's",
    "SessionChainingConfig": "session chaining is SageMaker's",
}


@dataclass(frozen=True)
class ReplayPlan:
    """A replay, ready to run: the local job's plan and what could not be carried over.

    Attributes:
        source: The SageMaker job's name.
        description: Its DescribeTrainingJob response.
        plan: The local job's plan (``plan.request`` is the local request).
        code: The code archive the job ran (``s3://``), or ``None`` without one.
        notes: What the replay changes or cannot reproduce, one sentence each.
    """

    source: str
    description: Mapping[str, Any]
    plan: JobPlan
    code: str | None
    notes: tuple[str, ...]

    @property
    def name(self) -> str:
        """The local job's name."""
        return self.plan.name


def sagemaker_gpus(instance_type: str) -> int | None:
    """GPUs per instance of a SageMaker instance type: ``0`` for a CPU type, ``None`` if unknown."""
    match = re.match(r"^ml\.([a-z0-9-]+)\.([a-z0-9]+)$", instance_type or "")
    if not match:
        return 0
    family, size = match.groups()
    if not family.startswith(("p", "g")):
        return 0
    return _GPUS.get(family, {}).get(size)


def request_from_description(description: Mapping[str, Any], session: Any) -> dict[str, Any]:
    """The CreateTrainingJob request a description holds: the members of botocore's request shape.

    ``session`` gives botocore's model of CreateTrainingJob (its SageMaker client's).
    Tags are not part of a description, and so are not part of the result.
    """
    shape = session.sagemaker_client.meta.service_model.operation_model("CreateTrainingJob")
    members = shape.input_shape.members
    return {k: copy.deepcopy(v) for k, v in description.items() if k in members}


def _uri_of(value: Any) -> str:
    """A channel's URI: a string, or a ``TrainingInput``'s ``S3Uri``."""
    config = getattr(value, "config", None)
    if isinstance(config, Mapping):
        return str(((config.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri"))
    return str(value)


def parse_inputs(values: Sequence[str] | Mapping[str, Any] | str | None) -> dict[str, str]:
    """``["train=s3://b/p", "test=./data"]`` (or a dict) -> ``{"train": "s3://b/p", ...}``.

    A plain local path becomes a ``file://`` URI of its absolute path; a dict's values
    may be ``TrainingInput`` objects (their ``S3Uri``); one URI alone is the
    ``training`` channel, as ``fit("s3://...")`` takes it.

    Raises:
        ConfigurationError: an entry without ``=``, a bad channel name, a name given
            twice, or a URI that is neither ``s3://``, ``file://`` nor a path that exists.
    """
    if values is None:
        return {}
    pairs: list[tuple[str, str]] = []
    if isinstance(values, str):
        pairs = [("training", values)]
    elif isinstance(values, Mapping):
        pairs = [(str(k), _uri_of(v)) for k, v in values.items()]
    else:
        for entry in values:
            name, sep, uri = str(entry).partition("=")
            if not sep or not name or not uri:
                raise ConfigurationError.invalid(
                    "--input", entry, "CHANNEL=URI, such as train=s3://bucket/data or train=./data"
                )
            pairs.append((name, uri))
    channels: dict[str, str] = {}
    for name, uri in pairs:
        if not _CHANNEL_NAME.match(name):
            raise ConfigurationError.invalid(
                "--input", f"{name}={uri}", "a channel name of 1-64 letters, digits, '.', '-', '_'"
            )
        if name in channels:
            raise ConfigurationError.invalid(
                "--input", f"{name}={uri}", "each channel once", reason=f"{name!r} is given twice"
            )
        if not (is_s3_uri(uri) or is_file_uri(uri)):
            if not os.path.exists(uri):
                raise ConfigurationError.invalid(
                    "--input",
                    f"{name}={uri}",
                    "an s3:// URI, a file:// URI or a local path that exists",
                )
            uri = "file://" + os.path.abspath(uri)
        channels[name] = uri
    return channels


def _replay_name(source: str) -> str:
    base = _STAMP.sub("", source)[:32].rstrip("-")
    now = time.time()
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    return f"{base}-replay-{stamp}"


def _local_home() -> str:
    # The local root is the parent of its jobs folder (layout's public helper).
    return os.path.dirname(default_job_root())


def _gpu_note(instance_type: str, count: int, plan: JobPlan) -> str | None:
    wanted = sagemaker_gpus(instance_type)
    if wanted == 0:
        return None
    here = 0 if not plan.gpus else min(len(ids) for ids in plan.gpus.values())
    if wanted is None:
        said = f"{instance_type} has GPUs (how many launchbay does not know)"
    else:
        said = f"{instance_type} has {wanted} GPU(s) per host ({wanted * count} in all)"
    if here == 0:
        return (
            f"{said}; this replay runs without a GPU ({plan.placement.instance_type} on this "
            f"machine found none for it): each of the {count} host(s) runs on CPU with "
            "SM_NUM_GPUS=0, so a launcher that starts one process per GPU starts one per host, "
            "and code that needs CUDA fails here"
        )
    if wanted is not None and here >= wanted:
        return None
    return (
        f"{said}; this machine gives each of the {count} host(s) {here} GPU(s), so a launcher "
        "that starts one process per GPU starts fewer ranks than on SageMaker"
    )


def _local_channel(channel: Mapping[str, Any], uri: str) -> dict[str, Any]:
    new = {k: copy.deepcopy(v) for k, v in channel.items() if k != "DataSource"}
    source = dict((channel.get("DataSource") or {}).get("S3DataSource") or {})
    source.setdefault("S3DataType", "S3Prefix")
    source.setdefault("S3DataDistributionType", "FullyReplicated")
    source["S3Uri"] = uri
    new["DataSource"] = {"S3DataSource": source}
    return new


def replay_request(
    request: Mapping[str, Any],
    *,
    instance_type: str = LOCAL_PROCESS,
    instance_count: int | None = None,
    inputs: Mapping[str, str] | None = None,
    job_name: str | None = None,
    code_uri: str | None = None,
    home: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The local request that replays ``request`` here, and the notes on what changed.

    Pure: nothing is read or written. ``code_uri`` is the local copy of the job's
    code archive (``file://``), put where the job's hyperparameter (or its ``code``
    channel) pointed; ``home`` is the local root (default ``$LAUNCHBAY_HOME``).

    Raises:
        ConfigurationError: an instance type a replay cannot use, a bad instance count,
            an instance count with instance groups, a job that ran a Marketplace
            algorithm, or a channel this machine cannot read (an EFS or FSx file
            system) that ``inputs`` does not replace.
    """
    source = str(request.get("TrainingJobName", ""))
    if instance_type not in REPLAY_INSTANCE_TYPES:
        raise ConfigurationError.invalid(
            "instance_type", instance_type, " or ".join(repr(t) for t in REPLAY_INSTANCE_TYPES)
        )
    if instance_count is not None and (
        isinstance(instance_count, bool)
        or not isinstance(instance_count, int)
        or instance_count < 1
    ):
        raise ConfigurationError.invalid(
            "instance_count", instance_count, "an integer 1 or more (one local host each)"
        )
    algorithm = dict(request.get("AlgorithmSpecification") or {})
    if algorithm.get("AlgorithmName"):
        raise ConfigurationError.invalid(
            "job_name",
            source,
            "a job that ran a training image",
            reason=f"it ran the Marketplace algorithm {algorithm['AlgorithmName']!r}, whose "
            "image only SageMaker can pull",
        )
    name = job_name or _replay_name(source)
    root = home or _local_home()
    out = "file://" + os.path.join(root, "output", name)
    new = copy.deepcopy(dict(request))
    new["TrainingJobName"] = name
    notes: list[str] = []

    resources = dict(new.get("ResourceConfig") or {})
    groups = resources.get("InstanceGroups") or []
    if groups and instance_count is not None:
        raise ConfigurationError.invalid(
            "instance_count",
            instance_count,
            "no instance count for a job with instance groups (each group keeps its count)",
        )
    local_resources: dict[str, Any] = {}
    if groups:
        local_resources["InstanceGroups"] = [{**g, "InstanceType": instance_type} for g in groups]
    else:
        local_resources["InstanceType"] = instance_type
        local_resources["InstanceCount"] = instance_count or int(
            resources.get("InstanceCount") or 1
        )
    if resources.get("VolumeSizeInGB"):
        local_resources["VolumeSizeInGB"] = resources["VolumeSizeInGB"]
    if resources.get("KeepAlivePeriodInSeconds"):
        notes.append("the warm pool (KeepAlivePeriodInSeconds) is SageMaker's: not replayed")
    if resources.get("VolumeKmsKeyId"):
        notes.append("the volume's KMS key is SageMaker's: this machine's disk is used as it is")
    new["ResourceConfig"] = local_resources
    if instance_count is not None and resources.get("InstanceCount") not in (None, instance_count):
        notes.append(
            f"the job ran {resources['InstanceCount']} host(s); the replay runs {instance_count}"
        )

    output = dict(new.get("OutputDataConfig") or {})
    if output.get("KmsKeyId"):
        notes.append("the output's KMS key is SageMaker's: outputs are written unencrypted here")
    new["OutputDataConfig"] = {
        k: v for k, v in output.items() if k not in ("S3OutputPath", "KmsKeyId")
    } | {"S3OutputPath": out}
    for field, folder in (
        ("CheckpointConfig", "checkpoints"),
        ("TensorBoardOutputConfig", "tensorboard"),
        ("DebugHookConfig", "debug"),
    ):
        config = new.get(field)
        if config and config.get("S3OutputPath" if field != "CheckpointConfig" else "S3Uri"):
            key = "S3Uri" if field == "CheckpointConfig" else "S3OutputPath"
            config[key] = f"{out}/{folder}"
    for field, why in _NOT_REPLAYED.items():
        if new.pop(field, None):
            notes.append(f"{field}: {why}")

    channels = [dict(c) for c in new.get("InputDataConfig") or []]
    given = dict(inputs or {})
    replayed: list[dict[str, Any]] = []
    for channel in channels:
        cname = str(channel.get("ChannelName"))
        if cname in given:
            replayed.append(_local_channel(channel, given.pop(cname)))
            continue
        if "FileSystemDataSource" in (channel.get("DataSource") or {}):
            raise ConfigurationError.invalid(
                "inputs",
                cname,
                f"a replacement for channel {cname!r}: --input {cname}=URI (s3://, file:// or "
                "a local path)",
                reason=f"channel {cname!r} reads an EFS or FSx file system, which this "
                "machine cannot mount",
            )
        replayed.append(channel)
    replayed.extend(_local_channel({"ChannelName": k}, v) for k, v in given.items())

    hyperparameters = dict(new.get("HyperParameters") or {})
    isolated = bool(new.get("EnableNetworkIsolation"))
    if code_uri is not None:
        code_channel = next(
            (c for c in replayed if c.get("ChannelName") == CODE_CHANNEL and isolated), None
        )
        if code_channel is not None:
            index = replayed.index(code_channel)
            replayed[index] = _local_channel(code_channel, code_uri.rsplit("/", 1)[0])
        else:
            hyperparameters[HP.SUBMIT_DIRECTORY] = f'"{code_uri}"'
    if hyperparameters:
        new["HyperParameters"] = hyperparameters
    if replayed:
        new["InputDataConfig"] = replayed
    else:
        new.pop("InputDataConfig", None)
    return new, notes


def _code_of(request: Mapping[str, Any]) -> str | None:
    """The ``s3://`` code archive the job ran: its submit directory, or its ``code`` channel."""
    raw = (request.get("HyperParameters") or {}).get(HP.SUBMIT_DIRECTORY)
    try:
        submit = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        submit = raw
    if isinstance(submit, str) and is_s3_uri(submit):
        return submit
    if request.get("EnableNetworkIsolation"):
        for channel in request.get("InputDataConfig") or []:
            uri = ((channel.get("DataSource") or {}).get("S3DataSource") or {}).get("S3Uri")
            if channel.get("ChannelName") == CODE_CHANNEL and is_s3_uri(uri):
                text = str(uri)
                return text if text.endswith(".tar.gz") else f"{text.rstrip('/')}/{ARCHIVE_NAME}"
    return None


def download_code(uri: str, session: Any, home: str | None = None) -> str:
    """Download the code archive at ``uri`` once; return its local ``file://`` copy.

    The copy is content-addressed: ``<local root>/source/<sha256>/sourcedir.tar.gz``.

    Raises:
        InputError: ``uri`` is not an ``s3://`` URI of an object.
        TransferError: the download failed.
        JobError: the job's code archive is not there any more.
    """
    bucket, key = parse_s3_uri(uri, argument="sagemaker_submit_directory")
    if not key or key.endswith("/"):
        raise InputError.invalid(
            "sagemaker_submit_directory", uri, "the s3:// URI of a sourcedir.tar.gz"
        )
    if not session.object_exists(bucket, key):
        raise JobError(
            f"The job's code archive {uri} (sagemaker_submit_directory) is not on S3 any more, "
            "so it cannot be replayed. Accepted: a job whose code archive is still there."
        )
    root = os.path.join(home or _local_home(), "source")
    os.makedirs(root, mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".launchbay-replay-", dir=root) as tmp:
        paths = session.download_data(tmp, bucket, key)
        if len(paths) != 1:
            raise JobError(
                f"The job's code archive {uri} (sagemaker_submit_directory) is not one object: "
                f"{len(paths)} were found under it. Accepted: the s3:// URI of a sourcedir.tar.gz."
            )
        digest = hashlib.sha256()
        with open(paths[0], "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        target = os.path.join(root, digest.hexdigest())
        os.makedirs(target, mode=0o700, exist_ok=True)
        path = os.path.join(target, ARCHIVE_NAME)
        if not os.path.isfile(path):
            os.chmod(paths[0], 0o644)
            shutil.move(paths[0], path)
    logger.info("Downloaded the job's code archive %s to %s", uri, path)
    return "file://" + path


def plan_replay(
    source: str,
    *,
    sagemaker_session: Any = None,
    description: Mapping[str, Any] | None = None,
    instance_type: str = LOCAL_PROCESS,
    instance_count: int | None = None,
    inputs: Sequence[str] | Mapping[str, Any] | str | None = None,
    job_name: str | None = None,
) -> ReplayPlan:
    """Describe the job (unless ``description`` is given), download its code, plan the local job.

    Nothing runs yet; the notes are logged at WARNING (``launchbay.replay``).

    Raises:
        ConfigurationError: as :func:`replay_request` and :func:`parse_inputs`, or a
            local job this machine cannot run (too many ranks, GPUs it lacks).
        JobError: the job cannot be described, or its code archive is gone.
    """
    channels = parse_inputs(inputs)
    if sagemaker_session is None:
        from launchbay.session import Session

        sagemaker_session = Session()
    if description is None:
        description = registry.backend_for_job(source, sagemaker_session).describe(source)
    request = request_from_description(description, sagemaker_session)
    code = _code_of(request)
    code_uri = download_code(code, sagemaker_session) if code else None
    local, notes = replay_request(
        request,
        instance_type=instance_type,
        instance_count=instance_count,
        inputs=channels,
        job_name=job_name,
        code_uri=code_uri,
    )
    if code is None and (request.get("HyperParameters") or {}).get(HP.PROGRAM):
        notes.append("the job names no s3:// code archive: the hosts use the image's own code")
    plan = plan_request(local)
    resources = request.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or [resources]
    for group in groups:
        note = _gpu_note(
            str(group.get("InstanceType")),
            instance_count or int(group.get("InstanceCount") or 1),
            plan,
        )
        if note:
            notes.append(note)
    for note in notes:
        logger.warning("Replay of %s: %s.", source, note)
    return ReplayPlan(source, description, plan, code, tuple(notes))


def replay(
    source: str,
    *,
    sagemaker_session: Any = None,
    description: Mapping[str, Any] | None = None,
    instance_type: str = LOCAL_PROCESS,
    instance_count: int | None = None,
    inputs: Sequence[str] | Mapping[str, Any] | str | None = None,
    job_name: str | None = None,
    wait: bool = True,
    logs: str | bool | None = "All",
) -> TrainingJob:
    """Run SageMaker job ``source`` again on this machine (module docstring); return the local job.

    Args:
        source: The SageMaker job's name.
        sagemaker_session: The :class:`launchbay.Session` to describe the job and read
            its code with (default: a new one).
        description: The job's DescribeTrainingJob response, when already read.
        instance_type: ``local_process`` (process groups, the default) or ``local``/
            ``local_gpu`` (containers of the job's own image).
        instance_count: Hosts to run (default: the job's).
        inputs: Channels to use instead of the job's, ``{"train": "s3://..."}`` or
            ``["train=./data"]``; a new name adds a channel.
        job_name: The local job's name (default ``<job>-replay-<timestamp>``).
        wait: Follow the job to its end (a failed host's traceback is shown); with
            ``False`` the job runs detached, as ``fit(wait=False)`` runs a local job.
        logs: As ``fit(logs=...)``.

    Raises:
        ConfigurationError, JobError: as :func:`plan_replay`, before anything starts.
        JobFailedError: with ``wait``, the replayed script failed; it carries the
            failing host's traceback.
    """
    planned = plan_replay(
        source,
        sagemaker_session=sagemaker_session,
        description=description,
        instance_type=instance_type,
        instance_count=instance_count,
        inputs=inputs,
        job_name=job_name,
    )
    backend = registry.backend_for_plan(planned.plan, sagemaker_session)
    if wait:
        job = backend.run(planned.plan)
        job.wait(logs=logs)
        return job
    if not isinstance(backend, InProcessBackend):  # every replay instance type is local
        raise ConfigurationError.invalid(
            "instance_type", instance_type, " or ".join(repr(t) for t in REPLAY_INSTANCE_TYPES)
        )
    return backend.start_detached(planned.plan)
