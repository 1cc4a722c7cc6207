"""URI helpers: parsing, joining and scheme checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from launchbay.errors import ConfigurationError, InputError
from launchbay.s3uri import is_file_uri, is_s3_uri, is_valid_bucket_name, parse_s3_uri, s3_join


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket/prefix", ("bucket", "prefix")),
        ("s3://my.bucket-1/a/b/c.txt", ("my.bucket-1", "a/b/c.txt")),
        ("S3://bucket/Key/", ("bucket", "Key/")),
    ],
)
def test_parse_s3_uri(uri: str, expected: tuple[str, str]) -> None:
    assert parse_s3_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("bucket/key", "does not start with 's3://'"),
        ("https://bucket/key", "does not start with 's3://'"),
        ("s3:///key", "bucket name is empty"),
        ("s3://", "bucket name is empty"),
        ("s3://Bad_Bucket/key", "'Bad_Bucket' is not a valid S3 bucket name"),
        ("s3://ab/key", "'ab' is not a valid S3 bucket name"),
        ("s3://192.168.1.1/key", "is not a valid S3 bucket name"),
        (None, "not a string"),
    ],
)
def test_parse_s3_uri_errors_name_argument_value_and_accepted(uri: object, reason: str) -> None:
    with pytest.raises(InputError) as info:
        parse_s3_uri(uri, argument="output_path")  # type: ignore[arg-type]
    message = str(info.value)
    assert isinstance(info.value, ConfigurationError) and isinstance(info.value, ValueError)
    assert info.value.argument == "output_path"
    assert f"Invalid output_path={uri!r}" in message
    assert reason in message
    assert "s3://bucket/prefix" in message


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (("s3://b", "a", "c"), "s3://b/a/c"),
        (("s3://b/", "/a//", "c"), "s3://b/a/c"),
        (("s3://b", "", None, "k"), "s3://b/k"),
        (("a/", "b/"), "a/b/"),
        (("", None), ""),
        (("prefix",), "prefix"),
    ],
)
def test_s3_join(parts: tuple[str | None, ...], expected: str) -> None:
    assert s3_join(*parts) == expected


@given(st.lists(st.text(alphabet="ab/", max_size=6), max_size=5))
def test_s3_join_never_doubles_slashes(parts: list[str]) -> None:
    joined = s3_join("s3://bucket", *parts)
    assert joined.startswith("s3://bucket")
    assert "//" not in joined[5:]
    assert joined[5:].replace("/", "") == "bucket" + "".join(parts).replace("/", "")


def test_scheme_checks() -> None:
    assert is_s3_uri("s3://b/k") and is_s3_uri("S3://b")
    assert not is_s3_uri("file:///tmp") and not is_s3_uri(None) and not is_s3_uri("s3:/b")
    assert is_file_uri("file:///tmp/x") and not is_file_uri("/tmp/x") and not is_file_uri(3)
    assert is_valid_bucket_name("sagemaker-us-west-2-123456789012")
    assert not is_valid_bucket_name("a..b") and not is_valid_bucket_name("-abc")
