"""Training channels: :class:`TrainingInput`, :class:`FileSystemInput`, and channel normalisation.

``fit(inputs)`` accepts what SageMaker Python SDK v2 accepts: one S3 URI (the
``training`` channel), a dict of channel name to URI / TrainingInput /
FileSystemInput, a single TrainingInput or FileSystemInput. ``file://`` URIs are
accepted for the local instance types only.
"""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Mapping
from typing import Any

from launchbay.errors import InputError
from launchbay.runtime.contract import CHANNEL_NAME_ACCEPTED, channel_name_problem
from launchbay.s3uri import is_s3_uri, parse_s3_uri

__all__ = [
    "TrainingInput",
    "FileSystemInput",
    "InstanceGroup",
    "ShuffleConfig",
    "channels_from_inputs",
    "s3_input",
]

S3_DATA_TYPES = ("S3Prefix", "ManifestFile", "AugmentedManifestFile", "Converse")
S3_DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")
INPUT_MODES = ("File", "Pipe", "FastFile")
COMPRESSION_TYPES = ("None", "Gzip")
RECORD_WRAPPERS = ("None", "RecordIO")
FILE_SYSTEM_TYPES = ("FSxLustre", "EFS")
FILE_SYSTEM_ACCESS_MODES = ("ro", "rw")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9\.\-_]{1,64}$")


def _one_of(argument: str, value: Any, accepted: tuple[str, ...]) -> None:
    if value is not None and value not in accepted:
        raise InputError(
            f"Invalid {argument}={value!r}. Accepted: {', '.join(map(repr, accepted))}.",
            argument=argument,
            value=value,
        )


def check_uri(uri: Any, argument: str, *, allow_file: bool = True) -> str:
    """Return ``uri`` if it is an ``s3://bucket/...`` (or ``file://...``) URI, else raise."""
    accepted = "an 's3://bucket/prefix' URI" + (" or a 'file:///path' URI" if allow_file else "")
    if not isinstance(uri, str):
        raise InputError(
            f"Invalid {argument}={uri!r}: expected {accepted}.", argument=argument, value=uri
        )
    if is_s3_uri(uri):
        parse_s3_uri(uri, argument=argument)
        return uri
    if allow_file and uri.startswith("file://") and len(uri) > len("file://"):
        return uri
    raise InputError(
        f"Invalid {argument}={uri!r}: expected {accepted}.", argument=argument, value=uri
    )


class TrainingInput:
    """An S3 (or, for local runs, ``file://``) channel, with SDK v2's arguments."""

    def __init__(
        self,
        s3_data: str,
        distribution: str | None = None,
        compression: str | None = None,
        content_type: str | None = None,
        record_wrapping: str | None = None,
        s3_data_type: str = "S3Prefix",
        instance_groups: list[str] | None = None,
        input_mode: str | None = None,
        attribute_names: list[str] | None = None,
        target_attribute_name: str | None = None,
        shuffle_config: Any = None,
    ) -> None:
        check_uri(s3_data, "s3_data")
        _one_of("distribution", distribution, S3_DISTRIBUTIONS)
        _one_of("compression", compression, COMPRESSION_TYPES)
        _one_of("record_wrapping", record_wrapping, RECORD_WRAPPERS)
        _one_of("s3_data_type", s3_data_type, S3_DATA_TYPES)
        _one_of("input_mode", input_mode, INPUT_MODES)
        source: dict[str, Any] = {"S3DataType": s3_data_type, "S3Uri": s3_data}
        self.config: dict[str, Any] = {"DataSource": {"S3DataSource": source}}
        if not (target_attribute_name or distribution):
            distribution = "FullyReplicated"
        if distribution is not None:
            source["S3DataDistributionType"] = distribution
        if compression is not None:
            self.config["CompressionType"] = compression
        if content_type is not None:
            self.config["ContentType"] = content_type
        if record_wrapping is not None:
            self.config["RecordWrapperType"] = record_wrapping
        if instance_groups is not None:
            source["InstanceGroupNames"] = list(instance_groups)
        if input_mode is not None:
            self.config["InputMode"] = input_mode
        if attribute_names is not None:
            source["AttributeNames"] = list(attribute_names)
        if target_attribute_name is not None:
            self.config["TargetAttributeName"] = target_attribute_name
        if shuffle_config is not None:
            seed = getattr(shuffle_config, "seed", shuffle_config)
            self.config["ShuffleConfig"] = {"Seed": seed}

    @property
    def uri(self) -> str:
        return self.config["DataSource"]["S3DataSource"]["S3Uri"]

    def __repr__(self) -> str:
        return f"TrainingInput({self.config!r})"


class ShuffleConfig:
    """The seed a Pipe-mode channel shuffles with: ``TrainingInput(shuffle_config=ShuffleConfig(7))``.

    SDK v2's ``sagemaker.inputs.ShuffleConfig`` (sent as ``ShuffleConfig.Seed``).
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __repr__(self) -> str:
        return f"ShuffleConfig(seed={self.seed!r})"


class s3_input(TrainingInput):  # noqa: N801  SDK v1's name, kept as notebooks spell it
    """SDK v1's name of :class:`TrainingInput` (``sagemaker.session.s3_input``).

    Takes TrainingInput's arguments and warns (``DeprecationWarning``) when made,
    as SDK v2 does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            "s3_input is SDK v1's name of TrainingInput (SDK v2 renamed it too): use "
            "launchbay.inputs.TrainingInput (or launchbay.TrainingInput) with the same arguments.",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)


