"""Staging shared by the local backends (``local_process`` now, Docker later).

A local backend interprets the same CreateTrainingJob request SageMaker gets.
This module does everything around the hosts themselves: the job directory,
the input channels, the checkpoints and the outputs. It never starts a process.

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

Channels (``InputDataConfig``):

* ``file://`` sources are *linked*, never copied: ``input/data/<channel>`` is a
  symlink to a directory source, or a directory of symlinks (a file source, or
  a sharded channel). The data is the user's own: training scripts must treat
  channel directories as read-only, and launchbay never writes through them.
* ``s3://`` sources are listed, then every object not yet cached is downloaded
  in parallel into ``$LAUNCHBAY_HOME/cache/s3/objects/``, one immutable file per
  (bucket, key, ETag). ``cache/s3/index.json`` records each object's ETag, size
  and file, so a second run with the same data downloads nothing. Each host's
  channel directory is a tree of symlinks into the cache.
* ``ShardedByS3Key`` gives each host a share of the objects, as SageMaker does:
  objects sorted by key, host *i* (0-based) gets objects *i*, *i + N*, *i + 2N* ...
* ``FileSystemInput`` (EFS, FSx for Lustre) and ``Pipe`` input mode cannot run on
  this machine: :func:`check_request` raises :class:`~launchbay.errors.ConfigurationError`.

Outputs land where SageMaker puts them, for ``file://`` and ``s3://``
``OutputDataConfig.S3OutputPath``: ``<path>/<job>/output/model.tar.gz`` (every
host's model dir merged; the first host wins on a name clash),
``output.tar.gz`` (``output/data`` merged the same way) and ``failure`` (the
failure reason) when the job failed. Files appear atomically (temp file +
rename; S3 PUTs are atomic). With ``CompressionType: NONE`` the files go
uncompressed under ``output/model/`` and ``output/data/``.

Checkpoints (``CheckpointConfig``): the ``S3Uri`` (``s3://`` or ``file://``) is
restored into every host's checkpoint dir before the hosts start; when the job
ends, in any state, each host's new or changed checkpoint files are saved back
(the first host wins on a name clash).

S3 is reached through :class:`launchbay.Session`, created on first use: a job
whose data is all ``file://`` needs neither boto3 credentials nor a network.
Every S3 listing, download and upload, and the parallel runner, are
:mod:`launchbay.transfer`'s, the engine ``Session`` uses too.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from launchbay import transfer
from launchbay._home import local_home
from launchbay.errors import ConfigurationError, InputError, TransferError
from launchbay.runtime._confine import (
    TreeEntry,
    open_regular,
    reached_without_links,
    read_beneath,
    rmtree_beneath,
    scan_tree,
    unlink_beneath,
)
from launchbay.runtime.contract import checkpoint_config_for, debug_hook_config_for
from launchbay.runtime.launchers.mpi import HOST_ENV_FILE
from launchbay.s3uri import is_file_uri, is_s3_uri, parse_s3_uri
from launchbay.session import Session
from launchbay.transfer import S3Object

__all__ = [
    "JOBS_DIR",
    "default_job_root",
    "host_names",
    "file_uri_path",
    "check_request",
    "JobLayout",
    "S3Object",
    "S3Cache",
    "LocalStager",
]

logger = logging.getLogger("launchbay.backends.local")

JOBS_DIR = "jobs"


# --------------------------------------------------------------------------- paths


def default_job_root() -> str:
    """Where job directories go by default: ``<local home>/jobs``."""
    return os.path.join(local_home(), JOBS_DIR)


def host_names(request: Mapping[str, Any]) -> list[str]:
    """``algo-1`` ... ``algo-N`` for the request's instance count (or its groups' total)."""
    resources = request.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    if groups:
        count = sum(int(g.get("InstanceCount") or 0) for g in groups)
    else:
        count = int(resources.get("InstanceCount") or 1)
    if count < 1:
        raise ConfigurationError.invalid(
            "instance_count", count, "an integer 1 or more (one local host each)"
        )
    return [f"algo-{i}" for i in range(1, count + 1)]


def file_uri_path(uri: str) -> str:
    """The absolute local path of a ``file://`` URI (``~`` expanded)."""
    path = uri[len("file://") :]
    if path.startswith("localhost/"):
        path = path[len("localhost") :]
    return os.path.abspath(os.path.expanduser(path))


