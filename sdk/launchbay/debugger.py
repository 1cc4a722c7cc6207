"""SageMaker Debugger hook configuration (smdebug zero-code-change).

``DebuggerHookConfig`` becomes the request's ``DebugHookConfig``; inside the
container smdebug reads it from /opt/ml/input/config/debughookconfig.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError

__all__ = ["DebuggerHookConfig", "CollectionConfig"]


def _str_dict(argument: str, value: Any) -> dict[str, str] | None:
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
        self.parameters = _str_dict("parameters", parameters)

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
        self.hook_parameters = _str_dict("hook_parameters", hook_parameters)
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
