"""Removing what local Docker jobs made: a job's network, and what dead clients left behind.

A job's containers and network carry labels (:data:`LABEL_JOB`, :data:`LABEL_JOB_DIR`,
:data:`LABEL_CLIENT`, the ``host:pid`` of the process that ran the job). Whatever carries
the label of a client that died on this machine, and whose job's name nobody holds (a
watchdog finishing the job holds it), is removed by :func:`remove_orphans`, which every
Docker job's start calls. A job that ended normally has its exited containers and its
network removed in the background (:meth:`ContainerHosts.teardown
<launchbay.backends.local.container_hosts.ContainerHosts.teardown>`), before its client
exits: they are swept here only if that client was killed first.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from launchbay._docker import docker_errors
from launchbay.backends.local import warm_pool
from launchbay.backends.local.record import NameLock, client_pid
from launchbay.errors import DockerError
from launchbay.runtime.for_client import is_alive

logger = logging.getLogger("launchbay.backends.docker")

__all__ = [
    "LABEL_CLIENT",
    "LABEL_JOB",
    "LABEL_JOB_DIR",
    "network_name",
    "remove_container_named",
    "remove_network",
    "remove_orphans",
]

LABEL_JOB = "launchbay.job"
LABEL_JOB_DIR = "launchbay.job-dir"
LABEL_CLIENT = "launchbay.client"


def network_name(job_name: str) -> str:
    """The job's Docker network: ``launchbay-<job>``."""
    return f"launchbay-{job_name}"


def remove_container_named(client: Any, name: str, timeout: float = 30.0) -> None:
    """Remove the container called ``name`` and wait until it is gone (gone already is fine).

    A removal already under way (an ended job's, in the background) is waited for.
    """
    errors = docker_errors()
    api = client.api
    try:
        api.remove_container(name, force=True, v=True)
    except errors.NotFound:
        return
    except errors.APIError as exc:
        if exc.status_code != 409:  # 409: "removal ... is already in progress"
            raise
    import requests  # noqa: PLC0415 - docker's own dependency, needed only here

    try:  # the engine answers once the container is gone: no polling
        api.wait(name, timeout=timeout, condition="removed")
    except errors.NotFound:  # gone before the wait began
        return
    except requests.exceptions.RequestException as exc:  # the timeout
        raise DockerError(
            f"The Docker container {name!r} was still being removed after {timeout:.0f} s"
        ) from exc


def remove_network(client: Any, network: str) -> None:
    """Remove ``network`` (gone already is fine), retrying while endpoints still detach."""
    errors = docker_errors()
    for _ in range(20):
        try:
            client.api.remove_network(network)
            return
        except errors.NotFound:
            return
        except errors.APIError as exc:  # endpoints still detaching: try again shortly
            logger.debug("Removing network %s: %s", network, exc)
            time.sleep(0.25)
    logger.warning("Could not remove Docker network %s", network)


def _orphaned(labels: dict[str, str]) -> int | None:
    """The dead client's pid, when what carries ``labels`` was left behind by it; else None."""
    pid = client_pid(labels.get(LABEL_CLIENT, ""))
    if pid is None or is_alive(pid) or NameLock.held_for(labels.get(LABEL_JOB_DIR, "")):
        return None  # another machine's, a live client's, or its watchdog is finishing the job
    return pid


def remove_orphans(client: Any) -> int:
    """Remove containers and networks of jobs whose client process on this machine died.

    Returns how many containers were removed. Warm pools past their period, or whose
    containers are gone, are ended too.
    """
    removed = 0
    networks: set[str] = set()
    # One list call (containers.list inspects each container after listing, and fails on
    # one that another job removes in between: a live client's, in the background).
    for container in client.api.containers(all=True, filters={"label": LABEL_CLIENT}):
        labels = container.get("Labels") or {}
        pid = _orphaned(labels)
        if pid is None:
            continue
        name = str((container.get("Names") or [container["Id"]])[0]).lstrip("/")
        message = "Removing container %s, left behind by launchbay process %s that is gone"
        logger.warning(message, name, pid)
        networks.add(network_name(labels.get(LABEL_JOB, "")))
        with contextlib.suppress(docker_errors().APIError):
            client.api.remove_container(container["Id"], force=True, v=True)
            removed += 1
    for network in client.api.networks(filters={"label": LABEL_CLIENT}):
        if _orphaned(network.get("Labels") or {}) is not None:
            networks.add(str(network["Name"]))
    for network in networks:
        remove_network(client, network)
    warm_pool.sweep(client)
    return removed
