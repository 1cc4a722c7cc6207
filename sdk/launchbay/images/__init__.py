"""Training images: their names, building them, pushing them (``launchbay images``).

The images come from ``containers/<framework>/Dockerfile`` (one file per framework; CPU and
GPU from the same file through ``ARG BASE_IMAGE``; HuggingFace, scikit-learn and XGBoost
share ``containers/packages/Dockerfile``, their pip packages passed as build arguments) and
are named::

    launchbay/<framework>-training:<framework_version>-<cpu|gpu>-<py_version>
    launchbay/pytorch-training:2.13.0-cpu-py311

Each holds Python in a venv (``/opt/venv``), the framework, Open MPI with mpi4py, an SSH
server and client for passwordless MPI between the containers of one job, boto3, and the
launchbay runtime (``train`` on PATH), installed from a wheel of the launchbay package
(:func:`build_runtime_wheel`). See docs/images.md.

One module per job; this package re-exports their public names::

    names.py     image_name, parse_image_name, build_command, default_base_image: pure
    wheel.py     build_runtime_wheel: the launchbay wheel the images install
    context.py   the build context: Dockerfile, wheel, wheelhouse, CA bundle, content hash
    build.py     build_image: a build through the Docker engine with a progress display
    ensure.py    ensure_image: an image used when present, built (with progress) when missing
    push.py      push_image: tags and pushes an image; logs in to ECR through boto3
    pull.py      pull_image: pulls an image (SageMaker's algorithms, DLCs); ECR login through boto3
    base.py      build_base_image: a slim Python base from this machine's Debian sources
                 (mmdebstrap + docker import), for machines that cannot pull images
    _engine.py   the Docker client and an image's labels
    _live.py     the build and push progress displays

``docker`` (the ``docker`` extra, reached through :mod:`launchbay._docker` as the Docker
backend does) and ``boto3`` (the ``aws`` extra) are imported only inside the functions that
use them; ``import launchbay`` does not import this package. Errors (:mod:`launchbay.errors`)::

    LaunchbayError
    ├── ConfigurationError        a bad argument (framework, processor, wheelhouse, ...)
    ├── MissingDependencyError    the docker package (or mmdebstrap, boto3) is missing
    └── DockerError (RuntimeError)    the engine cannot be reached or refused a call
        └── ImageError
            ├── ImageBuildError       a build step failed (quotes its last output lines)
            ├── ImagePushError        the registry refused the push or the login
            └── ImagePullError        the registry refused the pull or the login (images.pull)
"""

from __future__ import annotations

from launchbay.errors import ImageBuildError, ImageError, ImagePushError
from launchbay.images._engine import docker_client
from launchbay.images._live import ERROR_TAIL_LINES
from launchbay.images.base import base_image_name, build_base_image
from launchbay.images.build import build_image
from launchbay.images.context import containers_dir
from launchbay.images.ensure import ensure_image
from launchbay.images.names import (
    DEFAULT_GPU_BASE_IMAGE,
    DEFAULT_PY_VERSION,
    FRAMEWORKS,
    LABEL_HASH,
    LABEL_PREFIX,
    PROCESSORS,
    REPOSITORY_PREFIX,
    ImageSpec,
    build_command,
    default_base_image,
    huggingface_version,
    image_name,
    parse_image_name,
)
from launchbay.images.pull import (
    ECR_ENDPOINT_VARIABLE,
    ImagePullError,
    manual_pull_commands,
    pull_image,
)
from launchbay.images.push import ecr_auth_config, ecr_registry, push_image
from launchbay.images.wheel import build_runtime_wheel

__all__ = [
    "FRAMEWORKS",
    "PROCESSORS",
    "DEFAULT_PY_VERSION",
    "DEFAULT_GPU_BASE_IMAGE",
    "REPOSITORY_PREFIX",
    "LABEL_PREFIX",
    "LABEL_HASH",
    "ERROR_TAIL_LINES",
    "ImageSpec",
    "ImageError",
    "ImageBuildError",
    "ImagePushError",
    "image_name",
    "parse_image_name",
    "build_command",
    "default_base_image",
    "huggingface_version",
    "docker_client",
    "containers_dir",
    "build_runtime_wheel",
    "build_image",
    "ensure_image",
    "push_image",
    "pull_image",
    "manual_pull_commands",
    "ImagePullError",
    "ECR_ENDPOINT_VARIABLE",
    "ecr_registry",
    "ecr_auth_config",
    "base_image_name",
    "build_base_image",
]
