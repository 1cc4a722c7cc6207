"""Each Docker host's name resolves for as long as its job runs, as a machine's does.

The engine's embedded DNS answers ``algo-2`` only while ``algo-2``'s container runs. A
host that is done early (a data-parallel worker with nothing left to do, a no-op host)
used to take its name with it, and a later host that looked it up waited: the
SageMaker training toolkit's ``_wait_hostname_resolution`` retries every host's name
for 15 minutes before it runs the script.

So every container of a job mounts one hosts file of the job read-only at
``/etc/hosts`` (the engine then writes none of its own): the usual ``localhost`` lines,
``host.docker.internal`` (the address the engine's ``host-gateway`` stands for, its
default bridge's gateway; none on an isolated network), and a line ``<address> algo-N``
appended as each container starts (its address on the job network, from the engine).
Names not yet in the file still resolve through the engine's DNS, so nothing waits for
a line. A warm pool's slot has its own file, complete before any job runs in it.
Appends only, in one ``write`` each: a container sees the file grow, never change.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from launchbay._docker import engine_fact
from launchbay.backends.local.layout import write_text_atomic

__all__ = [
    "HOST_GATEWAY",
    "TARGET",
    "add_host",
    "bind",
    "name_container",
    "host_gateway_address",
    "start_file",
]

#: The name a container reaches this machine by (``host-gateway``'s address).
HOST_GATEWAY = "host.docker.internal"
#: Where the file is mounted in each container.
TARGET = "/etc/hosts"

_LOCALHOST = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "ff00::0\tip6-mcastprefix\n"
    "ff02::1\tip6-allnodes\n"
    "ff02::2\tip6-allrouters\n"
)


def host_gateway_address(client: Any) -> str | None:
    """The address the engine gives ``host-gateway``: its default bridge's IPv4 gateway
    (asked once per engine and process); None when the engine has no such bridge.

    An engine that made its bridge itself, without ``--bip``, names no ``Gateway`` in the
    bridge's IPAM config (Docker 20.10 on a fresh machine): its bridge then holds the
    subnet's first address, which is what ``host-gateway`` stands for.
    """

    def ask() -> str | None:
        try:
            configs = client.api.inspect_network("bridge").get("IPAM", {}).get("Config") or []
        except Exception:  # no default bridge (a daemon started with --bridge=none)
            configs = []
        for config in configs:
            gateway = str(config.get("Gateway") or "")
            if gateway:
                if ":" not in gateway:
                    return gateway
                continue
            try:
                subnet = ipaddress.ip_network(str(config.get("Subnet") or ""))
            except ValueError:
                continue
            if subnet.version == 4 and subnet.num_addresses > 2:
                return str(subnet.network_address + 1)
        return None

    return engine_fact(client, "host-gateway", ask)


def start_file(path: str, gateway: str | None) -> None:
    """A new hosts file at ``path`` (mode 0644: every user of a container reads it), written
    whole before any container mounts it: later writes only append."""
    text = _LOCALHOST + (f"{gateway}\t{HOST_GATEWAY}\n" if gateway else "")
    write_text_atomic(path, text, mode=0o644)


def add_host(path: str, address: str, host: str) -> None:
    """Append ``address host`` in one write (readers see whole lines)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, f"{address}\t{host}\n".encode())
    finally:
        os.close(fd)


def name_container(api: Any, container_id: str, network: str, path: str, host: str) -> None:
    """Append the started container's line (its address on ``network``) to ``path``; none
    for a container that has already stopped (its name then lasts only as long as it ran)."""
    networks = api.inspect_container(container_id).get("NetworkSettings", {}).get("Networks")
    address = (networks or {}).get(network, {}).get("IPAddress")
    if address:
        add_host(path, address, host)


def bind(path: str) -> dict[str, dict[str, str]]:
    """The read-only bind mount of the hosts file at :data:`TARGET`."""
    return {path: {"bind": TARGET, "mode": "ro"}}
