"""S3 transfers: the one engine behind :class:`~launchbay.session.Session` and the local backends.

Everything that moves bytes between this machine and S3 goes through here:

* **listing** (``ListObjectsV2``, every page): a prefix matches as S3 matches
  it, character by character (``data`` also lists ``database/x``);
* **uploads** of files and directories, and **downloads** of objects and of
  prefixes;
* the **parallel runner** both use, and the **multipart** threshold and part size;
* the translation of botocore and boto3 errors into
  :class:`~launchbay.errors.TransferError`, whose message names the file, the
  S3 URI and the original error (kept as ``__cause__``);
* the **progress** bar of a batch (``launchbay.display.Progress``: bytes and files).

Where things go is the callers' business: :class:`~launchbay.session.Session`
resolves buckets and key prefixes (SDK v2's arguments); the local backends
choose the S3 cache, channel and checkpoint directories.

The runner uses plain threads rather than ``concurrent.futures``: executors
refuse work once the interpreter is shutting down, and a local job stopped from
an ``atexit`` hook must still save its outputs (if no thread can be started at
all, the calling thread runs the jobs one after the other). Objects smaller than
:data:`MULTIPART_THRESHOLD` go with one request each, on up to ``workers``
threads; larger ones go through boto3's managed transfer (multipart, several
threads per object), one at a time on one more thread. The calling thread only
waits, in an interruptible wait, so Ctrl-C (or SIGTERM turned into it) reaches
it at once, never stuck behind a transfer. The first failure or Ctrl-C stops a
batch: no new transfer starts, and transfers in flight stop at their next
chunk (downloads every 64 KiB; uploads at the next block the socket takes, as
their bodies and boto3's progress callbacks look at the batch's stop event,
and a request aborted so is never retried). After a failure the runner waits
for the threads and re-raises it; after Ctrl-C it waits at most
:data:`STOP_GRACE` seconds, then re-raises the ``KeyboardInterrupt`` (which
wins over transfer errors) while the threads finish stopping. Transfers run
off the main thread (a local job's, on its supervisor thread) stop the same way
when an event given to :func:`cancelled_by` is set. A download is written to a
temporary ``.launchbay-*.part`` file beside its destination and renamed into
place, so a destination holds the whole object or nothing (a process that exits
right after Ctrl-C may leave such a temporary file); an interrupted multipart
upload is aborted by boto3, and S3 shows a PUT whole or not at all.

boto3 is imported only inside functions, so importing this module (and
``launchbay``) stays fast.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import os
import posixpath
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from launchbay._runner import (
    STOP_GRACE,
    Cancelled,
    StopAwareBody,
    cancelled_by,
    run_parallel,
    watch_cancellation,
)
from launchbay.display import Progress, format_bytes, progress_enabled
from launchbay.errors import ConfigurationError, InputError, MissingDependencyError, TransferError
from launchbay.s3uri import s3_join

__all__ = [
    "DEFAULT_MAX_WORKERS",
    "MAX_WORKERS",
    "MULTIPART_THRESHOLD",
    "MULTIPART_CHUNKSIZE",
    "LARGE_FILE_CONCURRENCY",
    "SMALL_BODY_LIMIT",
    "POOL_CONNECTIONS",
    "NOT_FOUND_CODES",
    "Limits",
    "S3Object",
    "import_boto3",
    "error_code",
    "transfer_exceptions",
    "check_extra_args",
    "resolve_workers",
    "tune_client",
    "run_parallel",
    "cancelled_by",
    "STOP_GRACE",
    "list_objects",
    "object_exists",
    "ensure_bucket",
    "upload_bytes",
    "read_object",
    "upload_files",
    "walk_files",
    "special_file_kind",
    "open_for_upload",
    "download_objects",
    "download_prefix",
]

logger = logging.getLogger("launchbay.transfer")

#: Worker threads used for transfers when ``max_workers`` is not given: 8 per CPU,
#: at most 32. A PUT costs the client about 1.5 ms of CPU, so more threads than
#: that only add lock contention on small machines; on larger ones 32 in flight
#: hide S3's per-request latency.
DEFAULT_MAX_WORKERS = min(32, 8 * (os.cpu_count() or 1))
#: Upper bound for ``max_workers`` (the S3 client's connection pool is sized for it).
MAX_WORKERS = 64
#: Objects at least this large use multipart transfers.
MULTIPART_THRESHOLD = 8 * 1024 * 1024
#: Part size for multipart transfers (8 MiB measured best against moto; larger
#: parts cost the server more without helping throughput).
MULTIPART_CHUNKSIZE = 8 * 1024 * 1024
#: Threads working on the parts of one large object (of all large objects being
#: downloaded at once).
LARGE_FILE_CONCURRENCY = 10
#: Large objects a download works on at once.
LARGE_OBJECTS_AT_ONCE = 4
#: Files up to this size are read into memory and sent as bytes (a little less
#: CPU per request than streaming from the open file).
SMALL_BODY_LIMIT = 1024 * 1024
#: Connections the S3 client keeps: every small-object worker plus one large object's parts.
POOL_CONNECTIONS = MAX_WORKERS + LARGE_FILE_CONCURRENCY
#: Error codes S3 answers for a missing key or bucket.
NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchBucket"})

#: Bytes a download reads between two looks at its batch's stop event: small
#: enough that a stopped batch ends within a second even through a slow link.
_READ_CHUNK = 64 * 1024
#: Failed files a partial-upload error names.
_FAILURES_SHOWN = 5


@dataclass(frozen=True)
class Limits:
    """How a batch runs: parallel small transfers, and when and how objects go multipart."""

    workers: int = DEFAULT_MAX_WORKERS
    multipart_threshold: int = MULTIPART_THRESHOLD
    multipart_chunksize: int = MULTIPART_CHUNKSIZE
    large_file_concurrency: int = LARGE_FILE_CONCURRENCY

    def is_large(self, size: int) -> bool:
        """True when an object of ``size`` bytes goes through the managed (multipart) transfer."""
        return size >= self.multipart_threshold

    def transfer_config(self, *, use_threads: bool = True) -> Any:
        """boto3's ``TransferConfig`` for one large object."""
        from boto3.s3.transfer import TransferConfig  # boto3 is heavy: imported on first use

        return TransferConfig(
            multipart_threshold=self.multipart_threshold,
            multipart_chunksize=self.multipart_chunksize,
            max_concurrency=self.large_file_concurrency,
            use_threads=use_threads,
            # boto3's threads look at a cancelled transfer between reads of this
            # size, and the interpreter waits for them at exit (no measurable cost)
            io_chunksize=_READ_CHUNK,
        )


