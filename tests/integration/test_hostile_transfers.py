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