class FileSystemInput:
    """An EFS or FSx for Lustre channel."""

    def __init__(
        self,
        file_system_id: str,
        file_system_type: str,
        directory_path: str,
        file_system_access_mode: str = "ro",
        content_type: str | None = None,
    ) -> None:
        _one_of("file_system_type", file_system_type, FILE_SYSTEM_TYPES)
        _one_of("file_system_access_mode", file_system_access_mode, FILE_SYSTEM_ACCESS_MODES)
        if not isinstance(file_system_id, str) or not file_system_id:
            raise InputError(
                f"Invalid file_system_id={file_system_id!r}: expected an id such as 'fs-0123abcd'.",
                argument="file_system_id",
                value=file_system_id,
            )
        if not isinstance(directory_path, str) or not directory_path.startswith("/"):
            raise InputError(
                f"Invalid directory_path={directory_path!r}: expected an absolute path such as "
                "'/fsx/data'.",
                argument="directory_path",
                value=directory_path,
            )
        self.config: dict[str, Any] = {
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": file_system_id,
                    "FileSystemType": file_system_type,
                    "DirectoryPath": directory_path,
                    "FileSystemAccessMode": file_system_access_mode,
                }
            }
        }
        if content_type:
            self.config["ContentType"] = content_type

    def __repr__(self) -> str:
        return f"FileSystemInput({self.config!r})"


class InstanceGroup:
    """One group of a heterogeneous cluster (``instance_groups=[...]``)."""

    def __init__(
        self,
        instance_group_name: str | None = None,
        instance_type: str | None = None,
        instance_count: int | None = None,
    ) -> None:
        self.instance_group_name = instance_group_name
        self.instance_type = instance_type
        self.instance_count = instance_count

    def to_request_dict(self) -> dict[str, Any]:
        return {
            "InstanceGroupName": self.instance_group_name,
            "InstanceType": self.instance_type,
            "InstanceCount": self.instance_count,
        }

    def __repr__(self) -> str:
        return (
            f"InstanceGroup({self.instance_group_name!r}, {self.instance_type!r}, "
            f"{self.instance_count!r})"
        )


def _channel(name: Any, value: Any, allow_file: bool) -> dict[str, Any]:
    if not isinstance(name, str) or not _CHANNEL_NAME.match(name):
        raise InputError(
            f"Invalid channel name {name!r} in inputs: expected 1-64 letters, digits, '.', '-' "
            "or '_'.",
            argument="inputs",
            value=name,
        )
    problem = channel_name_problem(name)
    if problem:
        raise InputError(
            f"Invalid channel name {name!r} in inputs: it {problem}. Accepted: "
            f"{CHANNEL_NAME_ACCEPTED}.",
            argument="inputs",
            value=name,
        )
    if isinstance(value, str):
        check_uri(value, f"inputs[{name!r}]", allow_file=True)
        if value.startswith("file://") and not allow_file:
            raise InputError(
                f"Invalid inputs[{name!r}]={value!r}: file:// inputs run only with the local "
                "instance types ('local_process', 'local', 'local_gpu'). Accepted here: an "
                "'s3://bucket/prefix' URI.",
                argument=f"inputs[{name!r}]",
                value=value,
            )
        config = TrainingInput(value).config
    elif isinstance(value, TrainingInput):
        if value.uri.startswith("file://") and not allow_file:
            raise InputError(
                f"Invalid inputs[{name!r}]={value.uri!r}: file:// inputs run only with the local "
                "instance types. Accepted here: an 's3://bucket/prefix' URI.",
                argument=f"inputs[{name!r}]",
                value=value.uri,
            )
        config = value.config
    elif isinstance(value, FileSystemInput):
        config = value.config
    else:
        raise InputError(
            f"Invalid inputs[{name!r}]={value!r}: expected an S3 URI string, a TrainingInput or "
            "a FileSystemInput.",
            argument=f"inputs[{name!r}]",
            value=value,
        )
    channel = copy.deepcopy(config)
    channel["ChannelName"] = name
    return channel


def channels_from_inputs(inputs: Any, *, allow_file: bool) -> list[dict[str, Any]] | None:
    """Turn ``fit()``'s ``inputs`` into InputDataConfig channels (None when there are none)."""
    if inputs is None:
        return None
    if isinstance(inputs, (str, TrainingInput, FileSystemInput)):
        return [_channel("training", inputs, allow_file)]
    if isinstance(inputs, Mapping):
        return [_channel(name, value, allow_file) for name, value in inputs.items()]
    raise InputError(
        f"Invalid inputs={inputs!r}: expected an S3 URI string, a dict of channel name to "
        "URI/TrainingInput/FileSystemInput, a TrainingInput or a FileSystemInput.",
        argument="inputs",
        value=inputs,
    )
