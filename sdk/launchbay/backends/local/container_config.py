"""What each host's container is made of: its spec, and the engine's host config for it.

:class:`HostSpec` is one container of a job (also what the compose file says);
:func:`host_config_args` turns it into ``APIClient.create_host_config`` arguments, with
SDK v2 local mode's ``local.container_config`` (:func:`container_options`) on top.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launchbay import _sagemaker_config
from launchbay._docker import docker_errors, engine_fact, engine_on_this_machine
from launchbay.backends.local import etc_hosts
from launchbay.backends.local.compose import HOST_GATEWAY

__all__ = ["HostSpec", "bind_mount", "container_options", "engine_pins_cpus", "host_config_args"]

logger = logging.getLogger("launchbay")


@dataclass
class HostSpec:
    """Everything one container of the job is made from (also what the compose file says)."""

    host: str
    container_name: str
    binds: dict[str, dict[str, str]]  # host path -> {"bind": container path, "mode": ro|rw}
    environment: dict[str, str]
    secret_names: list[str]
    #: The GPU device ids this container gets (``local_gpu``), else None.
    gpu_ids: list[str] | None = None
    #: The entrypoint, where it is not the image's own (see ``_add_pip_cache``).
    entrypoint: list[str] | None = None
    #: The CPUs this container runs on (``cpuset_cpus``, "0,1"): its host's share of this
    #: machine's CPUs (:func:`launchbay._capacity.cpusets_of`), else None (every CPU).
    cpus: str | None = None


def container_options(*, for_docker: bool = False) -> dict[str, Any]:
    """``local.container_config`` of SDK v2 local mode's ``~/.sagemaker/config.yaml``.

    As ``APIClient.create_host_config`` keyword arguments (``shm_size``, ``ulimits``,
    ``mem_limit``, ...; :data:`launchbay._sagemaker_config.DOCKER_HOST_OPTIONS`);
    ``for_docker`` turns ulimits into ``docker.types.Ulimit``. Empty without the file.
    """
    config = _sagemaker_config.load_local_mode()
    if config is None or not config.container_config:
        return {}
    options = _sagemaker_config.docker_host_options(config.container_config, config.path)
    if for_docker:
        return _sagemaker_config.host_options_for_docker(config.path, options)
    return options


def host_config_args(
    spec: HostSpec,
    network: str,
    isolated: bool,
    options: Mapping[str, Any] | None = None,
    *,
    hosts_file: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``APIClient.create_host_config`` for one host's container.

    With ``hosts_file``, the job's hosts file (:mod:`launchbay.backends.local.etc_hosts`)
    is the container's ``/etc/hosts`` and names ``host.docker.internal`` itself; without
    it, the engine's ``host-gateway`` does (none on an isolated network). A ``local_gpu`` container gets one device request naming its own GPUs
    (``spec.gpu_ids``), never ``count=-1`` (all): hosts must not share a GPU.
    ``options`` (:func:`container_options`) add to them; their ``shm_size`` replaces
    the default 1 GB.
    """
    device_requests = None
    cpus = {"cpuset_cpus": spec.cpus} if spec.cpus else {}  # the user's cpuset replaces it
    if spec.gpu_ids is not None:
        from docker.types import DeviceRequest

        device_requests = [DeviceRequest(device_ids=list(spec.gpu_ids), capabilities=[["gpu"]])]
    binds = spec.binds if hosts_file is None else {**spec.binds, **etc_hosts.bind(hosts_file)}
    own_hosts = isolated or hosts_file is not None
    return {
        "binds": binds,
        "init": True,
        "network_mode": network,
        "device_requests": device_requests,
        "extra_hosts": None if own_hosts else {HOST_GATEWAY: "host-gateway"},
        "shm_size": "1g",
        **cpus,
        **(options or {}),
    }


def bind_mount(target: str, mode: str) -> dict[str, str]:
    """One bind mount's ``create_host_config`` value: ``target`` in the container, ``mode``."""
    return {"bind": posixpath.normpath(target), "mode": mode}


def engine_pins_cpus(client: Any) -> bool:
    """Whether each container gets its host's share of this machine's CPUs: where the engine
    runs on this machine, sees its CPUs (``NCPU``: not an engine in a VM behind a local
    socket) and can pin them (``CPUSet``; a rootless engine without the cpuset controller
    cannot). Asked once per engine and process: the engine's ``info`` takes 10-20 ms, which
    every cold job's start paid."""

    def ask() -> bool:
        try:
            if engine_on_this_machine():
                info = client.api.info()
                return info.get("NCPU") == os.cpu_count() and bool(info.get("CPUSet"))
        except (docker_errors().DockerException, OSError) as exc:
            logger.debug("Docker engine info failed (%s): containers keep every CPU", exc)
        return False

    return engine_fact(client, "pins-cpus", ask)
