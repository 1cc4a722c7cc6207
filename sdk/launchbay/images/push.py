"""Pushing a training image to a registry (:func:`push_image`); ECR logins through boto3.

``boto3`` (the ``aws`` extra) is imported only when an ECR registry is logged in to.
"""

from __future__ import annotations

import base64
import re
import sys
import time
from typing import Any, TextIO

from launchbay._docker import docker_errors
from launchbay.errors import ConfigurationError, ImagePushError, MissingDependencyError
from launchbay.images._engine import docker_client
from launchbay.images._live import LayerProgress, display_for
from launchbay.images.names import build_command, check_tag

__all__ = ["ecr_registry", "ecr_auth_config", "push_image"]

_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_ECR_HOST_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)


def ecr_registry(host: str) -> tuple[str, str] | None:
    """``(account, region)`` when ``host`` is an ECR registry host, else ``None``.

    >>> ecr_registry("123456789012.dkr.ecr.us-west-2.amazonaws.com")
    ('123456789012', 'us-west-2')
    """
    match = _ECR_HOST_RE.match(host.split(":")[0]) if isinstance(host, str) else None
    return (match.group("account"), match.group("region")) if match else None


def split_repository(repository: str) -> tuple[str, str]:
    """``(registry host, path)`` of a repository URI (``host[:port]/path``); host ``""`` for Docker Hub."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    return "", repository


def ecr_auth_config(host: str, session: Any = None) -> dict[str, str]:
    """Docker credentials for ECR registry ``host`` from ``GetAuthorizationToken`` (boto3).

    ``session`` is a :class:`launchbay.Session`, a ``boto3.Session`` or ``None`` (the default
    session in the registry's region). ``AWS_ENDPOINT_URL`` is honoured by boto3 itself.
    """
    registry = ecr_registry(host)
    if registry is None:
        raise ConfigurationError.invalid(
            "repository", host, "an ECR host such as 123456789012.dkr.ecr.us-west-2.amazonaws.com"
        )
    account, region = registry
    boto_session = getattr(session, "boto_session", session)
    if boto_session is None:
        try:  # boto3 is heavy and optional (the aws extra): imported only to log in to ECR
            import boto3
        except ImportError as exc:
            raise MissingDependencyError.for_module("boto3", "aws", "Logging in to ECR") from exc
        boto_session = boto3.Session()
    try:
        import botocore.exceptions
    except ImportError as exc:  # pragma: no cover - boto3 brings botocore
        raise MissingDependencyError.for_module("boto3", "aws", "Logging in to ECR") from exc
    try:
        ecr = boto_session.client("ecr", region_name=region)
        response = ecr.get_authorization_token(registryIds=[account])
        data = response["authorizationData"][0]
        username, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise ImagePushError(
            f"Logging in to ECR registry {host} (account {account}, region {region}) failed: {exc}"
        ) from exc
    except (KeyError, IndexError, ValueError) as exc:
        raise ImagePushError(
            f"ECR returned no usable authorization token for {host}: {exc}"
        ) from exc
    return {"username": username, "password": password, "serveraddress": host}


def push_image(
    image: str,
    repository: str,
    *,
    tag: str | None = None,
    session: Any = None,
    client: Any = None,
    progress: bool | None = None,
    stream: TextIO | None = None,
) -> str:
    """Tag local ``image`` as ``repository:tag`` and push it; return the pushed reference.

    Args:
        image: A local image (``launchbay/pytorch-training:2.13.0-cpu-py311``).
        repository: Where to push, without a tag: ``<acct>.dkr.ecr.<region>.amazonaws.com/name``
            or any registry's ``host[:port]/name``. A ``:tag`` suffix is taken as the tag.
        tag: The pushed tag. Default: the tag of ``repository`` if it has one, else ``image``'s.
        session: For ECR: a :class:`launchbay.Session` or ``boto3.Session`` (default: boto3's).
        client: A ``docker.DockerClient`` (default: from the environment).
        progress: As for :func:`build_image`.
        stream: Where progress goes (default ``sys.stderr``).

    ECR hosts are logged in to through boto3 (``GetAuthorizationToken``; ``AWS_ENDPOINT_URL``
    applies) and the credentials go to the engine with this push only (nothing is written to
    ``~/.docker``). Any other registry uses the engine's own credentials (``docker login``).

    Raises:
        ConfigurationError: a bad image, repository or tag.
        ImagePushError: the image is not local, the login failed or the registry refused.
    """
    if not isinstance(image, str) or not image:
        raise ConfigurationError.invalid("image", image, "a local image name")
    check_tag(image, "image")
    if not isinstance(repository, str) or not repository or "@" in repository:
        raise ConfigurationError.invalid(
            "repository",
            repository,
            "a repository URI such as 123456789012.dkr.ecr.us-west-2.amazonaws.com/launchbay",
        )
    host, path = split_repository(repository)
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, _, repo_tag = path.rpartition(":")
        tag = tag or repo_tag
    target_repo = f"{host}/{path}" if host else path
    if tag is None:
        tag = image.rsplit("/", 1)[-1].partition(":")[2] or "latest"
    if not _TAG_RE.match(tag):
        raise ConfigurationError.invalid("tag", tag, "letters, digits, '_', '.', '-' (at most 128)")
    check_tag(f"{target_repo}:{tag}", "repository")
    client = docker_client(client, feature="Pushing training images")
    errors = docker_errors()
    out = sys.stderr if stream is None else stream
    shown = display_for(progress, out)

    auth_config = ecr_auth_config(host, session) if host and ecr_registry(host) else None
    try:
        client.api.tag(image, target_repo, tag=tag)
    except errors.ImageNotFound as exc:
        raise ImagePushError(
            f"No local image {image!r} to push: build it first"
            + (f" ({build_command(image)})" if build_command(image) else "")
        ) from exc
    except errors.APIError as exc:
        raise ImagePushError(f"Tagging {image} as {target_repo}:{tag} failed: {exc}") from exc
    reference = f"{target_repo}:{tag}"
    shown.print(f"Pushing {reference}" + (" (ECR login through boto3)" if auth_config else ""))
    display = LayerProgress(shown, reference)
    started = time.monotonic()
    try:
        for chunk in client.api.push(
            target_repo, tag=tag, stream=True, decode=True, auth_config=auth_config
        ):
            if "error" in chunk or "errorDetail" in chunk:
                display.finish()
                message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error")
                raise ImagePushError(f"Pushing {reference} failed: {message}")
            display.feed(chunk)
    except errors.APIError as exc:
        display.finish()
        raise ImagePushError(f"Pushing {reference} failed: {exc.explanation or exc}") from exc
    display.finish()
    shown.print(f"Pushed {reference} in {time.monotonic() - started:.1f} s")
    return reference
