"""A local job's directory: where each of its files lives, and the file helpers its parts share.

Job directory (root: ``job_root`` argument, else ``$LAUNCHBAY_HOME/jobs``, else
``~/.launchbay/jobs``)::

    <root>/<job name>/
        request.json          the request, as received
        status.json           the last DescribeTrainingJob-shaped snapshot
        artifacts/            archives built before an S3 upload, checkpoint bookkeeping
        algo-1/ ... algo-N/   each host's /opt/ml-like tree (SAGEMAKER_BASE_DIR)
            input/config/*.json, input/data/<channel>/, model/, output/, checkpoints/, code/
        shared/               a directory every host of the job can see
        logs/algo-1.log ...   every line each host printed
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launchbay import transfer
from launchbay._home import local_home
from launchbay.backends.plan import algo_hosts, instance_count_of
from launchbay.errors import ConfigurationError, TransferError
from launchbay.runtime.for_client import (
    read_beneath,
    rmtree_beneath,
    unlink_beneath,
)
from launchbay.runtime.launchers.mpi import HOST_ENV_FILE
from launchbay.transfer import S3Object

__all__ = [
    "JOBS_DIR",
    "default_job_root",
    "host_names",
    "file_uri_path",
    "JobLayout",
    "write_json_atomic",
    "write_text_atomic",
]

logger = logging.getLogger("launchbay.backends.local")

JOBS_DIR = "jobs"


def default_job_root() -> str:
    """Where job directories go by default: ``<local home>/jobs``."""
    return os.path.join(local_home(), JOBS_DIR)


def host_names(request: Mapping[str, Any]) -> list[str]:
    """``algo-1`` ... ``algo-N`` for the request's instance count (or its groups' total)."""
    count = instance_count_of(request.get("ResourceConfig") or {})
    if count < 1:
        raise ConfigurationError.invalid(
            "instance_count", count, "an integer 1 or more (one local host each)"
        )
    return list(algo_hosts(count))


def file_uri_path(uri: str) -> str:
    """The absolute local path of a ``file://`` URI (``~`` expanded)."""
    path = uri[len("file://") :]
    if path.startswith("localhost/"):
        path = path[len("localhost") :]
    return os.path.abspath(os.path.expanduser(path))


def join_uri(base: str, *parts: str) -> str:
    """``base`` and ``parts`` joined with single slashes (keeps ``s3://``/``file://``)."""
    scheme = ""
    for prefix in ("s3://", "file://"):
        if base[: len(prefix)].lower() == prefix:
            scheme, base = base[: len(prefix)], base[len(prefix) :]
            break
    pieces = [base.rstrip("/")] + [p.strip("/") for p in parts if p and p.strip("/")]
    joined = "/".join(pieces)
    return scheme + joined


@dataclass(frozen=True)
class JobLayout:
    """The directories and files of one local job (see the module docstring)."""

    job_dir: str
    hosts: tuple[str, ...]

    @classmethod
    def create(cls, root: str, job_name: str, hosts: Sequence[str]) -> JobLayout:
        """Make a fresh job directory under ``root`` (a leftover one of that name is replaced)."""
        job_dir = os.path.join(os.path.abspath(os.path.expanduser(root)), job_name)
        if os.path.lexists(job_dir):
            logger.info("Replacing the old job directory %s", job_dir)
            shutil.rmtree(job_dir, ignore_errors=True)
        layout = cls(job_dir, tuple(hosts))
        # The job directory is its owner's alone (0700): it holds the job's environment
        # (request.json, the ranks' published environments) and its logs.
        os.makedirs(job_dir, mode=0o700, exist_ok=True)
        os.chmod(job_dir, 0o700)
        for directory in (layout.shared_dir, layout.logs_dir, *map(layout.host_dir, hosts)):
            os.makedirs(directory, exist_ok=True)
        return layout

    def read_host_file(self, host: str, name: str, limit: int = 8192) -> str:
        """The start of ``<host>/output/<name>`` (a file the host wrote), or "".

        Read without following any link below the job directory: a container or
        script that made ``output/failure`` (or ``output`` itself) a link to a file
        of this machine gets "" here, never that file's text.
        """
        path = os.path.join(self.host_dir(host), "output", name)
        data = read_beneath(self.job_dir, path, limit)
        if data is None:
            if os.path.lexists(path):
                logger.warning("Not reading %s: not a regular file reached without a link", path)
            return ""
        return data.decode("utf-8", errors="replace")

    def forget_secrets(self) -> None:
        """Remove the rank environments the hosts published (they hold the job's secrets).

        The host runtimes remove their own when their part of the job ends; this
        is for hosts that were killed first. Nothing is followed through a link.
        """
        if not os.path.isdir(self.job_dir):
            return
        rmtree_beneath(self.job_dir, os.path.join(self.shared_dir, "mpi", "env"))
        for host in self.hosts:
            env_file = os.path.join(self.host_dir(host), "output", "ranks", HOST_ENV_FILE)
            unlink_beneath(self.job_dir, env_file)  # refuses a link anywhere on the way

    @property
    def name(self) -> str:
        """The job name (the directory's name)."""
        return os.path.basename(self.job_dir)

    def host_dir(self, host: str) -> str:
        """The host's base dir (its ``/opt/ml``)."""
        return os.path.join(self.job_dir, host)

    @property
    def shared_dir(self) -> str:
        """A directory all hosts of the job share (``LAUNCHBAY_SHARED_DIR``)."""
        return os.path.join(self.job_dir, "shared")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.job_dir, "logs")

    def log_file(self, host: str) -> str:
        """Every line ``host`` printed."""
        return os.path.join(self.logs_dir, f"{host}.log")

    @property
    def request_file(self) -> str:
        return os.path.join(self.job_dir, "request.json")

    @property
    def status_file(self) -> str:
        return os.path.join(self.job_dir, "status.json")

    @property
    def artifacts_dir(self) -> str:
        return os.path.join(self.job_dir, "artifacts")

    @property
    def checkpoint_manifest(self) -> str:
        """Size and mtime of every restored checkpoint file, by checkpoint dir."""
        return os.path.join(self.artifacts_dir, "checkpoints-restored.json")

    def write_request(self, request: Mapping[str, Any]) -> None:
        """Store the request as ``request.json``."""
        write_json_atomic(self.request_file, request)


def write_json_atomic(path: str, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str))


def write_text_atomic(path: str, text: str, *, mode: int = 0o600) -> None:
    """Put ``text`` at ``path`` whole (``mode``, its directory made): a reader sees the old
    file or the new one, never a part; nothing is left behind if the write fails."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        if mode != 0o600:  # mkstemp's
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def list_files(client: Any, bucket: str, prefix: str) -> list[S3Object]:
    """Every object under ``s3://bucket/prefix`` (directory markers left out), sorted by key."""
    found = transfer.list_objects(client, bucket, prefix)
    return sorted((o for o in found if not o.key.endswith("/")), key=lambda o: o.key)


def relative_key(key: str, prefix: str) -> str:
    """Where an object lands inside its channel (SageMaker SDK v2's local layout).

    The URI names the object itself: its base name. Otherwise the key after the
    prefix, leading slashes dropped.
    """
    if key == prefix:
        return posixpath.basename(key)
    return key[len(prefix) :].lstrip("/")


def safe_join(root: str, rel: str) -> str:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise TransferError(f"Refusing to place {rel!r} under {root!r}: it would land outside.")
    return os.path.join(root, *parts)


def remove_path(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
