"""The compose file of a local Docker job (``<job dir>/docker-compose.yaml``), and what
every container of a job is given on its network.

The file runs the job's containers again by hand (``docker compose -f ... up``), as
:class:`~launchbay.backends.local.container_hosts.ContainerHosts` ran them: the same
image, command, environment (AWS credentials named, never written), mounts, host names
on a network of the job's own, GPUs and ``~/.sagemaker/config.yaml``'s container options.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from launchbay import _sagemaker_config
from launchbay.backends.local.container_cleanup import LABEL_JOB, network_name
from launchbay.backends.local.etc_hosts import HOST_GATEWAY
from launchbay.backends.plan import JobFields

__all__ = ["HOST_GATEWAY", "ISOLATED_OPTIONS", "ComposedHost", "compose_document"]

#: ``HOST_GATEWAY`` names this machine in every container (``host-gateway``), unless isolated.
#: An internal network still routes to its bridge's address, i.e. to this machine. With no
#: address on the bridge, a container of an isolated job reaches its peers and nothing else.
ISOLATED_OPTIONS = {"com.docker.network.bridge.inhibit_ipv4": "true"}


class ComposedHost(Protocol):
    """What the compose file says of one host's container (a ``HostSpec``)."""

    host: str
    entrypoint: list[str] | None
    environment: dict[str, str]
    secret_names: list[str]
    binds: dict[str, dict[str, str]]
    gpu_ids: list[str] | None
    cpus: str | None


def compose_document(
    source: JobFields | Mapping[str, Any],
    specs: Sequence[ComposedHost],
    *,
    gpu: bool,
    isolated: bool,
) -> dict[str, Any]:
    """The compose file for the job's containers (Compose Specification; docker-compose 1.27+).

    ``source`` is the job's plan (a bare request is derived the same way).
    """
    plan = JobFields.of(source)
    name = plan.job_name
    network = network_name(name)
    image = plan.image
    services: dict[str, Any] = {}
    for spec in specs:
        service: dict[str, Any] = {
            "image": image,
            "hostname": spec.host,
            "command": ["train"],
            **({"entrypoint": list(spec.entrypoint)} if spec.entrypoint else {}),
            "init": True,
            "shm_size": "1g",
            "environment": [f"{k}={v}" for k, v in spec.environment.items()]
            + list(spec.secret_names),
            "volumes": [
                f"{source}:{bind['bind']}:{bind['mode']}" for source, bind in spec.binds.items()
            ],
            "networks": {"job": {"aliases": [spec.host]}},
            "labels": {LABEL_JOB: name},
        }
        if not isolated:
            service["extra_hosts"] = [f"{HOST_GATEWAY}:host-gateway"]
        if spec.cpus:  # the host's share of this machine's CPUs
            service["cpuset"] = spec.cpus
        # ~/.sagemaker/config.yaml local.container_config: Compose's own option names.
        config = _sagemaker_config.load_local_mode()
        if config is not None and config.container_config:
            _sagemaker_config.docker_host_options(config.container_config, config.path)
            service.update(copy.deepcopy(config.container_config))
        if gpu and spec.gpu_ids is not None:
            device = {"driver": "nvidia", "device_ids": list(spec.gpu_ids), "capabilities": ["gpu"]}
            service["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
        services[spec.host] = service
    job_network: dict[str, Any] = {
        "name": f"{network}-compose",
        "driver": "bridge",
        "internal": isolated,
    }
    if isolated:
        job_network["driver_opts"] = dict(ISOLATED_OPTIONS)
    return {"services": services, "networks": {"job": job_network}}
