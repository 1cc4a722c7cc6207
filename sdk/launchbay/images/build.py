"""Building a training image through the Docker engine (:func:`build_image`)."""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, TextIO

from launchbay._docker import docker_errors
from launchbay.display import Display
from launchbay.errors import ConfigurationError, ImageBuildError
from launchbay.images._engine import docker_client, image_labels
from launchbay.images._live import BuildDisplay, display_for
from launchbay.images.context import (
    build_args_for,
    build_context,
    dockerfile_for,
    resolve_ca_bundle,
    wheelhouse_files,
)
from launchbay.images.names import (
    DEFAULT_PY_VERSION,
    LABEL_HASH,
    LABEL_PREFIX,
    check_framework,
    check_framework_version,
    check_processor,
    check_tag,
    default_base_image,
    huggingface_version,
    image_name,
    python_version,
)
from launchbay.images.wheel import build_runtime_wheel

__all__ = ["build_image"]

logger = logging.getLogger("launchbay.images")


def build_image(
    framework: str,
    framework_version: str,
    processor: str = "cpu",
    *,
    base_image: str | None = None,
    wheelhouse: str | os.PathLike[str] | None = None,
    tag: str | None = None,
    ca_bundle: str | os.PathLike[str] | None = None,
    py_version: str = DEFAULT_PY_VERSION,
    reuse: bool = False,
    build_args: Mapping[str, str] | None = None,
    offline: bool = False,
    nocache: bool = False,
    progress: bool | None = None,
    stream: TextIO | None = None,
    client: Any = None,
    pytorch_version: str | None = None,
) -> str:
    """Build a training image through the Docker engine; return its tag.

    Args:
        framework: ``"pytorch"``, ``"tensorflow"``, ``"huggingface"``, ``"sklearn"`` or
            ``"xgboost"``.
        framework_version: The framework's version, e.g. ``"2.13.0"``; SageMaker's
            ``"1.2-1"`` for scikit-learn and XGBoost (their images install the versions in
            :data:`~launchbay.images.context.PINNED_PACKAGES`); for HuggingFace the
            transformers version with ``pytorch_version``, or both as the image's name has
            them (``"5.24.0-pytorch2.13.0"``).
        processor: ``"cpu"`` or ``"gpu"``: the framework's CUDA build, the EFA pieces unless
            ``build_args={"INSTALL_EFA": "0"}`` (what a build FROM a plain Debian base, without
            the CUDA base, passes: docs/images.md), and the host's driver asked for at run
            time (``NVIDIA_VISIBLE_DEVICES=all``). On a machine without GPUs it runs on the CPU.
        base_image: The ``FROM`` image. Default: ``python:<X.Y>-slim`` for CPU,
            :data:`DEFAULT_GPU_BASE_IMAGE` for GPU. Where nothing can be pulled, use
            :func:`build_base_image`'s image. A base without Python X.Y gets it from apt.
        wheelhouse: A directory of wheels pip prefers to the index (``--find-links``).
        tag: The image's tag. Default: :func:`image_name`.
        ca_bundle: A CA bundle for pip during the build. Default: ``$PIP_CERT``,
            ``$REQUESTS_CA_BUNDLE`` or ``$SSL_CERT_FILE`` when set; ``""`` for none.
        py_version: ``"py311"`` and the like; the image's Python.
        reuse: Return at once when an image with this tag was built from the same context
            (the label ``ai.launchbay.context-hash`` matches: same Dockerfile, launchbay
            package, wheelhouse, CA bundle and build arguments). Otherwise it is rebuilt;
            Docker's layer cache keeps that quick when only the runtime changed.
        build_args: More ``--build-arg``s (override the defaults, e.g. ``INSTALL_EFA="0"``;
            ``INSTALL_EFA`` takes ``"0"`` or ``"1"``).
        offline: pip installs from the wheelhouse only (``--no-index``).
        nocache: Build without Docker's layer cache.
        progress: ``None`` or ``True``: a live step line in a terminal or a notebook, plain
            lines elsewhere (CI logs), as :mod:`launchbay.display` decides; ``False``: silent.
        stream: Where the progress goes (default ``sys.stderr``).
        client: A ``docker.DockerClient`` (default: from the environment).
        pytorch_version: HuggingFace only: the torch version under transformers.

    Raises:
        ConfigurationError: a bad argument (names the argument, value and what is accepted).
        MissingDependencyError: the ``docker`` package is not installed.
        DockerError: the engine cannot be reached.
        ImageBuildError: a step failed; the message quotes its last output lines.
    """
    framework = check_framework(framework)
    if pytorch_version is not None:
        if framework != "huggingface":
            raise ConfigurationError.invalid(
                "pytorch_version", pytorch_version, "None unless framework='huggingface'"
            )
        check_framework_version(pytorch_version)
        framework_version = huggingface_version(
            check_framework_version(framework_version), pytorch_version
        )
    framework_version = check_framework_version(framework_version, framework)
    processor = check_processor(processor)
    if framework == "sklearn" and processor == "gpu":
        raise ConfigurationError.invalid(
            "processor", processor, "'cpu'", reason="scikit-learn images are CPU only"
        )
    python = python_version(py_version)
    name = tag or image_name(framework, framework_version, processor, py_version)
    check_tag(name, "tag")
    if base_image is not None and (not isinstance(base_image, str) or not base_image.strip()):
        raise ConfigurationError.invalid(
            "base_image", base_image, "an image reference such as 'python:3.11-slim'"
        )
    base = base_image or default_base_image(processor, py_version)
    dockerfile = dockerfile_for(framework)
    wheels = wheelhouse_files(wheelhouse) if wheelhouse is not None else []
    ca = resolve_ca_bundle(ca_bundle)
    args = build_args_for(
        framework, framework_version, processor, python, base, build_args, offline
    )
    if offline and not wheels:
        raise ConfigurationError.invalid(
            "offline",
            offline,
            "True only together with a wheelhouse",
            reason="pip would have no source",
        )
    client = docker_client(client)
    out = sys.stderr if stream is None else stream

    with tempfile.TemporaryDirectory(prefix="launchbay-build-") as tmp:
        wheel = build_runtime_wheel(Path(tmp) / "wheel")
        context = build_context(dockerfile, wheel, ca, wheels)
        digest = context.digest(args)
        labels = {
            LABEL_PREFIX + "framework": framework,
            LABEL_PREFIX + "framework-version": framework_version,
            LABEL_PREFIX + "processor": processor,
            LABEL_PREFIX + "py-version": py_version,
            LABEL_PREFIX + "base-image": base,
            LABEL_HASH: digest,
            **(
                {LABEL_PREFIX + "packages": args["FRAMEWORK_PACKAGES"]}
                if "FRAMEWORK_PACKAGES" in args
                else {}
            ),
        }
        if reuse:
            existing = image_labels(client, name)
            if existing is not None and existing.get(LABEL_HASH) == digest:
                logger.info("Reusing %s (built from the same context)", name)
                return name
            if existing is not None:
                logger.info("%s exists but was built from another context: rebuilding", name)
        with tempfile.TemporaryFile(dir=tmp) as tar:
            context.write_tar(tar)
            tar.seek(0)
            _run_build(client, tar, name, args, labels, nocache, display_for(progress, out))
    return name