def _join_uri(base: str, *parts: str) -> str:
    """``base`` and ``parts`` joined with single slashes (keeps ``s3://``/``file://``)."""
    scheme = ""
    for prefix in ("s3://", "file://"):
        if base[: len(prefix)].lower() == prefix:
            scheme, base = base[: len(prefix)], base[len(prefix) :]
            break
    pieces = [base.rstrip("/")] + [p.strip("/") for p in parts if p and p.strip("/")]
    joined = "/".join(pieces)
    return scheme + joined


def _s3_source(channel: Mapping[str, Any]) -> dict[str, Any]:
    return dict((channel.get("DataSource") or {}).get("S3DataSource") or {})


def check_request(request: Mapping[str, Any]) -> None:
    """Refuse what cannot run on this machine, before anything starts.

    Raises:
        ConfigurationError: a FileSystemInput channel, Pipe input mode, or an S3
            data type other than ``S3Prefix``.
        InputError: a ``file://`` channel, output path or checkpoint URI that is
            neither ``file://`` nor ``s3://``, or a ``file://`` channel whose path
            does not exist.
    """
    default_mode = (request.get("AlgorithmSpecification") or {}).get("TrainingInputMode", "File")
    for channel in request.get("InputDataConfig") or []:
        name = channel.get("ChannelName")
        source = channel.get("DataSource") or {}
        if "FileSystemDataSource" in source:
            fs = source["FileSystemDataSource"]
            raise ConfigurationError(
                f"Channel {name!r} reads from {fs.get('FileSystemType', 'a file system')} "
                f"{fs.get('FileSystemId', '')}:{fs.get('DirectoryPath', '')} (a FileSystemInput). "
                "EFS and FSx for Lustre file systems are mounted inside a VPC on SageMaker and "
                "cannot be reached by a local run. Accepted locally: a 'file:///path' or "
                "'s3://bucket/prefix' channel (mount the file system yourself and pass its "
                "path as file://), or run on an ml.* instance type.",
                argument=f"inputs[{name!r}]",
                value=fs,
            )
        mode = channel.get("InputMode") or default_mode
        if mode == "Pipe":
            raise ConfigurationError(
                f"Channel {name!r} uses input_mode='Pipe', which local runs do not support "
                "(SageMaker streams Pipe channels through named pipes it manages). Accepted "
                "locally: 'File' or 'FastFile' (both give the script files).",
                argument="input_mode",
                value=mode,
            )
        s3 = _s3_source(channel)
        data_type = s3.get("S3DataType", "S3Prefix")
        if data_type != "S3Prefix":
            raise ConfigurationError(
                f"Channel {name!r} has S3DataType={data_type!r}, which local runs do not "
                "support. Accepted locally: 'S3Prefix'.",
                argument=f"inputs[{name!r}]",
                value=data_type,
            )
        uri = s3.get("S3Uri", "")
        if is_file_uri(uri):
            path = file_uri_path(uri)
            if not os.path.exists(path):
                raise InputError(
                    f"Invalid inputs[{name!r}]={uri!r}: nothing exists at {path!r}. Accepted: "
                    "a file:// URI of an existing file or directory, or an s3:// URI.",
                    argument=f"inputs[{name!r}]",
                    value=uri,
                )
        elif not is_s3_uri(uri):
            raise InputError.invalid(f"inputs[{name!r}]", uri, "an s3:// or file:// URI")
    output = (request.get("OutputDataConfig") or {}).get("S3OutputPath", "")
    if not (is_file_uri(output) or is_s3_uri(output)):
        raise InputError.invalid("output_path", output, "an s3:// or file:// URI")
    checkpoint = (request.get("CheckpointConfig") or {}).get("S3Uri")
    if checkpoint and not (is_file_uri(checkpoint) or is_s3_uri(checkpoint)):
        raise InputError.invalid("checkpoint_s3_uri", checkpoint, "an s3:// or file:// URI")


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
            ranks = os.path.join(self.host_dir(host), "output", "ranks")
            if reached_without_links(self.job_dir, ranks):
                unlink_beneath(self.job_dir, os.path.join(ranks, HOST_ENV_FILE))

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
        _write_json_atomic(self.request_file, request)


def _write_json_atomic(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, default=str)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------- S3 helpers


