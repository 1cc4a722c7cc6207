"""A local job's checkpoints and outputs, where SageMaker puts them.

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

TensorBoard files (``TensorBoardOutputConfig``): every host's TensorBoard dir is
copied to ``<S3OutputPath>/<job>/tensorboard-output`` while the job runs
(:mod:`launchbay.backends.local.tensorboard`) and once more when it ends, in any state.

Every S3 listing and upload, and the parallel runner, are :mod:`launchbay.transfer`'s.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from launchbay import transfer
from launchbay.backends.local import tensorboard
from launchbay.backends.local.layout import (
    JobLayout,
    file_uri_path,
    join_uri,
    list_files,
    relative_key,
    safe_join,
    write_json_atomic,
)
from launchbay.backends.plan import JobFields
from launchbay.runtime.contract import rewrite_container_path
from launchbay.runtime.for_client import (
    TreeEntry,
    open_regular,
    scan_tree,
)
from launchbay.s3uri import is_file_uri, is_s3_uri, parse_s3_uri

__all__ = ["Outputs", "add_entry"]

logger = logging.getLogger("launchbay.backends.local")


class Outputs:
    """Restores checkpoints before the hosts start; saves them, and publishes the outputs, at the end.

    Args:
        s3: Returns the S3 client (called on first S3 use only).
        max_workers: Parallel S3 transfers.
    """

    def __init__(self, s3: Callable[[], Any], max_workers: int = 16) -> None:
        self._s3 = s3
        self.max_workers = max_workers
        self._tensorboard_lock = threading.Lock()
        self._tensorboard_warned: set[tuple[str, str]] = set()

    @property
    def s3(self) -> Any:
        """The S3 client."""
        return self._s3()

    # -- checkpoints ------------------------------------------------------------
    @staticmethod
    def checkpoint_dirs(source: JobFields | Mapping[str, Any], layout: JobLayout) -> list[str]:
        """Each host's checkpoint dir (a shared custom ``LocalPath`` counted once).

        ``source`` is the job's plan as the hosts' trees look here
        (``LocalJob.host_plan``); a bare request is derived the same way.
        """
        checkpoint = JobFields.of(source).checkpoint
        dirs: list[str] = []
        if checkpoint is None:
            return dirs
        for host in layout.hosts:
            directory = rewrite_container_path(checkpoint.local_path, layout.host_dir(host))
            if directory not in dirs:
                dirs.append(directory)
        return dirs

    def restore_checkpoints(self, source: JobFields | Mapping[str, Any], layout: JobLayout) -> int:
        """Copy what ``CheckpointConfig.S3Uri`` holds into every host's checkpoint dir.

        Returns the number of files restored (per host).
        """
        fields = JobFields.of(source)
        uri = fields.checkpoint.uri if fields.checkpoint is not None else None
        dirs = self.checkpoint_dirs(fields, layout)
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
            for obj in list_files(self.s3, bucket, prefix):
                rel = relative_key(obj.key, prefix)
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
        write_json_atomic(layout.checkpoint_manifest, manifest)
        if entries:
            logger.info("Restored %d checkpoint file(s) from %s", restored_count, uri)
        return restored_count

    def save_checkpoints(self, source: JobFields | Mapping[str, Any], layout: JobLayout) -> int:
        """Save new or changed checkpoint files of every host to ``CheckpointConfig.S3Uri``.

        Files restored at the start and left untouched are not written again. On a
        name clash between hosts the first host's file wins. Returns the number of
        files saved.
        """
        plan = JobFields.of(source)
        uri = plan.checkpoint.uri if plan.checkpoint is not None else None
        dirs = self.checkpoint_dirs(plan, layout)
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
        self._publish_files([chosen[rel] for rel in sorted(chosen)], uri, plan)
        logger.info("Saved %d checkpoint file(s) to %s", len(chosen), uri)
        return len(chosen)

    # -- outputs ----------------------------------------------------------------
    @staticmethod
    def output_prefix(source: JobFields | Mapping[str, Any]) -> str:
        """``<S3OutputPath>/<job>/output``."""
        plan = JobFields.of(source)
        return join_uri(plan.output_path, plan.job_name, "output")

    @classmethod
    def model_artifacts_uri(cls, source: JobFields | Mapping[str, Any]) -> str:
        """Where the model goes: ``.../output/model.tar.gz`` (``.../output/model/`` uncompressed)."""
        plan = JobFields.of(source)
        if not plan.compress_outputs:
            return join_uri(cls.output_prefix(plan), "model") + "/"
        return join_uri(cls.output_prefix(plan), "model.tar.gz")

    def collect_outputs(
        self,
        source: JobFields | Mapping[str, Any],
        layout: JobLayout,
        failure_reason: str | None = None,
    ) -> str:
        """Write the model, the output data and the failure reason where SageMaker puts them.

        ``source`` is the job's plan as the hosts' trees look here
        (``LocalJob.host_plan``); a bare request is derived the same way.
        Returns the model artifacts URI.
        """
        plan = JobFields.of(source)
        prefix = self.output_prefix(plan)
        hosts = list(layout.hosts)
        model_dirs = [os.path.join(layout.host_dir(h), "model") for h in hosts]
        data_dirs = [os.path.join(layout.host_dir(h), "output", "data") for h in hosts]
        model = _merged(model_dirs, "/opt/ml/model", layout.job_dir)
        data = _merged(data_dirs, "/opt/ml/output/data", layout.job_dir)
        if not plan.compress_outputs:
            self._publish_files(model, join_uri(prefix, "model"), plan)
            self._publish_files(data, join_uri(prefix, "data"), plan)
        else:
            for name, entries in (("model.tar.gz", model), ("output.tar.gz", data)):
                self._publish_archive(entries, join_uri(prefix, name), layout, plan)
        if failure_reason:
            self._publish_bytes(failure_reason.encode(), join_uri(prefix, "failure"), layout, plan)
        self._publish_debug_output(plan, layout)
        self._publish_rule_outputs(plan, layout)
        try:
            self.sync_tensorboard(plan, layout)
        except Exception as exc:  # TensorBoard's copy is a view of the run: report it only
            logger.error(
                "Copying the TensorBoard files of job %s to %s failed: %s",
                plan.job_name,
                tensorboard.destination(plan),
                exc,
            )
        return self.model_artifacts_uri(plan)

    def sync_tensorboard(self, source: JobFields | Mapping[str, Any], layout: JobLayout) -> int:
        """Copy every host's new or changed TensorBoard files to ``<S3OutputPath>/<job>/tensorboard-output``.

        Called while the job runs (:class:`~launchbay.backends.local.tensorboard.TensorBoardSync`)
        and when it ends. Returns the number of files copied; nothing without a
        ``TensorBoardOutputConfig``.
        """
        plan = JobFields.of(source)
        target = tensorboard.destination(plan)
        if target is None:
            return 0
        with self._tensorboard_lock:
            entries, fingerprints = tensorboard.changed_entries(
                plan, layout, self._tensorboard_warned
            )
            if not entries:
                return 0
            self._publish_files(entries, target, plan)
            tensorboard.record_copied(layout, fingerprints)
        logger.debug("Copied %d TensorBoard file(s) to %s", len(entries), target)
        return len(entries)

    def _publish_debug_output(self, plan: JobFields, layout: JobLayout) -> None:
        """Tensors the debugger hook wrote go to ``<S3OutputPath>/<job>/debug-output``."""
        hook = plan.debug_hook
        target = hook.uri if hook is not None else None
        if hook is None or not target or not (is_file_uri(target) or is_s3_uri(target)):
            return
        dirs = []
        for host in layout.hosts:
            directory = rewrite_container_path(hook.local_path, layout.host_dir(host))
            if directory not in dirs:
                dirs.append(directory)
        files = _merged(dirs, "/opt/ml/output/tensors", layout.job_dir)
        if files:
            destination = join_uri(target, plan.job_name, "debug-output")
            self._publish_files(files, destination, plan)

    def _publish_rule_outputs(self, plan: JobFields, layout: JobLayout) -> None:
        """Local Debugger rules' outputs and the profiler's system metrics, where SageMaker
        puts them: ``<output>/<job>/rule-output`` and ``<profiler output>/<job>/profiler-output``."""
        profiler = (plan.profiler or {}).get("S3OutputPath") or plan.output_path
        for name, target in (("rule-output", plan.output_path), ("profiler-output", profiler)):
            folder = os.path.join(layout.job_dir, name)
            if os.path.isdir(folder) and target and (is_file_uri(target) or is_s3_uri(target)):
                files = _merged([folder], "/opt/ml/" + name, layout.job_dir)
                if files:
                    self._publish_files(files, join_uri(target, plan.job_name, name), plan)

    # -- publishing -------------------------------------------------------------
    def _upload_args(self, plan: JobFields) -> dict[str, Any]:
        kms = plan.output_kms_key
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms} if kms else {}

    def _upload(
        self,
        files: Sequence[tuple[str, str]],
        plan: JobFields,
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
                extra_args=self._upload_args(plan),
                progress=False,
                open_file=functools.partial(open_regular, base=base),
                summarize=False,
            )

    def _publish_files(self, files: Sequence[TreeEntry], base_uri: str, plan: JobFields) -> None:
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
                destination = safe_join(root, entry.rel)
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
            uploads.setdefault(entry.base, []).append((source, join_uri(base_uri, entry.rel)))
        for base, batch in uploads.items():
            self._upload(batch, plan, base or None)

    def _publish_archive(
        self,
        files: Sequence[TreeEntry],
        uri: str,
        layout: JobLayout,
        plan: JobFields,
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
            self._upload([(local, uri)], plan)

    def _publish_bytes(self, data: bytes, uri: str, layout: JobLayout, plan: JobFields) -> None:
        os.makedirs(layout.artifacts_dir, exist_ok=True)
        local = os.path.join(layout.artifacts_dir, posixpath.basename(uri))
        with open(local, "wb") as f:
            f.write(data)
        if is_file_uri(uri):
            _copy_atomic(local, file_uri_path(uri))
        else:
            self._upload([(local, uri)], plan)


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
            if not add_entry(tar, entry):
                logger.warning(
                    "Not packing %s: no longer a regular file reached without a link", entry.path
                )


def add_entry(tar: tarfile.TarFile, entry: TreeEntry) -> bool:
    """Add one scanned entry to ``tar`` as ``entry.rel``: a file's data, or an inside link as a link.

    The file is opened without following a link swapped in after the scan
    (:func:`open_regular`); returns ``False`` when it is no longer a regular file.
    The Ray agent packs a host's files on its node with this too.
    """
    if entry.kind == "link":
        info = tarfile.TarInfo(entry.rel)
        info.type = tarfile.SYMTYPE
        info.linkname = entry.link
        info.mode = 0o777
        with contextlib.suppress(OSError):
            info.mtime = int(os.lstat(entry.path).st_mtime)
        tar.addfile(info)
        return True
    fd = open_regular(entry.path, entry.base or None)
    if fd is None:
        return False
    with os.fdopen(fd, "rb") as f:
        info = tar.gettarinfo(arcname=entry.rel, fileobj=f)
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        tar.addfile(info, f)
    return True


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
    target = safe_join(root, rel)
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
