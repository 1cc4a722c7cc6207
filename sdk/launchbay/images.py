"""Training images: their names, building them, pushing them (``launchbay images``).

The images come from ``containers/<framework>/Dockerfile`` (one file per framework; CPU and
GPU from the same file through ``ARG BASE_IMAGE``) and are named::

    launchbay/<framework>-training:<framework_version>-<cpu|gpu>-<py_version>
    launchbay/pytorch-training:2.13.0-cpu-py311

Each holds Python in a venv (``/opt/venv``), the framework, Open MPI with mpi4py, an SSH
server and client for passwordless MPI between the containers of one job, boto3, and the
launchbay runtime (``train`` on PATH), installed from a wheel of the launchbay package this
module belongs to (:func:`build_runtime_wheel`). See docs/images.md.

* :func:`image_name`, :func:`parse_image_name`, :func:`build_command`: names, pure.
* :func:`build_image`: builds an image through the Docker engine with a progress display.
* :func:`push_image`: tags and pushes an image; logs in to ECR through boto3.
* :func:`build_base_image`: a slim Python base made from this machine's Debian sources
  (``mmdebstrap`` + ``docker import``), for machines that cannot pull images.

``docker`` (the ``docker`` extra, reached through :mod:`launchbay._docker` as the Docker
backend does) and ``boto3`` (the ``aws`` extra) are imported only inside the functions that
use them. Errors::

    LaunchbayError
    ├── ConfigurationError        a bad argument (framework, processor, wheelhouse, ...)
    ├── MissingDependencyError    the docker package (or mmdebstrap, boto3) is missing
    └── DockerError (RuntimeError)    the engine cannot be reached or refused a call
        └── ImageError
            ├── ImageBuildError       a build step failed (quotes its last output lines)
            └── ImagePushError        the registry refused the push or the login
"""

from __future__ import annotations

import base64
import collections
import configparser
import contextlib
import csv
import glob
import hashlib
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple, TextIO

from launchbay._docker import docker_client as _engine_client
from launchbay._docker import docker_errors
from launchbay._progress import _in_notebook
from launchbay.errors import ConfigurationError, DockerError, MissingDependencyError

__all__ = [
    "FRAMEWORKS",
    "PROCESSORS",
    "DEFAULT_PY_VERSION",
    "DEFAULT_GPU_BASE_IMAGE",
    "ImageSpec",
    "ImageError",
    "ImageBuildError",
    "ImagePushError",
    "image_name",
    "parse_image_name",
    "build_command",
    "default_base_image",
    "docker_client",
    "containers_dir",
    "build_runtime_wheel",
    "build_image",
    "push_image",
    "ecr_registry",
    "ecr_auth_config",
    "base_image_name",
    "build_base_image",
]

logger = logging.getLogger("launchbay.images")

FRAMEWORKS = ("pytorch", "tensorflow")
PROCESSORS = ("cpu", "gpu")
DEFAULT_PY_VERSION = "py311"
#: The GPU base: a CUDA + cuDNN *runtime* image (NCCL included). Ubuntu 22.04 has no Python
#: 3.11 of its own, so the Dockerfile installs python3.11 from its apt sources.
DEFAULT_GPU_BASE_IMAGE = "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04"
REPOSITORY_PREFIX = "launchbay"
#: Image labels (``docker inspect``): what the image is, and the hash of what it was built from.
LABEL_PREFIX = "ai.launchbay."
LABEL_HASH = LABEL_PREFIX + "context-hash"
#: Build steps whose output ends in these lines are quoted when they fail.
ERROR_TAIL_LINES = 25

_NAME_RE = re.compile(
    r"^launchbay/(?P<framework>[a-z]+)-training:"
    r"(?P<framework_version>[0-9A-Za-z][0-9A-Za-z._]*)-(?P<processor>cpu|gpu)-(?P<py_version>py\d+)$"
)
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._]{0,80}$")
_PY_RE = re.compile(r"^py3(\d{1,2})$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_ECR_HOST_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$"
)


# --------------------------------------------------------------------------- errors


class ImageError(DockerError):
    """Building or pushing a training image failed."""


class ImageBuildError(ImageError):
    """A build step failed.

    Attributes:
        tag: The image that was being built.
        step: The failing step (``"Step 7/21 : RUN ..."``), or ``""``.
        log_tail: The step's last output lines (also in the message).
    """

    def __init__(
        self, message: str, *, tag: str = "", step: str = "", log_tail: Iterable[str] = ()
    ):
        super().__init__(message)
        self.tag = tag
        self.step = step
        self.log_tail = list(log_tail)