@dataclass(frozen=True)
class S3Object:
    """One listed object: where it is, which version (ETag) it has and its size."""

    bucket: str
    key: str
    etag: str
    size: int

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


# --------------------------------------------------------------------------- boto3 and errors


def import_boto3(feature: str) -> Any:
    """The ``boto3`` module, or a MissingDependencyError naming the ``aws`` extra."""
    try:
        import boto3  # heavy: imported on first AWS use only
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError.for_module("boto3", "aws", feature) from exc
    return boto3


def error_code(exc: BaseException) -> str:
    """The ``Error.Code`` of a botocore ``ClientError`` (``""`` for anything else)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def transfer_exceptions() -> tuple[type[BaseException], ...]:
    """The third-party exceptions a transfer can raise (translated to TransferError)."""
    import boto3.exceptions  # heavy: imported on first transfer only
    import botocore.exceptions

    return (
        botocore.exceptions.BotoCoreError,
        botocore.exceptions.ClientError,
        boto3.exceptions.Boto3Error,
        OSError,
    )


def check_extra_args(extra_args: Mapping[str, Any] | None, *, upload: bool) -> dict[str, Any]:
    """``extra_args`` as a dict, refused unless its keys are boto3's allowed ``ExtraArgs``."""
    if extra_args is None:
        return {}
    from boto3.s3.transfer import S3Transfer  # heavy: imported on first use

    allowed = S3Transfer.ALLOWED_UPLOAD_ARGS if upload else S3Transfer.ALLOWED_DOWNLOAD_ARGS
    if not isinstance(extra_args, Mapping):
        raise InputError.invalid(
            "extra_args", extra_args, f"a dict with keys among {sorted(allowed)}"
        )
    unknown = sorted(set(extra_args) - set(allowed))
    if unknown:
        raise InputError.invalid(
            "extra_args",
            dict(extra_args),
            f"keys among {sorted(allowed)}",
            reason=f"Unknown key(s) {unknown}",
        )
    return dict(extra_args)


