"""The AWS session: region, account, default bucket and fast S3 transfers.

:class:`Session` stands in for ``sagemaker.Session`` (SDK v2) for what
estimators need. boto3 is imported only inside methods, so ``import launchbay``
never imports it; without boto3 installed, the first AWS call raises
:class:`~launchbay.errors.MissingDependencyError` naming the ``aws`` extra.

Transfers run on a thread pool sharing one thread-safe S3 client (a single
connection pool, standard retry mode). Small files go up with one
``PutObject`` each; files of :data:`MULTIPART_THRESHOLD` bytes or more go
through boto3's managed transfer (multipart, several threads per file). A
bytes-and-files progress bar is drawn on stderr when it is a terminal or in a
Jupyter notebook.

Differences from SDK v2, on purpose:

* keys are joined with single slashes (``key_prefix="data/"`` gives
  ``data/file``, not ``data//file``; ``key_prefix=""`` gives ``file``, not
  ``/file``);
* botocore errors are raised as :class:`~launchbay.errors.TransferError`
  naming the file and the S3 URI, with the original error as ``__cause__``;
* ``download_data`` checks every destination before downloading anything and
  refuses keys that would land outside ``path``;
* small PUTs are sent without ``Expect: 100-continue`` (one round trip less
  per object).
"""

from __future__ import annotations

import logging
import os
import posixpath
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from launchbay.display import Progress, format_bytes, progress_enabled
from launchbay.errors import (
    ConfigurationError,
    InputError,
    MissingDependencyError,
    TransferError,
)
from launchbay.s3uri import is_valid_bucket_name, s3_join

if TYPE_CHECKING:  # pragma: no cover
    import boto3

__all__ = [
    "Session",
    "get_execution_role",
    "LocalExecutionRole",
    "LOCAL_ROLE_ARN",
    "NOTEBOOK_METADATA_FILE",
    "DEFAULT_MAX_WORKERS",
    "MAX_WORKERS",
    "MULTIPART_THRESHOLD",
    "MULTIPART_CHUNKSIZE",
]

logger = logging.getLogger("launchbay.session")

#: Worker threads used for transfers when ``max_workers`` is not given: 8 per CPU,
#: at most 32. A PUT costs the client about 1.5 ms of CPU, so more threads than
#: that only add lock contention on small machines; on larger ones 32 in flight
#: hide S3's per-request latency.
DEFAULT_MAX_WORKERS = min(32, 8 * (os.cpu_count() or 1))
#: Upper bound for ``max_workers`` (the S3 client's connection pool is sized for it).
MAX_WORKERS = 64
#: Files at least this large use multipart transfers.
MULTIPART_THRESHOLD = 8 * 1024 * 1024
#: Part size for multipart transfers (8 MiB measured best against moto; larger
#: parts cost the server more without helping throughput).
MULTIPART_CHUNKSIZE = 8 * 1024 * 1024
#: Threads working on the parts of one large file.
LARGE_FILE_CONCURRENCY = 10

#: Files up to this size are read into memory and sent as bytes (a little less
#: CPU per request than streaming from the open file).
SMALL_BODY_LIMIT = 1024 * 1024

#: Attempts per call (first try included) of the SageMaker and CloudWatch Logs clients.
#: They use botocore's "standard" retry mode: throttling and transient errors are
#: retried with exponential backoff and jitter (at most 20 s apart), and a client-wide
#: retry quota stops retry storms. Following a job polls these APIs for hours, so they
#: get more attempts than botocore's default of 3.
CONTROL_PLANE_MAX_ATTEMPTS = 8

_POOL_CONNECTIONS = MAX_WORKERS + LARGE_FILE_CONCURRENCY
_READ_CHUNK = 1024 * 1024
_NOT_FOUND_CODES = frozenset({"404", "NoSuchKey", "NotFound", "NoSuchBucket"})


def _import_boto3(feature: str) -> Any:
    try:
        import boto3
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError.for_module("boto3", "aws", feature) from exc
    return boto3


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


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
    from botocore.utils import determine_content_length

    length = determine_content_length(request.body)
    if length is not None and length <= SMALL_BODY_LIMIT:
        del request.headers["Expect"]