def _run_build(
    client: Any,
    tar: IO[bytes],
    name: str,
    args: Mapping[str, str],
    labels: Mapping[str, str],
    nocache: bool,
    shown: Display,
) -> None:
    errors = docker_errors()
    started = time.monotonic()
    shown.print(f"Building {name} (FROM {args.get('BASE_IMAGE')})")
    image_id = None
    with BuildDisplay(shown, name) as display:
        try:
            chunks = client.api.build(
                fileobj=tar,
                custom_context=True,
                tag=name,
                buildargs=dict(args),
                labels=dict(labels),
                rm=True,
                forcerm=True,
                pull=False,
                nocache=nocache,
                decode=True,
                timeout=None,
            )
            for chunk in chunks:
                if "stream" in chunk:
                    display.feed(chunk["stream"])
                elif "error" in chunk or "errorDetail" in chunk:
                    detail = chunk.get("errorDetail") or {}
                    message = detail.get("message") or chunk.get("error") or "unknown error"
                    display.finish(failed=True)
                    raise _build_error(name, display, message, args)
                elif "aux" in chunk:
                    image_id = (chunk.get("aux") or {}).get("ID") or image_id
                elif "status" in chunk:  # pulling a missing base reports status lines
                    display.feed(str(chunk.get("status")) + "\n")
        except errors.APIError as exc:
            display.finish(failed=True)
            raise _build_error(name, display, str(exc.explanation or exc), args) from exc
    if image_id is None and image_labels(client, name) is None:
        raise _build_error(name, display, "the engine ended the build without an image", args)
    shown.print(f"Built {name} in {time.monotonic() - started:.1f} s")


def _build_error(
    name: str, display: BuildDisplay, message: str, args: Mapping[str, str]
) -> ImageBuildError:
    step = display.step or display.last_step
    tail = list(display.tail)
    text = f"Building {name} failed"
    if step:
        text += f" at {step.strip()}"
    text += f":\n{message.strip()}"
    if tail:
        text += f"\nLast {len(tail)} lines of the step's output:\n" + "\n".join(
            f"  {line}" for line in tail
        )
    hint = _build_hint(message, tail, step, args.get("BASE_IMAGE", ""))
    if hint:
        text += "\n" + hint
    return ImageBuildError(text, tag=name, step=step, log_tail=tail)


def _build_hint(message: str, tail: list[str], step: str, base: str) -> str:
    joined = "\n".join([message, *tail])
    if (
        re.search(r" : FROM ", step)
        or "pull access denied" in joined
        or "manifest unknown" in joined
    ):
        return (
            f"The base image {base!r} is not on this Docker engine and could not be pulled. Pull "
            "it (or `docker load` it) where a registry is reachable, or pass --base-image with a "
            "local image; for CPU images `launchbay images base` makes one from this machine's "
            "Debian sources."
        )
    if "INSTALL_EFA" in step or "efa-installer" in joined:
        return (
            "The AWS EFA installer could not be installed (it is downloaded from "
            "efa-installer.amazonaws.com during the build). Without it: --build-arg "
            "INSTALL_EFA=0 (build_args={'INSTALL_EFA': '0'}); the image then has no EFA, which "
            "only SageMaker's multi-node EFA instances use (docs/images.md)."
        )
    if "CERTIFICATE_VERIFY_FAILED" in joined or "SSLError" in joined:
        return "pip could not verify the index's certificate: pass --ca-bundle with your CA bundle."
    return ""
