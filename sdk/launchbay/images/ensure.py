"""Making sure a training image is on the Docker engine before a local Docker job
(:func:`ensure_image`): used as it is when present, built with progress when missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import launchbay
from launchbay.errors import ConfigurationError, ImageBuildError
from launchbay.images._engine import docker_client, image_labels
from launchbay.images._live import display_for
from launchbay.images.base import base_image_name
from launchbay.images.build import build_image
from launchbay.images.names import (
    PY_RE,
    default_base_image,
    parse_image_name,
    python_for,
    python_version,
)

__all__ = ["ensure_image"]


def ensure_image(
    image: str,
    *,
    base_image: str | None = None,
    wheelhouse: str | os.PathLike[str] | None = None,
    horovod: bool = False,
    ca_bundle: str | os.PathLike[str] | None = None,
    build_args: Mapping[str, str] | None = None,
    progress: bool | None = None,
    stream: TextIO | None = None,
    client: Any = None,
) -> str:
    """Make sure the launchbay training image ``image`` is on the Docker engine; return it.

    An image of that name that is present is used as it is (as a local Docker job would use
    it), with one line saying so. A missing one is built (:func:`build_image`, minutes the
    first time) with its progress on ``stream``: in a notebook a live step line and a line
    per finished step, in a log a line per step; never a carriage return.

    Typically ``ensure_image(estimator.training_image_uri())`` before ``fit()`` of an
    estimator with ``instance_type="local"``.

    Args:
        image: A launchbay image name, ``launchbay/<framework>-training:<version>-<cpu|gpu>-<py>``.
        base_image: The ``FROM`` image of a build. Default: this machine's
            ``launchbay/python-base`` (:func:`build_base_image`) when it is on the engine and
            has the image's Python, else :func:`default_base_image` (pulled).
        wheelhouse: Wheels pip prefers to the index during a build (``--find-links``).
        horovod: Put Horovod in a built image: the wheel ``.ci/horovod.sh`` of this
            checkout builds against this Python's torch and TensorFlow (cached per machine;
            compiled when missing, several minutes; docs/horovod.md), beside ``wheelhouse``.
        ca_bundle, build_args: As :func:`build_image`.
        progress: ``False``: silent; else as :func:`build_image`.
        stream: Where the lines go (default ``sys.stderr``).
        client: A ``docker.DockerClient`` (default: from the environment).

    Raises:
        ConfigurationError: ``image`` is not a launchbay image name.
        MissingDependencyError: the ``docker`` package is missing.
        DockerError: the engine cannot be reached.
        ImageBuildError: the build (or Horovod's) failed.
    """
    spec = parse_image_name(image)
    if spec is None:
        raise ConfigurationError.invalid(
            "image",
            image,
            "a launchbay image name such as 'launchbay/pytorch-training:2.13.0-cpu-py311' "
            "(the training_image_uri() of a local estimator)",
        )
    client = docker_client(client, feature="Making sure a training image exists")
    shown = display_for(progress, sys.stderr if stream is None else stream)
    if image_labels(client, image) is not None:
        shown.print(f"{image}: on this Docker engine")
        return image
    py_version = spec.py_version
    if not PY_RE.match(py_version):  # SageMaker's loose "py3" of old versions
        py_version = python_for(spec.framework, spec.framework_version)
    base = base_image or _machine_base(client, spec.processor, py_version)
    shown.print(f"{image} is not on this Docker engine: building it (FROM {base})")
    if horovod:
        wheelhouse = _horovod_wheelhouse(wheelhouse, image, shown)
    return build_image(
        spec.framework,
        spec.framework_version,
        spec.processor,
        base_image=base,
        wheelhouse=wheelhouse,
        tag=image,
        ca_bundle=ca_bundle,
        py_version=py_version,
        build_args=build_args,
        progress=progress,
        stream=stream,
        client=client,
    )


def _machine_base(client: Any, processor: str, py_version: str) -> str:
    """This machine's ``launchbay/python-base`` when present with the right Python (CPU)."""
    default = default_base_image(processor, py_version)
    if processor != "cpu":
        return default
    local = base_image_name()
    if local.rsplit(":", 1)[-1].startswith(python_version(py_version) + "-"):
        if image_labels(client, local) is not None:
            return local
    return default


def _horovod_script() -> Path:
    """``.ci/horovod.sh`` of the checkout this package runs from."""
    return Path(launchbay.__file__).resolve().parents[2] / ".ci" / "horovod.sh"


def _horovod_wheelhouse(wheelhouse: str | os.PathLike[str] | None, image: str, shown: Any) -> str:
    """``.ci/horovod.sh --wheelhouse [wheelhouse]``: Horovod's cached wheel beside those."""
    script = _horovod_script()
    if not script.is_file():
        raise ConfigurationError.invalid(
            "horovod",
            True,
            "False outside a launchbay checkout",
            reason=f"Horovod's wheel is built by .ci/horovod.sh of a checkout, not found at {script}",
        )
    shown.print(
        "Horovod for the image: .ci/horovod.sh --wheelhouse (compiles Horovod, several "
        "minutes, when this machine has no cached wheel)"
    )
    # The script compiles against, and keys its cache by, the frameworks of this Python.
    path = os.environ.get("PATH", os.defpath)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{path}")
    argv = ["bash", str(script), "--wheelhouse"]
    if wheelhouse is not None:
        argv.append(os.fspath(wheelhouse))
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    tail: list[str] = []
    for line in proc.stderr:  # the script's progress; its answer is stdout's last line
        shown.print("  " + line.rstrip())
        tail = [*tail[-24:], line.rstrip()]
    answer = proc.stdout.read().strip().splitlines()
    if proc.wait() != 0 or not answer:
        raise ImageBuildError(
            f"Building Horovod's wheel for {image} failed (.ci/horovod.sh exit "
            f"{proc.returncode}):\n" + "\n".join(f"  {line}" for line in tail),
            tag=image,
            step=".ci/horovod.sh --wheelhouse",
            log_tail=tail,
        )
    return answer[-1]