class ImagePushError(ImageError):
    """The registry refused the push, or logging in to it failed."""


# --------------------------------------------------------------------------- names


class ImageSpec(NamedTuple):
    """What a launchbay training image name says."""

    framework: str
    framework_version: str
    processor: str
    py_version: str

    @property
    def name(self) -> str:
        """The image name: ``launchbay/<framework>-training:<fv>-<processor>-<py>``."""
        return image_name(self.framework, self.framework_version, self.processor, self.py_version)


def _check_framework(framework: object) -> str:
    if framework not in FRAMEWORKS:
        raise ConfigurationError.invalid("framework", framework, " or ".join(map(repr, FRAMEWORKS)))
    return str(framework)


def _check_processor(processor: object) -> str:
    if processor not in PROCESSORS:
        raise ConfigurationError.invalid("processor", processor, " or ".join(map(repr, PROCESSORS)))
    return str(processor)


def _check_framework_version(version: object) -> str:
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ConfigurationError.invalid(
            "framework_version", version, "a version such as '2.13.0' (letters, digits, '.', '_')"
        )
    return version


def _python_version(py_version: object) -> str:
    """``"py311"`` -> ``"3.11"``."""
    match = _PY_RE.match(py_version) if isinstance(py_version, str) else None
    if not match:
        raise ConfigurationError.invalid(
            "py_version", py_version, "'py3' and a minor version, e.g. 'py311'"
        )
    return f"3.{match.group(1)}"


def image_name(
    framework: str, framework_version: str, processor: str, py_version: str = DEFAULT_PY_VERSION
) -> str:
    """The local image name for a framework image.

    >>> image_name("pytorch", "2.13.0", "cpu")
    'launchbay/pytorch-training:2.13.0-cpu-py311'
    """
    _check_framework(framework)
    _check_framework_version(framework_version)
    _check_processor(processor)
    _python_version(py_version)
    return f"{REPOSITORY_PREFIX}/{framework}-training:{framework_version}-{processor}-{py_version}"


def parse_image_name(name: str) -> ImageSpec | None:
    """The :class:`ImageSpec` of a launchbay image name, or ``None`` for any other name.

    >>> parse_image_name("launchbay/pytorch-training:2.13.0-cpu-py311")
    ImageSpec(framework='pytorch', framework_version='2.13.0', processor='cpu', py_version='py311')
    """
    match = _NAME_RE.match(name) if isinstance(name, str) else None
    if not match or match.group("framework") not in FRAMEWORKS:
        return None
    return ImageSpec(**match.groupdict())


def build_command(name: str) -> str | None:
    """The ``launchbay images build ...`` line that makes image ``name`` (``None`` if not ours).

    >>> build_command("launchbay/pytorch-training:2.13.0-gpu-py311")
    'launchbay images build pytorch --framework-version 2.13.0 --processor gpu'

    Old framework versions name their image with SageMaker's loose Python tag (``py3``,
    ``py2``); the command then builds on the newest Python 3 that version's SageMaker
    image had (``py37`` for TensorFlow 1.15.2, else ``py36``) and tags the result with
    the name the estimator asks for:

    >>> build_command("launchbay/tensorflow-training:1.15.2-cpu-py3")  # doctest: +NORMALIZE_WHITESPACE
    'launchbay images build tensorflow --framework-version 1.15.2 --processor cpu
     --py-version py37 --tag launchbay/tensorflow-training:1.15.2-cpu-py3'
    """
    spec = parse_image_name(name)
    if spec is None:
        return None
    py_version, tag = spec.py_version, None
    if not _PY_RE.match(py_version):
        py_version, tag = _python_for(spec.framework, spec.framework_version), name
    command = (
        f"launchbay images build {spec.framework} --framework-version {spec.framework_version} "
        f"--processor {spec.processor}"
    )
    if py_version != DEFAULT_PY_VERSION:
        command += f" --py-version {py_version}"
    if tag:
        command += f" --tag {tag}"
    return command


def _python_for(framework: str, framework_version: str) -> str:
    """The newest ``py3X`` SageMaker's image of this version had, else ``py36``."""
    from launchbay import image_uris

    try:
        listed = image_uris.py_versions(framework, framework_version)
    except ConfigurationError:
        listed = []
    explicit = [p for p in listed if _PY_RE.match(p)]
    return max(explicit, key=lambda p: int(p[3:])) if explicit else "py36"


