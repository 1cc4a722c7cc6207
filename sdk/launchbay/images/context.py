"""The build context of a training image: the Dockerfile, the runtime wheel, the wheelhouse,
the CA bundle, the build arguments, and the content hash ``--reuse`` compares.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import launchbay
from launchbay.errors import ConfigurationError

__all__ = ["containers_dir", "build_context", "PINNED_PACKAGES", "framework_packages"]

#: Frameworks whose image is a set of pip packages on the shared layout:
#: containers/packages/Dockerfile, the packages passed as build arguments.
PACKAGE_FRAMEWORKS = ("huggingface", "sklearn", "xgboost")

#: What the scikit-learn and XGBoost images install, whatever SageMaker version names them:
#: the versions setup.cfg's test extra pins (tests/unit checks they agree). SageMaker's own
#: versions (scikit-learn 1.2, XGBoost 1.7) predate NumPy 2 and Python 3.11 wheels of theirs
#: do not run with it; ``--build-arg FRAMEWORK_PACKAGES=...`` installs others.
PINNED_PACKAGES = {
    "scikit-learn": "1.9.1",
    "xgboost-cpu": "3.2.0",
}


def containers_dir() -> Path:
    """The directory that holds ``<framework>/Dockerfile``.

    ``$LAUNCHBAY_CONTAINERS_DIR`` if set, else ``containers/`` of the checkout this package
    runs from.
    """
    configured = os.environ.get("LAUNCHBAY_CONTAINERS_DIR")
    if configured:
        return Path(configured)
    return Path(launchbay.__file__).resolve().parents[2] / "containers"


def dockerfile_for(framework: str) -> Path:
    directory = "packages" if framework in PACKAGE_FRAMEWORKS else framework
    path = containers_dir() / directory / "Dockerfile"
    if not path.is_file():
        raise ConfigurationError(
            f"No Dockerfile for framework={framework!r} at {path}. The Dockerfiles live in "
            "containers/ of the launchbay source tree: run from a checkout, or set "
            "LAUNCHBAY_CONTAINERS_DIR to a copy of that directory.",
            argument="framework",
            value=framework,
        )
    return path


@dataclass
class _Context:
    """The files of a build context: ``(name in the context, bytes or a file on disk)``."""

    entries: list[tuple[str, bytes | Path]] = field(default_factory=list)

    def add(self, arcname: str, source: bytes | Path) -> None:
        self.entries.append((arcname, source))

    def digest(self, extra: Mapping[str, str]) -> str:
        """A hash of the names, the contents (big wheelhouse files: name, size, mtime) and ``extra``."""
        h = hashlib.sha256()
        for arcname, source in sorted(self.entries, key=lambda e: e[0]):
            h.update(arcname.encode() + b"\0")
            if isinstance(source, bytes):
                h.update(hashlib.sha256(source).digest())
            elif source.stat().st_size > 16 * 1024 * 1024:
                st = source.stat()
                h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
            else:
                h.update(hashlib.sha256(source.read_bytes()).digest())
        h.update(json.dumps(dict(extra), sort_keys=True).encode())
        return h.hexdigest()

    def write_tar(self, fileobj: IO[bytes]) -> None:
        with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
            dirs: set[str] = set()
            for arcname, source in sorted(self.entries, key=lambda e: e[0]):
                parts = arcname.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        info = tarfile.TarInfo(d)
                        info.type, info.mode = tarfile.DIRTYPE, 0o755
                        tar.addfile(info)
                info = tarfile.TarInfo(arcname)
                info.mode = 0o644
                if isinstance(source, bytes):
                    info.size = len(source)
                    tar.addfile(info, io.BytesIO(source))
                else:
                    info.size = source.stat().st_size
                    with open(source, "rb") as f:
                        tar.addfile(info, f)


def build_context(
    dockerfile: Path, wheel: Path, ca_bundle: Path | None = None, wheelhouse: Iterable[Path] = ()
) -> _Context:
    """The context of a build: the Dockerfile, the launchbay wheel, ``ca/`` and ``wheelhouse/``.

    Its :meth:`_Context.digest` with the build arguments is the image's content hash
    (``--reuse``): it changes when any of these files or arguments changes, and only then,
    because the wheel's bytes depend only on its sources (:mod:`launchbay.images.wheel`).
    """
    context = _Context()
    context.add("Dockerfile", dockerfile.read_bytes())
    context.add(f"launchbay/{wheel.name}", wheel.read_bytes())
    context.add("ca/README", b"An optional CA bundle (ca-bundle.crt) pip uses during the build.\n")
    if ca_bundle is not None:
        context.add("ca/ca-bundle.crt", ca_bundle.read_bytes())
    context.add("wheelhouse/README", b"Optional wheels pip prefers to the index.\n")
    for path in wheelhouse:
        context.add(f"wheelhouse/{path.name}", path)
    return context


def wheelhouse_files(wheelhouse: str | os.PathLike[str]) -> list[Path]:
    path = Path(wheelhouse)
    if not path.is_dir():
        raise ConfigurationError.invalid(
            "wheelhouse", os.fspath(wheelhouse), "an existing directory of wheels (*.whl)"
        )
    files = sorted(
        p for p in path.iterdir() if p.is_file() and p.name.endswith((".whl", ".tar.gz", ".zip"))
    )
    if not files:
        raise ConfigurationError.invalid(
            "wheelhouse",
            os.fspath(wheelhouse),
            "a directory holding wheels (*.whl) or source archives (*.tar.gz, *.zip)",
            reason="It holds none",
        )
    return files


def resolve_ca_bundle(ca_bundle: str | os.PathLike[str] | None) -> Path | None:
    """The CA bundle pip uses in the build: ``ca_bundle``, else $PIP_CERT/$REQUESTS_CA_BUNDLE/$SSL_CERT_FILE.

    ``ca_bundle=""`` means none.
    """
    if ca_bundle is not None:
        if os.fspath(ca_bundle) == "":
            return None
        path = Path(ca_bundle)
        if not path.is_file():
            raise ConfigurationError.invalid(
                "ca_bundle", os.fspath(ca_bundle), "an existing PEM file of CA certificates"
            )
        return path
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return None


def build_args_for(
    framework: str,
    framework_version: str,
    processor: str,
    python: str,
    base_image: str,
    build_args: Mapping[str, str] | None,
    offline: bool,
) -> dict[str, str]:
    args = {
        "BASE_IMAGE": base_image,
        "PYTHON_VERSION": python,
        "FRAMEWORK_VERSION": framework_version,
        "PROCESSOR": processor,
        "INSTALL_EFA": "1" if processor == "gpu" else "0",
    }
    if processor == "gpu":
        # The NVIDIA container runtime mounts the host's driver into the container.
        args["GPU_DEVICES"] = "all"
    if framework == "tensorflow" and processor == "gpu":
        args["TENSORFLOW_PACKAGE"] = "tensorflow[and-cuda]"
    if framework in PACKAGE_FRAMEWORKS:
        packages, modules = framework_packages(framework, framework_version, processor)
        args["FRAMEWORK"] = framework
        args["FRAMEWORK_PACKAGES"] = " ".join(packages)
        args["FRAMEWORK_MODULES"] = " ".join(modules)
    if offline:
        args["OFFLINE"] = "1"
    for key, value in (build_args or {}).items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ConfigurationError.invalid(
                "build_args", key, "names of build arguments (letters, digits, '_')"
            )
        args[key] = str(value)
    if args["INSTALL_EFA"] not in ("0", "1"):
        raise ConfigurationError.invalid(
            "build_args",
            f"INSTALL_EFA={args['INSTALL_EFA']}",
            "INSTALL_EFA=0 (no EFA: any base, no download) or INSTALL_EFA=1 (the AWS EFA "
            "installer, downloaded during the build)",
        )
    return args


def framework_packages(
    framework: str, framework_version: str, processor: str = "cpu"
) -> tuple[list[str], list[str]]:
    """The pip requirements of a package framework's image and the modules that must import.

    HuggingFace installs what its name says (``5.24.0-pytorch2.13.0``: transformers 5.24.0
    and torch 2.13.0, torch from the wheelhouse when it holds it). scikit-learn and XGBoost
    install :data:`PINNED_PACKAGES` for any SageMaker version (``1.2-1``, ``1.7-1``).
    """
    if framework == "huggingface":
        from launchbay.images.names import split_huggingface

        transformers, base, base_version = split_huggingface(framework_version)
        if base != "pytorch":
            raise ConfigurationError.invalid(
                "framework_version",
                framework_version,
                "a HuggingFace PyTorch version such as '5.24.0-pytorch2.13.0'",
                reason="launchbay builds HuggingFace images on PyTorch only; pass image_uri= "
                "an image of HuggingFace on TensorFlow",
            )
        return (
            [f"torch=={base_version}", f"transformers=={transformers}", "numpy"],
            ["torch", "transformers"],
        )
    sklearn = f"scikit-learn=={PINNED_PACKAGES['scikit-learn']}"
    if framework == "sklearn":
        return [sklearn, "pandas", "joblib"], ["sklearn", "pandas", "joblib"]
    if framework == "xgboost":
        # xgboost-cpu is the CPU-only wheel (no bundled CUDA/NCCL); GPU images take the full one.
        name = "xgboost-cpu" if processor == "cpu" else "xgboost"
        return (
            [f"{name}=={PINNED_PACKAGES['xgboost-cpu']}", sklearn, "pandas"],
            ["xgboost", "sklearn", "pandas"],
        )
    raise ConfigurationError.invalid("framework", framework, " or ".join(PACKAGE_FRAMEWORKS))
