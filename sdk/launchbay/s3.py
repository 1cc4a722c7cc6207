"""SDK v2's ``sagemaker.s3``: upload to and download from S3 URIs in one call.

``from launchbay.s3 import S3Uploader, S3Downloader, s3_path_join, parse_s3_url``
takes the arguments SDK v2 takes and returns what it returns; the bytes move
through :class:`launchbay.Session`'s transfer engine (:mod:`launchbay.transfer`:
parallel, with a progress bar in a terminal or a notebook). Without
``sagemaker_session`` each call makes a new :class:`~launchbay.Session` from the
default AWS settings, as SDK v2 does.

Differences from SDK v2, on purpose (docs/compatibility.md, "S3 helpers"):

* a URI that is not ``s3://bucket/...`` is an :class:`~launchbay.errors.InputError`
  (a ``ValueError``, as v2 raises) naming the argument; ``s3://`` without a
  bucket is refused here rather than failing later in boto3;
* keys keep ``?`` and ``#`` (SDK v2 parses URIs with ``urlparse``, which cuts
  the key there);
* ``S3Downloader.list`` returns each key as it is (v2 collapses ``//`` and drops
  the trailing ``/`` of folder markers, naming another object);
* ``S3Downloader.download(kms_key=...)`` sends the key as an SSE-C customer key
  with its algorithm (``AES256``); v2 sends it without the algorithm, which S3
  refuses. Objects encrypted with SSE-KMS need no key to be read;
* the key layout and errors of :meth:`launchbay.Session.upload_data` and
  :meth:`~launchbay.Session.download_data` (single slashes between key parts,
  ``TransferError`` naming the file and the URI).
"""

from __future__ import annotations

import builtins
import io
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from launchbay.errors import InputError
from launchbay.s3uri import is_s3_uri

if TYPE_CHECKING:  # pragma: no cover
    from launchbay.session import Session

__all__ = ["S3Uploader", "S3Downloader", "s3_path_join", "parse_s3_url"]

_URI_ACCEPTED = "an S3 URI such as 's3://bucket/key'"


def parse_s3_url(url: str) -> tuple[str, str]:
    """``("bucket", "key")`` of ``s3://bucket/key`` (leading slashes of the key dropped).

    The scheme may be written in any case (``S3://``); the key may be empty.

    Raises:
        InputError: ``url`` is not a string starting with ``s3://`` and a bucket name.
    """
    return _split(url, "url")


def _split(uri: object, argument: str) -> tuple[str, str]:
    if not isinstance(uri, str):
        raise InputError.invalid(argument, uri, _URI_ACCEPTED, reason="It is not a string")
    if not is_s3_uri(uri):
        scheme = uri.partition("://")[0] if "://" in uri else ""
        reason = f"Its scheme is {scheme!r}, not 's3'" if scheme else "It has no 's3://' scheme"
        raise InputError.invalid(argument, uri, _URI_ACCEPTED, reason=reason)
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise InputError.invalid(argument, uri, _URI_ACCEPTED, reason="It names no bucket")
    return bucket, key.lstrip("/")


def s3_path_join(*args: str | None, with_end_slash: bool = False) -> str:
    """Join S3 key or URI parts with one ``/`` between them.

    ``None`` and empty parts are skipped; runs of slashes become one (the ``//``
    of a leading ``s3://`` stays); slashes at the start are dropped, and at the
    end too unless ``with_end_slash`` (then the result ends with exactly one,
    unless it is empty). ``s3_path_join("s3://", "bucket/", "/a//b/")`` is
    ``"s3://bucket/a/b"``.
    """
    parts = []
    for position, part in enumerate(args):
        if part is None or part == "":
            continue
        if not isinstance(part, str):
            raise InputError.invalid(
                f"args[{position}]", part, "a string (a key, a key part or an S3 URI), or None"
            )
        parts.append(part)
    if not parts:
        return ""
    joined = ""
    for part in parts:  # a slash goes between two parts unless one of them has it already
        if joined and not joined.endswith("/") and not part.startswith("/"):
            joined += "/"
        joined += part
    scheme = "s3://" if joined.startswith("s3://") else ""
    collapsed = "/".join(piece for piece in joined[len(scheme) :].split("/") if piece)
    if with_end_slash and collapsed:
        collapsed += "/"
    return scheme + collapsed


def _session(sagemaker_session: Session | None) -> Session:
    if sagemaker_session is not None:
        return sagemaker_session
    from launchbay.session import Session  # boto3 loads with the first AWS call only

    return Session()


