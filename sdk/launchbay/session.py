"""The AWS session: region, account, default bucket and fast S3 transfers.

:class:`Session` stands in for ``sagemaker.Session`` (SDK v2) for what
estimators need. boto3 is imported only inside methods, so ``import launchbay``
never imports it; without boto3 installed, the first AWS call raises
:class:`~launchbay.errors.MissingDependencyError` naming the ``aws`` extra.

Transfers go through :mod:`launchbay.transfer`, the one S3 engine the local
backends use too: a pool of threads sharing this session's thread-safe S3
client (a single connection pool, standard retry mode). Small files go up with
one ``PutObject`` each; files of :data:`MULTIPART_THRESHOLD` bytes or more go
through boto3's managed transfer (multipart, several threads per file). A
bytes-and-files progress bar is drawn on stderr when it is a terminal or in a
Jupyter notebook.

Differences from SDK v2, on purpose:

* keys are joined with single slashes (``key_prefix="data/"`` gives
  ``data/file``, not ``data//file``; ``key_prefix=""`` gives ``file``, not
  ``/file``);
* botocore errors are raised as :class:`~launchbay.errors.TransferError`
  naming the file and the S3 URI, with the original error as ``__cause__``;
* ``download_data`` takes ``key_prefix`` as a path: the object of that key
  and the keys under ``key_prefix/``; keys that only share the string
  (``data2/x`` for ``data``) are left alone, where SDK v2 fails on them;
* ``download_data`` checks every destination before downloading anything and
  refuses keys that would land outside ``path``;
* ``upload_data`` never reads a FIFO, socket or device: given directly it is
  refused, in a directory it is skipped with a warning;
* small PUTs are sent without ``Expect: 100-continue`` (one round trip less
  per object).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from launchbay import transfer
from launchbay.display import format_bytes as format_bytes  # re-exported: bar sizes
from launchbay.errors import ConfigurationError, InputError
from launchbay.s3uri import is_valid_bucket_name, s3_join
from launchbay.transfer import (
    DEFAULT_MAX_WORKERS,
    LARGE_FILE_CONCURRENCY,
    MAX_WORKERS,
    MULTIPART_CHUNKSIZE,
    MULTIPART_THRESHOLD,
)
from launchbay.transfer import SMALL_BODY_LIMIT as SMALL_BODY_LIMIT  # re-exported

if TYPE_CHECKING:  # pragma: no cover
    import boto3

    from launchbay.inputs import TrainingInput, s3_input


def __getattr__(name: str) -> Any:
    """``TrainingInput`` and ``s3_input`` (deprecated), where SDK v2 notebooks import them.

    ``from launchbay.session import TrainingInput`` is launchbay.inputs' class; it is
    imported on first use, so this module stays light.
    """
    if name in ("TrainingInput", "s3_input"):
        from launchbay import inputs

        value = getattr(inputs, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'launchbay.session' has no attribute {name!r}")


__all__ = [
    "Session",
    "TrainingInput",
    "s3_input",
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

# DEFAULT_MAX_WORKERS, MAX_WORKERS, MULTIPART_THRESHOLD and MULTIPART_CHUNKSIZE are
# launchbay.transfer's, named here as before. The multipart pair is read from this
# module at each transfer, so setting them here tunes this session's transfers.

#: Attempts per call (first try included) of the SageMaker and CloudWatch Logs clients.
#: They use botocore's "standard" retry mode: throttling and transient errors are
#: retried with exponential backoff and jitter (at most 20 s apart), and a client-wide
#: retry quota stops retry storms. Following a job polls these APIs for hours, so they
#: get more attempts than botocore's default of 3.
CONTROL_PLANE_MAX_ATTEMPTS = 8


class Session:
    """Region, credentials, default bucket and S3 transfers (a stand-in for ``sagemaker.Session``).

    Args:
        boto_session: A ``boto3.Session``; created on first use (with ``region_name``)
            when not given.
        sagemaker_client: A boto3 SageMaker client to use instead of creating one.
        default_bucket: Bucket name to use instead of ``sagemaker-{region}-{account}``.
        default_bucket_prefix: Key prefix applied when uploading to the default bucket.
        region_name: AWS region; defaults to the boto session's region.
        sagemaker_config: SageMaker SDK defaults as a dict (SDK v2's argument), checked
            like a file; default: the admin and user defaults files
            (:mod:`launchbay._sagemaker_config`), whose
            ``SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket`` and
            ``DefaultS3ObjectKeyPrefix`` fill ``default_bucket`` and
            ``default_bucket_prefix`` when they are not given.
        sagemaker_runtime_client, sagemaker_featurestore_runtime_client,
        sagemaker_metrics_client, settings: SDK v2's clients and settings for hosting,
            Feature Store and Experiments, accepted (keyword only) so that notebooks
            that pass them make their session; kept as attributes of the same names,
            and used by nothing launchbay does.
    """

    def __init__(
        self,
        boto_session: boto3.Session | None = None,
        sagemaker_client: Any = None,
        default_bucket: str | None = None,
        default_bucket_prefix: str | None = None,
        region_name: str | None = None,
        sagemaker_config: Mapping[str, Any] | None = None,
        *,
        sagemaker_runtime_client: Any = None,
        sagemaker_featurestore_runtime_client: Any = None,
        sagemaker_metrics_client: Any = None,
        settings: Any = None,
    ) -> None:
        if default_bucket is not None and not is_valid_bucket_name(default_bucket):
            raise ConfigurationError.invalid(
                "default_bucket",
                default_bucket,
                "an S3 bucket name (3-63 lowercase letters, digits, '.' or '-')",
            )
        self._lock = threading.RLock()
        self.sagemaker_runtime_client = sagemaker_runtime_client
        self.sagemaker_featurestore_runtime_client = sagemaker_featurestore_runtime_client
        self.sagemaker_metrics_client = sagemaker_metrics_client
        self.settings = settings
        self._boto_session = boto_session
        self._sagemaker_client = sagemaker_client
        self._s3_client: Any = None
        self._logs_client: Any = None
        self._cloudwatch_client: Any = None
        self._region_name = region_name
        from launchbay import _sagemaker_config  # imported by the first session made

        #: The SageMaker SDK defaults this session applies (files read once, then cached).
        self.sagemaker_defaults = (
            _sagemaker_config.from_dict(sagemaker_config)
            if sagemaker_config is not None
            else _sagemaker_config.load(boto_session)
        )
        default_bucket = _sagemaker_config.session_default(
            _sagemaker_config.DEFAULT_S3_BUCKET, default_bucket, self.sagemaker_defaults
        )
        default_bucket_prefix = _sagemaker_config.session_default(
            _sagemaker_config.DEFAULT_S3_PREFIX, default_bucket_prefix, self.sagemaker_defaults
        )
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
                boto3 = transfer.import_boto3("Creating an AWS session")
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
    def sagemaker_config(self) -> dict[str, Any]:
        """The merged SageMaker SDK defaults (a dict, as SDK v2's ``Session.sagemaker_config``)."""
        return copy.deepcopy(self.sagemaker_defaults.data)

    @property
    def default_bucket_prefix(self) -> str | None:
        """The key prefix applied when uploading to the default bucket."""
        return self._default_bucket_prefix

    def _new_client(self, service: str, *, max_attempts: int | None = None, **config: Any) -> Any:
        import botocore.config  # heavy: imported on first AWS use only

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
    def cloudwatch_client(self) -> Any:
        """A boto3 CloudWatch client (created on first use), for training job metrics."""
        with self._lock:
            if self._cloudwatch_client is None:
                self._cloudwatch_client = self._new_client(
                    "cloudwatch", max_attempts=CONTROL_PLANE_MAX_ATTEMPTS
                )
            return self._cloudwatch_client

    @property
    def s3_client(self) -> Any:
        """A thread-safe boto3 S3 client shared by all transfers of this session."""
        with self._lock:
            if self._s3_client is None:
                client = self._new_client("s3", max_pool_connections=transfer.POOL_CONNECTIONS)
                self._s3_client = transfer.tune_client(client)
            return self._s3_client

    # -- identity and buckets ---------------------------------------------------
    def account_id(self) -> str:
        """The AWS account id of the caller (STS ``GetCallerIdentity``, cached)."""
        if self._account_id is None:
            import botocore.exceptions  # heavy: imported on first AWS use only

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
        transfer.ensure_bucket(self.s3_client, name, self.boto_region_name, expected_owner)

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
        import botocore.exceptions  # heavy: imported on first AWS use only

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
        import botocore.exceptions  # heavy: imported on first AWS use only

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
        return transfer.object_exists(self.s3_client, bucket, key)

    def upload_bytes(
        self,
        data: bytes,
        bucket: str,
        key: str,
        extra_args: Mapping[str, Any] | None = None,
    ) -> str:
        """Upload ``data`` to ``s3://bucket/key`` with one ``PutObject``; return the URI."""
        self._check_bucket(bucket)
        extra = transfer.check_extra_args(extra_args, upload=True)
        return transfer.upload_bytes(
            self.s3_client,
            data,
            bucket,
            key,
            extra_args=extra,
            expected_owner=self._expected_owner(bucket),
        )

    def upload_string_as_file_body(
        self, body: str | bytes, bucket: str, key: str, kms_key: str | None = None
    ) -> str:
        """Write ``body`` (a string, sent as UTF-8) to ``s3://bucket/key``; return the URI.

        SDK v2's ``Session.upload_string_as_file_body``: with ``kms_key`` the object is
        encrypted with that KMS key (``ServerSideEncryption="aws:kms"``).
        """
        if not isinstance(body, str | bytes):
            raise InputError.invalid("body", body, "a string (or bytes) to store as the object")
        data = body.encode("utf-8") if isinstance(body, str) else body
        return self.upload_bytes(data, bucket, key, extra_args=kms_upload_args(kms_key))

    def read_bytes(self, bucket: str, key: str) -> bytes:
        """The body of ``s3://bucket/key`` as bytes (one ``GetObject``)."""
        self._check_bucket(bucket)
        return transfer.read_object(
            self.s3_client, bucket, key, expected_owner=self._expected_owner(bucket)
        )

    def read_s3_file(self, bucket: str, key_prefix: str) -> str:
        """The body of the object ``s3://bucket/key_prefix``, decoded as UTF-8 (SDK v2's name)."""
        data = self.read_bytes(bucket, key_prefix)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError.invalid(
                "key_prefix",
                key_prefix,
                "the key of a UTF-8 text object (read other objects with read_bytes)",
                reason=f"s3://{bucket}/{key_prefix} is not UTF-8 text ({exc})",
            ) from exc

    def list_s3_files(self, bucket: str, key_prefix: str) -> list[str]:
        """The keys of ``bucket`` that begin with the string ``key_prefix``, in key order.

        As S3 (and SDK v2) lists them: ``"data"`` also lists ``database/x``, and
        folder markers (keys ending in ``/``) are included.
        """
        self._check_bucket(bucket)
        listed = transfer.list_objects(
            self.s3_client, bucket, key_prefix or "", expected_owner=self._expected_owner(bucket)
        )
        return [obj.key for obj in listed]

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
        size = _regular_file_size(local, "an existing local file")
        extra = transfer.check_extra_args(extra_args, upload=True)
        transfer.upload_files(
            self.s3_client,
            bucket,
            [(local, key, size)],
            limits=self._limits(1),
            extra_args=extra,
            expected_owner=self._expected_owner(bucket),
            progress=progress,
            callback=callback,
        )
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
            InputError: ``path`` does not exist or is a FIFO, socket or device, or a
                bad ``bucket``/``extra_args``. In a directory such special files are
                skipped with a warning naming each (a FIFO would block the upload).
            TransferError: An upload failed. The message names the file and S3 URI;
                for a directory it starts ``Uploaded N of M file(s) to s3://bucket/``
                and names the failed files (the first five) and how many were not
                attempted: the upload stops at the first failure, and what went up
                stays in S3.
        """
        local = os.fspath(path)
        is_dir = os.path.isdir(local)
        size = 0 if is_dir else _regular_file_size(local, "an existing local file or directory")
        extra = transfer.check_extra_args(extra_args, upload=True)
        workers = transfer.resolve_workers(max_workers)
        if bucket:
            self._check_bucket(bucket)
            prefix = key_prefix
        else:
            bucket = self.default_bucket()
            prefix = s3_join(self.default_bucket_prefix, key_prefix)
        prefix = _normalise_prefix(prefix)

        if is_dir:
            files = transfer.walk_files(local, prefix)
            uri = f"s3://{bucket}/{prefix}"
        else:
            key = s3_join(prefix, os.path.basename(local))
            files = [(local, key, size)]
            uri = f"s3://{bucket}/{key}"

        transfer.upload_files(
            self.s3_client,
            bucket,
            files,
            limits=self._limits(workers),
            extra_args=extra,
            expected_owner=self._expected_owner(bucket),
            progress=progress,
            callback=callback,
        )
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
        """Download the object ``key_prefix`` and every object under ``key_prefix/`` into ``path``.

        Objects are downloaded in parallel. ``key_prefix`` is a path, not a
        string prefix: for ``"data"``, ``data`` and ``data/...`` are downloaded
        and ``data2/...`` or ``database/...`` are left alone (said at INFO);
        ``""`` takes the whole bucket. The layout follows SDK v2: each object
        lands at its key relative to ``key_prefix``, except when ``key_prefix``
        looks like a file name (has an extension), in which case only the
        object's base name is kept. Zero-byte keys ending in ``/`` become
        directories. Every destination is checked first; a key that would be
        written outside ``path`` (``..``) stops the download before anything
        is written.

        Returns:
            The local paths of the downloaded files, in key order (``[]`` if
            nothing matched).

        Raises:
            InputError: bad ``bucket`` or ``extra_args``.
            TransferError: listing or a download failed, or a key would escape ``path``.
        """
        local_root = os.fspath(path)
        self._check_bucket(bucket)
        extra = transfer.check_extra_args(extra_args, upload=False)
        workers = transfer.resolve_workers(max_workers)
        return transfer.download_prefix(
            self.s3_client,
            bucket,
            key_prefix,
            local_root,
            limits=self._limits(workers),
            extra_args=extra,
            expected_owner=self._expected_owner(bucket),
            progress=progress,
        )

    # -- argument checks -----------------------------------------------------------
    @staticmethod
    def _check_bucket(bucket: str) -> None:
        if not isinstance(bucket, str) or not is_valid_bucket_name(bucket):
            raise InputError.invalid(
                "bucket", bucket, "an S3 bucket name (3-63 lowercase letters, digits, '.' or '-')"
            )

    @staticmethod
    def _limits(workers: int) -> transfer.Limits:
        """This session's transfer limits; the multipart settings are read from this module now."""
        return transfer.Limits(
            workers=workers,
            multipart_threshold=MULTIPART_THRESHOLD,
            multipart_chunksize=MULTIPART_CHUNKSIZE,
            large_file_concurrency=LARGE_FILE_CONCURRENCY,
        )


def _regular_file_size(local: str, accepted: str) -> int:
    """The size of the regular file ``local`` (links followed), or an InputError naming it.

    A FIFO, socket or device is refused rather than read: reading a FIFO blocks
    until something writes to it, which may be never.
    """
    try:
        st = os.stat(local)
    except OSError as exc:
        reason = "Nothing exists at that path" if not os.path.lexists(local) else str(exc)
        raise InputError.invalid("path", local, accepted, reason=reason) from exc
    kind = transfer.special_file_kind(st.st_mode)
    if kind is not None or stat.S_ISDIR(st.st_mode):
        raise InputError.invalid(
            "path", local, accepted, reason=f"It is {kind or 'a directory'}, not a regular file"
        )
    return st.st_size


def kms_upload_args(kms_key: str | None) -> dict[str, str] | None:
    """The upload ExtraArgs that encrypt with ``kms_key`` (SSE-KMS), or None without a key."""
    if kms_key is None:
        return None
    if not isinstance(kms_key, str) or not kms_key:
        raise InputError.invalid("kms_key", kms_key, "a KMS key ID, alias or ARN (a string)")
    return {"SSEKMSKeyId": kms_key, "ServerSideEncryption": "aws:kms"}


def _normalise_prefix(prefix: str | None) -> str:
    """Drop leading, trailing and repeated slashes: ``"/a//b/"`` -> ``"a/b"``."""
    return "/".join(part for part in (prefix or "").split("/") if part)


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
