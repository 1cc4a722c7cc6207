"""The launchbay runtime wheel the training images install (:func:`build_runtime_wheel`).

The wheel is the project's own, built by ``pip wheel --no-deps --no-build-isolation
--no-index`` with setuptools from ``setup.cfg``: what the images install is what
``pip install launchbay`` installs, and the build needs no network. It is built from a copy
of the project's inputs in a temporary directory, so nothing is written into the source tree
and no stale ``build/`` can leak removed modules into it. ``SOURCE_DATE_EPOCH`` fixes the
timestamps in the archive, so unchanged sources give the same bytes: the image's content hash
(``--reuse``) and Docker's layer cache hold.
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import launchbay
from launchbay.errors import ConfigurationError, ImageBuildError, MissingDependencyError

__all__ = ["build_runtime_wheel", "source_dir"]

#: 1980-01-01, the earliest time a zip archive can hold.
_SOURCE_DATE_EPOCH = "315532800"
#: Files of the project root the build reads besides the package directories.
_ROOT_FILES = ("setup.cfg", "pyproject.toml", "setup.py", "README.md", "LICENSE")


def source_dir() -> Path:
    """The launchbay project this package runs from: the directory holding ``setup.cfg``.

    Raises:
        ConfigurationError: launchbay runs from an installed copy, not from a checkout.
    """
    root = Path(launchbay.__file__).resolve().parents[2]
    if not (root / "setup.cfg").is_file() or not (root / "pyproject.toml").is_file():
        raise ConfigurationError(
            f"Building a training image packs the launchbay runtime from its source tree "
            f"(setup.cfg and pyproject.toml beside sdk/), and launchbay runs from "
            f"{Path(launchbay.__file__).resolve().parent}, which has none. Run from a checkout "
            "of launchbay (pip install -e .)."
        )
    return root


def _package_dirs(root: Path) -> list[str]:
    """The directories ``setup.cfg``'s ``package_dir`` maps packages from (``sdk``, ``infra``)."""
    config = configparser.ConfigParser()
    config.read(root / "setup.cfg")
    mapping = config.get("options", "package_dir", fallback="")
    dirs = []
    for line in mapping.splitlines():
        _, sep, directory = line.partition("=")
        directory = directory.strip()
        if sep and directory and directory not in dirs:
            dirs.append(directory)
    return dirs or ["."]


def _copy_inputs(root: Path, dest: Path) -> None:
    """Copy what setuptools reads (root files, package directories) from ``root`` to ``dest``."""
    for name in _ROOT_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")
    for directory in _package_dirs(root):
        if directory != ".":
            shutil.copytree(root / directory, dest / directory, ignore=ignore)


def build_runtime_wheel(directory: str | os.PathLike[str]) -> Path:
    """Write a wheel of the launchbay project this package runs from; return its path.

    ``pip wheel --no-deps --no-build-isolation --no-index`` of the project (see the module's
    docstring): every module and data file ``setup.cfg`` lists, and the console scripts
    (``train``, ``launchbay-train``, ``launchbay``). The same sources give the same bytes.
    The images install it with ``--no-deps``: the runtime (``launchbay.runtime``) needs only
    the standard library.

    Raises:
        ConfigurationError: launchbay runs from an installed copy, without its source tree.
        MissingDependencyError: setuptools is not installed (the ``docker`` extra brings it).
        ImageBuildError: pip could not build the wheel (the message quotes its output).
    """
    root = source_dir()
    if importlib.util.find_spec("setuptools") is None:
        raise MissingDependencyError.for_module(
            "setuptools", "docker", "Building the launchbay wheel for the training images"
        )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="launchbay-wheel-") as tmp:
        source, out = Path(tmp) / "src", Path(tmp) / "dist"
        source.mkdir()
        _copy_inputs(root, source)
        command = [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
            "--no-build-isolation", "--no-index", "--disable-pip-version-check",
            "--wheel-dir", str(out), str(source),
        ]  # fmt: skip
        env = dict(os.environ, SOURCE_DATE_EPOCH=_SOURCE_DATE_EPOCH)
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        wheels = sorted(out.glob("launchbay-*.whl"))
        if result.returncode != 0 or len(wheels) != 1:
            output = (result.stdout + result.stderr).strip().splitlines()[-25:]
            raise ImageBuildError(
                f"Building the launchbay wheel from {root} failed (pip wheel exited "
                f"{result.returncode}):\n" + "\n".join(f"  {line}" for line in output),
                step="pip wheel",
                log_tail=output,
            )
        path = directory / wheels[0].name
        shutil.move(wheels[0], path)
    return path
