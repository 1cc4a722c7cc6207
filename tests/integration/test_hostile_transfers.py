"""S3 transfers and code staging under hostile conditions (issue 25), against moto's server.

Real processes, signals, FIFOs and a slow TCP link (a throttling proxy in front
of moto, on 127.0.0.1); nothing of launchbay is mocked.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from launchbay import transfer

REGION = "us-west-2"
MIB = 1024 * 1024


@pytest.fixture
def s3(aws: str) -> Any:
    return transfer.tune_client(boto3.client("s3", region_name=REGION))


def _bucket(client: Any, name: str) -> str:
    client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
    return name


def _run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )


# -- item 24: the code archive is never held whole in memory ---------------------------------
_PACKAGE_AND_STAGE = """
import json, resource, sys
import launchbay
from launchbay.code import code_s3_uri, package_code, stage_code, stage_code_file

src, cache, staged = sys.argv[1:4]
session = launchbay.Session(region_name="us-west-2")
session.s3_client.head_bucket(Bucket="code-bucket")  # boto3 and its client loaded: the baseline

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

try:  # reset the peak (VmHWM) to what is resident now (Linux 4.0+)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS")
except OSError:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
peak = lambda: status("VmHWM")
bundle = package_code("train.py", src, cache_dir=cache)  # built
again = package_code("train.py", src, cache_dir=cache)  # from the cache
assert again.sha256 == bundle.sha256
stage_code(session, bundle, code_s3_uri("code-bucket", None, bundle))
stage_code_file(bundle, "file://" + staged)
print(json.dumps({"base": base, "peak": peak(), "size": bundle.size, "sha256": bundle.sha256}))
"""


def test_packaging_and_staging_a_large_tree_keeps_memory_bounded(s3: Any, tmp_path: Path) -> None:
    """A 96 MiB incompressible file: the client's peak memory grows far less than that.

    The archive used to be built in a BytesIO and uploaded from bytes (420 MB
    of memory for a 400 MB file); it is now streamed to a file and uploaded
    from it, in parts.
    """
    _bucket(s3, "code-bucket")
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('train')\n")
    with open(src / "weights.bin", "wb") as out:
        for _ in range(96):
            out.write(os.urandom(MIB))
    staged = tmp_path / "staged" / "sourcedir.tar.gz"

    result = _run_python(_PACKAGE_AND_STAGE, str(src), str(tmp_path / "cache"), str(staged))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["size"] > 96 * MIB
    grown = report["peak"] - report["base"]
    # packaging costs ~1 MiB; the multipart upload's threads and buffers ~20 MiB, whatever the size
    assert grown < 48 * MIB, f"peak memory grew {grown / MIB:.0f} MiB for a 96 MiB archive"

    uploaded = s3.get_object(
        Bucket="code-bucket", Key=f"source/{report['sha256']}/sourcedir.tar.gz"
    )
    digest = hashlib.sha256()
    for chunk in uploaded["Body"].iter_chunks(MIB):
        digest.update(chunk)
    assert digest.hexdigest() == report["sha256"]
    assert hashlib.sha256(staged.read_bytes()).hexdigest() == report["sha256"]


# -- item 19: download_data takes key_prefix as a path --------------------------------------
def test_download_data_ignores_keys_that_only_share_the_string_prefix(
    session: Any, tmp_path: Path
) -> None:
    """``key_prefix="data"`` with a sibling ``data2/...``: ``data`` is downloaded, not refused."""
    bucket = session.default_bucket()
    bodies = {
        "data": b"the object itself",
        "data/a.txt": b"a",
        "data/sub/b.txt": b"b",
        "data2/c.txt": b"sibling",
        "database/d.txt": b"sibling",
        "data.csv": b"sibling",
    }
    for key, body in bodies.items():
        session.upload_bytes(body, bucket, key)

    out = tmp_path / "out"
    paths = session.download_data(out, bucket, key_prefix="data")
    assert paths == [str(out / "data"), str(out / "a.txt"), str(out / "sub" / "b.txt")]
    assert (out / "data").read_bytes() == b"the object itself"
    assert (out / "a.txt").read_bytes() == b"a" and (out / "sub" / "b.txt").read_bytes() == b"b"
    assert sorted(p.name for p in out.rglob("*")) == ["a.txt", "b.txt", "data", "sub"]

    # the folder spelling and the sibling itself
    assert session.download_data(tmp_path / "o2", bucket, "data/") == [
        str(tmp_path / "o2" / "a.txt"),
        str(tmp_path / "o2" / "sub" / "b.txt"),
    ]
    assert session.download_data(tmp_path / "o3", bucket, "data2") == [
        str(tmp_path / "o3" / "c.txt")
    ]
    assert session.download_data(tmp_path / "o4", bucket, "dat") == []


# -- item 20: upload_data never blocks on a FIFO ---------------------------------------------
_UPLOAD_SPECIAL = """
import os, sys
import launchbay
from launchbay import transfer
from launchbay.errors import InputError

tree, fifo = sys.argv[1:3]
session = launchbay.Session(region_name="us-west-2")
print("URI", session.upload_data(tree, bucket="fifo-bucket", key_prefix="d"), flush=True)
for call in (
    lambda: session.upload_data(fifo, bucket="fifo-bucket", key_prefix="f"),
    lambda: session.upload_file(fifo, "fifo-bucket", "f/one"),
):
    try:
        call()
    except InputError as exc:
        print("REFUSED", exc, flush=True)
# a FIFO swapped in after a scan (the engine given it as a file) is skipped, not read
transfer.upload_files(session.s3_client, "fifo-bucket", [(fifo, "swapped", 10)], progress=False)
transfer.upload_files(
    session.s3_client, "fifo-bucket", [(fifo, "swapped-large", 9 * 2**20)], progress=False
)
print("DONE", flush=True)
"""


def test_upload_data_skips_or_refuses_fifos_and_never_blocks(s3: Any, tmp_path: Path) -> None:
    _bucket(s3, "fifo-bucket")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "ok.txt").write_text("ok")
    (tree / "sub" / "more.txt").write_text("more")
    os.mkfifo(tree / "pipe")
    (tree / "sub" / "link-to-pipe").symlink_to(tree / "pipe")
    lonely = tmp_path / "lonely-pipe"
    os.mkfifo(lonely)

    # no writer ever opens the FIFOs: a blocking read would hang until the timeout
    result = _run_python(_UPLOAD_SPECIAL, str(tree), str(lonely), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "URI s3://fifo-bucket/d" in out and "DONE" in out
    refused = [line for line in out.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 2
    for line in refused:
        assert str(lonely) in line and "FIFO" in line and "Accepted:" in line
    for name in ("pipe", "link-to-pipe"):
        assert f"{name}: it is a FIFO (named pipe)" in result.stderr, result.stderr[-3000:]
    listed = s3.list_objects_v2(Bucket="fifo-bucket").get("Contents", [])
    assert sorted(o["Key"] for o in listed) == ["d/ok.txt", "d/sub/more.txt"]
