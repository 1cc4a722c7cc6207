"""S3 transfers and code staging under hostile conditions (issue 25), against moto's server.

Real processes, signals, FIFOs and a slow TCP link (a throttling proxy in front
of moto, on 127.0.0.1); nothing of launchbay is mocked.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

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


# -- item 5: Ctrl-C and SIGTERM end a transfer through a slow link at once -------------------
class SlowLink:
    """A TCP proxy on 127.0.0.1 in front of moto: each connection carries ``rate`` bytes/s each way.

    ``up`` and ``down`` count the bytes forwarded to and from the server.
    """

    def __init__(self, upstream: str, rate: int) -> None:
        parsed = urlparse(upstream)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._rate = rate
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.up = 0
        self.down = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._upstream)
            except OSError:
                return
            with self._lock:
                self._sockets += [client, server]
            for source, target, way in ((client, server, "up"), (server, client, "down")):
                threading.Thread(target=self._pump, args=(source, target, way), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, way: str) -> None:
        chunk = max(1024, self._rate // 20)
        try:
            while data := source.recv(chunk):
                target.sendall(data)
                with self._lock:
                    setattr(self, way, getattr(self, way) + len(data))
                time.sleep(len(data) / self._rate)
        except OSError:
            pass
        finally:
            for end in (source, target):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def wait_for(self, way: str, count: int, process: subprocess.Popen[str]) -> None:
        """Wait until ``count`` bytes went ``way`` ("up"/"down"): the transfer is under way."""
        deadline = time.monotonic() + 120
        while getattr(self, way) < count:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"only {getattr(self, way)} bytes went {way}"
            time.sleep(0.05)

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()


#: Bytes a second each connection carries: a 4 MiB object takes 64 s.
SLOW = 64 * 1024
#: What "at once" means here: seconds from the signal to the process's end. The
#: transfers below take a minute or more; before the fix a signal waited for them
#: (16 s and more: a 1 MiB read, a whole 8 MiB part or a whole file).
PROMPTLY = 8.0


@pytest.fixture
def slow_link(aws: str) -> Iterator[SlowLink]:
    link = SlowLink(aws, SLOW)
    yield link
    link.close()


def _through(link: SlowLink, **extra: str) -> dict[str, str]:
    """This process's environment, with S3 reached through ``link``."""
    return {**os.environ, "AWS_ENDPOINT_URL": link.url, **extra}


