"""launchbay.transfer, the one S3 engine of Session and the local backends, against moto's server.

Listing across pages, many small objects, an object above the multipart
threshold, error messages for a missing bucket and for denied access, progress
hooks, and what a failure or Ctrl-C leaves on disk (whole files or nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import pytest

from launchbay import session as session_module
from launchbay import transfer
from launchbay.backends.local import outputs, staging
from launchbay.errors import TransferError
from launchbay.transfer import Limits, S3Object

REGION = "us-west-2"
BUCKET = "transfer-bucket"
MIB = 1024 * 1024


@pytest.fixture
def s3(aws: str) -> Any:
    """A real boto3 S3 client on a fresh moto server, with ``BUCKET`` created."""
    client = transfer.tune_client(boto3.client("s3", region_name=REGION))
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    return client


def record(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every ``operation`` call the real client makes from now on."""
    calls: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.s3.{operation}", lambda params, **_: calls.append(dict(params))
    )
    return calls


def put_many(client: Any, prefix: str, count: int, size: int = 64) -> dict[str, bytes]:
    bodies = {f"{prefix}{i:04d}.bin": os.urandom(size) for i in range(count)}
    for key, body in bodies.items():
        client.put_object(Bucket=BUCKET, Key=key, Body=body)
    return bodies


def leftovers(root: Path) -> list[Path]:
    """Temporary download files left anywhere under ``root``."""
    return [p for p in root.rglob("*") if p.name.startswith(".launchbay-")]


# -- listing ---------------------------------------------------------------------------------
def test_listing_follows_every_page_and_matches_the_prefix_as_s3_does(s3: Any) -> None:
    put_many(s3, "data/", 7)
    s3.put_object(Bucket=BUCKET, Key="database/x.txt", Body=b"x")  # "data" matches it too
    s3.put_object(Bucket=BUCKET, Key="data/dir/", Body=b"")  # a directory marker
    s3.put_object(Bucket=BUCKET, Key="dat", Body=b"no")
    s3.put_object(Bucket=BUCKET, Key="other/y.txt", Body=b"no")
    calls = record(s3, "ListObjectsV2")
    # Three keys a page, so nine keys take several pages (S3 would give 1,000 a page).
    s3.meta.events.register(
        "provide-client-params.s3.ListObjectsV2", lambda params, **_: params.update(MaxKeys=3)
    )

    found = transfer.list_objects(s3, BUCKET, "data")

    keys = [o.key for o in found]
    assert keys == [f"data/{i:04d}.bin" for i in range(7)] + ["data/dir/", "database/x.txt"]
    assert len(calls) == 3, "every page is read"
    assert all(isinstance(o, S3Object) and o.bucket == BUCKET for o in found)
    assert found[0].size == 64 and found[0].etag and '"' not in found[0].etag
    assert found[0].uri == f"s3://{BUCKET}/data/0000.bin"
    assert [o.key for o in transfer.list_objects(s3, BUCKET, "data/")][-1] == "data/dir/"
    assert transfer.list_objects(s3, BUCKET, "nothing/") == []


