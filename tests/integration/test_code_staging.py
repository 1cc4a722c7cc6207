"""stage_code against a real moto server: content-addressed, uploaded once, KMS as SDK v2."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import boto3
import pytest

import launchbay
from launchbay.code import code_s3_uri, package_code, stage_code
from launchbay.errors import InputError, TransferError
from launchbay.s3uri import parse_s3_uri

REGION = "us-west-2"


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "lib").mkdir(parents=True)
    (root / "train.py").write_text("print('hello')\n")
    (root / "lib" / "helpers.py").write_text("def helper(): return 1\n")
    return root


def count_puts(session: launchbay.Session) -> list[str]:
    """Keys of every PutObject the session's real S3 client sends."""
    keys: list[str] = []
    session.s3_client.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: keys.append(params["Key"])
    )
    return keys


def test_stage_code_uploads_once(session: launchbay.Session, src: Path) -> None:
    bucket = session.default_bucket()
    bundle = package_code("train.py", src)
    uri = code_s3_uri(bucket, "jobs", bundle)
    assert uri == f"s3://{bucket}/jobs/source/{bundle.sha256}/sourcedir.tar.gz"
    puts = count_puts(session)

    assert stage_code(session, bundle, uri) is True
    _, key = parse_s3_uri(uri)
    s3 = boto3.client("s3", region_name=REGION)
    first = s3.head_object(Bucket=bucket, Key=key)
    assert puts == [key]

    # the same files packaged again give the same URI; nothing is uploaded
    again = package_code("train.py", src)
    assert code_s3_uri(bucket, "jobs", again) == uri
    assert stage_code(session, again, uri) is False
    assert puts == [key]
    assert s3.head_object(Bucket=bucket, Key=key)["LastModified"] == first["LastModified"]

    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == bundle.data
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["lib", "lib/helpers.py", "train.py"]


def test_changed_code_gets_a_new_location(session: launchbay.Session, src: Path) -> None:
    bucket = session.default_bucket()
    first = package_code("train.py", src)
    stage_code(session, first, code_s3_uri(bucket, None, first))
    (src / "train.py").write_text("print('changed')\n")
    second = package_code("train.py", src)
    assert second.sha256 != first.sha256
    assert stage_code(session, second, code_s3_uri(bucket, None, second)) is True
    listed = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in listed) == sorted(
        f"source/{b.sha256}/sourcedir.tar.gz" for b in (first, second)
    )


def test_computing_the_uri_uploads_nothing(session: launchbay.Session, src: Path) -> None:
    bundle = package_code("train.py", src)
    name = session.default_bucket_name()
    code_s3_uri(name, "dry-run", bundle)
    assert boto3.client("s3", region_name=REGION).list_buckets()["Buckets"] == []


def test_stage_code_with_kms_key(session: launchbay.Session, src: Path) -> None:
    kms = boto3.client("kms", region_name=REGION)
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    bucket = session.default_bucket()
    bundle = package_code("train.py", src)
    uri = code_s3_uri(bucket, "", bundle)
    sent: list[dict] = []
    session.s3_client.meta.events.register(
        "provide-client-params.s3.PutObject", lambda params, **_: sent.append(dict(params))
    )
    assert stage_code(session, bundle, uri, kms_key=key_id) is True
    assert sent[0]["ServerSideEncryption"] == "aws:kms"
    assert sent[0]["SSEKMSKeyId"] == key_id
    head = boto3.client("s3", region_name=REGION).head_object(
        Bucket=bucket, Key=parse_s3_uri(uri)[1]
    )
    assert head["ServerSideEncryption"] == "aws:kms"
    assert key_id in head["SSEKMSKeyId"]


def test_stage_code_errors(session: launchbay.Session, src: Path) -> None:
    bundle = package_code("train.py", src)
    with pytest.raises(InputError, match=r"Invalid s3_uri='bucket/key'"):
        stage_code(session, bundle, "bucket/key")
    with pytest.raises(TransferError, match=r"s3://no-such-bucket/source/"):
        stage_code(session, bundle, code_s3_uri("no-such-bucket", "", bundle))