def _list_files(client: Any, bucket: str, prefix: str) -> list[S3Object]:
    """Every object under ``s3://bucket/prefix`` (directory markers left out), sorted by key."""
    found = transfer.list_objects(client, bucket, prefix)
    return sorted((o for o in found if not o.key.endswith("/")), key=lambda o: o.key)


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; a no-op elsewhere)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl  # POSIX only: absent on Windows
        except ImportError:  # pragma: no cover - not POSIX
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class S3Cache:
    """Downloaded S3 objects, one immutable file per (bucket, key, ETag).

    ``<root>/objects/<hh>/<sha256>`` holds the data; ``<root>/index.json`` maps each
    object URI to ``{"etag", "size", "path"}`` (``path`` relative to ``root``).
    An object whose ETag and size match the index is not downloaded again. Files
    are never rewritten in place, so a running job's links stay valid while a
    newer version of the same key is fetched for another job.
    """

    def __init__(self, root: str, max_workers: int = 16) -> None:
        self.root = root
        self.max_workers = max_workers
        self._lock = threading.Lock()

    @property
    def index_file(self) -> str:
        return os.path.join(self.root, "index.json")

    def _object_path(self, obj: S3Object) -> str:
        digest = hashlib.sha256(f"{obj.bucket}/{obj.key}\0{obj.etag}".encode()).hexdigest()
        return os.path.join("objects", digest[:2], digest)

    def _read_index(self) -> dict[str, Any]:
        try:
            with open(self.index_file, encoding="utf-8") as f:
                index = json.load(f)
            return index if isinstance(index, dict) else {}
        except (OSError, ValueError):
            return {}

    def lookup(self, obj: S3Object, index: Mapping[str, Any] | None = None) -> str | None:
        """The cached file of ``obj`` (same ETag and size, unchanged since download), or ``None``.

        A local job's channel links to these files, so a script that edits an
        input file in place edits the cached copy. The index keeps each file's
        size, modification time and inode as downloaded; a file that no longer
        matches is not used again (it is downloaded afresh), so one job's edit
        never changes what a later job reads. Cached files are also read-only
        (0444), which stops such an edit outright for a script not run as root.
        """
        entry = (self._read_index() if index is None else index).get(obj.uri)
        if not isinstance(entry, dict) or entry.get("etag") != obj.etag:
            return None
        path = os.path.join(self.root, str(entry.get("path", "")))
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if not stat.st_size == obj.size == entry.get("size"):
            return None
        stamp = entry.get("stamp")
        if stamp is not None and stamp != _stamp(stat):
            logger.warning(
                "The cached copy of %s changed after it was downloaded (a job edited its input "
                "in place?): downloading it again",
                obj.uri,
            )
            return None
        return path

    def fetch(self, client: Any, objects: Sequence[S3Object]) -> dict[str, str]:
        """Make sure every object is cached; return ``{uri: local file}``.

        Missing objects are downloaded in parallel; the index is updated under a
        file lock, so concurrent jobs can share the cache.
        """
        result: dict[str, str] = {}
        missing: list[S3Object] = []
        index = self._read_index()
        for obj in objects:
            cached = self.lookup(obj, index)
            if cached is None:
                missing.append(obj)
            else:
                result[obj.uri] = cached
        if missing:
            total = sum(o.size for o in missing)
            logger.info(
                "Downloading %d S3 object(s), %d bytes, into %s", len(missing), total, self.root
            )
            transfer.download_objects(
                client,
                [(obj, os.path.join(self.root, self._object_path(obj))) for obj in missing],
                limits=transfer.Limits(workers=self.max_workers),
                progress=None,
            )
            with self._lock, _locked(os.path.join(self.root, ".index.lock")):
                index = self._read_index()
                for obj in missing:
                    rel = self._object_path(obj)
                    path = os.path.join(self.root, rel)
                    os.chmod(path, 0o444)
                    index[obj.uri] = {
                        "etag": obj.etag,
                        "size": obj.size,
                        "path": rel,
                        "stamp": _stamp(os.stat(path)),
                    }
                    result[obj.uri] = path
                _write_json_atomic(self.index_file, index)
        else:
            logger.debug("All %d S3 object(s) already cached in %s", len(objects), self.root)
        return result


def _stamp(stat: os.stat_result) -> list[int]:
    """What tells a cached file from one changed in place: inode, size and mtime."""
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def _relative_key(key: str, prefix: str) -> str:
    """Where an object lands inside its channel (SageMaker SDK v2's local layout).

    The URI names the object itself: its base name. Otherwise the key after the
    prefix, leading slashes dropped.
    """
    if key == prefix:
        return posixpath.basename(key)
    return key[len(prefix) :].lstrip("/")