def default_base_image(processor: str, py_version: str = DEFAULT_PY_VERSION) -> str:
    """The base a build uses without ``base_image``: ``python:3.11-slim``, or the CUDA image."""
    python = _python_version(py_version)
    if _check_processor(processor) == "gpu":
        return DEFAULT_GPU_BASE_IMAGE
    return f"python:{python}-slim"


# --------------------------------------------------------------------------- docker


def docker_client(client: Any = None, *, feature: str = "Building training images") -> Any:
    """``client`` if given, else a ``docker.DockerClient`` for the engine of the environment.

    Raises:
        MissingDependencyError: the ``docker`` package is missing (extra ``docker``).
        DockerError: no engine answers (the message says how to start one).
    """
    if client is not None:
        return client
    return _engine_client(feature)


def _image_labels(client: Any, name: str) -> dict[str, str] | None:
    """The labels of local image ``name``; ``None`` when there is no such image."""
    errors = docker_errors()
    try:
        attrs = client.api.inspect_image(name)
    except errors.ImageNotFound:
        return None
    except errors.APIError as exc:
        if getattr(exc, "status_code", None) == 404:
            return None
        raise DockerError(f"The Docker engine could not inspect image {name!r}: {exc}") from exc
    return dict((attrs.get("Config") or {}).get("Labels") or {})


# --------------------------------------------------------------------------- the runtime wheel


_DEFAULT_ENTRY_POINTS = {
    "console_scripts": {
        "launchbay": "launchbay.cli:main",
        "train": "launchbay.runtime.train:main",
        "launchbay-train": "launchbay.runtime.train:main",
    }
}
_PACKAGE_DATA_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".typed")
_WHEEL_DATE = (1980, 1, 1, 0, 0, 0)


def _package_dirs() -> dict[str, Path]:
    """``{package name: directory}`` for launchbay and its packages living elsewhere (infra)."""
    import importlib.util

    import launchbay

    dirs = {"launchbay": Path(launchbay.__file__).resolve().parent}
    spec = importlib.util.find_spec("launchbay.infra")
    if spec is not None and spec.submodule_search_locations:
        location = Path(list(spec.submodule_search_locations)[0]).resolve()
        if location != dirs["launchbay"] / "infra":
            dirs["launchbay.infra"] = location
    return dirs


def _package_files() -> list[tuple[str, Path]]:
    """``(path in the wheel, file)`` for every module and data file of the launchbay package."""
    dirs = _package_dirs()
    files: dict[str, Path] = {}
    for package, directory in dirs.items():
        prefix = package.replace(".", "/")
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            if not path.is_file() or not path.name.endswith(_PACKAGE_DATA_SUFFIXES):
                continue
            arcname = f"{prefix}/{rel.as_posix()}"
            # A nested package found in its own location (infra) wins over a stray copy.
            if package == "launchbay" and any(
                arcname.startswith(p.replace(".", "/") + "/") for p in dirs if p != "launchbay"
            ):
                continue
            files[arcname] = path
    return sorted(files.items())