def resolve_workers(max_workers: int | None) -> int:
    """``max_workers`` checked (a positive integer), capped at :data:`MAX_WORKERS`."""
    if max_workers is None:
        return DEFAULT_MAX_WORKERS
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise ConfigurationError.invalid(
            "max_workers", max_workers, f"a positive integer (at most {MAX_WORKERS})"
        )
    if max_workers > MAX_WORKERS:
        logger.debug("max_workers=%d capped at %d", max_workers, MAX_WORKERS)
    return min(max_workers, MAX_WORKERS)


def _send_small_bodies_at_once(request: Any, **_: Any) -> None:
    """Drop ``Expect: 100-continue`` from PutObject requests with small bodies.

    botocore asks S3 for a "100 Continue" before sending any file-like body,
    which costs a full round trip per object. For bodies up to
    :data:`SMALL_BODY_LIMIT` the handshake saves nothing worth that (an error
    still comes back as the response), so they are sent at once; larger
    bodies keep it. ``Expect`` is never part of the SigV4 signature.
    """
    if "Expect" not in request.headers:
        return
    from botocore.utils import determine_content_length  # heavy: only once a request is sent

    length = determine_content_length(request.body)
    if length is not None and length <= SMALL_BODY_LIMIT:
        del request.headers["Expect"]


def tune_client(client: Any) -> Any:
    """Make an S3 client send small PUT bodies without the 100-continue round trip."""
    client.meta.events.register("before-sign.s3.PutObject", _send_small_bodies_at_once)
    return client


def _put_args(client: Any, extra: Mapping[str, Any], owner: str | None) -> dict[str, Any]:
    """ExtraArgs narrowed to what PutObject takes, plus the bucket owner check."""
    members = client.meta.service_model.operation_model("PutObject").input_shape.members
    args = {k: v for k, v in extra.items() if k in members}
    if owner:
        args.setdefault("ExpectedBucketOwner", owner)
    return args


def _with_owner(extra: Mapping[str, Any] | None, owner: str | None) -> dict[str, Any]:
    args = dict(extra or {})
    if owner:
        args.setdefault("ExpectedBucketOwner", owner)
    return args


def _managed(call: Callable[[Any], None], limits: Limits) -> None:
    """Run a managed (multipart) transfer; without its threads if the interpreter is exiting.

    boto3's transfer manager runs on a ``concurrent.futures`` pool, which refuses
    work once the interpreter is shutting down (outputs saved from an ``atexit``
    hook): the transfer is then made again in this thread alone.
    """
    try:
        call(limits.transfer_config())
    except RuntimeError as exc:
        if "shutdown" not in str(exc):
            raise
        logger.debug("Interpreter shutting down; transferring without threads (%s)", exc)
        call(limits.transfer_config(use_threads=False))


# --------------------------------------------------------------------------- the runner


# --------------------------------------------------------------------------- small requests


def list_objects(
    client: Any, bucket: str, prefix: str, *, expected_owner: str | None = None
) -> list[S3Object]:
    """Every object under ``s3://bucket/prefix``, in S3's (key) order, directory markers included.

    Raises:
        TransferError: ``Listing s3://bucket/prefix failed: ...``.
    """
    request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
    if expected_owner:
        request["ExpectedBucketOwner"] = expected_owner
    found: list[S3Object] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(**request):
            for item in page.get("Contents", []):
                etag = str(item.get("ETag", "")).strip('"')
                found.append(S3Object(bucket, item["Key"], etag, int(item.get("Size", 0))))
    except transfer_exceptions() as exc:
        raise TransferError(f"Listing s3://{bucket}/{prefix} failed: {exc}") from exc
    return found


def object_exists(client: Any, bucket: str, key: str) -> bool:
    """True if ``s3://bucket/key`` exists (``HeadObject``); False on 404."""
    import botocore.exceptions  # heavy: imported on first use

    try:
        client.head_object(Bucket=bucket, Key=key)
    except botocore.exceptions.ClientError as exc:
        if error_code(exc) in NOT_FOUND_CODES:
            return False
        raise TransferError(f"Could not check s3://{bucket}/{key}: {exc}") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise TransferError(f"Could not check s3://{bucket}/{key}: {exc}") from exc
    return True