def _ended_within(process: subprocess.Popen[str], seconds: float) -> tuple[float, str]:
    """(seconds the process took to end, its output); it is killed after ``seconds`` + 60."""
    signalled = time.monotonic()
    try:
        output, _ = process.communicate(timeout=seconds + 60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return time.monotonic() - signalled, output


_TRANSFER = """
import signal, sys, time
# Ctrl-C as a terminal gives it, whatever this test process inherited: a disposition set
# to "ignore", or a blocked SIGINT, passes from parent to child across exec (said first, for
# the record, when it was not the default).
inherited = signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, [])
if inherited[0] is not signal.default_int_handler or signal.SIGINT in inherited[1]:
    print(f"inherited SIGINT disposition {inherited[0]!r}, blocked {sorted(inherited[1])}", flush=True)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
import launchbay
session = launchbay.Session(region_name="us-west-2")
what, local = sys.argv[1:3]
try:
    if what == "download":
        session.download_data(local, "slow-bucket", "data", progress=False)
    else:
        session.upload_data(local, bucket="slow-bucket", key_prefix="up", progress=False)
except KeyboardInterrupt:
    print(f"KeyboardInterrupt at {time.time()}", flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


@pytest.mark.parametrize("what", ["download", "upload"])
def test_ctrl_c_ends_a_session_transfer_through_a_slow_link_at_once(
    s3: Any, slow_link: SlowLink, tmp_path: Path, what: str
) -> None:
    """One Ctrl-C: KeyboardInterrupt in the main thread within a second or two, exit 130.

    Small objects (one request each) and a large one (boto3's multipart
    transfer, 2 parts) go at once; it would all take a minute or more. The
    process may live a few seconds longer: at exit Python waits for boto3's
    own threads, which may be blocked writing a full socket buffer.
    """
    _bucket(s3, "slow-bucket")
    bodies = {f"data/small-{i}.bin": os.urandom(2 * MIB) for i in range(3)}
    bodies["data/large.bin"] = os.urandom(12 * MIB)
    local = tmp_path / "local"
    if what == "download":
        for key, body in bodies.items():
            s3.put_object(Bucket="slow-bucket", Key=key, Body=body)
    else:
        local.mkdir()
        for key, body in bodies.items():
            (local / key.split("/")[-1]).write_bytes(body)
    process = subprocess.Popen(
        [sys.executable, "-c", _TRANSFER, what, str(local)],
        env=_through(slow_link),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    slow_link.wait_for("down" if what == "download" else "up", 512 * 1024, process)
    pressed = time.time()
    process.send_signal(signal.SIGINT)
    took, output = _ended_within(process, 30)
    assert process.returncode == 130 and "KeyboardInterrupt at" in output, output[-3000:]
    raised = float(output.split("KeyboardInterrupt at ")[1].split()[0]) - pressed
    assert raised < PROMPTLY, f"Ctrl-C reached the main thread {raised:.1f}s into the {what}"
    assert took < 30, f"the process took {took:.1f}s to end after Ctrl-C"
    if what == "download":  # a destination holds the whole object or nothing
        for key, body in bodies.items():
            path = local / key.split("/")[-1]
            assert not path.exists() or path.read_bytes() == body
    else:
        listed = s3.list_objects_v2(Bucket="slow-bucket", Prefix="up/").get("Contents", [])
        assert len(listed) < len(bodies)


_LOCAL_JOB = """
import json, sys
from launchbay.pytorch import PyTorch

options = json.loads(sys.argv[1])
estimator = PyTorch(
    entry_point="train.py",
    source_dir=options["source_dir"],
    role=None,
    instance_type="local_process",
    instance_count=1,
    framework_version="2.8.0",
    py_version="py312",
    output_path=options["output"],
)
try:
    estimator.fit(options.get("inputs"), job_name=options["job"], logs=False)
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(130)
print("driver: finished", flush=True)
"""

_WRITE_MODEL = """
import os
with open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.bin"), "wb") as f:
    f.write(os.urandom(6 * 1024 * 1024))
"""


def _local_job(tmp_path: Path, link: SlowLink, **options: Any) -> subprocess.Popen[str]:
    source = tmp_path / "code"
    source.mkdir()
    (source / "train.py").write_text(_WRITE_MODEL)
    options = {"source_dir": str(source), **options}
    env = _through(link, LAUNCHBAY_HOME=str(tmp_path / "home"), LAUNCHBAY_GRACE_SECONDS="5")
    return subprocess.Popen(
        [sys.executable, "-c", _LOCAL_JOB, json.dumps(options)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _status(tmp_path: Path, job: str) -> dict[str, Any]:
    return json.loads((tmp_path / "home" / "jobs" / job / "status.json").read_text())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_local_jobs_channel_download_stops_it_at_once(
    s3: Any, slow_link: SlowLink, tmp_path: Path, sig: signal.Signals
) -> None:
    """Ctrl-C or SIGTERM while a local job downloads its S3 channel: the job ends Stopped at once.

    The download runs on the job's supervisor thread, which a signal never
    reaches: the job's stop request now stops it.
    """
    _bucket(s3, "slow-bucket")
    for i in range(2):
        s3.put_object(Bucket="slow-bucket", Key=f"train/part-{i}", Body=os.urandom(4 * MIB))
    job = f"slow-channel-{sig.name.lower()}"
    process = _local_job(
        tmp_path,
        slow_link,
        job=job,
        inputs={"train": "s3://slow-bucket/train"},
        output=f"file://{tmp_path / 'out'}",
    )
    slow_link.wait_for("down", 512 * 1024, process)
    process.send_signal(sig)
    took, output = _ended_within(process, PROMPTLY)
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "driver: KeyboardInterrupt" in output, output
    else:
        assert process.returncode == -signal.SIGTERM, output
    assert took < PROMPTLY, f"{sig.name} took {took:.1f}s to end the job: {output[-2000:]}"
    status = _status(tmp_path, job)
    assert status["TrainingJobStatus"] == "Stopped", status
    cache = tmp_path / "home" / "cache" / "s3"
    assert not [p for p in cache.rglob("*") if p.name.endswith(".part")]


def test_ctrl_c_twice_during_a_local_jobs_output_upload_ends_it_at_once(
    s3: Any, slow_link: SlowLink, tmp_path: Path
) -> None:
    """The first Ctrl-C lets the outputs upload (as SageMaker does); the second stops it at once."""
    _bucket(s3, "slow-bucket")
    job = "slow-outputs"
    process = _local_job(tmp_path, slow_link, job=job, output="s3://slow-bucket/out")
    slow_link.wait_for("up", 512 * 1024, process)  # the 6 MiB model.tar.gz is going up
    process.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert process.poll() is None, "the first Ctrl-C lets the upload go on"
    process.send_signal(signal.SIGINT)
    took, output = _ended_within(process, PROMPTLY)
    assert process.returncode == 130 and "driver: KeyboardInterrupt" in output, output
    assert took < PROMPTLY, f"the second Ctrl-C took {took:.1f}s: {output[-2000:]}"
    status = _status(tmp_path, job)
    assert status["TrainingJobStatus"] in ("Stopped", "Failed"), status
    assert "stopped before they finished" in status.get("FailureReason", ""), status