def _distribution_metadata() -> tuple[str, str, dict[str, dict[str, str]]]:
    """``(version, summary, entry points)`` from the installed metadata, setup.cfg, or defaults."""
    import importlib.metadata

    import launchbay

    version, summary = launchbay.__version__, "launchbay training runtime"
    entry_points: dict[str, dict[str, str]] = {}
    try:
        dist = importlib.metadata.distribution("launchbay")
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None and dist.entry_points:
        version = dist.version or version
        summary = dist.metadata.get("Summary") or summary
        for ep in dist.entry_points:
            entry_points.setdefault(ep.group, {})[ep.name] = ep.value
        return version, summary, entry_points
    # A checkout on sys.path without install: read setup.cfg next to sdk/.
    setup_cfg = Path(launchbay.__file__).resolve().parents[2] / "setup.cfg"
    if setup_cfg.is_file():
        config = configparser.ConfigParser()
        config.read(setup_cfg)
        if config.has_option("options.entry_points", "console_scripts"):
            scripts = {}
            for line in config.get("options.entry_points", "console_scripts").splitlines():
                if "=" in line:
                    name, value = (part.strip() for part in line.split("=", 1))
                    scripts[name] = value
            if scripts:
                return version, summary, {"console_scripts": scripts}
    return version, summary, {group: dict(eps) for group, eps in _DEFAULT_ENTRY_POINTS.items()}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def build_runtime_wheel(directory: str | os.PathLike[str]) -> Path:
    """Write a wheel of the launchbay package this module belongs to; return its path.

    Pure standard library, from a checkout or an installed copy: every module and data
    file of ``launchbay`` (and ``launchbay.infra``), the console scripts (``train``,
    ``launchbay-train``, ``launchbay``) and a RECORD. The bytes depend only on the
    files' contents (fixed timestamps, sorted entries), so an unchanged package gives an
    identical wheel and Docker reuses its cached layer.

    The wheel declares no dependencies: the images install it with ``--no-deps`` because the
    runtime (``launchbay.runtime``) needs only the standard library; the client side
    (``launchbay`` command, estimators) also needs PyYAML and jsonschema.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    version, summary, entry_points = _distribution_metadata()
    safe_version = re.sub(r"[^A-Za-z0-9.+]", "_", version)
    dist_info = f"launchbay-{safe_version}.dist-info"
    members: list[tuple[str, bytes]] = [
        (arcname, path.read_bytes()) for arcname, path in _package_files()
    ]
    metadata = (
        "Metadata-Version: 2.1\n"
        "Name: launchbay\n"
        f"Version: {version}\n"
        f"Summary: {summary}\n"
        "Requires-Python: >=3.10\n"
    )
    wheel = (
        "Wheel-Version: 1.0\n"
        "Generator: launchbay.images\n"
        "Root-Is-Purelib: true\n"
        "Tag: py3-none-any\n"
    )
    eps = "".join(
        f"[{group}]\n"
        + "".join(f"{name} = {value}\n" for name, value in sorted(items.items()))
        + "\n"
        for group, items in sorted(entry_points.items())
    )
    members += [
        (f"{dist_info}/METADATA", metadata.encode()),
        (f"{dist_info}/WHEEL", wheel.encode()),
        (f"{dist_info}/entry_points.txt", eps.encode()),
        (f"{dist_info}/top_level.txt", b"launchbay\n"),
    ]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arcname, data in members:
        writer.writerow([arcname, _record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    members.append((f"{dist_info}/RECORD", record.getvalue().encode()))

    path = directory / f"launchbay-{safe_version}-py3-none-any.whl"
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in members:
            info = zipfile.ZipInfo(arcname, date_time=_WHEEL_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- build context


def containers_dir() -> Path:
    """The directory that holds ``<framework>/Dockerfile``.

    ``$LAUNCHBAY_CONTAINERS_DIR`` if set, else ``containers/`` of the checkout this package
    runs from.
    """
    configured = os.environ.get("LAUNCHBAY_CONTAINERS_DIR")
    if configured:
        return Path(configured)
    import launchbay

    return Path(launchbay.__file__).resolve().parents[2] / "containers"


def _dockerfile(framework: str) -> Path:
    path = containers_dir() / framework / "Dockerfile"
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


def _wheelhouse_files(wheelhouse: str | os.PathLike[str]) -> list[Path]:
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


def _resolve_ca_bundle(ca_bundle: str | os.PathLike[str] | None) -> Path | None:
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


def _build_args_for(
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
    if framework == "tensorflow" and processor == "gpu":
        args["TENSORFLOW_PACKAGE"] = "tensorflow[and-cuda]"
    if offline:
        args["OFFLINE"] = "1"
    for key, value in (build_args or {}).items():
        if not isinstance(key, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ConfigurationError.invalid(
                "build_args", key, "names of build arguments (letters, digits, '_')"
            )
        args[key] = str(value)
    return args


# --------------------------------------------------------------------------- progress display


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _BuildDisplay:
    """Shows a build's progress on ``stream``.

    ``live`` (a terminal): one line redrawn in place (step, elapsed time, latest output
    line); each finished step stays behind as a line with its time. ``plain`` (CI logs): a
    line when a step starts, its time when it ends, and a heartbeat with its latest output
    line every 30 s of a long step. ``quiet``: nothing. In every mode the running step's last
    output lines are kept for the error message. A ticker thread keeps the live line and the
    heartbeat going while a step prints nothing (compiling, downloading).
    """

    HEARTBEAT = 30.0
    REDRAW = 0.1
    STEP_WIDTH = 140

    def __init__(self, mode: str, stream: TextIO, label: str) -> None:
        self.mode = mode
        self.stream = stream
        self.label = label
        self.step = ""
        self.step_started = time.monotonic()
        self.tail: collections.deque[str] = collections.deque(maxlen=ERROR_TAIL_LINES)
        self.cached = False
        self.last_step = ""
        self._partial = ""
        self._last_draw = 0.0
        self._last_beat = 0.0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> _BuildDisplay:
        if self.mode in ("live", "plain"):
            self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        self.finish()

    # -- input
    def feed(self, text: str) -> None:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                self._line(line.rstrip("\r"))
            self._tick()

    def _line(self, line: str) -> None:
        if line.startswith("Step ") and " : " in line:
            self._end_step()
            self.step, self.step_started, self.cached = line, time.monotonic(), False
            self.tail.clear()
            self._last_beat = self.step_started
            if self.mode == "plain":
                self._write(self._short(line, self.STEP_WIDTH) + "\n")
            return
        stripped = line.strip()
        if stripped == "---> Using cache":
            self.cached = True
            return
        if stripped.startswith(("--->", "Removing intermediate container")):
            return
        if stripped.startswith(("Successfully built", "Successfully tagged")) or not stripped:
            return
        self.tail.append(line)

    def _tick_loop(self) -> None:
        while not self._stop.wait(self.REDRAW if self.mode == "live" else 1.0):
            with self._lock:
                self._tick()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.mode == "live" and now - self._last_draw >= self.REDRAW:
            self._last_draw = now
            self._draw()
        elif self.mode == "plain" and self.step and now - self._last_beat >= self.HEARTBEAT:
            self._last_beat = now
            last = self.tail[-1].strip()[:100] if self.tail else "(no output yet)"
            self._write(f"    ... {now - self.step_started:.0f} s: {last}\n")

    def _end_step(self, failed: bool = False) -> None:
        if not self.step:
            return
        elapsed = time.monotonic() - self.step_started
        state = "failed" if failed else "cached" if self.cached else "done"
        if self.mode == "live":
            note = state if state != "done" else f"{elapsed:.1f} s"
            if failed:
                note = f"failed after {elapsed:.1f} s"
            self._write(self._fit(f"{self._short(self.step)}  {note}") + "\n", clear=True)
        elif self.mode == "plain" and (
            failed
            or elapsed >= 1.0
            or (self.cached and re.search(r" : (RUN|COPY|ADD) ", self.step))
        ):
            self._write(f"    {state}, {elapsed:.1f} s\n")
        self.last_step, self.step = self.step, ""

    def finish(self, failed: bool = False) -> None:
        """End the running step (``failed``: it failed); idempotent."""
        with self._lock:
            if self._partial:
                self._line(self._partial)
                self._partial = ""
            self._end_step(failed)

    # -- output
    @staticmethod
    def _short(step: str, width: int = 0) -> str:
        match = re.match(r"Step (\d+)/(\d+) : (.*)", step)
        text = step
        if match:
            number, total, instruction = match.groups()
            text = f"[{int(number):>{len(total)}}/{total}] {' '.join(instruction.split())}"
        if width and len(text) > width:
            text = text[: width - 3] + "..."
        return text

    def _fit(self, text: str) -> str:
        width = shutil.get_terminal_size((100, 20)).columns - 1
        return text if len(text) <= width else text[: max(width - 3, 10)] + "..."

    def _draw(self) -> None:
        if not self.step:
            return
        elapsed = time.monotonic() - self.step_started
        last = self.tail[-1].strip() if self.tail else ""
        line = f"{self._short(self.step)}  {elapsed:.0f}s"
        if last:
            line = f"{self._short(self.step, 60)}  {elapsed:.0f}s  | {last}"
        self._write(self._fit(line), clear=True)

    def _write(self, text: str, clear: bool = False) -> None:
        if self.mode == "quiet":
            return
        try:
            if clear and self.mode == "live":
                self.stream.write("\r\x1b[2K")
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream must not fail the build
            self.mode = "quiet"


def _display_mode(progress: bool | None, stream: TextIO) -> str:
    if progress is False:
        return "quiet"
    if _in_notebook() and stream in (sys.stdout, sys.stderr):
        return "plain"  # Jupyter keeps every "\r" redraw in the saved output
    if progress is True:
        return "live"
    return "live" if _isatty(stream) else "plain"


# --------------------------------------------------------------------------- build


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
) -> str:
    """Build a training image through the Docker engine; return its tag.

    Args:
        framework: ``"pytorch"`` or ``"tensorflow"``.
        framework_version: The framework's version, e.g. ``"2.13.0"``.
        processor: ``"cpu"`` or ``"gpu"`` (GPU adds the EFA pieces; not runnable without GPUs).
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
        build_args: More ``--build-arg``s (override the defaults, e.g. ``INSTALL_EFA="0"``).
        offline: pip installs from the wheelhouse only (``--no-index``).
        nocache: Build without Docker's layer cache.
        progress: ``None``: a live step line on a terminal, plain lines otherwise (CI);
            ``True``: the live line; ``False``: silent.
        stream: Where the progress goes (default ``sys.stderr``).
        client: A ``docker.DockerClient`` (default: from the environment).

    Raises:
        ConfigurationError: a bad argument (names the argument, value and what is accepted).
        MissingDependencyError: the ``docker`` package is not installed.
        DockerError: the engine cannot be reached.
        ImageBuildError: a step failed; the message quotes its last output lines.
    """
    framework = _check_framework(framework)
    framework_version = _check_framework_version(framework_version)
    processor = _check_processor(processor)
    python = _python_version(py_version)
    name = tag or image_name(framework, framework_version, processor, py_version)
    _check_tag(name, "tag")
    if base_image is not None and (not isinstance(base_image, str) or not base_image.strip()):
        raise ConfigurationError.invalid(
            "base_image", base_image, "an image reference such as 'python:3.11-slim'"
        )
    base = base_image or default_base_image(processor, py_version)
    dockerfile = _dockerfile(framework)
    wheels = _wheelhouse_files(wheelhouse) if wheelhouse is not None else []
    ca = _resolve_ca_bundle(ca_bundle)
    args = _build_args_for(
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
        context = _Context()
        context.add("Dockerfile", dockerfile.read_bytes())
        wheel = build_runtime_wheel(Path(tmp) / "wheel")
        context.add(f"launchbay/{wheel.name}", wheel.read_bytes())
        context.add(
            "ca/README", b"An optional CA bundle (ca-bundle.crt) pip uses during the build.\n"
        )
        if ca is not None:
            context.add("ca/ca-bundle.crt", ca.read_bytes())
        context.add("wheelhouse/README", b"Optional wheels pip prefers to the index.\n")
        for path in wheels:
            context.add(f"wheelhouse/{path.name}", path)
        digest = context.digest(args)
        labels = {
            LABEL_PREFIX + "framework": framework,
            LABEL_PREFIX + "framework-version": framework_version,
            LABEL_PREFIX + "processor": processor,
            LABEL_PREFIX + "py-version": py_version,
            LABEL_PREFIX + "base-image": base,
            LABEL_HASH: digest,
        }
        if reuse:
            existing = _image_labels(client, name)
            if existing is not None and existing.get(LABEL_HASH) == digest:
                logger.info("Reusing %s (built from the same context)", name)
                return name
            if existing is not None:
                logger.info("%s exists but was built from another context: rebuilding", name)
        with tempfile.TemporaryFile(dir=tmp) as tar:
            context.write_tar(tar)
            tar.seek(0)
            _run_build(client, tar, name, args, labels, nocache, _display_mode(progress, out), out)
    return name


def _check_tag(name: object, argument: str) -> None:
    if not isinstance(name, str) or not re.match(
        r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
        r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$",
        name.split("@")[0],
    ):
        raise ConfigurationError.invalid(
            argument,
            name,
            "a Docker image reference such as 'launchbay/pytorch-training:2.13.0-cpu-py311'",
        )


def _run_build(
    client: Any,
    tar: IO[bytes],
    name: str,
    args: Mapping[str, str],
    labels: Mapping[str, str],
    nocache: bool,
    mode: str,
    out: TextIO,
) -> None:
    errors = docker_errors()
    started = time.monotonic()
    if mode != "quiet":
        out.write(f"Building {name} (FROM {args.get('BASE_IMAGE')})\n")
        out.flush()
    image_id = None
    with _BuildDisplay(mode, out, name) as display:
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
    if image_id is None and _image_labels(client, name) is None:
        raise _build_error(name, display, "the engine ended the build without an image", args)
    if mode != "quiet":
        out.write(f"Built {name} in {time.monotonic() - started:.1f} s\n")
        out.flush()


def _build_error(
    name: str, display: _BuildDisplay, message: str, args: Mapping[str, str]
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
    if "CERTIFICATE_VERIFY_FAILED" in joined or "SSLError" in joined:
        return "pip could not verify the index's certificate: pass --ca-bundle with your CA bundle."
    return ""


# --------------------------------------------------------------------------- push


def ecr_registry(host: str) -> tuple[str, str] | None:
    """``(account, region)`` when ``host`` is an ECR registry host, else ``None``.

    >>> ecr_registry("123456789012.dkr.ecr.us-west-2.amazonaws.com")
    ('123456789012', 'us-west-2')
    """
    match = _ECR_HOST_RE.match(host.split(":")[0]) if isinstance(host, str) else None
    return (match.group("account"), match.group("region")) if match else None


def _split_repository(repository: str) -> tuple[str, str]:
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
        try:
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


class _PushDisplay:
    """Push progress: bytes of all layers on one live line, or a line per finished layer."""

    def __init__(self, mode: str, stream: TextIO, target: str) -> None:
        self.mode, self.stream, self.target = mode, stream, target
        self.layers: dict[str, tuple[int, int]] = {}
        self.done: dict[str, str] = {}
        self._last = 0.0

    def feed(self, chunk: Mapping[str, Any]) -> None:
        layer, status = chunk.get("id"), str(chunk.get("status") or "")
        detail = chunk.get("progressDetail") or {}
        if layer and detail.get("total"):
            self.layers[layer] = (int(detail.get("current") or 0), int(detail["total"]))
        if layer and status in ("Pushed", "Layer already exists", "Mounted from"):
            self.done[layer] = status
            if layer in self.layers:
                total = self.layers[layer][1]
                self.layers[layer] = (total, total)
            if self.mode == "plain":
                self._write(f"  {layer}: {status}\n")
        elif not layer and status and self.mode == "plain":
            self._write(f"  {status}\n")
        now = time.monotonic()
        if self.mode == "live" and now - self._last > 0.1:
            self._last = now
            current = sum(c for c, _ in self.layers.values())
            total = sum(t for _, t in self.layers.values())
            self._write(
                f"\r\x1b[2KPushing {self.target}: {len(self.done)} layers done, "
                f"{current / 2**20:.1f}/{total / 2**20:.1f} MiB"
            )

    def finish(self) -> None:
        if self.mode == "live":
            self._write("\r\x1b[2K")

    def _write(self, text: str) -> None:
        if self.mode == "quiet":
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self.mode = "quiet"


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
    _check_tag(image, "image")
    if not isinstance(repository, str) or not repository or "@" in repository:
        raise ConfigurationError.invalid(
            "repository",
            repository,
            "a repository URI such as 123456789012.dkr.ecr.us-west-2.amazonaws.com/launchbay",
        )
    host, path = _split_repository(repository)
    last = path.rsplit("/", 1)[-1]
    if ":" in last:
        path, _, repo_tag = path.rpartition(":")
        tag = tag or repo_tag
    target_repo = f"{host}/{path}" if host else path
    if tag is None:
        tag = image.rsplit("/", 1)[-1].partition(":")[2] or "latest"
    if not _TAG_RE.match(tag):
        raise ConfigurationError.invalid("tag", tag, "letters, digits, '_', '.', '-' (at most 128)")
    _check_tag(f"{target_repo}:{tag}", "repository")
    client = docker_client(client, feature="Pushing training images")
    errors = docker_errors()
    out = sys.stderr if stream is None else stream
    mode = _display_mode(progress, out)

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
    if mode != "quiet":
        out.write(
            f"Pushing {reference}" + (" (ECR login through boto3)\n" if auth_config else "\n")
        )
        out.flush()
    display = _PushDisplay(mode, out, reference)
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
    if mode != "quiet":
        out.write(f"Pushed {reference} in {time.monotonic() - started:.1f} s\n")
        out.flush()
    return reference


# --------------------------------------------------------------------------- base image


def _os_release() -> dict[str, str]:
    values: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/etc/os-release", encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.strip().partition("=")
            if sep:
                values[key] = value.strip().strip('"')
    return values


def _apt_sources(codename: str) -> list[str]:
    """The machine's apt source files that serve ``codename`` (its -updates/-security too)."""
    candidates = ["/etc/apt/sources.list"]
    candidates += sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    candidates += sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    suite = re.compile(rf"(?<![\w-]){re.escape(codename)}(?:-[a-z]+)?(?![\w-])")
    found = []
    for path in candidates:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError:
            continue
        active = [
            line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
        ]
        if any(suite.search(line) for line in active):
            found.append(path)
    return found