class S3Uploader:
    """Upload files, directories, strings and bytes to S3 URIs (SDK v2's ``S3Uploader``)."""

    @staticmethod
    def upload(
        local_path: str | os.PathLike[str],
        desired_s3_uri: str,
        kms_key: str | None = None,
        sagemaker_session: Session | None = None,
        callback: Callable[[int], object] | None = None,
        *,
        max_workers: int | None = None,
        progress: bool | None = None,
    ) -> str:
        """Upload a file or a directory under the prefix ``desired_s3_uri``; return its URI.

        A file goes to ``<desired_s3_uri>/<file name>`` and that URI is returned; a
        directory's files go to ``<desired_s3_uri>/<relative path>`` and
        ``desired_s3_uri`` is returned. ``kms_key`` encrypts the objects with that KMS
        key; ``callback`` gets each number of bytes sent. ``max_workers`` and
        ``progress`` are launchbay's (:meth:`launchbay.Session.upload_data`).
        """
        bucket, prefix = _split(desired_s3_uri, "desired_s3_uri")
        from launchbay.session import kms_upload_args

        return _session(sagemaker_session).upload_data(
            local_path,
            bucket,
            prefix,
            callback,
            kms_upload_args(kms_key),
            max_workers=max_workers,
            progress=progress,
        )

    @staticmethod
    def upload_string_as_file_body(
        body: str,
        desired_s3_uri: str | None = None,
        kms_key: str | None = None,
        sagemaker_session: Session | None = None,
    ) -> str:
        """Store ``body`` (UTF-8) as the object ``desired_s3_uri``; return ``desired_s3_uri``."""
        bucket, key = _split(desired_s3_uri, "desired_s3_uri")
        _session(sagemaker_session).upload_string_as_file_body(body, bucket, key, kms_key)
        return str(desired_s3_uri)

    @staticmethod
    def upload_bytes(
        b: bytes | io.BytesIO,
        s3_uri: str,
        kms_key: str | None = None,
        sagemaker_session: Session | None = None,
    ) -> str:
        """Store ``b`` (bytes, or what is left to read of a binary file object) as ``s3_uri``.

        Returns ``s3_uri``.
        """
        bucket, key = _split(s3_uri, "s3_uri")
        if isinstance(b, bytes | bytearray | memoryview):
            data = bytes(b)
        elif callable(getattr(b, "read", None)):
            data = b.read()
            if not isinstance(data, bytes):
                raise InputError.invalid(
                    "b", b, "bytes or a binary file object such as io.BytesIO",
                    reason="Reading it gave text, not bytes",
                )  # fmt: skip
        else:
            raise InputError.invalid("b", b, "bytes or a binary file object such as io.BytesIO")
        from launchbay.session import kms_upload_args

        session = _session(sagemaker_session)
        session.upload_bytes(data, bucket, key, extra_args=kms_upload_args(kms_key))
        return s3_uri


class S3Downloader:
    """Download, read and list S3 objects by URI (SDK v2's ``S3Downloader``)."""

    @staticmethod
    def download(
        s3_uri: str,
        local_path: str | os.PathLike[str],
        kms_key: str | None = None,
        sagemaker_session: Session | None = None,
        *,
        max_workers: int | None = None,
        progress: bool | None = None,
    ) -> list[str]:
        """Download the object ``s3_uri`` and the objects under it into ``local_path``.

        Returns the local paths written, in key order (:meth:`launchbay.Session.download_data`
        says where each object lands). ``kms_key`` is the customer key (SSE-C, AES256) the
        objects were stored with; objects encrypted with SSE-KMS need none.
        """
        bucket, prefix = _split(s3_uri, "s3_uri")
        extra: dict[str, Any] | None = None
        if kms_key is not None:
            if not isinstance(kms_key, str) or not kms_key:
                raise InputError.invalid(
                    "kms_key", kms_key, "the SSE-C customer key the objects were stored with"
                )
            extra = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": kms_key}
        return _session(sagemaker_session).download_data(
            local_path, bucket, prefix, extra, max_workers=max_workers, progress=progress
        )

    @staticmethod
    def read_file(s3_uri: str, sagemaker_session: Session | None = None) -> str:
        """The body of the object ``s3_uri`` as a string (UTF-8)."""
        bucket, key = _split(s3_uri, "s3_uri")
        return _session(sagemaker_session).read_s3_file(bucket, key)

    @staticmethod
    def read_bytes(s3_uri: str, sagemaker_session: Session | None = None) -> bytes:
        """The body of the object ``s3_uri`` as bytes."""
        bucket, key = _split(s3_uri, "s3_uri")
        return _session(sagemaker_session).read_bytes(bucket, key)

    @staticmethod
    def list(s3_uri: str, sagemaker_session: Session | None = None) -> builtins.list[str]:
        """The URI of every object whose key begins with the key of ``s3_uri``, in key order.

        The key is a string prefix, as S3 lists it: ``s3://b/data`` also lists
        ``s3://b/database/x``.
        """
        bucket, prefix = _split(s3_uri, "s3_uri")
        keys = _session(sagemaker_session).list_s3_files(bucket, prefix)
        return [f"s3://{bucket}/{key}" for key in keys]
