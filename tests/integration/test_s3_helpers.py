"""``launchbay.s3`` against SDK v2's ``sagemaker.s3``, both on one moto server (issue 32, item 4).

Each test makes the same calls with both SDKs, each into its own bucket, and
compares the return values (the bucket name swapped) and the resulting bucket
contents, key by key and byte by byte. Where launchbay differs on purpose
(docs/compatibility.md, "S3 helpers") the test says so.
"""

from __future__ import annotations

import io
import itertools
import os
from pathlib import Path
from typing import Any

import boto3
import pytest

import launchbay
from launchbay.errors import InputError, TransferError
from launchbay.s3 import S3Downloader, S3Uploader, parse_s3_url, s3_path_join

REGION = "us-west-2"
V2_BUCKET, OUR_BUCKET = "v2-bucket", "launchbay-bucket"

TREE = {
    "top.txt": b"top\n",
    "a/one.bin": os.urandom(3000),
    "a/b/two.json": b'{"x": 1}',
    "a/b/c/three.csv": b"1,2,3\n" * 100,
    "empty.dat": b"",
    "d/with space.txt": "spaces and \u00e9".encode(),
}


@pytest.fixture
def sdks(aws: str) -> tuple[Any, launchbay.Session]:
    """SDK v2's session and launchbay's, on a clean moto, each with its own bucket."""
    import sagemaker

    s3 = boto3.client("s3", region_name=REGION)
    for bucket in (V2_BUCKET, OUR_BUCKET):
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    v2 = sagemaker.Session(boto_session=boto3.Session(region_name=REGION))
    return v2, launchbay.Session(region_name=REGION)


