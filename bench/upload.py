"""Benchmark: launchbay ``Session.upload_data`` against SageMaker SDK v2's, side by side.

Starts a ``moto_server`` subprocess on a free loopback port, points both SDKs
at it through ``AWS_ENDPOINT_URL``, builds a temporary data set (by default
2,000 files of 4 KiB and one 200 MiB file) and times each upload several times,
alternating which SDK goes first. The moto state is reset before every timed
run, so each one starts from an empty bucket. Prints every time, the medians
and the ratio (SDK v2 time / launchbay time, so > 1 means launchbay is faster).

Run from the repository root::

    python bench/upload.py                   # defaults: 5 repetitions
    python bench/upload.py --reps 5 --big-mb 100

Goals: at least 3x faster on the small files, not slower on the big file.
With psutil installed, each run also shows the moto server's CPU time: moto is
one Python process (one CPU at most, about 2 ms of CPU per small PUT on the
machine this was written on), so when a run's wall time is close to that CPU
time the server, not the client, is the limit.
The moto server is always stopped on exit, including on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

REGION = "us-west-2"
BUCKET = "launchbay-bench"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_moto(port: int, log_path: str) -> subprocess.Popen[bytes]:
    exe = shutil.which("moto_server") or os.path.join(
        os.path.dirname(sys.executable), "moto_server"
    )
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with code {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1):
                return proc
        except OSError:
            time.sleep(0.1)
    stop_moto(proc)
    raise RuntimeError(f"moto_server did not answer on port {port} within 30s; see {log_path}")


def stop_moto(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def moto_cpu_meter(pid: int) -> Callable[[], float]:
    """CPU seconds used so far by the moto server (-1 without psutil).

    A run whose wall time is close to the server's CPU time is limited by the
    single-process moto server, not by the client.
    """
    try:
        import psutil
    except ImportError:
        return lambda: -1.0
    process = psutil.Process(pid)

    def used() -> float:
        times = process.cpu_times()
        return float(times.user + times.system)

    return used


def reset_moto(url: str) -> None:
    request = urllib.request.Request(f"{url}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()


def make_data(root: str, n_small: int, small_size: int, big_mb: int) -> tuple[str, str]:
    small_dir = os.path.join(root, "small")
    for i in range(n_small):
        sub = os.path.join(small_dir, f"part-{i % 20:02d}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"file-{i:05d}.bin"), "wb") as fh:
            fh.write(os.urandom(small_size))
    big_dir = os.path.join(root, "big")
    os.makedirs(big_dir)
    big_file = os.path.join(big_dir, "big.bin")
    chunk = os.urandom(1024 * 1024)
    with open(big_file, "wb") as fh:
        for i in range(big_mb):
            # vary each MiB a little so the content is not one repeated block
            fh.write(i.to_bytes(8, "little") + chunk[8:])
    return small_dir, big_file


def count_objects(client: Any, prefix: str) -> int:
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        total += len(page.get("Contents", []))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs per SDK and data set")
    parser.add_argument("--small-files", type=int, default=2000)
    parser.add_argument("--small-kb", type=int, default=4)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--workers", type=int, default=None, help="launchbay max_workers")
    parser.add_argument(
        "--cases", default="small,big", help="comma-separated subset of: small, big"
    )
    args = parser.parse_args(argv)
    wanted = {c.strip() for c in args.cases.split(",") if c.strip()}
    if not wanted or wanted - {"small", "big"}:
        parser.error(f"--cases: expected a subset of small,big; got {args.cases!r}")

    # SIGTERM should run the finally blocks (stop moto, delete the data) like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = tempfile.mkdtemp(prefix="launchbay-bench-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_moto(port, os.path.join(workdir, "moto.log"))
    try:
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": REGION,
                "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
            }
        )
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)
        import logging

        logging.getLogger("sagemaker").setLevel(logging.WARNING)

        import boto3
        import sagemaker

        import launchbay

        print(f"moto_server at {url} (pid {proc.pid}); building data set in {workdir} ...")
        print(f"CPUs: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")
        small_dir, big_file = make_data(
            os.path.join(workdir, "data"),
            args.small_files if "small" in wanted else 0,
            args.small_kb * 1024,
            args.big_mb if "big" in wanted else 0,
        )
        v2 = sagemaker.Session(boto_session=boto3.Session(region_name=REGION))
        lb = launchbay.Session(region_name=REGION)
        check = boto3.client("s3", region_name=REGION)

        uploaders: dict[str, Callable[[str, str], str]] = {
            "sagemaker v2": lambda path, prefix: v2.upload_data(
                path, bucket=BUCKET, key_prefix=prefix
            ),
            "launchbay": lambda path, prefix: lb.upload_data(
                path, bucket=BUCKET, key_prefix=prefix, max_workers=args.workers, progress=False
            ),
        }
        cases = {}
        if "small" in wanted:
            cases[f"{args.small_files} x {args.small_kb} KiB"] = (small_dir, args.small_files)
        if "big" in wanted:
            cases[f"1 x {args.big_mb} MiB"] = (big_file, 1)
        server_cpu = moto_cpu_meter(proc.pid)
        results: dict[tuple[str, str], list[float]] = {}
        for case, (path, expected) in cases.items():
            print(f"\n== {case}")
            for rep in range(args.reps):
                order = list(uploaders) if rep % 2 == 0 else list(reversed(uploaders))
                for sdk in order:
                    reset_moto(url)
                    check.create_bucket(
                        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
                    )
                    server_before = server_cpu()
                    start = time.perf_counter()
                    uploaders[sdk](path, "bench")
                    elapsed = time.perf_counter() - start
                    server = server_cpu() - server_before
                    found = count_objects(check, "bench/")
                    if found != expected:
                        raise RuntimeError(f"{sdk}: expected {expected} objects, found {found}")
                    results.setdefault((case, sdk), []).append(elapsed)
                    busy = f"   (moto server CPU {server:5.2f} s)" if server >= 0 else ""
                    print(f"  rep {rep + 1}  {sdk:<13} {elapsed:8.2f} s{busy}")
        reset_moto(url)

        print(
            f"\nload average at end: {os.getloadavg()[0]:.2f} (timings are noisy on a busy machine)"
        )
        print(f"\n== summary (median of {args.reps} runs; ratio = v2 time / launchbay time)")
        print(
            f"  {'data set':<20} {'sagemaker v2':>13} {'launchbay':>11} {'ratio':>8}"
            "   per-rep ratios (min / median / max)"
        )
        for case in cases:
            olds = results[(case, "sagemaker v2")]
            news = results[(case, "launchbay")]
            old, new = statistics.median(olds), statistics.median(news)
            paired = sorted(o / n for o, n in zip(olds, news, strict=True))
            print(
                f"  {case:<20} {old:>11.2f} s {new:>9.2f} s {old / new:>7.2f}x"
                f"   {paired[0]:.2f} / {statistics.median(paired):.2f} / {paired[-1]:.2f}"
            )
        return 0
    finally:
        stop_moto(proc)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
