"""The Docker engine as the image functions use it: a client, and an image's labels."""

from __future__ import annotations

from typing import Any

from launchbay._docker import docker_client as _engine_client
from launchbay._docker import docker_errors
from launchbay.errors import DockerError

__all__ = ["docker_client"]


def docker_client(client: Any = None, *, feature: str = "Building training images") -> Any:
    """``client`` if given, else a ``docker.DockerClient`` for the engine of the environment.

    Raises:
        MissingDependencyError: the ``docker`` package is missing (extra ``docker``).
        DockerError: no engine answers (the message says how to start one).
    """
    if client is not None:
        return client
    return _engine_client(feature)


def image_labels(client: Any, name: str) -> dict[str, str] | None:
    """The labels of local image ``name``; ``None`` when there is no such image."""
    errors = docker_errors()
    try:
        attrs = client.api.inspect_image(name)
    except errors.ImageNotFound:
        return None
    except errors.APIError as exc:
        if getattr(exc, "status_code", None) == 404:
            return None
        raise DockerError(f"The Docker engine could not inspect image {name!r}: {exc}") from exc
    return dict((attrs.get("Config") or {}).get("Labels") or {})