def _check_placements(channel: str, placed: Sequence[tuple[str, str]]) -> None:
    """Refuse a channel two of whose objects would land on the same path.

    ``dup/x`` and ``dup//x`` land on one file; ``a`` and ``a/b`` need ``a`` to
    be a file and a directory at once. SageMaker cannot place them either. The
    error names both objects, before anything is downloaded.
    """
    files: dict[tuple[str, ...], str] = {}
    for rel, uri in placed:
        parts = tuple(p for p in rel.split("/") if p not in ("", "."))
        if not parts or ".." in parts:
            raise InputError(
                f"inputs[{channel!r}]: the S3 object {uri} would land at {rel!r}, outside the "
                "channel directory. Accepted: keys without '..' segments."
            )
        if parts in files:
            raise InputError(
                f"inputs[{channel!r}]: the S3 objects {files[parts]} and {uri} would both land "
                f"at {'/'.join(parts)!r} in the channel directory (empty or '.' key segments are "
                "dropped). Accepted: keys that map to distinct paths; rename or remove one."
            )
        files[parts] = uri
    for parts, uri in files.items():
        for cut in range(1, len(parts)):
            if parts[:cut] in files:
                raise InputError(
                    f"inputs[{channel!r}]: the S3 object {files[parts[:cut]]} would be the file "
                    f"{'/'.join(parts[:cut])!r} in the channel directory, but {uri} needs it to "
                    "be a directory. Accepted: keys of which none is a prefix directory of "
                    "another; rename or remove one."
                )


def _safe_join(root: str, rel: str) -> str:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise TransferError(f"Refusing to place {rel!r} under {root!r}: it would land outside.")
    return os.path.join(root, *parts)


def _shard(items: Sequence[Any], index: int, count: int, sharded: bool) -> list[Any]:
    return list(items[index::count]) if sharded and count > 1 else list(items)


