"""The one way launchbay reaches the Docker engine (the ``docker`` package, imported here only)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from launchbay.errors import DockerError, MissingDependencyError

__all__ = ["SHARED_POOL_SIZE", "docker_client", "docker_errors", "engine_fact", "shared_client"]

T = TypeVar("T")

#: Connections the shared client keeps open to the engine, at most (its pool's size): every
#: running job's log streams, exit waits and event streams at once, before any is discarded.
SHARED_POOL_SIZE = 32

_shared: dict[tuple[int, str, str, str], Any] = {}
_shared_lock = threading.Lock()
_facts: dict[tuple[str, str], Any] = {}


def docker_errors() -> Any:
    """The ``docker.errors`` module (the ``docker`` package must be installed)."""
    import docker.errors  # the docker extra, imported only when the engine is used

    return docker.errors


def docker_client(
    feature: str = "Local Docker mode", *, timeout: int = 120, max_pool_size: int | None = None
) -> Any:
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
        if max_pool_size is None:
            client = docker.from_env(timeout=timeout)
        else:
            client = docker.from_env(timeout=timeout, max_pool_size=max_pool_size)
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerError(
            f"{feature} needs a running Docker engine, and none answers at {where} ({exc}). "
            "Start one (`sudo systemctl start docker`, or `sudo dockerd &`) or point DOCKER_HOST "
            "at one; instance_type='local_process' runs without Docker."
        ) from exc
    return client


def shared_client(feature: str = "Local Docker mode") -> Any:
    """This process's one ``docker.DockerClient`` for the engine the environment names.

    The local Docker backends run every job through it. A client per job kept its pool of
    idle connections open for as long as the job's handle lived (the whole notebook): 22
    sockets for each 2-host job, so a long session's process passed 1,024 descriptors, where
    ``select`` stops working and the limit of open files is near. One client's pool holds at
    most :data:`SHARED_POOL_SIZE`. Made on first use (and the engine checked then); one per
    process and per ``DOCKER_HOST``, ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH``, so a
    forked child makes its own instead of sharing its parent's sockets. Never close it.
    """
    env = os.environ
    key = (
        os.getpid(),
        env.get("DOCKER_HOST", ""),
        env.get("DOCKER_TLS_VERIFY", ""),
        env.get("DOCKER_CERT_PATH", ""),
    )
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            client = docker_client(feature, max_pool_size=SHARED_POOL_SIZE)
            _shared[key] = client
        return client


def engine_on_this_machine() -> bool:
    """Whether the engine ``DOCKER_HOST`` names (default: the local socket) runs here."""
    where = os.environ.get("DOCKER_HOST", "")
    return not where or where.startswith("unix://")


def engine_fact(client: Any, name: str, ask: Callable[[], T]) -> T:
    """``ask()``'s answer about the engine ``client`` talks to, asked once per engine (its
    URL) and process: for what an engine does not change while it runs, which every job
    would otherwise ask again on its start's path."""
    key = (str(getattr(client.api, "base_url", "")), name)
    with _shared_lock:
        if key in _facts:
            return _facts[key]
    answer = ask()
    with _shared_lock:
        _facts[key] = answer
    return answer
