"""Local Docker mode (``instance_type="local"`` / ``"local_gpu"``): the local control loop with each host a container.

:class:`DockerBackend` is :class:`~launchbay.backends.local.control.LocalBackend`
(the job's life: staging, failure triage, outputs, Ctrl-C, teardown at exit)
driving a :class:`~launchbay.backends.local.container_hosts.ContainerHosts` (the
hosts: ``docker run IMAGE train`` on every instance, through the Docker Engine
API). The containers' names, labels, mounts, network and compose file are
described in :mod:`launchbay.backends.local.container_hosts`, whose public names
are importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from launchbay.backends.local.compose import compose_document
from launchbay.backends.local.container_config import (
    HostSpec,
    container_options,
    host_config_args,
)
from launchbay.backends.local.container_hosts import (
    COMPOSE_FILE,
    LABEL_CLIENT,
    LABEL_JOB,
    LABEL_JOB_DIR,
    ContainerHosts,
    container_endpoint,
    network_name,
)
from launchbay.backends.local.control import LocalBackend
from launchbay.backends.local.record import LocalJob
from launchbay.runtime.names import DOCKER_INSTANCE_TYPES, LOCAL_GPU

__all__ = [
    "DockerBackend",
    "COMPOSE_FILE",
    "LABEL_CLIENT",
    "LABEL_JOB",
    "LABEL_JOB_DIR",
    "HostSpec",
    "compose_document",
    "container_endpoint",
    "container_options",
    "host_config_args",
    "network_name",
]


class DockerBackend(LocalBackend):
    """Runs CreateTrainingJob requests as local Docker containers, one per instance.

    Args:
        session: A :class:`launchbay.Session` for ``s3://`` channels, outputs,
            checkpoints and the credentials handed to containers; created on first
            S3 use when not given.
        job_root: Where job directories go (default ``$LAUNCHBAY_HOME/jobs``).
        grace_seconds: Seconds between SIGTERM and SIGKILL when containers are
            stopped (default ``$LAUNCHBAY_GRACE_SECONDS``, else 10).
        gpu: Give every container its share of the GPUs (``instance_type="local_gpu"``).
        client: A ``docker.DockerClient`` (default: from the environment).
        owner: ``(uid, gid)`` the files containers write are given to when the job
            ends (default: the caller's; nothing to do for root).
    """

    name = "docker"
    instance_types = DOCKER_INSTANCE_TYPES
    host_kind = "container"
    poll_interval = 0.1

    @classmethod
    def for_instance_type(cls, instance_type: str | None, session: Any = None) -> DockerBackend:
        """``local_gpu`` gives every container its own GPUs; ``local`` none."""
        return cls(session, gpu=instance_type == LOCAL_GPU)

    def __init__(
        self,
        session: Any = None,
        job_root: str | os.PathLike[str] | None = None,
        *,
        grace_seconds: float | None = None,
        gpu: bool = False,
        client: Any = None,
        owner: tuple[int, int] | None = None,
    ) -> None:
        #: The containers' runner (also :attr:`runner`).
        self.containers = ContainerHosts(gpu=gpu, client=client, owner=owner)
        super().__init__(session, job_root, grace_seconds=grace_seconds, runner=self.containers)

    @property
    def gpu(self) -> bool:
        """Whether every container gets its share of the GPUs (``local_gpu``)."""
        return self.containers.gpu

    @property
    def owner(self) -> tuple[int, int]:
        """``(uid, gid)`` the files containers write are given to when the job ends."""
        return self.containers.owner

    @property
    def client(self) -> Any:
        """The ``docker.DockerClient`` (made, and the engine checked, on first use)."""
        return self.containers.client

    def remove_orphans(self) -> int:
        """See :meth:`ContainerHosts.remove_orphans`."""
        return self.containers.remove_orphans()

    def host_specs(
        self,
        request: Mapping[str, Any],
        job_dir: str,
        hosts: list[str],
        *,
        local_code: bool,
        grace: float,
        gpus: Mapping[str, list[str]] | None = None,
    ) -> list[HostSpec]:
        """See :meth:`ContainerHosts.host_specs`."""
        return self.containers.host_specs(
            request, job_dir, hosts, local_code=local_code, grace=grace, gpus=gpus
        )

    def write_compose_file(self, job: LocalJob, specs: list[HostSpec]) -> str:
        """See :meth:`ContainerHosts.write_compose_file`."""
        return self.containers.write_compose_file(job, specs)