def _debian_python(codename: str) -> str | None:
    """``"3.11"``: the python3 version apt would install (from this machine's apt lists)."""
    try:
        out = subprocess.run(
            ["apt-cache", "show", "--no-all-versions", "python3"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^Version: (?:\d+:)?(\d+\.\d+)", out, re.M)
    return match.group(1) if match else None


def base_image_name(codename: str | None = None, python: str | None = None) -> str:
    """``launchbay/python-base:<python>-<codename>``, e.g. ``launchbay/python-base:3.11-bookworm``."""
    codename = codename or _os_release().get("VERSION_CODENAME") or "debian"
    python = python or _debian_python(codename)
    return f"{REPOSITORY_PREFIX}/python-base:{python + '-' if python else ''}{codename}"


_BASE_PACKAGES = ("python3", "python3-venv", "python3-dev", "ca-certificates")


def build_base_image(
    tag: str | None = None,
    *,
    suite: str | None = None,
    sources: Iterable[str | os.PathLike[str]] | None = None,
    reuse: bool = True,
    progress: bool | None = None,
    stream: TextIO | None = None,
    client: Any = None,
) -> str:
    """Make a slim Debian Python base without pulling anything; return its tag.

    ``mmdebstrap --variant=minbase --include=python3,python3-venv,python3-dev,ca-certificates``
    for this machine's suite (``VERSION_CODENAME`` of /etc/os-release) from this machine's apt
    sources (the files under /etc/apt that serve that suite), then ``docker import``. The
    image's own apt sources are the same, so builds FROM it can apt-get install. Needs root
    (or unprivileged user namespaces) and the ``mmdebstrap`` package.

    Args:
        tag: Default :func:`base_image_name` (``launchbay/python-base:3.11-bookworm``).
        suite: The Debian suite (default: this machine's codename).
        sources: apt source files (``.list`` or deb822 ``.sources``); default: this machine's.
        reuse: Return at once when the tag exists.
    """
    release = _os_release()
    codename = suite or release.get("VERSION_CODENAME")
    if not codename:
        raise ConfigurationError.invalid(
            "suite",
            suite,
            "a Debian suite such as 'bookworm' (this machine's /etc/os-release has none)",
        )
    name = tag or base_image_name(codename)
    _check_tag(name, "tag")
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    client = docker_client(client, feature="Making the base image")
    if reuse and _image_labels(client, name) is not None:
        logger.info("Reusing base image %s", name)
        return name
    files = [os.fspath(s) for s in sources] if sources is not None else _apt_sources(codename)
    if not files:
        raise ConfigurationError.invalid(
            "sources",
            files,
            f"apt source files serving {codename!r}",
            reason="None found under /etc/apt",
        )
    for path in files:
        if not Path(path).is_file():
            raise ConfigurationError.invalid("sources", path, "existing apt source files")
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise MissingDependencyError(
            "Making the base image needs mmdebstrap, which is not installed. "
            "Install it with: apt-get install mmdebstrap"
        )
    out = sys.stderr if stream is None else stream
    mode = _display_mode(progress, out)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="launchbay-base-") as tmp:
        rootfs = os.path.join(tmp, "rootfs.tar")
        argv = [
            mmdebstrap, "--variant=minbase", "--include=" + ",".join(_BASE_PACKAGES),
            "--aptopt=Acquire::Check-Valid-Until false", codename, rootfs, *files,
        ]  # fmt: skip
        if mode != "quiet":
            out.write(f"Making {name}: {' '.join(argv[:3])} {codename} ... {' '.join(files)}\n")
            out.flush()
        errors = docker_errors()
        with _BuildDisplay(mode, out, name) as display:
            display.feed(f"Step 1/2 : mmdebstrap {codename}\n")
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                display.feed(line)
            code = proc.wait()
            if code != 0:
                display.finish(failed=True)
                raise ImageBuildError(
                    f"mmdebstrap failed (exit {code}) making {name}:\n"
                    + "\n".join(f"  {line}" for line in display.tail),
                    tag=name,
                    step="mmdebstrap",
                    log_tail=display.tail,
                )
            display.feed(f"Step 2/2 : docker import {name}\n")
            repository, _, image_tag = name.rpartition(":")
            try:
                client.api.import_image(
                    src=rootfs,
                    repository=repository,
                    tag=image_tag,
                    changes=[
                        "ENV LANG=C.UTF-8",
                        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        'CMD ["/bin/bash"]',
                        f"LABEL {LABEL_PREFIX}base-suite={codename}",
                    ],
                )
            except errors.APIError as exc:
                display.finish(failed=True)
                raise ImageBuildError(f"docker import of {name} failed: {exc}", tag=name) from exc
        if _image_labels(client, name) is None:
            raise ImageBuildError(f"docker import of {name} made no image", tag=name)
    if mode != "quiet":
        out.write(f"Made {name} in {time.monotonic() - started:.1f} s\n")
        out.flush()
    return name
