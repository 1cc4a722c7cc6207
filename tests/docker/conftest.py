"""Fixtures for the tests against the real Docker engine (everything under tests/docker).

Every test here carries the ``docker`` marker and runs on one xdist worker (tests/conftest.py). They never skip for want of an engine: an
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
* ``huggingface_image``, ``sklearn_image``, ``xgboost_image`` (session): the images the
  estimators name in local Docker mode (``launchbay/huggingface-training:5.24.0-pytorch2.13.0-
  cpu-py311``, ``launchbay/sklearn-training:1.2-1-cpu-py3``, ``launchbay/xgboost-training:
  1.7-1-cpu-py3``), from containers/packages/Dockerfile with the same base and wheelhouse as
  the PyTorch image (so they share its system and mpi4py layers), reused by context hash.
* ``framework_version`` (session): the PyTorch version of ``pytorch_image`` (CPU, py311).
* ``docker_options`` (session): the keywords of ``factories.estimator`` for a job of 2
  containers of ``pytorch_image`` running the ``local_process`` scripts; ``docker_pytorch``
  (session): ``factories.estimator`` with them bound.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from factories import LOCAL_PROCESS_SCRIPTS, estimator

TORCH_VERSION = "2.13.0"
TF_VERSION = "2.21.0"
TRANSFORMERS_VERSION = "5.24.0"
SKLEARN_VERSION = "1.2-1"
XGBOOST_VERSION = "1.7-1"
HERE = Path(__file__).resolve().parent


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
def host_gateway(docker_client: Any, base_image: str) -> str:
    """The address the engine itself gives ``host-gateway`` (``host.docker.internal`` in a
    job's containers), read in a container that names it: the oracle for launchbay's own
    lookup, whatever the engine's bridge config shows or omits."""
    output = docker_client.containers.run(
        base_image,
        ["getent", "ahostsv4", "probe"],
        extra_hosts={"probe": "host-gateway"},
        network_mode="bridge",
        remove=True,
    ).decode()
    return output.split()[0]


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
    return _build_image(docker_client, base_image, wheelhouse, "pytorch", TORCH_VERSION)


@pytest.fixture(scope="session")
def tensorflow_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/tensorflow-training:2.21.0-cpu-py311`` (with Horovod), built when needed."""
    return _build_image(docker_client, base_image, wheelhouse, "tensorflow", TF_VERSION)


@pytest.fixture(scope="session")
def framework_version(pytorch_image: str) -> str:
    """The framework version of ``pytorch_image``, checked to be a CPU image for py311."""
    from launchbay.images import parse_image_name

    spec = parse_image_name(pytorch_image)
    assert spec is not None and spec.processor == "cpu" and spec.py_version == "py311"
    return spec.framework_version


@pytest.fixture(scope="session")
def docker_options(framework_version: str) -> dict[str, Any]:
    """Keywords of ``factories.estimator``: 2 containers of ``pytorch_image``, the
    ``local_process`` scripts."""
    return dict(
        source_dir=str(LOCAL_PROCESS_SCRIPTS),
        instance_type="local",
        instance_count=2,
        framework_version=framework_version,
        py_version="py311",
    )


@pytest.fixture(scope="session")
def docker_pytorch(docker_options: dict[str, Any]) -> Callable[..., Any]:
    """``factories.estimator`` with ``docker_options`` bound (keywords given to it win)."""
    return functools.partial(estimator, **docker_options)


def _build_image(
    docker_client: Any,
    base_image: str,
    wheelhouse: str,
    framework: str,
    version: str,
    tag: str | None = None,
) -> str:
    """The CPU image of ``framework`` ``version`` (named ``tag`` if given), (re)built when
    needed; a failed build fails the test."""
    from launchbay import images

    try:
        return images.build_image(
            framework,
            version,
            "cpu",
            base_image=base_image,
            wheelhouse=wheelhouse,
            **({} if tag is None else {"tag": tag}),
            reuse=True,
            client=docker_client,
            stream=sys.stderr,
        )
    except images.ImageBuildError as exc:
        name = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}.get(framework, framework)
        pytest.fail(f"Building the {name} image failed:\n{exc}", pytrace=False)
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def huggingface_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311``, built when needed."""
    from launchbay import images

    version = images.huggingface_version(TRANSFORMERS_VERSION, TORCH_VERSION)
    tag = images.image_name("huggingface", version, "cpu")
    return _build_image(docker_client, base_image, wheelhouse, "huggingface", version, tag)


@pytest.fixture(scope="session")
def sklearn_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/sklearn-training:1.2-1-cpu-py3`` (scikit-learn 1.9.1), built when needed."""
    tag = f"launchbay/sklearn-training:{SKLEARN_VERSION}-cpu-py3"
    return _build_image(docker_client, base_image, wheelhouse, "sklearn", SKLEARN_VERSION, tag)


@pytest.fixture(scope="session")
def xgboost_image(docker_client: Any, base_image: str, wheelhouse: str) -> str:
    """``launchbay/xgboost-training:1.7-1-cpu-py3`` (xgboost-cpu 3.2.0), built when needed."""
    tag = f"launchbay/xgboost-training:{XGBOOST_VERSION}-cpu-py3"
    return _build_image(docker_client, base_image, wheelhouse, "xgboost", XGBOOST_VERSION, tag)