def contents(bucket: str) -> dict[str, bytes]:
    s3 = boto3.client("s3", region_name=REGION)
    listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    keys = [item["Key"] for page in listed for item in page.get("Contents", [])]
    return {key: s3.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def ours(value: Any) -> Any:
    """SDK v2's return value as launchbay's, for launchbay's bucket."""
    if isinstance(value, str):
        return value.replace(f"s3://{V2_BUCKET}", f"s3://{OUR_BUCKET}")
    if isinstance(value, list):
        return [ours(item) for item in value]
    return value


def make_tree(root: Path) -> Path:
    for rel, data in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def put_tree(bucket: str, *, sibling: bool = True) -> None:
    """TREE under ``data/``; with ``sibling``, ``data2/sibling.txt`` too (a key sharing the string)."""
    s3 = boto3.client("s3", region_name=REGION)
    for rel, data in TREE.items():
        s3.put_object(Bucket=bucket, Key=f"data/{rel}", Body=data)
    if sibling:
        s3.put_object(Bucket=bucket, Key="data2/sibling.txt", Body=b"sibling")


# -- parse_s3_url and s3_path_join: pure functions, compared on many inputs ---------------------


@pytest.mark.parametrize(
    "url",
    ["s3://bucket/key", "s3://bucket", "s3://bucket/", "s3://bucket//a//b/", "S3://bucket/k",
     "s3://bucket/dir/file.tar.gz", "s3://my.bucket-1/a b/c"],
)  # fmt: skip
def test_parse_s3_url_matches_v2(url: str) -> None:
    from sagemaker.s3 import parse_s3_url as v2_parse

    assert parse_s3_url(url) == v2_parse(url)


@pytest.mark.parametrize("url", ["http://bucket/key", "bucket/key", "file:///tmp/x", ""])
def test_parse_s3_url_refuses_what_v2_refuses_with_a_value_error(url: str) -> None:
    from sagemaker.s3 import parse_s3_url as v2_parse

    with pytest.raises(ValueError):
        v2_parse(url)
    with pytest.raises(InputError) as info:  # a ValueError too, naming the argument
        parse_s3_url(url)
    assert info.value.argument == "url"
    assert str(info.value).startswith(f"Invalid url={url!r}.")
    assert "Accepted: an S3 URI such as 's3://bucket/key'." in str(info.value)


def test_parse_s3_url_keeps_what_urlparse_cuts_and_refuses_no_bucket() -> None:
    from sagemaker.s3 import parse_s3_url as v2_parse

    assert v2_parse("s3://bucket/a#b?c") == ("bucket", "a")  # v2 loses the rest of the key
    assert parse_s3_url("s3://bucket/a#b?c") == ("bucket", "a#b?c")
    with pytest.raises(InputError, match="It names no bucket"):
        parse_s3_url("s3:///key")


def test_s3_path_join_matches_v2() -> None:
    from sagemaker.s3 import s3_path_join as v2_join

    pieces = ["s3://", "s3:/", "s3:", "/", "//", "a", "a/", "/a", "b//c", "", None,
              "s3://bucket", "x/./y", " ", "s3://b/", "//a//"]  # fmt: skip
    compared = 0
    for count in range(0, 4):
        for parts in itertools.product(pieces, repeat=count):
            for end in (False, True):
                expected = v2_join(*parts, with_end_slash=end)
                assert s3_path_join(*parts, with_end_slash=end) == expected, (parts, end)
                compared += 1
    assert compared > 8000


def test_s3_path_join_refuses_a_non_string() -> None:
    with pytest.raises(InputError, match=r"Invalid args\[1\]=3\. .*Accepted: a string"):
        s3_path_join("a", 3)  # type: ignore[arg-type]


# -- S3Uploader ----------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["data", "nested/prefix", "trailing/"])
def test_upload_directory_and_file_as_v2(sdks, tmp_path: Path, prefix: str) -> None:
    from sagemaker.s3 import S3Uploader as V2Uploader

    v2, session = sdks
    tree = make_tree(tmp_path / "tree")
    v2_sent: list[int] = []
    our_sent: list[int] = []
    theirs = [
        V2Uploader.upload(str(tree), f"s3://{V2_BUCKET}/{prefix}", None, v2, v2_sent.append),
        V2Uploader.upload(str(tree / "top.txt"), f"s3://{V2_BUCKET}/single", sagemaker_session=v2),
    ]
    mine = [
        S3Uploader.upload(str(tree), f"s3://{OUR_BUCKET}/{prefix}", None, session, our_sent.append),
        S3Uploader.upload(tree / "top.txt", f"s3://{OUR_BUCKET}/single", sagemaker_session=session),
    ]
    if prefix.endswith("/"):
        # v2 writes "trailing//top.txt"; launchbay joins with one slash (a documented difference)
        assert set(contents(V2_BUCKET)) >= {"trailing//top.txt", "single/top.txt"}
        assert set(contents(OUR_BUCKET)) >= {"trailing/top.txt", "single/top.txt"}
        assert mine == [f"s3://{OUR_BUCKET}/trailing", f"s3://{OUR_BUCKET}/single/top.txt"]
        return
    assert mine == ours(theirs)
    assert contents(OUR_BUCKET) == contents(V2_BUCKET)
    assert sum(our_sent) == sum(v2_sent) == sum(len(data) for data in TREE.values())


def test_upload_with_kms_key_as_v2(sdks, tmp_path: Path) -> None:
    from sagemaker.s3 import S3Uploader as V2Uploader

    v2, session = sdks
    key_id = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["KeyId"]
    tree = make_tree(tmp_path / "tree")
    V2Uploader.upload(str(tree / "top.txt"), f"s3://{V2_BUCKET}/enc", key_id, v2)
    S3Uploader.upload(str(tree / "top.txt"), f"s3://{OUR_BUCKET}/enc", key_id, session)
    V2Uploader.upload_string_as_file_body("x", f"s3://{V2_BUCKET}/s.txt", key_id, v2)
    S3Uploader.upload_string_as_file_body("x", f"s3://{OUR_BUCKET}/s.txt", key_id, session)
    s3 = boto3.client("s3", region_name=REGION)
    for key in ("enc/top.txt", "s.txt"):
        theirs = s3.head_object(Bucket=V2_BUCKET, Key=key)
        mine = s3.head_object(Bucket=OUR_BUCKET, Key=key)
        assert mine["ServerSideEncryption"] == theirs["ServerSideEncryption"] == "aws:kms"
        assert mine["SSEKMSKeyId"] == theirs["SSEKMSKeyId"]


def test_upload_string_and_bytes_as_v2(sdks) -> None:
    from sagemaker.s3 import S3Uploader as V2Uploader

    v2, session = sdks
    text = "line one\nd\u00e9j\u00e0 vu\n"
    calls = [
        ("upload_string_as_file_body", text, "notes/readme.txt"),
        ("upload_bytes", b"\x00\x01binary", "blobs/a.bin"),
        ("upload_bytes", io.BytesIO(b"from a file object"), "blobs/b.bin"),
    ]
    for method, body, key in calls:
        again = io.BytesIO(body.getvalue()) if isinstance(body, io.BytesIO) else body
        theirs = getattr(V2Uploader, method)(body, f"s3://{V2_BUCKET}/{key}", None, v2)
        mine = getattr(S3Uploader, method)(again, f"s3://{OUR_BUCKET}/{key}", None, session)
        assert mine == ours(theirs) == f"s3://{OUR_BUCKET}/{key}"
    assert contents(OUR_BUCKET) == contents(V2_BUCKET)


def test_uploader_errors_name_the_argument(sdks, tmp_path: Path) -> None:
    _, session = sdks
    with pytest.raises(InputError, match=r"^Invalid desired_s3_uri='bucket/x'\. It has no"):
        S3Uploader.upload(str(tmp_path), "bucket/x", sagemaker_session=session)
    with pytest.raises(InputError, match=r"^Invalid desired_s3_uri=None\. It is not a string"):
        S3Uploader.upload_string_as_file_body("x", sagemaker_session=session)
    with pytest.raises(InputError, match=r"^Invalid b='text'\. Accepted: bytes or a binary file"):
        S3Uploader.upload_bytes("text", f"s3://{OUR_BUCKET}/k", sagemaker_session=session)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"^Invalid path=.*Nothing exists at that path"):
        S3Uploader.upload(
            str(tmp_path / "absent"), f"s3://{OUR_BUCKET}/x", sagemaker_session=session
        )