def _walk(root: str) -> list[tuple[str, str]]:
    """``(relative posix path, absolute path)`` of every file under ``root``, sorted.

    Links to directories are followed (datasets are often assembled from links),
    but each real directory is listed once: a link back to a directory already
    seen (a loop such as ``again -> ..``, or a second link to the same place) is
    skipped with a warning, so no file is handed out twice.
    """
    files: list[tuple[str, str]] = []
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        try:
            info = os.stat(dirpath)
        except OSError:
            dirnames[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen:
            logger.warning(
                "Not listing %s again: it leads to a directory already listed (a loop of links?)",
                dirpath,
            )
            dirnames[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted(filenames):
            rel = name if rel_dir == os.curdir else posixpath.join(*rel_dir.split(os.sep), name)
            files.append((rel, os.path.join(dirpath, name)))
    return files


def _link_files(channel_dir: str, files: Sequence[tuple[str, str]]) -> None:
    os.makedirs(channel_dir, exist_ok=True)
    for rel, target in files:
        link = _safe_join(channel_dir, rel)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(target, link)


# --------------------------------------------------------------------------- the stager


class LocalStager:
    """Channels, checkpoints and outputs of local jobs (see the module docstring).

    Args:
        session: A :class:`launchbay.Session` (or anything with ``s3_client``);
            created on first S3 use when not given.
        home: The local root (default :func:`local_home`); the S3 cache lives in
            ``<home>/cache/s3``.
        max_workers: Parallel S3 transfers.
    """

    def __init__(
        self, session: Any = None, *, home: str | None = None, max_workers: int = 16
    ) -> None:
        self._session = session
        self._session_lock = threading.Lock()
        self.home = home or local_home()
        self.max_workers = max_workers
        self.cache = S3Cache(os.path.join(self.home, "cache", "s3"), max_workers=max_workers)

    @property
    def session(self) -> Any:
        """The S3 session (a :class:`launchbay.Session` created on first use)."""
        with self._session_lock:
            if self._session is None:
                self._session = Session()
            return self._session

    @property
    def s3(self) -> Any:
        """The session's S3 client."""
        return self.session.s3_client

    # -- channels ---------------------------------------------------------------
    def stage_channels(self, request: Mapping[str, Any], layout: JobLayout) -> None:
        """Link every channel into each host's ``input/data/<channel>``."""
        hosts = list(layout.hosts)
        for channel in request.get("InputDataConfig") or []:
            name = channel["ChannelName"]
            source = _s3_source(channel)
            uri = source.get("S3Uri", "")
            sharded = source.get("S3DataDistributionType") == "ShardedByS3Key"
            if is_file_uri(uri):
                self._stage_file_channel(name, file_uri_path(uri), sharded, layout)
            else:
                self._stage_s3_channel(name, uri, sharded, layout)
            logger.debug("Staged channel %s from %s for %d host(s)", name, uri, len(hosts))

    def _stage_file_channel(self, name: str, path: str, sharded: bool, layout: JobLayout) -> None:
        hosts = list(layout.hosts)
        if os.path.isdir(path):
            files = _walk(path) if sharded and len(hosts) > 1 else None
        else:
            files = [(os.path.basename(path), path)]
        for index, host in enumerate(hosts):
            channel_dir = os.path.join(layout.host_dir(host), "input", "data", name)
            _remove(channel_dir)
            os.makedirs(os.path.dirname(channel_dir), exist_ok=True)
            if files is None:
                os.symlink(path, channel_dir, target_is_directory=True)
            else:
                _link_files(channel_dir, _shard(files, index, len(hosts), sharded))

    def _stage_s3_channel(self, name: str, uri: str, sharded: bool, layout: JobLayout) -> None:
        bucket, prefix = parse_s3_uri(uri, argument=f"inputs[{name!r}]")
        client = self.s3
        objects = _list_files(client, bucket, prefix)
        if not objects:
            raise TransferError(
                f"No S3 objects found under S3 URL {uri!r} given in input data source of "
                f"channel {name!r}. Please ensure that the bucket exists and that objects exist "
                "under that prefix."
            )
        _check_placements(name, [(_relative_key(o.key, prefix), o.uri) for o in objects])
        cached = self.cache.fetch(client, objects)
        hosts = list(layout.hosts)
        placed = [(_relative_key(o.key, prefix), cached[o.uri]) for o in objects]
        for index, host in enumerate(hosts):
            channel_dir = os.path.join(layout.host_dir(host), "input", "data", name)
            _remove(channel_dir)
            _link_files(channel_dir, _shard(placed, index, len(hosts), sharded))

    # -- checkpoints ------------------------------------------------------------
    @staticmethod
    def checkpoint_dirs(request: Mapping[str, Any], layout: JobLayout) -> list[str]:
        """Each host's checkpoint dir (a shared custom ``LocalPath`` counted once)."""
        dirs: list[str] = []
        for host in layout.hosts:
            config = checkpoint_config_for(request, layout.host_dir(host))
            if config and config["LocalPath"] not in dirs:
                dirs.append(config["LocalPath"])
        return dirs

    def restore_checkpoints(self, request: Mapping[str, Any], layout: JobLayout) -> int:
        """Copy what ``CheckpointConfig.S3Uri`` holds into every host's checkpoint dir.

        Returns the number of files restored (per host).
        """
        uri = (request.get("CheckpointConfig") or {}).get("S3Uri")
        dirs = self.checkpoint_dirs(request, layout)
        if not uri or not dirs:
            return 0
        copy_to = dirs
        entries: list[TreeEntry]
        if is_file_uri(uri):
            # Files are copied and links inside the saved tree are made again as
            # links; a link leaving it is skipped with a warning, never followed.
            root = file_uri_path(uri)
            entries = _scan(root, [], "Not restoring checkpoint")
        else:
            # Downloaded straight into the first host's dir, copied to the others.
            bucket, prefix = parse_s3_uri(uri, argument="checkpoint_s3_uri")
            prefix = prefix.rstrip("/") + "/" if prefix.strip("/") else ""
            entries = []
            plan = []
            for obj in _list_files(self.s3, bucket, prefix):
                rel = _relative_key(obj.key, prefix)
                destination = _confined_destination(dirs[0], rel)
                if destination is None:
                    continue
                entries.append(TreeEntry(rel, destination, "file"))
                plan.append((obj, destination))
            transfer.download_objects(
                self.s3, plan, limits=transfer.Limits(workers=self.max_workers), progress=False
            )
            copy_to = dirs[1:]
        manifest: dict[str, dict[str, list[Any] | None]] = {}
        restored_count = 0
        for directory in dirs:
            restored = manifest.setdefault(directory, {})
            for entry in entries:
                target = _confined_destination(directory, entry.rel)
                if target is None:
                    continue
                if directory in copy_to:
                    if entry.kind == "link":
                        _link_atomic(entry.link, target)
                    elif not _copy_atomic(entry.path, target, entry.base):
                        continue
                restored[entry.rel] = _fingerprint(target)
            restored_count = max(restored_count, len(restored))
        _write_json_atomic(layout.checkpoint_manifest, manifest)
        if entries:
            logger.info("Restored %d checkpoint file(s) from %s", restored_count, uri)
        return restored_count

    def save_checkpoints(self, request: Mapping[str, Any], layout: JobLayout) -> int:
        """Save new or changed checkpoint files of every host to ``CheckpointConfig.S3Uri``.

        Files restored at the start and left untouched are not written again. On a
        name clash between hosts the first host's file wins. Returns the number of
        files saved.
        """
        uri = (request.get("CheckpointConfig") or {}).get("S3Uri")
        dirs = self.checkpoint_dirs(request, layout)
        if not uri or not dirs:
            return 0
        try:
            with open(layout.checkpoint_manifest, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError):
            manifest = {}
        chosen: dict[str, TreeEntry] = {}
        for directory in dirs:
            restored = manifest.get(directory) or {}
            entries = _scan(
                directory, [_CONTAINER_CHECKPOINTS], "Not saving checkpoint", layout.job_dir
            )
            for entry in entries:
                if entry.rel in chosen:
                    continue
                fingerprint = _fingerprint(entry.path)
                if fingerprint is None or restored.get(entry.rel) == fingerprint:
                    continue
                chosen[entry.rel] = entry
        if not chosen:
            return 0
        self._publish_files([chosen[rel] for rel in sorted(chosen)], uri, request)
        logger.info("Saved %d checkpoint file(s) to %s", len(chosen), uri)
        return len(chosen)

    # -- outputs ----------------------------------------------------------------
    @staticmethod
    def output_prefix(request: Mapping[str, Any]) -> str:
        """``<S3OutputPath>/<job>/output``."""
        output = request["OutputDataConfig"]["S3OutputPath"]
        return _join_uri(output, request["TrainingJobName"], "output")

    @classmethod
    def model_artifacts_uri(cls, request: Mapping[str, Any]) -> str:
        """Where the model goes: ``.../output/model.tar.gz`` (``.../output/model/`` uncompressed)."""
        if _uncompressed(request):
            return _join_uri(cls.output_prefix(request), "model") + "/"
        return _join_uri(cls.output_prefix(request), "model.tar.gz")

    def collect_outputs(
        self,
        request: Mapping[str, Any],
        layout: JobLayout,
        failure_reason: str | None = None,
    ) -> str:
        """Write the model, the output data and the failure reason where SageMaker puts them.

        Returns the model artifacts URI.
        """
        prefix = self.output_prefix(request)
        hosts = list(layout.hosts)
        model_dirs = [os.path.join(layout.host_dir(h), "model") for h in hosts]
        data_dirs = [os.path.join(layout.host_dir(h), "output", "data") for h in hosts]
        model = _merged(model_dirs, "/opt/ml/model", layout.job_dir)
        data = _merged(data_dirs, "/opt/ml/output/data", layout.job_dir)
        if _uncompressed(request):
            self._publish_files(model, _join_uri(prefix, "model"), request)
            self._publish_files(data, _join_uri(prefix, "data"), request)
        else:
            for name, entries in (("model.tar.gz", model), ("output.tar.gz", data)):
                self._publish_archive(entries, _join_uri(prefix, name), layout, request)
        if failure_reason:
            self._publish_bytes(
                failure_reason.encode(), _join_uri(prefix, "failure"), layout, request
            )
        self._publish_debug_output(request, layout)
        return self.model_artifacts_uri(request)

    def _publish_debug_output(self, request: Mapping[str, Any], layout: JobLayout) -> None:
        """Tensors the debugger hook wrote go to ``<S3OutputPath>/<job>/debug-output``."""
        hook = request.get("DebugHookConfig") or {}
        target = hook.get("S3OutputPath")
        if not target or not (is_file_uri(target) or is_s3_uri(target)):
            return
        dirs = []
        for host in layout.hosts:
            config = debug_hook_config_for(request, layout.host_dir(host))
            if config and config["LocalPath"] not in dirs:
                dirs.append(config["LocalPath"])
        files = _merged(dirs, "/opt/ml/output/tensors", layout.job_dir)
        if files:
            destination = _join_uri(target, request["TrainingJobName"], "debug-output")
            self._publish_files(files, destination, request)

    # -- publishing -------------------------------------------------------------
    def _upload_args(self, request: Mapping[str, Any]) -> dict[str, Any]:
        kms = (request.get("OutputDataConfig") or {}).get("KmsKeyId")
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms} if kms else {}

    def _upload(
        self,
        files: Sequence[tuple[str, str]],
        request: Mapping[str, Any],
        base: str | None = None,
    ) -> None:
        """Upload each (local file, ``s3://`` URI), in parallel; the first failure is raised.

        Files are opened without following a link swapped in after the scan
        (:func:`open_regular`; with ``base``, no directory below it may be a link
        either); one that is no longer a regular file is skipped with a warning.
        Outputs are saved from ``atexit`` hooks too: the runner of
        :mod:`launchbay.transfer` works there.
        """
        by_bucket: dict[str, list[tuple[str, str, int]]] = {}
        for path, uri in files:
            bucket, key = parse_s3_uri(uri, argument="output_path")
            try:
                size = os.stat(path).st_size
            except OSError:
                size = 0  # open_regular refuses it below, with a warning
            by_bucket.setdefault(bucket, []).append((path, key, size))
        for bucket, batch in by_bucket.items():
            transfer.upload_files(
                self.s3,
                bucket,
                batch,
                limits=transfer.Limits(workers=self.max_workers),
                extra_args=self._upload_args(request),
                progress=False,
                open_file=functools.partial(open_regular, base=base),
                summarize=False,
            )

    def _publish_files(
        self, files: Sequence[TreeEntry], base_uri: str, request: Mapping[str, Any]
    ) -> None:
        """Copy/upload scanned entries under ``base_uri``, in parallel.

        ``file://``: files are copied, links (all inside their tree) made again as
        links. ``s3://`` has no links: a link to a file is uploaded as a copy of
        that file (read inside the tree); a link to a directory is skipped with a
        warning, so a loop such as ``latest -> .`` uploads nothing twice.
        """
        if is_file_uri(base_uri):
            root = file_uri_path(base_uri)
            jobs: list[Callable[[], object]] = []
            for entry in files:
                destination = _safe_join(root, entry.rel)
                if entry.kind == "link":
                    jobs.append(functools.partial(_link_atomic, entry.link, destination))
                else:
                    jobs.append(
                        functools.partial(_copy_atomic, entry.path, destination, entry.base)
                    )
            transfer.run_parallel(jobs, self.max_workers)
            return
        uploads: dict[str, list[tuple[str, str]]] = {}
        for entry in files:
            source = entry.path
            if entry.kind == "link":
                if entry.target_kind != "file":
                    logger.warning(
                        "Not uploading %s to %s: a link to %s %r, and S3 has no links",
                        entry.rel,
                        base_uri,
                        "directory" if entry.target_kind == "dir" else "missing file",
                        entry.link,
                    )
                    continue
                source = entry.target_path
            uploads.setdefault(entry.base, []).append((source, _join_uri(base_uri, entry.rel)))
        for base, batch in uploads.items():
            self._upload(batch, request, base or None)

    def _publish_archive(
        self,
        files: Sequence[TreeEntry],
        uri: str,
        layout: JobLayout,
        request: Mapping[str, Any],
    ) -> None:
        if is_file_uri(uri):
            destination = file_uri_path(uri)
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                prefix=".tmp-", suffix=".tar.gz", dir=os.path.dirname(destination)
            )
            os.close(fd)
            try:
                _write_tar(files, tmp)
                os.chmod(tmp, 0o644)
                os.replace(tmp, destination)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        else:
            os.makedirs(layout.artifacts_dir, exist_ok=True)
            local = os.path.join(layout.artifacts_dir, posixpath.basename(uri))
            _write_tar(files, local)
            self._upload([(local, uri)], request)

    def _publish_bytes(
        self, data: bytes, uri: str, layout: JobLayout, request: Mapping[str, Any]
    ) -> None:
        os.makedirs(layout.artifacts_dir, exist_ok=True)
        local = os.path.join(layout.artifacts_dir, posixpath.basename(uri))
        with open(local, "wb") as f:
            f.write(data)
        if is_file_uri(uri):
            _copy_atomic(local, file_uri_path(uri))
        else:
            self._upload([(local, uri)], request)


