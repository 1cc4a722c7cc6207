"""Small helpers for ``s3://`` and ``file://`` URIs (standard library only).

Bucket names are checked against the current S3 naming rules: 3 to 63
characters of lowercase letters, digits, dots and hyphens, starting and ending
with a letter or digit, no two adjacent dots, and not shaped like an IP
address. (Legacy us-east-1 buckets with upper-case letters or underscores are
not accepted.)
"""

from __future__ import annotations

import re

from launchbay.errors import InputError

__all__ = ["parse_s3_uri", "s3_join", "is_s3_uri", "is_file_uri", "is_valid_bucket_name"]

_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_RE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_ACCEPTED = "an S3 URI such as 's3://bucket/prefix'"


def is_s3_uri(value: object) -> bool:
    """True if ``value`` is a string starting with ``s3://`` (scheme case-insensitive)."""
    return isinstance(value, str) and value[:5].lower() == "s3://"


def is_file_uri(value: object) -> bool:
    """True if ``value`` is a string starting with ``file://`` (scheme case-insensitive)."""
    return isinstance(value, str) and value[:7].lower() == "file://"


def is_valid_bucket_name(name: str) -> bool:
    """True if ``name`` follows the S3 bucket naming rules described in this module."""
    return bool(_BUCKET_RE.match(name)) and ".." not in name and not _IP_RE.match(name)


def parse_s3_uri(uri: str, argument: str = "s3_uri") -> tuple[str, str]:
    """Split ``s3://bucket/key`` into ``(bucket, key)``.

    The key may be empty (``s3://bucket`` or ``s3://bucket/``) and keeps any
    trailing slash. ``argument`` names the parameter the URI came from, so the
    :class:`~launchbay.errors.InputError` raised for a bad URI says which
    argument was wrong, the value given and what is accepted.
    """
    if not isinstance(uri, str):
        raise InputError.invalid(argument, uri, _ACCEPTED, reason="It is not a string")
    if not is_s3_uri(uri):
        raise InputError.invalid(argument, uri, _ACCEPTED, reason="It does not start with 's3://'")
    bucket, _, key = uri[5:].partition("/")
    if not bucket:
        raise InputError.invalid(argument, uri, _ACCEPTED, reason="The bucket name is empty")
    if not is_valid_bucket_name(bucket):
        raise InputError.invalid(
            argument,
            uri,
            _ACCEPTED + " whose bucket name has 3-63 lowercase letters, digits, '.' or '-'",
            reason=f"{bucket!r} is not a valid S3 bucket name",
        )
    return bucket, key


def s3_join(*parts: str | None) -> str:
    """Join URI or key parts with single slashes.

    Empty and ``None`` parts are skipped; repeated slashes are collapsed, except
    the ``//`` of a leading ``s3://`` scheme; a trailing slash on the last part
    is kept. ``s3_join("s3://b/", "/a//", "c")`` -> ``"s3://b/a/c"``.
    """
    pieces = [p for p in parts if p]
    if not pieces:
        return ""
    joined = "/".join(pieces)
    scheme = ""
    if is_s3_uri(joined):
        scheme, joined = joined[:5], joined[5:]
    joined = re.sub(r"/{2,}", "/", joined)
    return scheme + joined