def ensure_bucket(client: Any, name: str, region: str, expected_owner: str | None) -> None:
    """Create the bucket ``name`` in ``region`` unless it exists (the session's default bucket).

    Raises:
        TransferError: the bucket cannot be used (another account's, no access) or created.
    """
    import botocore.exceptions  # heavy: imported on first use

    head: dict[str, Any] = {"Bucket": name}
    if expected_owner:
        head["ExpectedBucketOwner"] = expected_owner
    try:
        client.head_bucket(**head)
        return
    except botocore.exceptions.ClientError as exc:
        code = error_code(exc)
        if code not in NOT_FOUND_CODES:
            hint = (
                " It may belong to another AWS account; pass Session(default_bucket=...)."
                if code in ("403", "AccessDenied", "Forbidden")
                else ""
            )
            raise TransferError(
                f"Cannot use the default bucket s3://{name} in {region}: {exc}.{hint}"
            ) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise TransferError(f"Cannot reach the default bucket s3://{name}: {exc}") from exc

    request: dict[str, Any] = {"Bucket": name}
    if region != "us-east-1":
        request["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        client.create_bucket(**request)
    except botocore.exceptions.ClientError as exc:
        code = error_code(exc)
        if code in ("BucketAlreadyOwnedByYou", "OperationAborted"):
            logger.debug("Bucket %s already exists or is being created (%s)", name, code)
            return
        hint = (
            " The name is taken by another AWS account; pass Session(default_bucket=...)."
            if code == "BucketAlreadyExists"
            else ""
        )
        raise TransferError(
            f"Could not create the default bucket s3://{name} in {region}: {exc}.{hint}"
        ) from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise TransferError(f"Could not create the default bucket s3://{name}: {exc}") from exc
    logger.info("Created S3 bucket %s in %s", name, region)


def upload_bytes(
    client: Any,
    data: bytes,
    bucket: str,
    key: str,
    *,
    extra_args: Mapping[str, Any] | None = None,
    expected_owner: str | None = None,
) -> str:
    """Upload ``data`` to ``s3://bucket/key`` with one ``PutObject``; return the URI."""
    args = _put_args(client, extra_args or {}, expected_owner)
    uri = f"s3://{bucket}/{key}"
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, **args)
    except transfer_exceptions() as exc:
        raise TransferError(f"Upload of {len(data)} bytes to {uri} failed: {exc}") from exc
    return uri