def _uncompressed(request: Mapping[str, Any]) -> bool:
    return (request.get("OutputDataConfig") or {}).get("CompressionType") == "NONE"


#: How a container sees the default checkpoint dir (an absolute link through it stays inside).
_CONTAINER_CHECKPOINTS = "/opt/ml/checkpoints"


def _scan(
    directory: str, aliases: Sequence[str], what: str, job_dir: str | None = None
) -> list[TreeEntry]:
    """Files and inside links of ``directory``; what is left out is logged as a warning.

    Outputs never follow a link out of the directory being packed: such a link
    (and a link loop, a FIFO, a socket or a device) is skipped, named in a warning.
    Nor is the directory itself, or any directory above it up to the job's
    directory (``job_dir``, when ``directory`` is inside it; else its parent),
    ever a link that is followed: a script or container that replaced
    ``/opt/ml/model`` or ``output/data`` by a link gets nothing packed from there.
    """
    base = job_dir if job_dir and _is_below(directory, job_dir) else None
    scan = scan_tree(directory, aliases, base)
    for rel, why in scan.skipped:
        logger.warning("%s %s: %s", what, os.path.join(directory, rel), why)
    return scan.entries


def _is_below(path: str, directory: str) -> bool:
    path, directory = os.path.abspath(path), os.path.abspath(directory)
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def _merged(dirs: Sequence[str], container_path: str, job_dir: str) -> list[TreeEntry]:
    """Entries of all ``dirs`` by relative path; the first dir wins on a clash.

    ``container_path`` is how a container saw each dir: an absolute link through
    it (``/opt/ml/model/best.pt``) stays inside. Nothing is read through a link
    below ``job_dir`` (see :func:`_scan`).
    """
    chosen: dict[str, TreeEntry] = {}
    for directory in dirs:
        for entry in _scan(directory, [container_path], "Not packing", job_dir):
            chosen.setdefault(entry.rel, entry)
    return [chosen[rel] for rel in sorted(chosen)]


