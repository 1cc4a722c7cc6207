"""Endpoints on the client machine's loopback, as a local job's hosts reach them.

A host of a local job is a machine of its own: in Docker mode a container, in
``local_process`` mode (own network) a network namespace. Its ``127.0.0.1`` is its
own loopback, as on SageMaker. Services the job is pointed at on the client
machine's loopback (a moto server, LocalStack: ``AWS_ENDPOINT_URL=http://127.0.0.1:5000``)
are then reached by a name for the client machine, ``host.docker.internal``: Docker
maps it to the host gateway, a ``local_process`` job's relay to the client's
loopback (:mod:`launchbay.runtime._netns`). The endpoint variables a job inherits
or is given are rewritten to that name, with one notice per job.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
import warnings
from collections.abc import Mapping

__all__ = ["client_endpoints", "is_loopback_host", "on_client"]

#: ``AWS_ENDPOINT_URL`` and every service's ``AWS_ENDPOINT_URL_<SERVICE>``.
_ENDPOINT_PREFIX = "AWS_ENDPOINT_URL"


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` (a URL's host name) names the machine's own loopback."""
    if not host:
        return False
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def on_client(url: str, name: str) -> str:
    """``url`` with a loopback host replaced by ``name`` (port, path and query kept)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return url
    if not is_loopback_host(host):
        return url
    netloc = parts.netloc.rpartition("@")
    userinfo = netloc[0] + "@" if netloc[1] else ""
    return urllib.parse.urlunsplit(
        parts._replace(netloc=f"{userinfo}{name}" + (f":{port}" if port else ""))
    )


def client_endpoints(environ: Mapping[str, str], name: str) -> dict[str, str]:
    """The endpoint variables of ``environ`` that name the client's loopback, rewritten to
    ``name``; one notice (a ``UserWarning``) names them. Empty when there are none."""
    changed: dict[str, str] = {}
    for key in sorted(environ):
        if key != _ENDPOINT_PREFIX and not key.startswith(_ENDPOINT_PREFIX + "_"):
            continue
        value = str(environ[key])
        rewritten = on_client(value, name)
        if rewritten != value:
            changed[key] = rewritten
    if changed:
        listed = ", ".join(f"{key}={environ[key]}" for key in changed)
        warnings.warn(
            f"{listed} name{'s' if len(changed) == 1 else ''} this machine's loopback, and a "
            "host of this job has a loopback of its own (as on SageMaker): the hosts get "
            f"{name} instead, the name that reaches this machine from a host "
            f"({', '.join(f'{key}={value}' for key, value in changed.items())}); "
            "docs/local.md.",
            UserWarning,
            stacklevel=4,
        )
    return changed