# -- S3Downloader ----------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["data", "data/a", "data/a/b/two.json", "data/top.txt"])
def test_download_as_v2(sdks, tmp_path: Path, prefix: str) -> None:
    from sagemaker.s3 import S3Downloader as V2Downloader

    v2, session = sdks
    # without data2/...: v2 fails on a key that only shares the prefix's string (launchbay
    # leaves it alone; Session.download_data's documented difference)
    put_tree(V2_BUCKET, sibling=False)
    put_tree(OUR_BUCKET, sibling=False)
    v2_dir, our_dir = tmp_path / "v2", tmp_path / "ours"
    theirs = V2Downloader.download(f"s3://{V2_BUCKET}/{prefix}", str(v2_dir), sagemaker_session=v2)
    mine = S3Downloader.download(f"s3://{OUR_BUCKET}/{prefix}", our_dir, sagemaker_session=session)
    assert [os.path.relpath(p, our_dir) for p in mine] == [
        os.path.relpath(p, v2_dir) for p in theirs
    ]
    for path in theirs:
        rel = os.path.relpath(path, v2_dir)
        assert (our_dir / rel).read_bytes() == Path(path).read_bytes()


def test_read_and_list_as_v2(sdks) -> None:
    from sagemaker.s3 import S3Downloader as V2Downloader

    v2, session = sdks
    put_tree(V2_BUCKET)
    put_tree(OUR_BUCKET)
    for key in ("data/top.txt", "data/d/with space.txt", "data/empty.dat"):
        theirs = V2Downloader.read_file(f"s3://{V2_BUCKET}/{key}", v2)
        assert S3Downloader.read_file(f"s3://{OUR_BUCKET}/{key}", session) == theirs
    for key in ("data/a/one.bin", "data/empty.dat"):
        theirs_bytes = V2Downloader.read_bytes(f"s3://{V2_BUCKET}/{key}", v2)
        assert S3Downloader.read_bytes(f"s3://{OUR_BUCKET}/{key}", session) == theirs_bytes
    for prefix in ("", "data", "data/", "data/a", "data2", "nothing"):
        theirs_list = V2Downloader.list(f"s3://{V2_BUCKET}/{prefix}", v2)
        assert S3Downloader.list(f"s3://{OUR_BUCKET}/{prefix}", session) == ours(theirs_list)
    assert S3Downloader.list(f"s3://{OUR_BUCKET}/data", session)[-1] == (
        f"s3://{OUR_BUCKET}/data2/sibling.txt"  # a string prefix, as S3 and v2 list it
    )


def test_list_keeps_folder_markers_as_they_are(sdks) -> None:
    from sagemaker.s3 import S3Downloader as V2Downloader

    v2, session = sdks
    for bucket in (V2_BUCKET, OUR_BUCKET):
        boto3.client("s3", region_name=REGION).put_object(Bucket=bucket, Key="folder/", Body=b"")
    assert V2Downloader.list(f"s3://{V2_BUCKET}/folder", v2) == [f"s3://{V2_BUCKET}/folder"]
    assert S3Downloader.list(f"s3://{OUR_BUCKET}/folder", session) == [
        f"s3://{OUR_BUCKET}/folder/"  # the object's own URI (v2 names "folder", another key)
    ]


def test_downloader_errors(sdks) -> None:
    _, session = sdks
    with pytest.raises(TransferError, match=rf"Reading s3://{OUR_BUCKET}/missing failed"):
        S3Downloader.read_bytes(f"s3://{OUR_BUCKET}/missing", session)
    boto3.client("s3", region_name=REGION).put_object(Bucket=OUR_BUCKET, Key="bin", Body=b"\xff")
    with pytest.raises(InputError, match="is not UTF-8 text"):
        S3Downloader.read_file(f"s3://{OUR_BUCKET}/bin", session)
    with pytest.raises(InputError, match=r"^Invalid s3_uri='http://x/y'\. Its scheme is 'http'"):
        S3Downloader.list("http://x/y", session)
