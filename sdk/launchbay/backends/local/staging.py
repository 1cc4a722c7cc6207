"""Staging of a local job's input channels, shared by the local backends.

A local backend interprets the same CreateTrainingJob request SageMaker gets.
This module refuses what cannot run here (:func:`check_request`) and links the
input channels into each host's tree; :class:`LocalStager` also hands the
checkpoints and outputs to :mod:`launchbay.backends.local.outputs`. The job
directory is :mod:`launchbay.backends.local.layout`'s. It never starts a process.

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

S3 is reached through :class:`launchbay.Session`, created on first use: a job
whose data is all ``file://`` needs neither boto3 credentials nor a network.
Every S3 listing, download and upload, and the parallel runner, are
:mod:`launchbay.transfer`'s, the engine ``Session`` uses too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import posixpath
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from launchbay import transfer
from launchbay._home import local_home
from launchbay.backends.local.layout import (
    JobLayout,
    file_uri_path,
    list_files,
    relative_key,
    remove_path,
    safe_join,
    write_json_atomic,
)
from launchbay.backends.local.outputs import Outputs
from launchbay.backends.plan import JobFields
from launchbay.errors import ConfigurationError, InputError, TransferError
from launchbay.s3uri import is_file_uri, is_s3_uri, parse_s3_uri
from launchbay.session import Session
from launchbay.transfer import S3Object

__all__ = ["check_request", "S3Object", "S3Cache", "LocalStager"]

logger = logging.getLogger("launchbay.backends.local")


def check_request(source: JobFields | Mapping[str, Any]) -> None:
    """Refuse what cannot run on this machine, before anything starts.

    ``source`` is the job's plan (a bare request is derived the same way,
    :meth:`JobFields.of <launchbay.backends.plan.JobFields.of>`).

    Raises:
        ConfigurationError: a FileSystemInput channel, Pipe input mode, or an S3
            data type other than ``S3Prefix``.
        InputError: a ``file://`` channel, output path or checkpoint URI that is
            neither ``file://`` nor ``s3://``, or a ``file://`` channel whose path
            does not exist.
    """
    plan = JobFields.of(source)
    for channel in plan.channels:
        name = channel.name
        if channel.file_system is not None:
            fs = channel.file_system
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
        mode = channel.input_mode
        if mode == "Pipe":
            raise ConfigurationError(
                f"Channel {name!r} uses input_mode='Pipe', which local runs do not support "
                "(SageMaker streams Pipe channels through named pipes it manages). Accepted "
                "locally: 'File' or 'FastFile' (both give the script files).",
                argument="input_mode",
                value=mode,
            )
        data_type = channel.data_type
        if data_type != "S3Prefix":
            raise ConfigurationError(
                f"Channel {name!r} has S3DataType={data_type!r}, which local runs do not "
                "support. Accepted locally: 'S3Prefix'.",
                argument=f"inputs[{name!r}]",
                value=data_type,
            )
        uri = channel.uri
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
    output = plan.output_path
    if not (is_file_uri(output) or is_s3_uri(output)):
        raise InputError.invalid("output_path", output, "an s3:// or file:// URI")
    checkpoint = plan.checkpoint.uri if plan.checkpoint is not None else None
    if checkpoint and not (is_file_uri(checkpoint) or is_s3_uri(checkpoint)):
        raise InputError.invalid("checkpoint_s3_uri", checkpoint, "an s3:// or file:// URI")


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
                write_json_atomic(self.index_file, index)
        else:
            logger.debug("All %d S3 object(s) already cached in %s", len(objects), self.root)
        return result


def _stamp(stat: os.stat_result) -> list[int]:
    """What tells a cached file from one changed in place: inode, size and mtime."""
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


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


def _link_files(channel_dir: str, files: Sequence[tuple[str, str]], own_files: bool) -> None:
    """Place each ``(relative path, file)`` in ``channel_dir``: a symbolic link to the file,
    or with ``own_files`` a hard link (a copy where the file is on another file system)."""
    os.makedirs(channel_dir, exist_ok=True)
    copies = 0
    for rel, target in files:
        link = safe_join(channel_dir, rel)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not own_files:
            os.symlink(target, link)
            continue
        try:
            os.link(target, link)
        except OSError:  # another file system (EXDEV), or hard links not allowed here
            shutil.copy2(target, link)
            copies += 1
    if copies:
        logger.info(
            "Copied %d file(s) into %s: they live on another file system than the job",
            copies,
            channel_dir,
        )


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
        #: Checkpoints and outputs (:mod:`launchbay.backends.local.outputs`), on this S3 session.
        self.outputs = Outputs(lambda: self.s3, max_workers)

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
    def stage_channels(
        self, source: JobFields | Mapping[str, Any], layout: JobLayout, *, own_files: bool = False
    ) -> None:
        """Link every channel of the plan (``source``; a bare request is derived the
        same way) into each host's ``input/data/<channel>``.

        The files of an S3 channel, and of a single-file or sharded ``file://``
        channel, are symbolic links to the S3 cache or the user's files. With
        ``own_files`` (containers) they are hard links instead (copies across file
        systems), so the channel directory holds exactly the channel's files and
        can be mounted alone: mounting the directories symbolic links point into
        would hand a container the whole cache (other jobs' objects) or the user's
        whole directory (``~/.ssh`` beside ``train.csv``). An unsharded ``file://``
        directory is linked as it is; it is the channel.
        """
        hosts = list(layout.hosts)
        for channel in JobFields.of(source).channels:
            name, uri, sharded = channel.name, channel.uri, channel.sharded
            if is_file_uri(uri):
                self._stage_file_channel(name, file_uri_path(uri), sharded, layout, own_files)
            else:
                self._stage_s3_channel(name, uri, sharded, layout, own_files)
            logger.debug("Staged channel %s from %s for %d host(s)", name, uri, len(hosts))

    def _stage_file_channel(
        self, name: str, path: str, sharded: bool, layout: JobLayout, own_files: bool
    ) -> None:
        hosts = list(layout.hosts)
        if os.path.isdir(path):
            files = _walk(path) if sharded and len(hosts) > 1 else None
        else:
            files = [(os.path.basename(path), path)]
        for index, host in enumerate(hosts):
            channel_dir = os.path.join(layout.host_dir(host), "input", "data", name)
            remove_path(channel_dir)
            os.makedirs(os.path.dirname(channel_dir), exist_ok=True)
            if files is None:
                os.symlink(path, channel_dir, target_is_directory=True)
            else:
                _link_files(channel_dir, _shard(files, index, len(hosts), sharded), own_files)

    def _stage_s3_channel(
        self, name: str, uri: str, sharded: bool, layout: JobLayout, own_files: bool
    ) -> None:
        bucket, prefix = parse_s3_uri(uri, argument=f"inputs[{name!r}]")
        client = self.s3
        objects = list_files(client, bucket, prefix)
        if not objects:
            raise TransferError(
                f"No S3 objects found under S3 URL {uri!r} given in input data source of "
                f"channel {name!r}. Please ensure that the bucket exists and that objects exist "
                "under that prefix."
            )
        keys = [(relative_key(o.key, prefix), o) for o in objects]
        _check_placements(name, [(rel, o.uri) for rel, o in keys])
        cached = self.cache.fetch(client, objects)
        hosts = list(layout.hosts)
        placed = [(rel, cached[o.uri]) for rel, o in keys]
        for index, host in enumerate(hosts):
            channel_dir = os.path.join(layout.host_dir(host), "input", "data", name)
            remove_path(channel_dir)
            _link_files(channel_dir, _shard(placed, index, len(hosts), sharded), own_files)

    # -- checkpoints and outputs (launchbay.backends.local.outputs) -------------
    checkpoint_dirs = staticmethod(Outputs.checkpoint_dirs)
    output_prefix = staticmethod(Outputs.output_prefix)
    model_artifacts_uri = staticmethod(Outputs.model_artifacts_uri)

    def restore_checkpoints(self, plan: JobFields | Mapping[str, Any], layout: JobLayout) -> int:
        """See :meth:`Outputs.restore_checkpoints`."""
        return self.outputs.restore_checkpoints(plan, layout)

    def save_checkpoints(self, plan: JobFields | Mapping[str, Any], layout: JobLayout) -> int:
        """See :meth:`Outputs.save_checkpoints`."""
        return self.outputs.save_checkpoints(plan, layout)

    def collect_outputs(
        self,
        plan: JobFields | Mapping[str, Any],
        layout: JobLayout,
        failure_reason: str | None = None,
    ) -> str:
        """See :meth:`Outputs.collect_outputs`."""
        return self.outputs.collect_outputs(plan, layout, failure_reason)
