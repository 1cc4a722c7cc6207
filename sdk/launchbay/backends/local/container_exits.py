"""How a Docker job's containers are seen to end, and what is removed after them.

* :class:`DeathWatch`: the engine's ``die`` events of one job's containers, one stream
  per job. An event comes as a container's process is gone, with its exit code; a
  ``wait`` call returns only once the engine has also detached the container from its
  network, 0.04-0.06 s later, which the job's end need not wait for. The ``wait`` calls
  stay (:meth:`ContainerHosts._wait_for
  <launchbay.backends.local.container_hosts.ContainerHosts>`), for a stream that
  breaks; :func:`record_exit` takes whichever word comes first.
* Containers whose process a job in this process saw end are no host left running
  (:func:`still_running`) while the engine still lists them as running, until they are
  removed (:func:`remove_made`: by the ids the job made, then its network by id, so a
  job of the same name started meanwhile keeps its own).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from launchbay._docker import docker_errors
from launchbay.backends.local import container_cleanup

logger = logging.getLogger("launchbay.backends.docker")

__all__ = ["DeathWatch", "record_exit", "remove_made", "still_running"]

#: Ids of containers whose process a job in this process saw end (any backend
#: instance's); forgotten once removed.
_ENDED: set[str] = set()
_ENDED_LOCK = threading.Lock()


class _Entry(Protocol):
    """One host's container as the host runner keeps it."""

    id: str
    exit_code: int | None
    exited: threading.Event


class _Job(Protocol):
    name: str

    @property
    def procs(self) -> Mapping[str, Any]: ...

    def notify(self) -> None: ...


def record_exit(job: _Job, entry: _Entry, code: int) -> None:
    """The first word of a container's exit (its die event, or its wait call) counts."""
    with _ENDED_LOCK:
        if entry.exited.is_set():
            return
        entry.exit_code = code
        entry.exited.set()
        _ENDED.add(entry.id)
    job.notify()


def still_running(found: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The engine's running containers ``found``, less those a job here saw end."""
    with _ENDED_LOCK:
        return [c for c in found if c["Id"] not in _ENDED]


class DeathWatch:
    """The open ``die`` event streams of the jobs a host runner runs, by job directory."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client
        self._streams: dict[str, Any] = {}

    def watch(self, job: _Job, job_dir: str, label: str) -> None:
        """Read the ``die`` events of the containers labelled ``label`` in a thread.

        Events since a second ago are replayed, so none is missed when this starts after
        the containers; one of another container with the label (a job of the same name
        just before) has another id.
        """
        filters = {"type": "container", "event": "die", "label": label}
        try:
            stream = self._client().api.events(
                since=int(time.time()) - 1, filters=filters, decode=True
            )
        except docker_errors().APIError as exc:
            logger.debug("No die events for job %s: %s", job.name, exc)
            return
        self._streams[job_dir] = stream

        def read() -> None:
            try:
                for event in stream:
                    actor = event.get("Actor") or {}
                    found = str(actor.get("ID") or event.get("id") or "")
                    for entry in job.procs.values():
                        if entry.id and entry.id == found:
                            code = (actor.get("Attributes") or {}).get("exitCode", -1)
                            record_exit(job, entry, int(code))
                    if all(entry.exited.is_set() for entry in job.procs.values()):
                        return
            except Exception as exc:  # closed by teardown, engine gone: the waits answer
                logger.debug("Die events of job %s: %s", job.name, exc)
            finally:
                self.close(job_dir)

        threading.Thread(target=read, name=f"launchbay-deaths-{job.name}", daemon=True).start()

    def close(self, job_dir: str) -> None:
        """Stop reading the job's events (its end, or its teardown)."""
        stream = self._streams.pop(job_dir, None)
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()


def remove_made(client: Any, name: str, ids: list[str], network: str | None) -> None:
    """Remove job ``name``'s containers ``ids`` (in parallel), then ``network``, by id."""
    api = client.api
    errors = docker_errors()

    def remove(container_id: str) -> None:
        try:
            api.remove_container(container_id, force=True, v=True)
        except errors.NotFound:
            pass
        except errors.APIError as exc:  # reported; the orphan sweep tries again later
            logger.warning("Could not remove container %s of job %s: %s", container_id, name, exc)

    if ids:
        # Threads of its own, not an executor: this runs in the background, also while
        # the interpreter exits (a detached runner's last job), when concurrent.futures
        # refuses new work and the network would be left behind.
        removers = [threading.Thread(target=remove, args=(i,), daemon=True) for i in ids]
        for thread in removers:
            thread.start()
        for thread in removers:
            thread.join()
        with _ENDED_LOCK:
            _ENDED.difference_update(ids)
    if network is not None:
        container_cleanup.remove_network(client, network)
