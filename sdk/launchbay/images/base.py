"""A slim Debian Python base image made without pulling anything (:func:`build_base_image`):
``mmdebstrap`` from this machine's apt sources, then ``docker import``.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from launchbay._docker import docker_errors
from launchbay.errors import ConfigurationError, ImageBuildError, MissingDependencyError
from launchbay.images._engine import docker_client, image_labels
from launchbay.images._live import BuildDisplay, display_for
from launchbay.images.names import LABEL_PREFIX, REPOSITORY_PREFIX, check_tag

__all__ = ["base_image_name", "build_base_image"]

logger = logging.getLogger("launchbay.images")


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
    check_tag(name, "tag")
    if ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    client = docker_client(client, feature="Making the base image")
    if reuse and image_labels(client, name) is not None:
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
    shown = display_for(progress, out)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="launchbay-base-") as tmp:
        rootfs = os.path.join(tmp, "rootfs.tar")
        argv = [
            mmdebstrap, "--variant=minbase", "--include=" + ",".join(_BASE_PACKAGES),
            "--aptopt=Acquire::Check-Valid-Until false", codename, rootfs, *files,
        ]  # fmt: skip
        shown.print(f"Making {name}: {' '.join(argv[:3])} {codename} ... {' '.join(files)}")
        errors = docker_errors()
        with BuildDisplay(shown, name) as display:
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
        if image_labels(client, name) is None:
            raise ImageBuildError(f"docker import of {name} made no image", tag=name)
    shown.print(f"Made {name} in {time.monotonic() - started:.1f} s")
    return name