def _transfer_exceptions() -> tuple[type[BaseException], ...]:
    """The third-party exceptions a transfer can raise (translated to TransferError)."""
    import boto3.exceptions
    import botocore.exceptions

    return (
        botocore.exceptions.BotoCoreError,
        botocore.exceptions.ClientError,
        boto3.exceptions.Boto3Error,
        OSError,
    )


class Session:
    """Region, credentials, default bucket and S3 transfers (a stand-in for ``sagemaker.Session``).

    Args:
        boto_session: A ``boto3.Session``; created on first use (with ``region_name``)
            when not given.
        sagemaker_client: A boto3 SageMaker client to use instead of creating one.
        default_bucket: Bucket name to use instead of ``sagemaker-{region}-{account}``.
        default_bucket_prefix: Key prefix applied when uploading to the default bucket.
        region_name: AWS region; defaults to the boto session's region.
    """

    def __init__(
        self,
        boto_session: boto3.Session | None = None,
        sagemaker_client: Any = None,
        default_bucket: str | None = None,
        default_bucket_prefix: str | None = None,
        region_name: str | None = None,
    ) -> None:
        if default_bucket is not None and not is_valid_bucket_name(default_bucket):
            raise ConfigurationError.invalid(
                "default_bucket",
                default_bucket,
                "an S3 bucket name (3-63 lowercase letters, digits, '.' or '-')",
            )
        self._lock = threading.RLock()
        self._boto_session = boto_session
        self._sagemaker_client = sagemaker_client
        self._s3_client: Any = None
        self._logs_client: Any = None
        self._region_name = region_name
        self._default_bucket_override = default_bucket
        self._default_bucket_prefix = default_bucket_prefix
        self._default_bucket: str | None = None
        self._account_id: str | None = None

    def __repr__(self) -> str:
        return (
            f"Session(region_name={self._region_name!r}, "
            f"default_bucket={self._default_bucket_override!r}, "
            f"default_bucket_prefix={self._default_bucket_prefix!r})"
        )

    # -- clients ----------------------------------------------------------------
    @property
    def boto_session(self) -> boto3.Session:
        """The ``boto3.Session`` (created on first use)."""
        with self._lock:
            if self._boto_session is None:
                boto3 = _import_boto3("Creating an AWS session")
                self._boto_session = boto3.Session(region_name=self._region_name)
            return self._boto_session

    @property
    def boto_region_name(self) -> str:
        """The AWS region: ``region_name`` if given, else the boto session's region."""
        region = self._region_name or self.boto_session.region_name
        if not region:
            raise ConfigurationError.invalid(
                "region_name",
                None,
                "an AWS region name such as 'us-west-2'",
                reason=(
                    "No AWS region is configured: pass Session(region_name=...), "
                    "set AWS_DEFAULT_REGION, or set a region in ~/.aws/config"
                ),
            )
        return region

    @property
    def local_mode(self) -> bool:
        """Always ``False``: this session talks to AWS (local runs use other backends)."""
        return False

    @property
    def default_bucket_prefix(self) -> str | None:
        """The key prefix applied when uploading to the default bucket."""
        return self._default_bucket_prefix

    def _new_client(self, service: str, *, max_attempts: int | None = None, **config: Any) -> Any:
        import botocore.config

        retries: dict[str, Any] = {"mode": "standard"}
        if max_attempts is not None:
            retries["total_max_attempts"] = max_attempts
        cfg = botocore.config.Config(retries=retries, **config)
        with self._lock:
            # boto3.Session.client is not thread-safe; the clients it makes are.
            return self.boto_session.client(service, region_name=self.boto_region_name, config=cfg)

    @property
    def sagemaker_client(self) -> Any:
        """A boto3 SageMaker client (created on first use)."""
        with self._lock:
            if self._sagemaker_client is None:
                self._sagemaker_client = self._new_client(
                    "sagemaker", max_attempts=CONTROL_PLANE_MAX_ATTEMPTS
                )
            return self._sagemaker_client

    @property
    def logs_client(self) -> Any:
        """A boto3 CloudWatch Logs client (created on first use), for training job logs."""
        with self._lock:
            if self._logs_client is None:
                self._logs_client = self._new_client(
                    "logs", max_attempts=CONTROL_PLANE_MAX_ATTEMPTS
                )
            return self._logs_client

    @property
    def s3_client(self) -> Any:
        """A thread-safe boto3 S3 client shared by all transfers of this session."""
        with self._lock:
            if self._s3_client is None:
                client = self._new_client("s3", max_pool_connections=_POOL_CONNECTIONS)
                client.meta.events.register("before-sign.s3.PutObject", _send_small_bodies_at_once)
                self._s3_client = client
            return self._s3_client

    # -- identity and buckets ---------------------------------------------------
    def account_id(self) -> str:
        """The AWS account id of the caller (STS ``GetCallerIdentity``, cached)."""
        if self._account_id is None:
            import botocore.exceptions

            try:
                identity = self._new_client("sts").get_caller_identity()
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                raise ConfigurationError(
                    f"Could not determine the AWS account (STS GetCallerIdentity failed: {exc}). "
                    "Check the AWS credentials of boto_session.",
                    argument="boto_session",
                ) from exc
            self._account_id = str(identity["Account"])
        return self._account_id

    def default_bucket_name(self) -> str:
        """The default bucket's name, ``sagemaker-{region}-{account}`` unless overridden.

        Unlike :meth:`default_bucket` this creates nothing.
        """
        if self._default_bucket_override:
            return self._default_bucket_override
        return f"sagemaker-{self.boto_region_name}-{self.account_id()}"

    def default_bucket(self) -> str:
        """The default bucket's name, creating the bucket if it does not exist yet (cached)."""
        with self._lock:
            if self._default_bucket is None:
                name = self.default_bucket_name()
                generated = self._default_bucket_override is None
                self._ensure_bucket(name, self.account_id() if generated else None)
                self._default_bucket = name
            return self._default_bucket

    def _ensure_bucket(self, name: str, expected_owner: str | None) -> None:
        import botocore.exceptions

        s3 = self.s3_client
        region = self.boto_region_name
        head: dict[str, Any] = {"Bucket": name}
        if expected_owner:
            head["ExpectedBucketOwner"] = expected_owner
        try:
            s3.head_bucket(**head)
            return
        except botocore.exceptions.ClientError as exc:
            code = _error_code(exc)
            if code not in _NOT_FOUND_CODES:
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
            s3.create_bucket(**request)
        except botocore.exceptions.ClientError as exc:
            code = _error_code(exc)
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

    def _expected_owner(self, bucket: str) -> str | None:
        """Account id to send as ExpectedBucketOwner when ``bucket`` is the generated default.

        Passive, like SDK v2's spot check: applies only once :meth:`default_bucket`
        has resolved a generated name, and never to user-chosen buckets.
        """
        if (
            self._default_bucket_override is None
            and self._default_bucket is not None
            and bucket == self._default_bucket
        ):
            return self._account_id
        return None

    def expand_role(self, role: str) -> str:
        """Expand an IAM role name into its ARN; a value containing ``/`` is returned as is."""
        if "/" in role:
            return role
        import botocore.exceptions

        try:
            return str(self._new_client("iam").get_role(RoleName=role)["Role"]["Arn"])
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise ConfigurationError.invalid(
                "role",
                role,
                "an IAM role ARN such as 'arn:aws:iam::123456789012:role/MyRole' "
                "or the name of a role IAM can find",
                reason=f"IAM GetRole failed: {exc}",
            ) from exc

    def get_caller_identity_arn(self) -> str:
        """The IAM role (or user) ARN this code runs as, as SDK v2 finds it.

        In a SageMaker notebook instance, its ``RoleArn`` (DescribeNotebookInstance);
        in Studio, the user profile's (else the domain's) execution role; otherwise
        STS GetCallerIdentity, with an assumed-role ARN turned into its role's ARN
        (``arn:aws:iam::<account>:role/<path><name>``).
        """
        import botocore.exceptions

        try:
            metadata = _notebook_metadata()
            if metadata.get("ResourceName") and not metadata.get("DomainId"):
                name = metadata["ResourceName"]
                found = self.sagemaker_client.describe_notebook_instance(NotebookInstanceName=name)
                return str(found["RoleArn"])
            if metadata.get("DomainId") and metadata.get("UserProfileName"):
                profile = self.sagemaker_client.describe_user_profile(
                    DomainId=metadata["DomainId"], UserProfileName=metadata["UserProfileName"]
                )
                role = (profile.get("UserSettings") or {}).get("ExecutionRole")
                if not role:
                    domain = self.sagemaker_client.describe_domain(DomainId=metadata["DomainId"])
                    role = (domain.get("DefaultUserSettings") or {}).get("ExecutionRole")
                if role:
                    return str(role)
            arn = str(self._new_client("sts").get_caller_identity()["Arn"])
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise ConfigurationError(
                f"Could not find the execution role of this notebook ({exc}). Pass role= an "
                "IAM role ARN, or set LAUNCHBAY_EXECUTION_ROLE.",
                argument="role",
            ) from exc
        if ":assumed-role/" not in arn:
            return arn
        account = arn.split(":")[4]
        role_name = arn.split(":assumed-role/", 1)[1].split("/")[0]
        try:  # the role's path, when IAM lets us read it
            return str(self._new_client("iam").get_role(RoleName=role_name)["Role"]["Arn"])
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
            return f"arn:aws:iam::{account}:role/{role_name}"

    # -- small helpers ------------------------------------------------------------
    def object_exists(self, bucket: str, key: str) -> bool:
        """True if ``s3://bucket/key`` exists (``HeadObject``); False on 404."""
        import botocore.exceptions

        try:
            self.s3_client.head_object(Bucket=bucket, Key=key)
        except botocore.exceptions.ClientError as exc:
            if _error_code(exc) in _NOT_FOUND_CODES:
                return False
            raise TransferError(f"Could not check s3://{bucket}/{key}: {exc}") from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise TransferError(f"Could not check s3://{bucket}/{key}: {exc}") from exc
        return True

    def upload_bytes(
        self,
        data: bytes,
        bucket: str,
        key: str,
        extra_args: Mapping[str, Any] | None = None,
    ) -> str:
        """Upload ``data`` to ``s3://bucket/key`` with one ``PutObject``; return the URI."""
        self._check_bucket(bucket)
        extra = self._put_args(self._check_extra_args(extra_args, upload=True), bucket)
        uri = f"s3://{bucket}/{key}"
        try:
            self.s3_client.put_object(Bucket=bucket, Key=key, Body=data, **extra)
        except _transfer_exceptions() as exc:
            raise TransferError(f"Upload of {len(data)} bytes to {uri} failed: {exc}") from exc
        return uri

    def upload_file(
        self,
        path: str | os.PathLike[str],
        bucket: str,
        key: str,
        extra_args: Mapping[str, Any] | None = None,
        *,
        progress: bool | None = None,
        callback: Callable[[int], object] | None = None,
    ) -> str:
        """Upload one local file to exactly ``s3://bucket/key``; return the URI."""
        self._check_bucket(bucket)
        local = os.fspath(path)
        if not os.path.isfile(local):
            raise InputError.invalid(
                "path", local, "an existing local file", reason="No file exists at that path"
            )
        size = os.path.getsize(local)
        extra = self._check_extra_args(extra_args, upload=True)
        self._upload_files(bucket, [(local, key, size)], extra, 1, progress, callback)
        return f"s3://{bucket}/{key}"

    # -- bulk transfers -------------------------------------------------------------
    def upload_data(
        self,
        path: str | os.PathLike[str],
        bucket: str | None = None,
        key_prefix: str = "data",
        callback: Callable[[int], object] | None = None,
        extra_args: Mapping[str, Any] | None = None,
        *,
        max_workers: int | None = None,
        progress: bool | None = None,
    ) -> str:
        """Upload a local file or directory to S3, in parallel (SDK v2's arguments, in order).

        A file goes to ``{key_prefix}/{filename}`` and the returned URI is
        ``s3://{bucket}/{key_prefix}/{filename}``. A directory is uploaded
        recursively, each key being ``{key_prefix}/{relative/path}`` (``/``
        separators), and the returned URI is ``s3://{bucket}/{key_prefix}``.
        Without ``bucket`` the default bucket is used (created if needed) and
        ``default_bucket_prefix`` is put in front of ``key_prefix``.

        Args:
            path: Local file or directory.
            bucket: Destination bucket (default: :meth:`default_bucket`).
            key_prefix: Key prefix (default ``"data"``).
            extra_args: Extra upload arguments, as boto3's ``ExtraArgs``
                (e.g. ``{"ServerSideEncryption": "aws:kms"}``).
            max_workers: Parallel transfers (default 8 per CPU up to 32; at most 64).
            progress: Show a progress bar; ``None`` shows it when stderr is a
                terminal or in a notebook.
            callback: Called with each number of bytes transferred, from the
                worker threads (as SDK v2's ``callback``).

        Raises:
            InputError: ``path`` does not exist, or a bad ``bucket``/``extra_args``.
            TransferError: An upload failed. The message names the file and S3 URI;
                for a directory it starts ``Uploaded N of M file(s) to s3://bucket/``
                and names the failed files (the first five) and how many were not
                attempted: the upload stops at the first failure, and what went up
                stays in S3.
        """
        local = os.fspath(path)
        if not os.path.exists(local):
            raise InputError.invalid(
                "path",
                local,
                "an existing local file or directory",
                reason="Nothing exists at that path",
            )
        extra = self._check_extra_args(extra_args, upload=True)
        workers = self._resolve_workers(max_workers)
        if bucket:
            self._check_bucket(bucket)
            prefix = key_prefix
        else:
            bucket = self.default_bucket()
            prefix = s3_join(self.default_bucket_prefix, key_prefix)
        prefix = _normalise_prefix(prefix)

        if os.path.isdir(local):
            files = _walk_files(local, prefix)
            uri = f"s3://{bucket}/{prefix}"
        else:
            key = s3_join(prefix, os.path.basename(local))
            files = [(local, key, os.path.getsize(local))]
            uri = f"s3://{bucket}/{key}"

        self._upload_files(bucket, files, extra, workers, progress, callback)
        return uri

    def download_data(
        self,
        path: str | os.PathLike[str],
        bucket: str,
        key_prefix: str = "",
        extra_args: Mapping[str, Any] | None = None,
        *,
        max_workers: int | None = None,
        progress: bool | None = None,
    ) -> list[str]:
        """Download every object under ``s3://bucket/key_prefix`` into ``path``, in parallel.

        The layout follows SDK v2: each object lands at its key relative to
        ``key_prefix``, except when ``key_prefix`` looks like a file name (has
        an extension), in which case only the object's base name is kept.
        Zero-byte keys ending in ``/`` become directories. Every destination is
        checked first; a key that would be written outside ``path`` (``..``)
        stops the download before anything is written.

        Returns:
            The local paths of the downloaded files, in key order (``[]`` if
            nothing matched).

        Raises:
            InputError: bad ``bucket`` or ``extra_args``.
            TransferError: listing or a download failed, or a key would escape ``path``.
        """
        local_root = os.fspath(path)
        self._check_bucket(bucket)
        extra = self._check_extra_args(extra_args, upload=False)
        workers = self._resolve_workers(max_workers)
        owner = self._expected_owner(bucket)
        if owner:
            extra.setdefault("ExpectedBucketOwner", owner)
        prefix_uri = f"s3://{bucket}/{key_prefix}"

        objects = self._list_objects(bucket, key_prefix, owner, prefix_uri)
        if not objects:
            logger.info("Nothing to download under %s", prefix_uri)
            return []

        keep_basename_only = bool(posixpath.splitext(key_prefix)[1])
        root_real = os.path.realpath(local_root)
        directories: list[str] = []
        plan: list[tuple[str, str, int]] = []  # (key, destination, size)
        for key, size in objects:
            is_dir_marker = key.endswith("/") and size == 0
            if keep_basename_only and not is_dir_marker:
                rel = posixpath.basename(key)
            else:
                rel = posixpath.relpath("/" + key, "/" + key_prefix) if key_prefix else key
                if rel in ("", ".") and not is_dir_marker:
                    rel = posixpath.basename(key.rstrip("/"))
            parts = [p for p in rel.split("/") if p]
            destination = os.path.join(local_root, *parts) if parts else local_root
            dest_real = os.path.realpath(destination)
            if dest_real != root_real and not dest_real.startswith(root_real + os.sep):
                raise TransferError(
                    f"Refusing to download s3://{bucket}/{key}: it would be written to "
                    f"{dest_real!r}, outside path={local_root!r}. Nothing was downloaded."
                )
            if is_dir_marker:
                directories.append(destination)
            else:
                plan.append((key, destination, size))

        for parent in sorted({*directories, *(os.path.dirname(dest) for _, dest, _ in plan)}):
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise TransferError(f"Cannot create directory {parent!r}: {exc}") from exc

        self._download_files(bucket, plan, extra, workers, progress)
        return [dest for _, dest, _ in plan]

    # -- transfer machinery ---------------------------------------------------------
    def _resolve_workers(self, max_workers: int | None) -> int:
        if max_workers is None:
            return DEFAULT_MAX_WORKERS
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ConfigurationError.invalid(
                "max_workers", max_workers, f"a positive integer (at most {MAX_WORKERS})"
            )
        if max_workers > MAX_WORKERS:
            logger.debug("max_workers=%d capped at %d", max_workers, MAX_WORKERS)
        return min(max_workers, MAX_WORKERS)

    @staticmethod
    def _check_bucket(bucket: str) -> None:
        if not isinstance(bucket, str) or not is_valid_bucket_name(bucket):
            raise InputError.invalid(
                "bucket", bucket, "an S3 bucket name (3-63 lowercase letters, digits, '.' or '-')"
            )

    @staticmethod
    def _check_extra_args(extra_args: Mapping[str, Any] | None, *, upload: bool) -> dict[str, Any]:
        if extra_args is None:
            return {}
        from boto3.s3.transfer import S3Transfer

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

    def _put_args(self, extra: dict[str, Any], bucket: str) -> dict[str, Any]:
        """ExtraArgs narrowed to what PutObject takes, plus the default-bucket owner check."""
        members = self.s3_client.meta.service_model.operation_model("PutObject").input_shape.members
        args = {k: v for k, v in extra.items() if k in members}
        owner = self._expected_owner(bucket)
        if owner:
            args.setdefault("ExpectedBucketOwner", owner)
        return args

    def _transfer_config(self, max_concurrency: int = LARGE_FILE_CONCURRENCY) -> Any:
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_CHUNKSIZE,
            max_concurrency=max_concurrency,
            use_threads=True,
        )

    def _run(
        self,
        small: list[Callable[[], None]],
        large: list[Callable[[], None]],
        workers: int,
    ) -> None:
        """Run ``small`` jobs on a pool while ``large`` ones run here, one at a time.

        The first failure cancels the jobs not yet started and is re-raised.
        """
        if len(small) <= 1 and not large:
            for job in small:
                job()
            return
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launchbay-s3")
        futures = [pool.submit(job) for job in small]
        try:
            for job in large:
                job()
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in futures:
                if future in done and future.exception() is not None:
                    future.result()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    def _upload_files(
        self,
        bucket: str,
        files: list[tuple[str, str, int]],
        extra: dict[str, Any],
        workers: int,
        progress: bool | None,
        callback: Callable[[int], object] | None,
    ) -> None:
        client = self.s3_client
        put_args = self._put_args(extra, bucket)
        managed_args = dict(extra)
        owner = self._expected_owner(bucket)
        if owner:
            managed_args.setdefault("ExpectedBucketOwner", owner)
        errors = _transfer_exceptions()
        total = sum(size for _, _, size in files)
        logger.info(
            "Uploading %d file(s), %s, to s3://%s/ with %d workers",
            len(files),
            format_bytes(total),
            bucket,
            workers,
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
        failed: list[tuple[str, str, TransferError]] = []
        lock = threading.Lock()

        def counted(upload: Callable[[], None], local: str, key: str) -> None:
            try:
                upload()
            except TransferError as exc:
                with lock:
                    failed.append((local, key, exc))
                raise
            with lock:
                done.append(key)

        def put(local: str, key: str, size: int) -> None:
            try:
                with open(local, "rb") as body:
                    if size <= SMALL_BODY_LIMIT:
                        client.put_object(Bucket=bucket, Key=key, Body=body.read(), **put_args)
                    else:
                        client.put_object(Bucket=bucket, Key=key, Body=body, **put_args)
            except errors as exc:
                raise TransferError(
                    f"Upload of {local!r} to s3://{bucket}/{key} failed: {exc}"
                ) from exc
            bar.update(size, 1)

        def managed(local: str, key: str) -> None:
            try:
                client.upload_file(
                    local,
                    bucket,
                    key,
                    ExtraArgs=managed_args or None,
                    Callback=bar.update,
                    Config=self._transfer_config(),
                )
            except errors as exc:
                raise TransferError(
                    f"Upload of {local!r} to s3://{bucket}/{key} failed: {exc}"
                ) from exc
            bar.update(0, 1)

        small: list[Callable[[], None]] = []
        large: list[Callable[[], None]] = []
        for local, key, size in files:
            if size >= MULTIPART_THRESHOLD:
                large.append(lambda a=local, b=key: counted(lambda: managed(a, b), a, b))
            else:
                small.append(lambda a=local, b=key, c=size: counted(lambda: put(a, b, c), a, b))
        try:
            with bar:
                self._run(small, large, workers)
        except TransferError as exc:
            if len(files) <= 1:
                raise
            raise _partial_upload_error(bucket, len(files), done, failed, exc) from exc.__cause__
        logger.info(
            "Uploaded %d file(s) to s3://%s/ in %.2fs",
            len(files),
            bucket,
            time.monotonic() - started,
        )

    def _list_objects(
        self, bucket: str, key_prefix: str, owner: str | None, prefix_uri: str
    ) -> list[tuple[str, int]]:
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": key_prefix}
        if owner:
            request["ExpectedBucketOwner"] = owner
        objects: list[tuple[str, int]] = []
        try:
            for page in self.s3_client.get_paginator("list_objects_v2").paginate(**request):
                for item in page.get("Contents", []):
                    objects.append((item["Key"], int(item.get("Size", 0))))
        except _transfer_exceptions() as exc:
            raise TransferError(f"Listing {prefix_uri} failed: {exc}") from exc
        return objects

    def _download_files(
        self,
        bucket: str,
        plan: list[tuple[str, str, int]],
        extra: dict[str, Any],
        workers: int,
        progress: bool | None,
    ) -> None:
        client = self.s3_client
        errors = _transfer_exceptions()
        total = sum(size for _, _, size in plan)
        logger.info(
            "Downloading %d file(s), %s, from s3://%s/ with %d workers",
            len(plan),
            format_bytes(total),
            bucket,
            workers,
        )
        bar = Progress(
            "download",
            total_bytes=total,
            total_files=len(plan),
            enabled=progress_enabled(progress),
        )

        def get(key: str, destination: str) -> None:
            tmp = None
            try:
                response = client.get_object(Bucket=bucket, Key=key, **extra)
                fd, tmp = tempfile.mkstemp(
                    prefix=".launchbay-", suffix=".part", dir=os.path.dirname(destination)
                )
                with os.fdopen(fd, "wb") as out:
                    for chunk in response["Body"].iter_chunks(_READ_CHUNK):
                        out.write(chunk)
                        bar.update(len(chunk))
                os.replace(tmp, destination)
                tmp = None
            except errors as exc:
                raise TransferError(
                    f"Download of s3://{bucket}/{key} to {destination!r} failed: {exc}"
                ) from exc
            finally:
                if tmp is not None and os.path.exists(tmp):
                    os.unlink(tmp)
            bar.update(0, 1)

        def managed(key: str, destination: str) -> None:
            try:
                client.download_file(
                    bucket,
                    key,
                    destination,
                    ExtraArgs=extra or None,
                    Callback=bar.update,
                    Config=self._transfer_config(),
                )
            except errors as exc:
                raise TransferError(
                    f"Download of s3://{bucket}/{key} to {destination!r} failed: {exc}"
                ) from exc
            bar.update(0, 1)

        small: list[Callable[[], None]] = []
        large: list[Callable[[], None]] = []
        for key, destination, size in plan:
            if size >= MULTIPART_THRESHOLD:
                large.append(lambda a=key, b=destination: managed(a, b))
            else:
                small.append(lambda a=key, b=destination: get(a, b))
        with bar:
            self._run(small, large, workers)


def _normalise_prefix(prefix: str | None) -> str:
    """Drop leading, trailing and repeated slashes: ``"/a//b/"`` -> ``"a/b"``."""
    return "/".join(part for part in (prefix or "").split("/") if part)


#: Failed files a partial-upload error names.
_FAILURES_SHOWN = 5


def _partial_upload_error(
    bucket: str,
    total: int,
    done: list[str],
    failed: list[tuple[str, str, TransferError]],
    first: TransferError,
) -> TransferError:
    """``Uploaded N of M file(s) ...``: what went up, what failed (first few), what was not tried."""
    failed = sorted(failed, key=lambda f: f[1])
    shown = "; ".join(str(exc) for _, _, exc in failed[:_FAILURES_SHOWN]) or str(first)
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


def _walk_files(root: str, prefix: str) -> list[tuple[str, str, int]]:
    """(local path, key, size) for every file under ``root``, in a stable order.

    Like SDK v2 this uses ``os.walk`` without following directory symlinks;
    symlinks to files are uploaded as the files they point to.
    """
    files: list[tuple[str, str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        rel_parts = [] if rel_dir == os.curdir else rel_dir.split(os.sep)
        for name in sorted(filenames):
            local = os.path.join(dirpath, name)
            try:
                size = os.path.getsize(local)
            except OSError as exc:
                raise InputError.invalid(
                    "path", root, "a directory of readable files", reason=f"{local!r}: {exc}"
                ) from exc
            files.append((local, s3_join(prefix, *rel_parts, name), size))
    return files


# --------------------------------------------------------------------------- execution role

#: Where a SageMaker notebook instance or Studio app describes itself.
NOTEBOOK_METADATA_FILE = "/opt/ml/metadata/resource-metadata.json"
#: The role ARN local jobs carry when no role was given.
LOCAL_ROLE_ARN = "arn:aws:iam::000000000000:role/launchbay-local"


class LocalExecutionRole(str):
    """The placeholder :func:`get_execution_role` returns outside SageMaker.

    It is :data:`LOCAL_ROLE_ARN` for local instance types (``local``,
    ``local_gpu``, ``local_process``); an estimator for SageMaker instance types
    refuses it with a :class:`~launchbay.errors.ConfigurationError`.
    """

    __slots__ = ()


def _notebook_metadata() -> dict[str, Any]:
    import json

    try:
        with open(NOTEBOOK_METADATA_FILE, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def get_execution_role(sagemaker_session: Session | None = None, use_default: bool = False) -> str:
    """The IAM role to run training jobs with (``sagemaker.get_execution_role()``).

    * ``LAUNCHBAY_EXECUTION_ROLE`` when set (a role ARN);
    * in a SageMaker notebook instance or Studio (``/opt/ml/metadata/resource-metadata.json``
      exists): its execution role, as SDK v2 finds it
      (:meth:`Session.get_caller_identity_arn`); a ConfigurationError when that is
      not a role;
    * anywhere else: a :class:`LocalExecutionRole` placeholder, no AWS call. Local
      instance types run with it; an estimator for an ``ml.*`` instance type
      raises a ConfigurationError that says to pass a role ARN.

    ``use_default=True`` (SDK v2 then creates ``AmazonSageMaker-DefaultRole``) is
    not supported: launchbay creates no IAM roles.
    """
    if use_default:
        raise ConfigurationError.invalid(
            "use_default",
            use_default,
            "False (launchbay creates no IAM roles: pass role= an IAM role ARN instead)",
        )
    explicit = os.environ.get("LAUNCHBAY_EXECUTION_ROLE")
    if explicit:
        return explicit
    if not os.path.exists(NOTEBOOK_METADATA_FILE):
        return LocalExecutionRole(LOCAL_ROLE_ARN)
    arn = (sagemaker_session or Session()).get_caller_identity_arn()
    if ":role/" in arn:
        return arn
    raise ConfigurationError(
        f"The AWS identity of this notebook is not a role ({arn}), so it cannot be a "
        "SageMaker execution role. Pass role= an IAM role ARN, or set LAUNCHBAY_EXECUTION_ROLE.",
        argument="role",
        value=arn,
    )
