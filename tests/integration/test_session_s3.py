"""launchbay.Session against a real moto server: default bucket, upload/download, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import botocore.exceptions
import pytest

import launchbay
from launchbay import session as session_module
from launchbay.errors import (
    ConfigurationError,
    InputError,
    MissingDependencyError,
    TransferError,
)
from launchbay.s3uri import parse_s3_uri

REGION = "us-west-2"
ACCOUNT = "123456789012"  # moto's account
DEFAULT_BUCKET = f"sagemaker-{REGION}-{ACCOUNT}"


def s3(region: str = REGION):
    return boto3.client("s3", region_name=region)


def keys(bucket: str, prefix: str = "") -> list[str]:
    pages = s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def make_tree(root: Path) -> dict[str, bytes]:
    """A nested directory; returns {relative posix path: content}."""
    files = {
        "top.txt": b"top\n",
        "a/one.bin": os.urandom(3000),
        "a/b/two.json": b'{"x": 1}',
        "a/b/c/three.csv": b"1,2,3\n" * 100,
        "empty.dat": b"",
        "d/with space.txt": b"spaces are fine",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def count_calls(client, operation: str) -> list[dict]:
    """Record the parameters of every call of ``operation`` made by a real boto3 client."""
    calls: list[dict] = []
    client.meta.events.register(
        f"provide-client-params.s3.{operation}", lambda params, **_: calls.append(dict(params))
    )
    return calls


# -- import hygiene and configuration ------------------------------------------------------
def test_import_launchbay_does_not_import_boto3() -> None:
    code = (
        "import sys, launchbay, launchbay.session, launchbay.code, launchbay.s3uri;"
        "launchbay.Session(region_name='us-west-2');"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('boto3', 'botocore', 's3transfer'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json;" + code],
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout) == []


def test_missing_boto3_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # makes ``import boto3`` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'launchbay\[aws\]'"):
        launchbay.Session(region_name=REGION).boto_session  # noqa: B018


def test_missing_region_is_a_clear_error(aws: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ConfigurationError, match=r"region_name=None.*AWS_DEFAULT_REGION"):
        launchbay.Session().boto_region_name  # noqa: B018


def test_region_and_clients(session: launchbay.Session) -> None:
    assert session.boto_region_name == REGION
    assert session.local_mode is False
    assert session.s3_client is session.s3_client
    config = session.s3_client.meta.config
    assert config.retries["mode"] == "standard"
    assert config.max_pool_connections >= session_module.MAX_WORKERS
    assert session.sagemaker_client.meta.region_name == REGION


def test_small_puts_skip_the_100_continue_round_trip(session: launchbay.Session) -> None:
    bucket = session.default_bucket()
    expect: dict[int, str | bytes | None] = {}
    session.s3_client.meta.events.register(
        "before-send.s3.PutObject",
        lambda request, **_: expect.__setitem__(
            int(request.headers["Content-Length"]), request.headers.get("Expect")
        ),
    )
    session.upload_bytes(b"x" * 4096, bucket, "small")
    session.upload_bytes(b"x" * (session_module.SMALL_BODY_LIMIT + 1), bucket, "large")
    assert expect[4096] is None
    assert expect[session_module.SMALL_BODY_LIMIT + 1] in ("100-continue", b"100-continue")
    assert session.object_exists(bucket, "small") and session.object_exists(bucket, "large")


# -- account, default bucket, roles ---------------------------------------------------------
def test_default_bucket_name_has_no_side_effects(session: launchbay.Session) -> None:
    assert session.account_id() == ACCOUNT
    assert session.default_bucket_name() == DEFAULT_BUCKET
    assert s3().list_buckets()["Buckets"] == []


def test_default_bucket_is_created_with_location_constraint(session: launchbay.Session) -> None:
    creates = count_calls(session.s3_client, "CreateBucket")
    assert session.default_bucket() == DEFAULT_BUCKET
    assert session.default_bucket() == DEFAULT_BUCKET  # cached: one create only
    assert creates == [
        {"Bucket": DEFAULT_BUCKET, "CreateBucketConfiguration": {"LocationConstraint": REGION}}
    ]
    assert s3().get_bucket_location(Bucket=DEFAULT_BUCKET)["LocationConstraint"] == REGION


def test_default_bucket_in_us_east_1_has_no_location_constraint(aws: str) -> None:
    sess = launchbay.Session(region_name="us-east-1")
    creates = count_calls(sess.s3_client, "CreateBucket")
    assert sess.default_bucket() == f"sagemaker-us-east-1-{ACCOUNT}"
    assert creates == [{"Bucket": f"sagemaker-us-east-1-{ACCOUNT}"}]


def test_existing_default_bucket_is_reused(session: launchbay.Session) -> None:
    s3().create_bucket(
        Bucket=DEFAULT_BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    creates = count_calls(session.s3_client, "CreateBucket")
    assert session.default_bucket() == DEFAULT_BUCKET
    assert creates == []


def test_default_bucket_override_and_prefix(aws: str, tmp_path: Path) -> None:
    sess = launchbay.Session(
        region_name=REGION, default_bucket="my-team-bucket", default_bucket_prefix="team/x/"
    )
    assert sess.default_bucket_name() == "my-team-bucket"
    assert sess.default_bucket_prefix == "team/x/"
    (tmp_path / "f.txt").write_text("hi")
    uri = sess.upload_data(str(tmp_path / "f.txt"))
    assert uri == "s3://my-team-bucket/team/x/data/f.txt"
    assert keys("my-team-bucket") == ["team/x/data/f.txt"]
    # an explicit bucket gets no default prefix (as in SDK v2)
    s3().create_bucket(
        Bucket="other-bucket", CreateBucketConfiguration={"LocationConstraint": REGION}
    )
    assert sess.upload_data(str(tmp_path / "f.txt"), bucket="other-bucket") == (
        "s3://other-bucket/data/f.txt"
    )


def test_expand_role(session: launchbay.Session) -> None:
    iam = boto3.client("iam", region_name=REGION)
    arn = iam.create_role(RoleName="TrainRole", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    assert session.expand_role("TrainRole") == arn
    assert session.expand_role("arn:aws:iam::1:role/x/Y") == "arn:aws:iam::1:role/x/Y"
    with pytest.raises(ConfigurationError, match=r"Invalid role='NoSuchRole'.*Accepted: an IAM"):
        session.expand_role("NoSuchRole")


# -- upload_data ----------------------------------------------------------------------------
def test_upload_file(session: launchbay.Session, tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    path.write_bytes(b"a,b\n1,2\n")
    uri = session.upload_data(str(path), key_prefix="inputs/run1")
    assert uri == f"s3://{DEFAULT_BUCKET}/inputs/run1/train.csv"
    bucket, key = parse_s3_uri(uri)
    assert s3().get_object(Bucket=bucket, Key=key)["Body"].read() == b"a,b\n1,2\n"


def test_upload_directory_and_download_round_trip(
    session: launchbay.Session, tmp_path: Path
) -> None:
    files = make_tree(tmp_path / "src")
    uri = session.upload_data(tmp_path / "src", key_prefix="datasets/v1", max_workers=4)
    assert uri == f"s3://{DEFAULT_BUCKET}/datasets/v1"
    assert keys(DEFAULT_BUCKET) == sorted(f"datasets/v1/{rel}" for rel in files)

    out = tmp_path / "out"
    paths = session.download_data(str(out), DEFAULT_BUCKET, key_prefix="datasets/v1")
    assert sorted(paths) == sorted(os.path.join(str(out), *rel.split("/")) for rel in files)
    for rel, data in files.items():
        assert (out / rel).read_bytes() == data, rel
    assert not [p for p in out.rglob("*") if p.name.startswith(".launchbay-")]  # no temp files


def test_download_of_one_file_and_of_nothing(session: launchbay.Session, tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    session.upload_data(str(tmp_path / "src"), key_prefix="d")
    # a prefix with an extension keeps only the base name (SDK v2 behaviour)
    paths = session.download_data(str(tmp_path / "one"), DEFAULT_BUCKET, "d/a/b/two.json")
    assert paths == [str(tmp_path / "one" / "two.json")]
    assert (tmp_path / "one" / "two.json").read_bytes() == b'{"x": 1}'
    assert session.download_data(str(tmp_path / "none"), DEFAULT_BUCKET, "nothing/here") == []


def test_multipart_round_trip_with_extra_args(
    session: launchbay.Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mib = 1024 * 1024
    monkeypatch.setattr(session_module, "MULTIPART_THRESHOLD", 5 * mib)
    monkeypatch.setattr(session_module, "MULTIPART_CHUNKSIZE", 5 * mib)
    src = tmp_path / "src"
    src.mkdir()
    big = os.urandom(11 * mib)
    (src / "big.bin").write_bytes(big)
    (src / "small.txt").write_bytes(b"small")
    session.upload_data(src, key_prefix="mp", extra_args={"Metadata": {"owner": "lb"}})

    head = s3().head_object(Bucket=DEFAULT_BUCKET, Key="mp/big.bin")
    assert head["ETag"].strip('"').endswith("-3"), "11 MiB in 5 MiB parts -> 3 parts"
    assert head["Metadata"] == {"owner": "lb"}
    assert s3().head_object(Bucket=DEFAULT_BUCKET, Key="mp/small.txt")["Metadata"] == {
        "owner": "lb"
    }
    paths = session.download_data(tmp_path / "out", DEFAULT_BUCKET, "mp")
    assert len(paths) == 2
    assert (tmp_path / "out" / "big.bin").read_bytes() == big


def test_progress_forced_on_reports_bytes_and_files(
    session: launchbay.Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(tmp_path / "src")
    total = sum(p.stat().st_size for p in (tmp_path / "src").rglob("*") if p.is_file())
    session.upload_data(tmp_path / "src", progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err  # not a terminal: plain lines
    final = err.rstrip("\n").split("\n")[-1]
    assert final.startswith("upload [########################] 100.0%")
    assert "6/6 files" in final
    assert f"{session_module.format_bytes(total)}/{session_module.format_bytes(total)}" in final

    session.download_data(tmp_path / "out", DEFAULT_BUCKET, "data", progress=True)
    final = capsys.readouterr().err.rstrip("\n").split("\n")[-1]
    assert final.startswith("download [") and "6/6 files" in final


def test_callback_receives_every_byte(session: launchbay.Session, tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src")
    seen: list[int] = []
    session.upload_data(tmp_path / "src", progress=False, callback=seen.append)
    assert sum(seen) == sum(len(data) for data in files.values())


def test_progress_off_and_auto_off_when_not_a_tty(
    session: launchbay.Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_tree(tmp_path / "src")
    session.upload_data(tmp_path / "src", progress=False)
    session.upload_data(tmp_path / "src")  # auto: captured stderr is not a TTY
    assert capsys.readouterr().err == ""


# -- small helpers ----------------------------------------------------------------------------
def test_object_exists_upload_bytes_and_upload_file(
    session: launchbay.Session, tmp_path: Path
) -> None:
    bucket = session.default_bucket()
    assert session.object_exists(bucket, "k/blob") is False
    assert session.upload_bytes(b"payload", bucket, "k/blob") == f"s3://{bucket}/k/blob"
    assert session.object_exists(bucket, "k/blob") is True
    (tmp_path / "f").write_bytes(b"file")
    assert session.upload_file(tmp_path / "f", bucket, "exact/key.bin") == (
        f"s3://{bucket}/exact/key.bin"
    )
    assert s3().get_object(Bucket=bucket, Key="exact/key.bin")["Body"].read() == b"file"


# -- errors ------------------------------------------------------------------------------------
def test_missing_path_is_an_input_error(session: launchbay.Session, tmp_path: Path) -> None:
    missing = str(tmp_path / "does-not-exist")
    with pytest.raises(InputError) as info:
        session.upload_data(missing, bucket="some-bucket")
    assert info.value.argument == "path"
    assert f"Invalid path={missing!r}" in str(info.value)
    assert "Accepted: an existing local file or directory" in str(info.value)


def test_bad_bucket_and_extra_args(session: launchbay.Session, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match=r"Invalid bucket='Not_A_Bucket'.*Accepted: an S3 bucket"):
        session.upload_data(str(tmp_path / "f"), bucket="Not_A_Bucket")
    with pytest.raises(InputError, match=r"Invalid extra_args=.*Unknown key\(s\) \['Colour'\]"):
        session.upload_data(str(tmp_path / "f"), bucket="b-1", extra_args={"Colour": "red"})
    with pytest.raises(ConfigurationError, match=r"Invalid max_workers=0"):
        session.upload_data(str(tmp_path / "f"), bucket="b-1", max_workers=0)


def test_bad_uri_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"Invalid code_location='my-bucket/code'.*s3://"):
        parse_s3_uri("my-bucket/code", argument="code_location")


def test_missing_bucket_is_a_transfer_error(session: launchbay.Session, tmp_path: Path) -> None:
    make_tree(tmp_path / "src")
    with pytest.raises(TransferError) as info:
        session.upload_data(tmp_path / "src", bucket="no-such-bucket", key_prefix="p")
    message = str(info.value)
    assert "s3://no-such-bucket/p/" in message
    assert str(tmp_path / "src") in message  # names the local file
    assert "NoSuchBucket" in message
    assert isinstance(info.value.__cause__, botocore.exceptions.ClientError)

    (tmp_path / "single.txt").write_text("x")
    with pytest.raises(TransferError, match=r"single\.txt.*s3://no-such-bucket/p/single\.txt"):
        session.upload_data(tmp_path / "single.txt", bucket="no-such-bucket", key_prefix="p")

    with pytest.raises(TransferError, match=r"Listing s3://no-such-bucket/p failed.*NoSuchBucket"):
        session.download_data(tmp_path / "out", "no-such-bucket", "p")


def test_download_refuses_keys_that_escape_path(session: launchbay.Session, tmp_path: Path) -> None:
    bucket = session.default_bucket()
    session.upload_bytes(b"fine", bucket, "data/ok.txt")
    session.upload_bytes(b"evil", bucket, "data/../../evil.txt")
    out = tmp_path / "deep" / "out"
    with pytest.raises(TransferError, match=r"Refusing to download .*evil\.txt.*outside path="):
        session.download_data(out, bucket, "data")
    assert not (tmp_path / "evil.txt").exists()
    assert not (tmp_path / "deep" / "evil.txt").exists()
    assert not out.exists(), "nothing is written when a key is refused"

    # a key that only shares the string prefix is not under it: left alone, never refused
    session.s3_client.delete_object(Bucket=bucket, Key="data/../../evil.txt")
    session.upload_bytes(b"x", bucket, "database/x.txt")
    assert session.download_data(tmp_path / "o2", bucket, "data") == [
        str(tmp_path / "o2" / "ok.txt")
    ]
    assert session.download_data(tmp_path / "o3", bucket, "database/") == [
        str(tmp_path / "o3" / "x.txt")
    ]


def test_a_partial_upload_says_how_many_files_went_up_and_which_failed(
    session: launchbay.Session, tmp_path: Path
) -> None:
    """A file removed after the listing (a real condition): the error counts what went up."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(10):
        (src / f"f{i:02d}.txt").write_text(str(i))
    victim = src / "f05.txt"

    def remove_one(_bytes: int) -> None:  # runs after the first file went up
        if victim.exists():
            victim.unlink()

    bucket = session.default_bucket()
    with pytest.raises(TransferError) as info:
        session.upload_data(
            src, bucket=bucket, key_prefix="p", max_workers=1, progress=False, callback=remove_one
        )
    message = str(info.value)
    keys = [
        o["Key"]
        for o in session.s3_client.list_objects_v2(Bucket=bucket, Prefix="p/").get("Contents", [])
    ]
    assert len(keys) >= 5 and "p/f05.txt" not in keys
    assert message.startswith(f"Uploaded {len(keys)} of 10 file(s) to s3://{bucket}/; 1 failed:")
    assert str(victim) in message and f"s3://{bucket}/p/f05.txt" in message
    assert "No such file or directory" in message
    if len(keys) < 9:
        assert f"{9 - len(keys)} file(s) were not attempted" in message