def read_object(client: Any, bucket: str, key: str, *, expected_owner: str | None = None) -> bytes:
    """The whole body of ``s3://bucket/key`` (one ``GetObject``), in memory.

    Raises:
        TransferError: ``Reading s3://bucket/key failed: ...`` (a missing key included).
    """
    args: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if expected_owner:
        args["ExpectedBucketOwner"] = expected_owner
    try:
        body = client.get_object(**args)["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()
    except transfer_exceptions() as exc:
        raise TransferError(f"Reading s3://{bucket}/{key} failed: {exc}") from exc


# --------------------------------------------------------------------------- uploads


def special_file_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is (``"a FIFO (named pipe)"`` ...), else None."""
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def open_for_upload(local: str) -> BinaryIO | None:
    """``local`` opened for reading if it is a regular file (links followed), else None.

    The open is non-blocking, so a FIFO (or a device) swapped in after the scan
    never blocks it; what it is, is checked on the descriptor.
    """
    fd = os.open(local, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def walk_files(root: str, prefix: str) -> list[tuple[str, str, int]]:
    """(local path, key, size) for every regular file under ``root``, in a stable order.

    Like SDK v2 this uses ``os.walk`` without following directory symlinks;
    symlinks to files are uploaded as the files they point to. FIFOs, sockets
    and devices (also behind a link) are skipped with a warning naming each:
    reading a FIFO would block the upload forever.
    """
    files: list[tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        rel_parts = [] if rel_dir == os.curdir else rel_dir.split(os.sep)
        for name in sorted(filenames):
            local = os.path.join(dirpath, name)
            try:
                st = os.stat(local)
            except OSError as exc:
                raise InputError.invalid(
                    "path", root, "a directory of readable files", reason=f"{local!r}: {exc}"
                ) from exc
            kind = special_file_kind(st.st_mode)
            if kind is not None:
                logger.warning("Not uploading %s: it is %s, not a regular file", local, kind)
                continue
            files.append((local, s3_join(prefix, *rel_parts, name), st.st_size))
    return files


def upload_files(
    client: Any,
    bucket: str,
    files: Sequence[tuple[str, str, int]],
    *,
    limits: Limits | None = None,
    extra_args: Mapping[str, Any] | None = None,
    expected_owner: str | None = None,
    progress: bool | None = None,
    callback: Callable[[int], object] | None = None,
    open_file: Callable[[str], int | None] | None = None,
    summarize: bool = True,
) -> None:
    """Upload ``files`` (local path, key, size) to ``bucket`` in parallel.

    Args:
        limits: Worker threads and multipart settings.
        extra_args: boto3 ``ExtraArgs`` (checked by the caller).
        expected_owner: Account id sent as ``ExpectedBucketOwner``.
        progress: Show a progress bar; ``None`` shows it in a terminal or a notebook.
        callback: Called with each number of bytes sent, from the worker threads.
        open_file: Opens a local path and returns its file descriptor, or ``None``
            to skip the file with a warning (the local backends open outputs so
            that a link swapped in after their scan is never followed). Without
            it files are opened by path.
        summarize: For more than one file, raise ``Uploaded N of M file(s) ...``
            naming what failed and what was not attempted; otherwise the first
            failure is raised as is.

    Raises:
        TransferError: ``Upload of 'path' to s3://bucket/key failed: ...`` (or the summary).
    """
    limits = limits or Limits()
    put_args = _put_args(client, extra_args or {}, expected_owner)
    managed_args = _with_owner(extra_args, expected_owner) or None
    errors = transfer_exceptions()
    total = sum(size for _, _, size in files)
    logger.info(
        "Uploading %d file(s), %s, to s3://%s/ with %d workers",
        len(files),
        format_bytes(total),
        bucket,
        limits.workers,
    )
    started = time.monotonic()
    bar = Progress(
        "upload",
        total_bytes=total,
        total_files=len(files),
        enabled=progress_enabled(progress),
        callback=callback,
    )
    done: list[str] = []
    failed: list[tuple[str, TransferError]] = []
    lock = threading.Lock()
    stop = threading.Event()
    watch_cancellation(client)

    def on_bytes(amount: int) -> None:  # boto3's callback: a stopped batch aborts its parts
        if stop.is_set():
            raise Cancelled(f"s3://{bucket}/")
        bar.update(amount)

    def opened(local: str, key: str) -> BinaryIO | None:
        if open_file is None:
            body = open_for_upload(local)
        else:
            fd = open_file(local)
            body = None if fd is None else os.fdopen(fd, "rb")
        if body is None:
            logger.warning(
                "Not uploading %s to s3://%s/%s: no longer a regular file", local, bucket, key
            )
        return body

    def send_fileobj(body: BinaryIO, key: str, config: Any) -> None:
        body.seek(0)
        client.upload_fileobj(
            body, bucket, key, ExtraArgs=managed_args, Callback=on_bytes, Config=config
        )

    def send(local: str, key: str, size: int) -> None:
        if limits.is_large(size) and open_file is None:
            # boto3 opens the file by path and reads its parts from several threads;
            # a FIFO or device swapped in since the scan is caught here, without blocking
            checked = opened(local, key)
            if checked is None:
                bar.update(0, 1)
                return
            checked.close()
            _managed(
                lambda config: client.upload_file(
                    local, bucket, key, ExtraArgs=managed_args, Callback=on_bytes, Config=config
                ),
                limits,
            )
            bar.update(0, 1)
            return
        body = opened(local, key)
        if body is None:
            bar.update(0, 1)
            return
        with body:
            if limits.is_large(size):
                _managed(lambda config: send_fileobj(body, key, config), limits)
                bar.update(0, 1)
                return
            data: Any = body.read() if size <= SMALL_BODY_LIMIT else body
            if size > _READ_CHUNK:  # sent a block at a time, stopping with the batch
                raw = io.BytesIO(data) if isinstance(data, bytes) else data
                data = StopAwareBody(raw, stop, f"s3://{bucket}/{key}")
            client.put_object(Bucket=bucket, Key=key, Body=data, **put_args)
        bar.update(size, 1)

    def job(local: str, key: str, size: int) -> None:
        try:
            send(local, key, size)
        except errors as exc:
            error = TransferError(f"Upload of {local!r} to s3://{bucket}/{key} failed: {exc}")
            with lock:
                failed.append((key, error))
            raise error from exc
        with lock:
            done.append(key)

    small: list[Callable[[], None]] = []
    large: list[Callable[[], None]] = []
    for local, key, size in files:
        (large if limits.is_large(size) else small).append(functools.partial(job, local, key, size))
    try:
        with bar:
            run_parallel(small, limits.workers, large=large, stop=stop)
    except TransferError as exc:
        if len(files) <= 1 or not summarize:
            raise
        raise _partial_upload_error(bucket, len(files), done, failed, exc) from exc.__cause__
    logger.info(
        "Uploaded %d file(s) to s3://%s/ in %.2fs", len(files), bucket, time.monotonic() - started
    )


def _partial_upload_error(
    bucket: str,
    total: int,
    done: list[str],
    failed: list[tuple[str, TransferError]],
    first: TransferError,
) -> TransferError:
    """``Uploaded N of M file(s) ...``: what went up, what failed (first few), what was not tried."""
    failed = sorted(failed, key=lambda f: f[0])
    shown = "; ".join(str(exc) for _, exc in failed[:_FAILURES_SHOWN]) or str(first)
    more = f" (and {len(failed) - _FAILURES_SHOWN} more)" if len(failed) > _FAILURES_SHOWN else ""
    skipped = total - len(done) - len(failed)
    not_tried = (
        f" {skipped} file(s) were not attempted: the upload stops at the first failure."
        if skipped > 0
        else ""
    )
    return TransferError(
        f"Uploaded {len(done)} of {total} file(s) to s3://{bucket}/; {len(failed) or 1} "
        f"failed: {shown}{more}.{not_tried} Files already uploaded stay in S3; fix the cause "
        "and upload again (existing keys are overwritten)."
    )


# --------------------------------------------------------------------------- downloads


def download_objects(
    client: Any,
    items: Sequence[tuple[S3Object, str]],
    *,
    limits: Limits | None = None,
    extra_args: Mapping[str, Any] | None = None,
    progress: bool | None = None,
) -> None:
    """Download each (object, destination) in parallel, each atomically (temp file + rename).

    Parent directories are created as needed. On failure or Ctrl-C no
    destination is left half-written and no temporary file is left behind.

    Raises:
        TransferError: ``Download of s3://bucket/key to 'path' failed: ...``.
    """
    limits = limits or Limits()
    errors = transfer_exceptions()
    extra = dict(extra_args or {})
    total = sum(obj.size for obj, _ in items)
    buckets = sorted({obj.bucket for obj, _ in items})
    logger.info(
        "Downloading %d file(s), %s, from %s with %d workers",
        len(items),
        format_bytes(total),
        ", ".join(f"s3://{b}/" for b in buckets),
        limits.workers,
    )
    bar = Progress(
        "download", total_bytes=total, total_files=len(items), enabled=progress_enabled(progress)
    )
    stop = threading.Event()
    watch_cancellation(client)

    def on_bytes(amount: int) -> None:  # boto3's callback: a stopped batch aborts its parts
        if stop.is_set():
            raise Cancelled("download")
        bar.update(amount)

    def fetch(obj: S3Object, tmp: str) -> None:
        if limits.is_large(obj.size):
            _managed(
                lambda config: client.download_file(
                    obj.bucket,
                    obj.key,
                    tmp,
                    ExtraArgs=extra or None,
                    Callback=on_bytes,
                    Config=config,
                ),
                part_limits,
            )
            return
        response = client.get_object(Bucket=obj.bucket, Key=obj.key, **extra)
        body = response["Body"]
        try:
            with open(tmp, "wb") as out:
                for chunk in body.iter_chunks(_READ_CHUNK):
                    if stop.is_set():
                        raise Cancelled(obj.uri)
                    out.write(chunk)
                    bar.update(len(chunk))
        except BaseException:
            body.close()  # the connection is dropped, not reused half-read
            raise

    # The temporary files being written: a batch stopped by a signal stops waiting for its
    # threads after STOP_GRACE, and removes what the threads still reading have not.
    writing: set[str] = set()

    def job(obj: S3Object, destination: str) -> None:
        tmp = made = None
        try:
            parent = os.path.dirname(destination)
            os.makedirs(parent, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".launchbay-", suffix=".part", dir=parent)
            made = tmp
            writing.add(made)
            os.close(fd)
            fetch(obj, tmp)
            os.replace(tmp, destination)
            tmp = None
        except errors as exc:
            raise TransferError(f"Download of {obj.uri} to {destination!r} failed: {exc}") from exc
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            writing.discard(made or "")
        bar.update(0, 1)

    small: list[Callable[[], None]] = []
    large: list[Callable[[], None]] = []
    for obj, destination in items:
        (large if limits.is_large(obj.size) else small).append(
            functools.partial(job, obj, destination)
        )
    # Large objects download side by side, the part threads shared among them: a
    # server that serves one object's parts one after another (moto does) is then
    # busy on several, and S3 loses nothing (measured: bench/scale.py, data).
    large_at_once = max(1, min(LARGE_OBJECTS_AT_ONCE, len(large)))
    part_limits = dataclasses.replace(
        limits, large_file_concurrency=-(-limits.large_file_concurrency // large_at_once)
    )

    together = [lambda: run_parallel(large, large_at_once, stop=stop)] if large else []
    try:
        with bar:
            run_parallel(small, limits.workers, large=together, stop=stop)
    finally:
        for tmp in list(writing):  # threads that did not end within the grace
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _is_under(key: str, key_prefix: str) -> bool:
    """True when ``key`` is ``key_prefix`` itself or lies under ``key_prefix/`` (a path, not a string)."""
    if not key_prefix or key_prefix.endswith("/"):
        return key.startswith(key_prefix)
    return key == key_prefix or key.startswith(key_prefix + "/")


def download_prefix(
    client: Any,
    bucket: str,
    key_prefix: str,
    path: str,
    *,
    limits: Limits | None = None,
    extra_args: Mapping[str, Any] | None = None,
    expected_owner: str | None = None,
    progress: bool | None = None,
) -> list[str]:
    """Download every object under ``s3://bucket/key_prefix`` into ``path`` (SDK v2's layout).

    ``key_prefix`` is taken as a path: the object of that very key and the keys
    under ``key_prefix/`` are downloaded; keys that merely share its string
    prefix (``data2/x`` or ``database/x`` for ``data``) are left alone, with an
    INFO message (SDK v2 failed on them, or flattened them with the prefix's
    siblings). ``""`` or a prefix ending in ``/`` takes every key S3 lists.

    Each object lands at its key relative to ``key_prefix``, except when
    ``key_prefix`` looks like a file name (has an extension): then only the
    object's base name is kept. Zero-byte keys ending in ``/`` become
    directories. Every destination is checked first; a key that would be
    written outside ``path`` stops the download before anything is written.

    Returns:
        The local paths of the downloaded files, in key order (``[]`` if nothing matched).

    Raises:
        TransferError: listing or a download failed, or a key would escape ``path``.
    """
    limits = limits or Limits()
    listed = list_objects(client, bucket, key_prefix, expected_owner=expected_owner)
    objects = [obj for obj in listed if _is_under(obj.key, key_prefix)]
    if len(objects) < len(listed):
        others = [obj.key for obj in listed if not _is_under(obj.key, key_prefix)]
        logger.info(
            "Not downloading %d object(s) of s3://%s/ whose keys only begin with the string "
            "%r (e.g. %s): key_prefix names an object or a folder",
            len(others),
            bucket,
            key_prefix,
            ", ".join(repr(key) for key in others[:3]),
        )
    if not objects:
        logger.info("Nothing to download under s3://%s/%s", bucket, key_prefix)
        return []

    keep_basename_only = bool(posixpath.splitext(key_prefix)[1])
    root_real = os.path.realpath(path)
    directories: list[str] = []
    plan: list[tuple[S3Object, str]] = []
    for obj in objects:
        key = obj.key
        is_dir_marker = key.endswith("/") and obj.size == 0
        if keep_basename_only and not is_dir_marker:
            rel = posixpath.basename(key)
        else:
            rel = posixpath.relpath("/" + key, "/" + key_prefix) if key_prefix else key
            if rel in ("", ".") and not is_dir_marker:
                rel = posixpath.basename(key.rstrip("/"))
        parts = [p for p in rel.split("/") if p]
        destination = os.path.join(path, *parts) if parts else path
        dest_real = os.path.realpath(destination)
        if dest_real != root_real and not dest_real.startswith(root_real + os.sep):
            raise TransferError(
                f"Refusing to download s3://{bucket}/{key}: it would be written to "
                f"{dest_real!r}, outside path={path!r}. Nothing was downloaded."
            )
        if is_dir_marker:
            directories.append(destination)
        else:
            plan.append((obj, destination))

    for parent in sorted({*directories, *(os.path.dirname(dest) for _, dest in plan)}):
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise TransferError(f"Cannot create directory {parent!r}: {exc}") from exc

    download_objects(
        client,
        plan,
        limits=limits,
        extra_args=_with_owner(extra_args, expected_owner),
        progress=progress,
    )
    return [dest for _, dest in plan]
