"""The launchbay runtime wheel the training images install (:func:`build_runtime_wheel`)."""

from __future__ import annotations

import base64
import configparser
import csv
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import re
import zipfile
from pathlib import Path

import launchbay

__all__ = ["build_runtime_wheel"]

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
