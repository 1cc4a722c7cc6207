"""Pulling an image (:func:`pull_image`, ``launchbay images pull``); ECR logins through boto3.

SageMaker's built-in algorithms and Deep Learning Containers live in ECR registries that
need a login. :func:`pull_image` gets the login from ``ecr.get_authorization_token``
(boto3; ``AWS_ENDPOINT_URL`` applies), hands it to the engine with this pull only
(nothing is written to ``~/.docker``), and shows the layers' progress.

``LAUNCHBAY_ECR_ENDPOINT=host:port`` sends every ECR pull to that registry instead, with
the same repository path and tag, and tags the result with the ECR name: a registry
mirror, or a local registry in tests (``tests/docker/test_pull.py`` pulls
``<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`` from a ``docker-registry`` on
127.0.0.1). The ECR token is still asked for and sent along.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, TextIO

from launchbay._docker import docker_errors
from launchbay.errors import ConfigurationError, ImageError, ImagePullError
from launchbay.images._engine import docker_client
from launchbay.images._live import display_for, pull_progress
from launchbay.images.push import ecr_auth_config, ecr_registry, split_repository

__all__ = ["ECR_ENDPOINT_VARIABLE", "ImagePullError", "manual_pull_commands", "pull_image"]

#: Environment variable: a registry (``host:port``) that serves every ECR pull instead.
ECR_ENDPOINT_VARIABLE = "LAUNCHBAY_ECR_ENDPOINT"
_ENDPOINT_RE = re.compile(r"^[A-Za-z0-9.-]+(:\d{1,5})?$")
_REFERENCE_RE = re.compile(r"^[a-z0-9][A-Za-z0-9._/:-]*(@sha256:[0-9a-f]{64})?$")


def _split_reference(image: str) -> tuple[str, str]:
    """``(repository, tag or digest)`` of ``image``; the tag defaults to ``latest``."""
    if "@" in image:
        repository, _, digest = image.partition("@")
        return repository, digest
    host, path = split_repository(image)
    if ":" in path.rsplit("/", 1)[-1]:
        path, _, tag = path.rpartition(":")
    else:
        tag = "latest"
    return (f"{host}/{path}" if host else path), tag


def manual_pull_commands(image: str) -> str:
    """The shell lines that pull ``image`` by hand (with the ECR login for an ECR image)."""
    host = split_repository(image)[0]
    registry = ecr_registry(host) if host else None
    lines = []
    if registry is not None:
        lines.append(
            f"aws ecr get-login-password --region {registry[1]} | "
            f"docker login --username AWS --password-stdin {host}"
        )
    lines.append(f"docker pull {image}")
    return "\n".join(f"    {line}" for line in lines)


def _endpoint() -> str | None:
    endpoint = os.environ.get(ECR_ENDPOINT_VARIABLE) or None
    if endpoint is not None and not _ENDPOINT_RE.match(endpoint):
        raise ConfigurationError.invalid(
            ECR_ENDPOINT_VARIABLE, endpoint, "a registry host[:port] such as 127.0.0.1:5000"
        )
    return endpoint


def pull_image(
    image: str,
    *,
    session: Any = None,
    client: Any = None,
    progress: bool | None = None,
    stream: TextIO | None = None,
) -> str:
    """Pull ``image`` to this machine's Docker engine; return its reference.

    Args:
        image: ``<registry>/<repository>[:tag]`` (default tag ``latest``) or ``...@sha256:...``,
            e.g. ``174872318107.dkr.ecr.us-west-2.amazonaws.com/kmeans:1``.
        session: For ECR: a :class:`launchbay.Session` or ``boto3.Session`` (default: boto3's).
        client: A ``docker.DockerClient`` (default: from the environment).
        progress: ``True`` a live line, ``False`` nothing, ``None`` live on a terminal or
            in Jupyter, a line per layer otherwise.
        stream: Where progress goes (default ``sys.stderr``).

    Raises:
        ConfigurationError: ``image`` is not an image reference, or a bad
            ``LAUNCHBAY_ECR_ENDPOINT``.
        ImagePullError: the ECR login or the pull failed; the message gives the commands
            that pull it by hand.
    """
    if not isinstance(image, str) or not _REFERENCE_RE.match(image):
        raise ConfigurationError.invalid(
            "image",
            image,
            "an image reference such as 123456789012.dkr.ecr.us-west-2.amazonaws.com/name:tag",
        )
    repository, tag = _split_reference(image)
    reference = f"{repository}@{tag}" if tag.startswith("sha256:") else f"{repository}:{tag}"
    host, path = split_repository(repository)
    client = docker_client(client, feature="Pulling images")
    errors = docker_errors()
    out = sys.stderr if stream is None else stream
    shown = display_for(progress, out)

    source, auth_config = repository, None
    if host and ecr_registry(host):
        try:
            auth_config = ecr_auth_config(host, session)
        except ImageError as exc:
            raise ImagePullError(
                f"{exc}. To pull it by hand:\n{manual_pull_commands(reference)}"
            ) from exc
        endpoint = _endpoint()
        if endpoint is not None:
            source = f"{endpoint}/{path}"
            auth_config = {**auth_config, "serveraddress": endpoint}
    via = (
        f" from {source.split('/', 1)[0]} ({ECR_ENDPOINT_VARIABLE})" if source != repository else ""
    )
    shown.print(f"Pulling {reference}{via}" + (" (ECR login through boto3)" if auth_config else ""))
    display = pull_progress(shown, reference)
    started = time.monotonic()
    try:
        for chunk in client.api.pull(
            source, tag=tag, stream=True, decode=True, auth_config=auth_config
        ):
            if "error" in chunk or "errorDetail" in chunk:
                display.finish()
                message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error")
                raise ImagePullError(
                    f"Pulling {reference} failed: {message}. To pull it by hand:\n"
                    f"{manual_pull_commands(reference)}"
                )
            display.feed(chunk)
        if source != repository:  # name it as the job asks for it, and drop the mirror's name
            pulled = f"{source}@{tag}" if tag.startswith("sha256:") else f"{source}:{tag}"
            client.api.tag(pulled, repository, tag=None if tag.startswith("sha256:") else tag)
            client.api.remove_image(pulled, noprune=True)
    except errors.APIError as exc:
        display.finish()
        raise ImagePullError(
            f"Pulling {reference} failed: {exc.explanation or exc}. To pull it by hand:\n"
            f"{manual_pull_commands(reference)}"
        ) from exc
    display.finish()
    shown.print(f"Pulled {reference} in {time.monotonic() - started:.1f} s")
    return reference