def _write_tar(files: Sequence[TreeEntry], path: str) -> None:
    """A gzipped tar of ``files``: regular files with their data, inside links as links."""
    with tarfile.open(path, "w:gz", compresslevel=6) as tar:
        for entry in files:
            if entry.kind == "link":
                info = tarfile.TarInfo(entry.rel)
                info.type = tarfile.SYMTYPE
                info.linkname = entry.link
                info.mode = 0o777
                with contextlib.suppress(OSError):
                    info.mtime = int(os.lstat(entry.path).st_mtime)
                tar.addfile(info)
                continue
            fd = open_regular(entry.path, entry.base or None)
            if fd is None:
                logger.warning(
                    "Not packing %s: no longer a regular file reached without a link", entry.path
                )
                continue
            with os.fdopen(fd, "rb") as f:
                info = tar.gettarinfo(arcname=entry.rel, fileobj=f)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                tar.addfile(info, f)


def _fingerprint(path: str) -> list[Any] | None:
    """What tells a restored checkpoint entry from a changed one: size and mtime, or the link."""
    try:
        if os.path.islink(path):
            return ["->", os.readlink(path)]
        stat = os.stat(path)
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def _confined_destination(root: str, rel: str) -> str | None:
    """``root/rel`` if no existing directory on the way is a link (else warn, ``None``).

    A checkpoint dir may already hold links (a custom ``LocalPath`` kept between
    jobs); writing a restored file through one would land outside it.
    """
    target = _safe_join(root, rel)
    if os.path.islink(root):
        logger.warning(
            "Not restoring checkpoint %s: %s itself is a symbolic link, and writing through it "
            "could leave it",
            rel,
            root,
        )
        return None
    parts = rel.split("/")[:-1]
    current = root
    for part in parts:
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        if os.path.islink(current):
            logger.warning(
                "Not restoring checkpoint %s: %s is a symbolic link, and writing through it "
                "could leave %s",
                rel,
                current,
                root,
            )
            return None
    return target


def _link_atomic(link: str, destination: str) -> None:
    """Make ``destination`` a symbolic link to ``link`` (replacing what is there)."""
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    tmp = os.path.join(
        os.path.dirname(destination), f".tmp-link-{os.getpid()}-{threading.get_ident()}"
    )
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(link, tmp)
    try:
        os.replace(tmp, destination)
    except IsADirectoryError:
        os.unlink(tmp)
        raise


def _copy_atomic(source: str, destination: str, base: str = "") -> bool:
    """Copy the regular file ``source`` (never through a link) to ``destination`` atomically.

    With ``base``, no directory between it and ``source`` may be a link either.
    Returns ``False`` (with a warning) when ``source`` is no longer a regular file.
    """
    fd_in = open_regular(source, base or None)
    if fd_in is None:
        logger.warning("Not copying %s: no longer a regular file", source)
        return False
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(destination))
    try:
        with os.fdopen(fd_in, "rb") as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out)
            stat = os.fstat(src.fileno())
        os.chmod(tmp, stat.st_mode & 0o7777)
        os.utime(tmp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(tmp, destination)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return True


def _remove(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
