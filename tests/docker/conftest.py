"""Fixtures for the tests against the real Docker engine (everything under tests/docker).

Every test here carries the ``docker`` marker. They never skip for want of an engine: an
engine that cannot be reached FAILS them, with the message saying how to start it
(``.ci/run`` installs and starts one).

* ``docker_client`` (session): a ``docker.DockerClient`` for the engine in the environment.
* ``base_image`` (session): the Python base the images build FROM. ``$LAUNCHBAY_BASE_IMAGE``
  if set (e.g. ``python:3.11-slim`` where pulling works), else the local
  ``launchbay/python-base:<python>-<suite>``, made with mmdebstrap when missing.
* ``wheelhouse`` (session): the image's wheelhouse as ``.ci/run`` makes it: links to
  Horovod's cached wheel (``.ci/horovod.sh`` builds it on first use, docs/horovod.md) and to
  the wheels of the first directory of ``$PIP_FIND_LINKS`` (then /opt/wheels) that holds
  torch's wheel.
* ``pytorch_image`` (session): ``launchbay/pytorch-training:2.13.0-cpu-py311``, built when
  missing or built from other sources (``build_image(..., reuse=True)``).
* ``tensorflow_image`` (session): ``launchbay/tensorflow-training:2.21.0-cpu-py311``, the same.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TORCH_VERSION = "2.13.0"
TF_VERSION = "2.21.0"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """The Docker engine of the environment; the tests fail (never skip) without one."""
    from launchbay import images
    from launchbay.errors import DockerError, MissingDependencyError

    try:
        client = images.docker_client(feature="The Docker tests")
    except (DockerError, MissingDependencyError) as exc:
        pytest.fail(f"The Docker tests need a Docker engine.\n{exc}", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """The base image the training images are built FROM (made when missing)."""
    from launchbay import images

    configured = os.environ.get("LAUNCHBAY_BASE_IMAGE")
    if configured:
        return configured
    try:
        return images.build_base_image(client=docker_client, stream=sys.stderr)
    except images.ImageError as exc:
        pytest.fail(f"Could not make the base image: {exc}", pytrace=False)
    except Exception as exc:  # MissingDependencyError (no mmdebstrap), ConfigurationError
        pytest.fail(
            f"Could not make the base image ({exc}). Install mmdebstrap, or set "
            "LAUNCHBAY_BASE_IMAGE to a pullable Python base such as python:3.11-slim.",
            pytrace=False,
        )
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def wheelhouse() -> str:
    """Horovod's wheel beside torch's CPU wheel: ``.ci/horovod.sh --wheelhouse``, as .ci/run."""
    from image_wheels import image_wheelhouse

    try:
        return image_wheelhouse()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def pytorch_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/pytorch-training:2.13.0-cpu-py311``, (re)built when needed."""
    from launchbay import images

    try:
        return images.build_image(
            "pytorch",
            TORCH_VERSION,
            "cpu",
            base_image=base_image,
            wheelhouse=wheelhouse,
            reuse=True,
            client=docker_client,
            stream=sys.stderr,
        )
    except images.ImageBuildError as exc:
        pytest.fail(f"Building the PyTorch image failed:\n{exc}", pytrace=False)
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def tensorflow_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/tensorflow-training:2.21.0-cpu-py311`` (with Horovod), built when needed."""
    from launchbay import images

    try:
        return images.build_image(
            "tensorflow",
            TF_VERSION,
            "cpu",
            base_image=base_image,
            wheelhouse=wheelhouse,
            reuse=True,
            client=docker_client,
            stream=sys.stderr,
        )
    except images.ImageBuildError as exc:
        pytest.fail(f"Building the TensorFlow image failed:\n{exc}", pytrace=False)
    raise AssertionError("unreachable")  # pragma: no cover