# -- many small objects ----------------------------------------------------------------------
def test_many_small_files_round_trip_one_request_each(s3: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    expected: dict[str, bytes] = {}
    for i in range(150):
        rel = f"part-{i % 5}/f{i:03d}.txt"
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(os.urandom(100 + i))
        expected[rel] = (src / rel).read_bytes()
    puts = record(s3, "PutObject")
    multipart = record(s3, "CreateMultipartUpload")
    sent: list[int] = []

    files = transfer.walk_files(str(src), "many")
    transfer.upload_files(
        s3, BUCKET, files, limits=Limits(workers=8), progress=False, callback=sent.append
    )

    assert len(puts) == 150 and multipart == []
    assert sum(sent) == sum(len(b) for b in expected.values())
    out = tmp_path / "out"
    paths = transfer.download_prefix(s3, BUCKET, "many", str(out), limits=Limits(workers=8))
    assert paths == [str(out / rel) for rel in sorted(expected)]
    for rel, body in expected.items():
        assert (out / rel).read_bytes() == body
    assert leftovers(out) == []


# -- above the multipart threshold -------------------------------------------------------------
@pytest.mark.parametrize("opened_by", ["path", "open_file"])
def test_a_file_above_the_threshold_goes_in_parts_both_ways(
    s3: Any, tmp_path: Path, opened_by: str
) -> None:
    limits = Limits(workers=4, multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(11 * MIB))
    small = tmp_path / "small.txt"
    small.write_bytes(b"small")
    sent: list[int] = []
    open_file = (lambda path: os.open(path, os.O_RDONLY)) if opened_by == "open_file" else None

    transfer.upload_files(
        s3,
        BUCKET,
        [(str(big), "mp/big.bin", big.stat().st_size), (str(small), "mp/small.txt", 5)],
        limits=limits,
        extra_args={"Metadata": {"owner": "lb"}},
        progress=False,
        callback=sent.append,
        open_file=open_file,
    )

    head = s3.head_object(Bucket=BUCKET, Key="mp/big.bin")
    assert head["ETag"].strip('"').endswith("-3"), "11 MiB in 5 MiB parts -> 3 parts"
    assert head["Metadata"] == {"owner": "lb"}
    assert sum(sent) == 11 * MIB + 5
    objects = transfer.list_objects(s3, BUCKET, "mp/")
    gets = record(s3, "GetObject")
    out = tmp_path / "out"
    transfer.download_objects(
        s3, [(o, str(out / "nested" / o.key)) for o in objects], limits=limits, progress=False
    )
    assert (out / "nested" / "mp" / "big.bin").read_bytes() == big.read_bytes()
    assert (out / "nested" / "mp" / "small.txt").read_bytes() == b"small"
    assert len([g for g in gets if "Range" in g]) == 3, "the big one is fetched in ranges"
    assert leftovers(out) == []


def test_large_objects_download_side_by_side_each_whole(s3: Any, tmp_path: Path) -> None:
    """Several large objects are fetched at once (parts of different objects in flight
    together: a server serving one object's parts in turn is then busy on several)."""
    bodies = put_many(s3, "big/", 6, size=3 * MIB)
    objects = transfer.list_objects(s3, BUCKET, "big/")
    in_flight: dict[int, str] = {}
    most = 0
    lock = threading.Lock()

    def before(params: dict[str, Any], **_: Any) -> None:
        nonlocal most
        with lock:
            in_flight[threading.get_ident()] = params["Key"]
            most = max(most, len(set(in_flight.values())))

    def after(**_: Any) -> None:
        with lock:
            in_flight.pop(threading.get_ident(), None)

    s3.meta.events.register("provide-client-params.s3.GetObject", before)
    s3.meta.events.register("after-call.s3.GetObject", after)
    limits = Limits(workers=4, multipart_threshold=MIB, multipart_chunksize=MIB)
    out = tmp_path / "out"
    transfer.download_objects(
        s3, [(o, str(out / o.key)) for o in objects], limits=limits, progress=False
    )
    assert assert_whole_or_absent(out, bodies) == len(bodies)
    assert most > 1, "one large object at a time"


def test_default_threshold_is_8_mib_and_shared() -> None:
    assert transfer.MULTIPART_THRESHOLD == 8 * MIB == Limits().multipart_threshold
    assert session_module.MULTIPART_THRESHOLD is transfer.MULTIPART_THRESHOLD
    assert not any(hasattr(m, "_MULTIPART_THRESHOLD") for m in (staging, outputs))
    config = Limits().transfer_config()
    assert config.multipart_threshold == config.multipart_chunksize == 8 * MIB
    assert config.max_concurrency == transfer.LARGE_FILE_CONCURRENCY


# -- error mapping -----------------------------------------------------------------------------
def test_a_missing_bucket_names_the_bucket_key_and_file(s3: Any, tmp_path: Path) -> None:
    local = tmp_path / "f.txt"
    local.write_text("x")
    with pytest.raises(TransferError) as info:
        transfer.upload_files(s3, "no-such-bucket", [(str(local), "p/f.txt", 1)], progress=False)
    assert str(info.value).startswith(
        f"Upload of {str(local)!r} to s3://no-such-bucket/p/f.txt failed: "
    )
    assert "NoSuchBucket" in str(info.value)
    assert isinstance(info.value.__cause__, botocore.exceptions.ClientError)

    with pytest.raises(
        TransferError, match=r"^Listing s3://no-such-bucket/p/ failed: .*NoSuchBucket"
    ):
        transfer.list_objects(s3, "no-such-bucket", "p/")

    ghost = S3Object("no-such-bucket", "p/f.txt", "", 1)
    destination = tmp_path / "out" / "f.txt"
    with pytest.raises(TransferError) as info:
        transfer.download_objects(s3, [(ghost, str(destination))], progress=False)
    assert str(info.value).startswith(
        f"Download of s3://no-such-bucket/p/f.txt to {str(destination)!r} failed: "
    )
    assert not destination.exists() and leftovers(tmp_path) == []
    assert transfer.object_exists(s3, "no-such-bucket", "p/f.txt") is False

    with pytest.raises(TransferError, match=r"^Upload of 3 bytes to s3://no-such-bucket/k failed"):
        transfer.upload_bytes(s3, b"abc", "no-such-bucket", "k")


def test_denied_access_is_a_transfer_error_naming_the_object(s3: Any, tmp_path: Path) -> None:
    s3.put_object(Bucket=BUCKET, Key="secret/a.txt", Body=b"a")
    deny = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"],
            }
        ],
    }
    s3.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps(deny))
    local = tmp_path / "f.txt"
    local.write_text("x")

    with pytest.raises(TransferError) as info:
        transfer.upload_files(s3, BUCKET, [(str(local), "secret/f.txt", 1)], progress=False)
    assert f"to s3://{BUCKET}/secret/f.txt failed: " in str(info.value)
    assert "Forbidden" in str(info.value) or "AccessDenied" in str(info.value)

    obj = S3Object(BUCKET, "secret/a.txt", "", 1)
    with pytest.raises(TransferError, match=rf"^Download of s3://{BUCKET}/secret/a\.txt to "):
        transfer.download_objects(s3, [(obj, str(tmp_path / "a.txt"))], progress=False)
    assert not (tmp_path / "a.txt").exists() and leftovers(tmp_path) == []

    with pytest.raises(TransferError, match=rf"Could not check s3://{BUCKET}/secret/a\.txt"):
        transfer.object_exists(s3, BUCKET, "secret/a.txt")


