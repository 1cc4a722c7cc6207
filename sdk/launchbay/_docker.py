"""The one way launchbay reaches the Docker engine (the ``docker`` package, imported here only)."""

from __future__ import annotations

import os
from typing import Any

from launchbay.errors import DockerError, MissingDependencyError

__all__ = ["docker_client", "docker_errors"]


def docker_errors() -> Any:
    """The ``docker.errors`` module (the ``docker`` package must be installed)."""
    import docker.errors  # the docker extra, imported only when the engine is used

    return docker.errors


def docker_client(feature: str = "Local Docker mode", *, timeout: int = 120) -> Any:
    """A ``docker.DockerClient`` for the engine ``DOCKER_HOST`` (or the local socket) names.

    Raises:
        MissingDependencyError: the ``docker`` package is not installed.
        DockerError: no engine answers.
    """
    try:  # the docker extra: heavy (requests, urllib3), imported only when the engine is used
        import docker
    except ImportError:
        raise MissingDependencyError.for_module("docker", "docker", feature) from None
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerError(
            f"{feature} needs a running Docker engine, and none answers at {where} ({exc}). "
            "Start one (`sudo systemctl start docker`, or `sudo dockerd &`) or point DOCKER_HOST "
            "at one; instance_type='local_process' runs without Docker."
        ) from exc
    return client


def engine_on_this_machine() -> bool:
    """Whether the engine ``DOCKER_HOST`` names (default: the local socket) runs here."""
    where = os.environ.get("DOCKER_HOST", "")
    return not where or where.startswith("unix://")
