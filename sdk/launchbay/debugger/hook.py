"""SageMaker Debugger's hook configuration (smdebug zero-code-change), and TensorBoard output.

``DebuggerHookConfig`` becomes the request's ``DebugHookConfig``; inside the
container smdebug reads it from /opt/ml/input/config/debughookconfig.json.
``TensorBoardOutputConfig`` becomes the request's ``TensorBoardOutputConfig``:
the directory the script writes TensorBoard files to, copied to S3 while the job
runs (docs/debugger.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.inputs import check_uri
from launchbay.runtime.contract import (
    DEFAULT_BASE_DIR,
    DEFAULT_TENSORBOARD_PATH,
    normalise_checkpoint_path,
)

__all__ = [
    "DebuggerHookConfig",
    "CollectionConfig",
    "TensorBoardOutputConfig",
    "DEFAULT_TENSORBOARD_PATH",
    "TENSORBOARD_PATH_ACCEPTED",
    "tensorboard_path_problem",
]

#: Contract directories the TensorBoard directory may not be: its copy, made whole while
#: the job runs, would carry the job's configuration or launchbay's rank records with it.
_TENSORBOARD_NOT = ("input", "code", "model", "output")
#: Contract directories the TensorBoard directory may not lie in.
_TENSORBOARD_NOT_IN = ("input", "output/ranks")

TENSORBOARD_PATH_ACCEPTED = (
    f"an absolute path such as {DEFAULT_TENSORBOARD_PATH} (the default), without '..' "
    f"segments, that is neither / nor {DEFAULT_BASE_DIR} (nor above it), nor "
    + ", ".join(f"{DEFAULT_BASE_DIR}/{d}" for d in _TENSORBOARD_NOT[:-1])
    + f" or {DEFAULT_BASE_DIR}/{_TENSORBOARD_NOT[-1]}, and lies in neither "
    + " nor ".join(f"{DEFAULT_BASE_DIR}/{d}" for d in _TENSORBOARD_NOT_IN)
)


def tensorboard_path_problem(path: object) -> str | None:
    """Why ``path`` cannot be ``TensorBoardOutputConfig.LocalPath`` (to follow "it"), or ``None``.

    The directory is copied, whole, to the job's ``S3OutputPath`` while the job
    runs, and a local host sees ``/opt/ml/...`` under its own directory. So it must
    be absolute and without ``..`` (``/opt/ml/../..`` would leave the host's tree),
    and not a directory whose copy would carry the job's configuration or
    launchbay's rank records (``/``, ``/opt/ml`` and above it, ``/opt/ml/input`` ...).
    """
    if not isinstance(path, str):
        return f"is {type(path).__name__}, not a string"
    if not path.startswith("/"):
        return "is not an absolute path"
    if "\0" in path:
        return "holds a NUL character"
    if ".." in path.split("/"):
        return "has '..' segments"
    norm = normalise_checkpoint_path(path)
    base = DEFAULT_BASE_DIR
    if norm == "/":
        return "is the root directory"
    if norm == base or base.startswith(norm + "/"):
        return f"is {base}" if norm == base else f"holds {base}"
    for name in _TENSORBOARD_NOT:
        if norm == f"{base}/{name}":
            return f"is {norm}, which the container contract owns"
    for name in _TENSORBOARD_NOT_IN:
        owned = f"{base}/{name}"
        if norm.startswith(owned + "/"):
            return f"lies in {owned}, which the container contract owns"
    return None


def str_dict(argument: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError.invalid(argument, value, "a dict of str to str")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ConfigurationError.invalid(f"{argument} key", key, "string keys")
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, (int, float)):
            item = str(item)
        if not isinstance(item, str):
            raise ConfigurationError.invalid(f"{argument}[{key!r}]", item, "a string or number")
        out[key] = item
    return out


class CollectionConfig:
    """A tensor collection to save, e.g. ``CollectionConfig("losses", {"save_interval": "10"})``."""

    def __init__(self, name: str, parameters: Mapping[str, Any] | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError.invalid("name", name, "a non-empty collection name")
        self.name = name
        self.parameters = str_dict("parameters", parameters)

    def _key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted((self.parameters or {}).items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CollectionConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"CollectionConfig({self.name!r}, {self.parameters!r})"

    def to_request_dict(self) -> dict[str, Any]:
        request: dict[str, Any] = {"CollectionName": self.name}
        if self.parameters is not None:
            request["CollectionParameters"] = dict(self.parameters)
        return request


class DebuggerHookConfig:
    """Where and what smdebug saves; ``hook_parameters`` such as ``include_workers``."""

    def __init__(
        self,
        s3_output_path: str | None = None,
        container_local_output_path: str | None = None,
        hook_parameters: Mapping[str, Any] | None = None,
        collection_configs: list[CollectionConfig] | None = None,
    ) -> None:
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path
        self.hook_parameters = str_dict("hook_parameters", hook_parameters)
        for item in collection_configs or []:
            if not isinstance(item, CollectionConfig):
                raise ConfigurationError.invalid(
                    "collection_configs", item, "a list of CollectionConfig objects"
                )
        self.collection_configs = list(collection_configs) if collection_configs else None

    def __repr__(self) -> str:
        return (
            f"DebuggerHookConfig(s3_output_path={self.s3_output_path!r}, "
            f"hook_parameters={self.hook_parameters!r}, "
            f"collection_configs={self.collection_configs!r})"
        )

    def to_request_dict(self, default_s3_output_path: str) -> dict[str, Any]:
        """The ``DebugHookConfig`` request entry; collections de-duplicated, order kept."""
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path or default_s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        if self.hook_parameters is not None:
            request["HookParameters"] = dict(self.hook_parameters)
        unique = list(dict.fromkeys(self.collection_configs or []))
        request["CollectionConfigurations"] = [c.to_request_dict() for c in unique]
        return request


class TensorBoardOutputConfig:
    """Where a job's TensorBoard files go: SDK v2's ``sagemaker.debugger.TensorBoardOutputConfig``.

    The script writes TensorBoard files (``SummaryWriter(log_dir=...)``) to
    ``container_local_output_path`` (default ``/opt/ml/output/tensorboard``); they are
    copied to ``<s3_output_path>/<job name>/tensorboard-output/`` while the job runs and
    once more when it ends. Local jobs take a ``file://`` URI as well (docs/debugger.md).

    Args:
        s3_output_path: An ``s3://bucket/prefix`` URI (or ``file:///path`` for local jobs).
        container_local_output_path: The directory the script writes to, as the host
            sees it; ``None`` leaves it out of the request (the service's default,
            ``/opt/ml/output/tensorboard``, applies).

    Raises:
        ConfigurationError: naming the argument, the value and what is accepted.
    """

    def __init__(self, s3_output_path: str, container_local_output_path: str | None = None) -> None:
        self.s3_output_path = check_uri(s3_output_path, "s3_output_path", allow_file=True)
        if container_local_output_path is not None:
            problem = tensorboard_path_problem(container_local_output_path)
            if problem:
                raise ConfigurationError.invalid(
                    "container_local_output_path",
                    container_local_output_path,
                    TENSORBOARD_PATH_ACCEPTED,
                    reason=f"It {problem}",
                )
        self.container_local_output_path = container_local_output_path

    @classmethod
    def _described(cls, s3_output_path: Any, local_path: Any) -> TensorBoardOutputConfig:
        """The config of a job the service accepted (attach), kept as described, unchecked."""
        config = cls.__new__(cls)
        config.s3_output_path = s3_output_path
        config.container_local_output_path = local_path
        return config

    def _key(self) -> tuple[str, str | None]:
        return self.s3_output_path, self.container_local_output_path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorBoardOutputConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TensorBoardOutputConfig(s3_output_path={self.s3_output_path!r}, "
            f"container_local_output_path={self.container_local_output_path!r})"
        )

    def to_request_dict(self) -> dict[str, Any]:
        """The ``TensorBoardOutputConfig`` request entry, as SDK v2 writes it."""
        request: dict[str, Any] = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        return request

    # SDK v2's name for the same method.
    _to_request_dict = to_request_dict