def test_a_partial_upload_summary_names_what_failed(s3: Any, tmp_path: Path) -> None:
    files = []
    for i in range(4):
        (tmp_path / f"f{i}").write_text(str(i))
        files.append((str(tmp_path / f"f{i}"), f"p/f{i}", 1))
    files.append((str(tmp_path / "gone"), "p/gone", 1))  # listed, then removed
    with pytest.raises(TransferError) as info:
        transfer.upload_files(s3, BUCKET, files, limits=Limits(workers=1), progress=False)
    message = str(info.value)
    assert message.startswith(f"Uploaded 4 of 5 file(s) to s3://{BUCKET}/; 1 failed: Upload of ")
    assert f"s3://{BUCKET}/p/gone failed" in message and "fix the cause" in message

    with pytest.raises(TransferError) as info:
        transfer.upload_files(
            s3, BUCKET, files, limits=Limits(workers=1), progress=False, summarize=False
        )
    assert str(info.value).startswith(f"Upload of {str(tmp_path / 'gone')!r} to s3://{BUCKET}/")


# -- progress hooks ----------------------------------------------------------------------------
def test_download_progress_counts_bytes_and_files(
    s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put_many(s3, "pg/", 5, size=1000)
    transfer.download_prefix(s3, BUCKET, "pg/", str(tmp_path / "out"), progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err  # not a terminal: plain lines
    final = err.rstrip("\n").split("\n")[-1]
    assert final.startswith("download [########################] 100.0%")
    assert "5/5 files" in final
    transfer.download_prefix(s3, BUCKET, "pg/", str(tmp_path / "out2"))  # auto: not a TTY
    assert capsys.readouterr().err == ""


# -- stopping: first failure and Ctrl-C --------------------------------------------------------
def assert_whole_or_absent(out: Path, bodies: dict[str, bytes]) -> int:
    """Every destination holds its whole object or does not exist; returns how many exist."""
    present = 0
    for key, body in bodies.items():
        path = out / key
        if path.exists():
            assert path.read_bytes() == body, key
            present += 1
    assert leftovers(out) == []
    return present


def test_the_first_failure_stops_the_batch_and_leaves_no_partial_file(
    s3: Any, tmp_path: Path
) -> None:
    bodies = put_many(s3, "c/", 60, size=256 * 1024)
    objects = transfer.list_objects(s3, BUCKET, "c/")
    missing = S3Object(BUCKET, "c/0000-missing.bin", "", 10)
    out = tmp_path / "out"
    gets = record(s3, "GetObject")
    plan = [(missing, str(out / missing.key))] + [(o, str(out / o.key)) for o in objects]

    with pytest.raises(TransferError, match=r"c/0000-missing\.bin .*NoSuchKey"):
        transfer.download_objects(s3, plan, limits=Limits(workers=2), progress=False)

    assert not (out / missing.key).exists()
    assert assert_whole_or_absent(out, bodies) < len(bodies)
    assert len(gets) < len(plan), "transfers not started when the first one failed never start"


def ctrl_c_once() -> Any:
    """An event hook that presses Ctrl-C once: SIGINT to this process, raised in the main thread.

    The transfers run on worker threads; the main thread only waits, and gets
    the ``KeyboardInterrupt`` there.
    """
    sent = threading.Event()

    def interrupt(**_: Any) -> None:
        if not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)

    return interrupt


def test_ctrl_c_stops_a_download_and_leaves_no_partial_file(s3: Any, tmp_path: Path) -> None:
    bodies = put_many(s3, "k/", 80, size=128 * 1024)
    objects = transfer.list_objects(s3, BUCKET, "k/")
    out = tmp_path / "out"

    s3.meta.events.register("after-call.s3.GetObject", ctrl_c_once())
    with pytest.raises(KeyboardInterrupt):
        transfer.download_objects(
            s3, [(o, str(out / o.key)) for o in objects], limits=Limits(workers=4), progress=True
        )
    # Ctrl-C is raised within STOP_GRACE; the workers stop at their next chunk and
    # remove their temporary files (on a loaded machine, maybe just after)
    deadline = time.monotonic() + 30
    while [t for t in threading.enumerate() if t.name == "launchbay-s3"]:
        assert time.monotonic() < deadline, "the transfer threads never stopped"
        time.sleep(0.05)
    assert assert_whole_or_absent(out, bodies) < len(bodies)


def test_ctrl_c_stops_an_upload(s3: Any, tmp_path: Path) -> None:
    files = []
    for i in range(40):
        (tmp_path / f"u{i}").write_bytes(b"u")
        files.append((str(tmp_path / f"u{i}"), f"u/{i}", 1))

    s3.meta.events.register("before-call.s3.PutObject", ctrl_c_once())
    # Each upload takes a moment (40 one-byte uploads to a local server otherwise all end
    # before a loaded machine's main thread handles the Ctrl-C they raced with).
    s3.meta.events.register("before-call.s3.PutObject", lambda **_: time.sleep(0.1))
    with pytest.raises(KeyboardInterrupt):
        transfer.upload_files(s3, BUCKET, files, limits=Limits(workers=3), progress=False)
    assert len(transfer.list_objects(s3, BUCKET, "u/")) < 40


# -- the runner ------------------------------------------------------------------------------
def test_runner_bounds_concurrency_and_stops_at_the_first_error() -> None:
    running = 0
    most = 0
    ran: list[int] = []
    lock = threading.Lock()

    def job(i: int) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            ran.append(i)
        time.sleep(0.002)
        with lock:
            running -= 1
        if i == 5:
            raise ValueError("job 5 failed")

    with pytest.raises(ValueError, match="job 5 failed"):
        transfer.run_parallel([lambda i=i: job(i) for i in range(200)], 3)
    assert most <= 3
    assert len(ran) < 200

    ran.clear()
    transfer.run_parallel([lambda i=i: job(i) for i in range(6, 50)], 4)
    assert sorted(ran) == list(range(6, 50)) and most <= 4


def test_runner_raises_ctrl_c_before_a_failure_of_another_thread() -> None:
    both_running = threading.Barrier(2, timeout=30)

    def job() -> None:
        if both_running.wait() == 0:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaches the waiting main thread
        time.sleep(0.3)
        raise TransferError("a worker's failure")

    with pytest.raises(KeyboardInterrupt):
        transfer.run_parallel([job, job], 2)


def test_runner_does_not_wait_for_a_job_that_cannot_stop_after_ctrl_c() -> None:
    """A transfer stuck in a call that never looks at ``stop`` does not hold Ctrl-C back."""
    release = threading.Event()
    running = threading.Event()

    def stuck() -> None:
        running.set()
        release.wait(60)

    def press() -> None:
        running.wait(30)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=press, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            transfer.run_parallel([stuck], 2, large=[stuck])
        assert time.monotonic() - started < transfer.STOP_GRACE + 10
    finally:
        release.set()


def test_runner_runs_large_jobs_one_at_a_time_beside_the_small_ones() -> None:
    where: list[str] = []
    large_at_once = [0, 0]
    lock = threading.Lock()

    def big() -> None:
        with lock:
            large_at_once[0] += 1
            large_at_once[1] = max(large_at_once)
        where.append("large:" + threading.current_thread().name)
        time.sleep(0.01)
        with lock:
            large_at_once[0] -= 1

    transfer.run_parallel(
        [lambda: where.append(threading.current_thread().name) for _ in range(4)],
        2,
        large=[big, big, big],
    )
    assert len(where) == 7 and large_at_once[1] == 1
    assert threading.main_thread().name not in {w.split(":")[-1] for w in where}


# -- interpreter shutdown ------------------------------------------------------------------------
_AT_EXIT = """
import atexit, os, sys
from launchbay import transfer
import boto3

def save():  # as a local job's outputs are saved when it is stopped at exit
    client = boto3.client("s3", region_name="us-west-2")
    limits = transfer.Limits(workers=4, multipart_threshold=5 * 2**20, multipart_chunksize=5 * 2**20)
    files = [(sys.argv[1], "exit/big.bin", os.path.getsize(sys.argv[1])),
             (sys.argv[2], "exit/small.txt", os.path.getsize(sys.argv[2])),
             (sys.argv[2], "exit/small2.txt", os.path.getsize(sys.argv[2]))]
    transfer.upload_files(client, "transfer-bucket", files, limits=limits, progress=False,
                          open_file=lambda p: os.open(p, os.O_RDONLY), summarize=False)
    obj = transfer.S3Object("transfer-bucket", "exit/big.bin", "", os.path.getsize(sys.argv[1]))
    transfer.download_objects(client, [(obj, sys.argv[3])], limits=limits, progress=False)
    print("saved")

atexit.register(save)
"""


def test_large_transfers_still_work_from_an_atexit_hook(s3: Any, tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(6 * MIB))
    small = tmp_path / "small.txt"
    small.write_text("s")
    back = tmp_path / "back.bin"
    script = tmp_path / "at_exit.py"
    script.write_text(_AT_EXIT)
    result = subprocess.run(
        [sys.executable, str(script), str(big), str(small), str(back)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "saved" in result.stdout, result.stderr[-3000:]
    head = s3.head_object(Bucket=BUCKET, Key="exit/big.bin")
    assert head["ETag"].strip('"').endswith("-2")
    assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(big.read_bytes()).digest()


def test_importing_the_engine_and_the_local_staging_imports_no_boto3() -> None:
    code = (
        "import json, sys, launchbay.transfer, launchbay.backends.local.staging;"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('boto3', 'botocore', 's3transfer'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []
