"""How launchbay's cost grows with the work, measured side by side (issue 17).

One run prints one table. Each row puts a launchbay figure beside its floor
(what the same work costs without launchbay) and, where SDK v2 does the same
work, beside SDK v2; the goal is printed on the row, with whether it is met.

* **code**: a ``source_dir`` of 1k, 10k and 50k text files (4 KiB each, 200 MiB
  at the top). ``package_code`` against ``tar czf`` of the same tree (floor);
  packaging plus upload to the moto server (a first ``fit()``'s staging) against
  SDK v2's ``tar_and_upload_dir``; then the same staging again with unchanged
  code: bytes uploaded (botocore events on the real client) and time vs the first.
* **data**: channels of 10k x 4 KiB and 4 x 256 MiB objects on a ``moto_server``
  read by a ``local_process`` ``fit()`` (the job's ``Downloading`` phase, from its
  status transitions) against boto3's transfer manager at launchbay's
  concurrency (16, floor) and SDK v2 local mode's S3 download
  (``sagemaker.utils.download_folder``); then a second ``fit()`` with unchanged data.
* **ranks**: a no-op ``torch_distributed`` script (join the gloo world, barrier)
  through ``fit()`` at 1x1, 2x2, 4x2 and 8x2 (hosts x processes) against plain
  ``torchrun --standalone`` with the same world on one node.
* **logs**: 8 ranks (2 hosts x 4 processes) each printing 100k lines as fast as
  they can, through ``fit()`` with its output to a file: every line checked
  (exactly once, in order per rank), wall time against the same 8 processes
  writing straight to files, and the driver's peak RSS.
* **failure**: the 8x2 world with one rank raising after the barrier: seconds
  from the raise to ``fit()`` raising (plain torchrun's exit beside it).

Usage, from the repository root::

    python bench/scale.py            # full sizes (about 10-15 minutes on 2 cores)
    python bench/scale.py --quick    # small sizes, a CI-like check (about 2 minutes)
    python bench/scale.py --only code,logs

Every time is the median of ``--reps`` runs (1 for the slow ones in the full
run, see ``--reps``). The machine's load average is printed with each section
and in the table: timings on a busy machine are noisy. The moto server is one
Python process; where a row is bound by it, its CPU time says so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import statistics
import string
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "sdk"))

from upload import (  # noqa: E402 - bench/upload.py's moto helpers
    moto_cpu_meter,
    reset_moto,
    start_moto,
    stop_moto,
)

REGION = "us-west-2"
BUCKET = "launchbay-scale"
CONCURRENCY = 16  # launchbay's S3 cache downloads with 16 workers (backends/_local.py)


# --------------------------------------------------------------------------- the table


@dataclass
class Row:
    section: str
    case: str
    launchbay: float
    unit: str = "s"
    floor: float | None = None
    floor_name: str = ""
    v2: float | None = None
    goal: str = ""
    met: bool | None = None
    load: float = field(default_factory=lambda: os.getloadavg()[0])
    note: str = ""


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    if unit == "B":
        return f"{value:.0f} B"
    return f"{value:g} {unit}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}x"


def print_table(rows: list[Row]) -> None:
    head = (
        f"{'section':<8} {'case':<30} {'launchbay':>11} {'floor':>11} {'vs floor':>8} "
        f"{'SDK v2':>10} {'vs v2':>7} {'load':>5}  {'goal':<34} met"
    )
    print("\n" + head)
    print("-" * len(head))
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        print(
            f"{r.section:<8} {r.case:<30} {fmt(r.launchbay, r.unit):>11} "
            f"{fmt(r.floor, r.unit):>11} {ratio(r.launchbay, r.floor):>8} "
            f"{fmt(r.v2, r.unit):>10} {ratio(r.launchbay, r.v2):>7} {r.load:5.2f}  "
            f"{r.goal:<34} {met}"
        )
    floors = dict.fromkeys(f"{r.section}: {r.floor_name}" for r in rows if r.floor_name)
    print("\nfloors: " + "; ".join(floors))
    notes = [f"  {r.section}/{r.case}: {r.note}" for r in rows if r.note]
    if notes:
        print("notes:\n" + "\n".join(notes))


def median_time(fn: Callable[[], Any], reps: int, before: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed(fn: Callable[..., Any], *args: Any) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {os.getloadavg()[0]:.2f}] {text}", flush=True)


# --------------------------------------------------------------------------- environments


def child_env(home: str) -> dict[str, str]:
    env = dict(os.environ, LAUNCHBAY_HOME=home, PYTHONUNBUFFERED="1", LAUNCHBAY_GRACE_SECONDS="5")
    paths = [str(ROOT / "sdk"), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class Moto:
    """A moto_server subprocess with the AWS environment pointed at it."""

    def __init__(self, workdir: str) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.proc = start_moto(port, os.path.join(workdir, "moto.log"))
        self.cpu = moto_cpu_meter(self.proc.pid)
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": self.url,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
            }
        )
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(name, None)

    def fresh_bucket(self) -> None:
        import boto3

        reset_moto(self.url)
        boto3.client("s3", region_name=REGION).create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )

    def stop(self) -> None:
        stop_moto(self.proc)


class Traffic:
    """Bytes a client sends in PUT/POST bodies, counted by botocore events."""

    def __init__(self, client: Any) -> None:
        self.sent = 0
        client.meta.events.register("before-send.s3", self._send)

    def _send(self, request: Any, **_: Any) -> None:
        if request.method in ("PUT", "POST"):
            self.sent += int(request.headers.get("Content-Length") or 0)


# --------------------------------------------------------------------------- code packaging


def make_tree(root: Path, files: int, file_bytes: int) -> None:
    """``files`` text files of about ``file_bytes`` each, 100 to a directory, plus train.py."""
    rnd = random.Random(files)
    words = [
        "".join(rnd.choices(string.ascii_lowercase, k=rnd.randint(2, 10))) for _ in range(5000)
    ]
    lines = []
    size = 0
    while size < 4 << 20:
        line = "    " + " = ".join(rnd.choices(words, k=rnd.randint(2, 8))) + "\n"
        lines.append(line)
        size += len(line)
    text = "".join(lines)
    root.mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    for i in range(files):
        sub = root / f"pkg{i // 1000:02d}" / f"mod{(i // 100) % 10}"
        if i % 100 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        start = rnd.randrange(0, len(text) - file_bytes)
        (sub / f"file_{i:05d}.py").write_text(f"# module {i}\n" + text[start : start + file_bytes])


def stat_tree(root: Path) -> int:
    """Stat every file under ``root`` (size, mtime): what a cached packaging would look at."""
    count = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            os.stat(os.path.join(dirpath, name))
            count += 1
    return count


def bench_code(
    rows: list[Row], moto: Moto, workdir: str, sizes: list[int], file_bytes: int, reps: int
) -> None:
    for files in sizes:  # the 200 MiB tree runs once: each of its steps takes 10-30 s here
        code_case(rows, moto, workdir, files, file_bytes, reps if files < 50_000 else 1)


def code_case(
    rows: list[Row], moto: Moto, workdir: str, files: int, file_bytes: int, reps: int
) -> None:
    import boto3
    import sagemaker.fw_utils

    import launchbay
    from launchbay.code import code_s3_uri, package_code, stage_code

    src = Path(workdir, f"src-{files}")
    say(f"code: building {files} files x {file_bytes} B in {src}")
    make_tree(src, files, file_bytes)
    total_mib = sum(p.stat().st_size for p in src.rglob("*") if p.is_file()) / (1 << 20)
    case = f"{files} files ({total_mib:.0f} MiB)"
    out = Path(workdir, "tar.tgz")
    tar_time = median_time(
        lambda: subprocess.run(["tar", "czf", str(out), "-C", str(src), "."], check=True), reps
    )
    tar_size = out.stat().st_size
    out.unlink()
    bundle_box: list[Any] = []
    pack_time = median_time(
        lambda: bundle_box.append(package_code("train.py", src, cache_dir=None)), reps
    )
    bundle = bundle_box[-1]
    rows.append(
        Row("code", f"package {case}", pack_time, floor=tar_time, floor_name="tar czf",
            goal="<= 1.2x tar czf", met=pack_time <= 1.2 * tar_time,
            note=f"archive {bundle.size / (1 << 20):.1f} MiB (tar czf: {tar_size / (1 << 20):.1f} MiB), "
                 "gzip level 6 as tar czf; no archive cache")
    )  # fmt: skip

    # first staging (package + upload) vs SDK v2's tar_and_upload_dir, on an empty bucket
    # and an empty archive cache
    session = launchbay.Session(region_name=REGION)
    cache = Path(workdir, "code-cache")

    def first_fit() -> None:
        fresh = package_code("train.py", src, cache_dir=str(cache))
        stage_code(session, fresh, code_s3_uri(BUCKET, "code", fresh))

    def empty() -> None:
        moto.fresh_bucket()
        shutil.rmtree(cache, ignore_errors=True)

    first = median_time(first_fit, reps, before=empty)
    boto_session = boto3.Session(region_name=REGION)
    v2 = median_time(
        lambda: sagemaker.fw_utils.tar_and_upload_dir(
            boto_session, BUCKET, "v2code", "train.py", directory=str(src)
        ),
        reps,
        before=moto.fresh_bucket,
    )
    rows.append(
        Row("code", f"first fit staging {files}", first, v2=v2, goal="(vs SDK v2)", met=None)
    )
    # the second fit: same code, the archive is already in S3 and in the cache
    empty()
    first_fit()
    traffic = Traffic(session.s3_client)
    second = median_time(first_fit, reps)
    rows.append(
        Row("code", f"second fit uploads {files}", traffic.sent / max(reps, 1), unit="B",
            goal="0 bytes", met=traffic.sent == 0)
    )  # fmt: skip
    rows.append(
        Row("code", f"second fit time {files}", second, floor=first, floor_name="first fit",
            goal="< 0.10x the first fit", met=second < 0.1 * first,
            note=f"the cached archive is reused: a walk and stat of every file "
                 f"({timed(stat_tree, src):.2f} s alone), reading the archive, one HEAD")
    )  # fmt: skip
    shutil.rmtree(src)


# --------------------------------------------------------------------------- channel download

NOOP = "print('noop')\n"


def fit_download_seconds(src: str, uri: str, home: str, name: str) -> float:
    """Run a 1-host local_process fit() reading ``uri``; its Downloading phase in seconds."""
    os.environ["LAUNCHBAY_HOME"] = home
    from launchbay.pytorch import PyTorch

    est = PyTorch(entry_point="noop.py", source_dir=src, instance_type="local_process",
                  instance_count=1, framework_version="2.13", py_version="py311",
                  output_path=f"file://{home}/out")  # fmt: skip
    job = est.fit({"train": uri}, logs=False, job_name=name)
    transitions = {t["Status"]: t for t in job.describe()["SecondaryStatusTransitions"]}
    down = transitions["Downloading"]
    return (down["EndTime"] - down["StartTime"]).total_seconds()


def transfer_manager_download(prefix: str, target: str) -> None:
    """The floor: list, then boto3's transfer manager with CONCURRENCY threads."""
    import boto3
    from boto3.s3.transfer import TransferConfig, create_transfer_manager
    from botocore.config import Config

    client = boto3.client(
        "s3", region_name=REGION, config=Config(max_pool_connections=CONCURRENCY + 4)
    )
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    config = TransferConfig(max_concurrency=CONCURRENCY)
    with create_transfer_manager(client, config) as manager:
        futures = []
        for key in keys:
            path = os.path.join(target, key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            futures.append(manager.download(BUCKET, key, path))
        for future in futures:
            future.result()


def make_data(root: Path, count: int, size: int) -> None:
    root.mkdir(parents=True)
    chunk = os.urandom(min(size, 1 << 20))
    for i in range(count):
        sub = root / f"part-{i % 20:02d}"
        sub.mkdir(exist_ok=True)
        with open(sub / f"obj-{i:05d}.bin", "wb") as fh:
            left = size
            n = 0
            while left > 0:
                piece = (i.to_bytes(4, "little") + n.to_bytes(4, "little") + chunk[8:])[:left]
                fh.write(piece)
                left -= len(piece)
                n += 1


def bench_data(
    rows: list[Row], moto: Moto, workdir: str, cases: list[tuple[int, int]], reps: int
) -> None:
    import boto3
    import sagemaker

    import launchbay

    src = Path(workdir, "noop-src")
    src.mkdir(exist_ok=True)
    (src / "noop.py").write_text(NOOP)
    for count, size in cases:
        label = (
            f"{count} x {size // 1024} KiB" if size < (1 << 20) else f"{count} x {size >> 20} MiB"
        )
        say(f"data: {label}: making and uploading")
        moto.fresh_bucket()
        local = Path(workdir, "data-src")
        make_data(local, count, size)
        launchbay.Session(region_name=REGION).upload_data(
            str(local), bucket=BUCKET, key_prefix="data", progress=False
        )
        shutil.rmtree(local)
        uri = f"s3://{BUCKET}/data/"
        lb_times, floor_times, v2_times, server = [], [], [], []
        v2_session = sagemaker.Session(boto_session=boto3.Session(region_name=REGION))
        for rep in range(reps):
            home = tempfile.mkdtemp(dir=workdir, prefix="home-")
            before = moto.cpu()
            lb_times.append(fit_download_seconds(str(src), uri, home, f"dl-{rep}"))
            server.append(moto.cpu() - before)
            if rep == reps - 1:
                second = fit_download_seconds(str(src), uri, home, f"dl-again-{rep}")
            shutil.rmtree(home)
            target = tempfile.mkdtemp(dir=workdir, prefix="tm-")
            floor_times.append(timed(transfer_manager_download, "data/", target))
            shutil.rmtree(target)
            target = tempfile.mkdtemp(dir=workdir, prefix="v2-")
            v2_times.append(
                timed(sagemaker.utils.download_folder, BUCKET, "data/", target, v2_session)
            )
            shutil.rmtree(target)
        lb, floor = statistics.median(lb_times), statistics.median(floor_times)
        busy = statistics.median(server)
        rows.append(
            Row("data", f"download {label}", lb, floor=floor, floor_name=f"boto3 transfer manager ({CONCURRENCY} threads)",
                v2=statistics.median(v2_times), goal="<= 1.3x transfer manager", met=lb <= 1.3 * floor,
                note=f"{label}: moto server CPU during launchbay's download {busy:.2f} s" if busy >= 0 else "")
        )  # fmt: skip
        rows.append(
            Row("data", f"second run {label}", second, floor=lb, floor_name="first run",
                goal="(cached: no GET)", met=None)
        )  # fmt: skip


# --------------------------------------------------------------------------- ranks, logs, failure

DIST_NOOP = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""

DIST_FAIL = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
if dist.get_rank() == int(os.environ.get("FAIL_RANK", "13")):
    with open(os.environ["FAIL_STAMP"], "w") as f:
        f.write(repr(time.time()))
    raise RuntimeError("rank failed on purpose")
time.sleep(600)
"""

CHATTY = """
import os, sys
rank = int(os.environ["RANK"])
count = int(sys.argv[sys.argv.index("--lines") + 1])
for i in range(count):
    print(f"L {rank} {i}")
"""

FIT = """
import json, sys, time
from launchbay.pytorch import PyTorch

src, script, hosts, procs, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), json.loads(sys.argv[5])
kwargs = {}
if procs:
    kwargs["distribution"] = {"torch_distributed": {"enabled": True, "processes_per_host": procs}}
est = PyTorch(entry_point=script, source_dir=src, instance_type="local_process",
              instance_count=hosts, framework_version="2.13", py_version="py311",
              environment=extra.get("env"), hyperparameters=extra.get("hp"), **kwargs)
result = {}
try:
    est.fit(logs=extra.get("logs", False))
    result["ok"] = True
except Exception as exc:
    result["raised_at"] = time.time()
    result["error"] = type(exc).__name__
# VmHWM, not getrusage's ru_maxrss: Linux carries the forking parent's RSS across exec into it
with open("/proc/self/status") as f:
    hwm = next(line for line in f if line.startswith("VmHWM:"))
result["maxrss_mib"] = int(hwm.split()[1]) / 1024
with open(extra["result"], "w") as f:
    json.dump(result, f)
"""


def run_fit(tmp: str, env: dict[str, str], script: str, hosts: int, procs: int, extra: dict[str, Any],
            stdout: Any = subprocess.DEVNULL) -> tuple[float, dict[str, Any]]:  # fmt: skip
    result = os.path.join(tmp, "result.json")
    extra = dict(extra, result=result)
    argv = [sys.executable, os.path.join(tmp, "fit.py"), os.path.join(tmp, "src"), script,
            str(hosts), str(procs), json.dumps(extra)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=tmp, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - start
    with open(result) as f:
        return elapsed, json.load(f)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run_fit_terminal(
    tmp: str, env: dict[str, str], script: str, hosts: int, procs: int, extra: dict[str, Any]
) -> tuple[float, dict[str, Any], list[str]]:
    """``run_fit`` with the driver in a pseudo-terminal (a live, coloured display, as in a shell)."""
    import pty

    result = os.path.join(tmp, "result.json")
    extra = dict(extra, result=result)
    argv = [sys.executable, os.path.join(tmp, "fit.py"), os.path.join(tmp, "src"), script,
            str(hosts), str(procs), json.dumps(extra)]  # fmt: skip
    master, slave = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=dict(env, TERM="xterm-256color"), cwd=tmp,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL)  # fmt: skip
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the terminal has no writer left
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait()
    elapsed = time.perf_counter() - start
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    with open(result) as f:
        return elapsed, json.load(f), re.split(r"[\r\n]+", text)


def torchrun(tmp: str, env: dict[str, str], script: str, world: int) -> tuple[float, int]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            str(world), os.path.join(tmp, "src", script)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start, done.returncode


def prepare_scripts(tmp: str) -> None:
    src = Path(tmp, "src")
    src.mkdir(exist_ok=True)
    (src / "dist_noop.py").write_text(DIST_NOOP)
    (src / "dist_fail.py").write_text(DIST_FAIL)
    (src / "chatty.py").write_text(CHATTY)
    Path(tmp, "fit.py").write_text(FIT)


def bench_ranks(rows: list[Row], tmp: str, shapes: list[tuple[int, int]], reps: int) -> None:
    env = child_env(os.path.join(tmp, "home"))
    run_fit(tmp, env, "dist_noop.py", 1, 1, {})  # warm caches (code staging, bytecode)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import torch.distributed.run"], env=env, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    torch_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    for hosts, procs in shapes:
        world = hosts * procs
        say(f"ranks: {hosts}x{procs}")
        lb, direct, failures = [], [], 0
        for _ in range(reps):
            seconds, code = torchrun(tmp, env, "dist_noop.py", world)
            direct.append(seconds)
            failures += code != 0
            seconds, result = run_fit(tmp, env, "dist_noop.py", hosts, procs, {})
            if not result.get("ok"):
                raise RuntimeError(f"fit() {hosts}x{procs} failed: {result}")
            lb.append(seconds)
        a, b = statistics.median(lb), statistics.median(direct)
        note = (
            f"fit() starts one torchrun agent for its {hosts} host(s) (a torchrun per host "
            f"would add {hosts - 1} x {torch_cpu:.1f} s of CPU importing torch) + {world} ranks, "
            f"beside {hosts} host runtime(s) without torch; {os.cpu_count()} cores"
        )
        if failures:
            note += f"; torchrun exited non-zero {failures} time(s) (gloo teardown abort)"
        rows.append(
            Row("ranks", f"{hosts}x{procs} no-op torch_distributed", a, floor=b,
                floor_name=f"torchrun --standalone --nproc_per_node {world}",
                goal="<= 1.1x torchrun", met=a <= 1.1 * b, note=note)
        )  # fmt: skip


def check_lines(lines: list[str], ranks: int, count: int) -> str:
    """'' when every rank's L lines are 0..count-1 exactly once in order, else what is wrong."""
    pattern = re.compile(r"L (\d+) (\d+)$")
    seen: dict[int, list[int]] = defaultdict(list)
    for line in lines:
        match = pattern.search(line)
        if match:
            seen[int(match.group(1))].append(int(match.group(2)))
    wrong = [r for r in range(ranks) if seen.get(r) != list(range(count))]
    return "" if not wrong else f"ranks {wrong} lost, repeated or reordered lines"


def bench_logs(rows: list[Row], tmp: str, lines: int, reps: int) -> None:
    env = child_env(os.path.join(tmp, "home"))
    hosts, procs = 2, 4
    world = hosts * procs
    say(f"logs: {world} ranks x {lines} lines")
    lb, floor, rss, problems = [], [], [], []
    for rep in range(reps):
        out = os.path.join(tmp, f"driver-{rep}.log")
        with open(out, "w") as fh:
            seconds, result = run_fit(tmp, env, "chatty.py", hosts, procs,
                                      {"hp": {"lines": lines}, "logs": "All"}, stdout=fh)  # fmt: skip
        lb.append(seconds)
        rss.append(result["maxrss_mib"])
        with open(out) as fh:
            problem = check_lines(fh.read().splitlines(), world, lines)
        problems.append(problem)
        os.unlink(out)
        # the floor: the same 8 processes, each writing straight to a file
        start = time.perf_counter()
        running = []
        for rank in range(world):
            fh = open(os.path.join(tmp, f"rank-{rank}.log"), "w")  # noqa: SIM115 - closed below
            proc = subprocess.Popen([sys.executable, os.path.join(tmp, "src", "chatty.py"), "--lines", str(lines)],
                                    env=dict(env, RANK=str(rank)), stdout=fh)  # fmt: skip
            running.append((proc, fh))
        for proc, fh in running:
            proc.wait()
            fh.close()
        floor.append(time.perf_counter() - start)
        for rank in range(world):
            os.unlink(os.path.join(tmp, f"rank-{rank}.log"))
    base, _ = run_fit(tmp, env, "chatty.py", hosts, procs, {"hp": {"lines": 0}, "logs": "All"})
    say("logs: the same, the driver in a terminal")
    tty_wall, tty_result, tty_lines = run_fit_terminal(
        tmp, env, "chatty.py", hosts, procs, {"hp": {"lines": lines}, "logs": "All"}
    )
    tty_lost = check_lines(tty_lines, world, lines)
    lost = next((p for p in problems if p), "")
    rows.append(
        Row("logs", f"{world} ranks x {lines // 1000}k lines: delivery", 0 if not lost else 1, unit="lost",
            goal="every line once, in order", met=not lost, note=lost)
    )  # fmt: skip
    a, b = statistics.median(lb), statistics.median(floor)
    rows.append(
        Row("logs", f"{world} ranks x {lines // 1000}k lines: wall", a, floor=b,
            floor_name="the ranks writing to files", goal="(no goal)", met=None,
            note=f"the same fit() printing 0 lines takes {base:.2f} s: the lines cost "
                 f"{a - base:.2f} s through fit() vs {b:.2f} s straight to files")
    )  # fmt: skip
    peak = max(rss)
    rows.append(
        Row("logs", f"{world} ranks x {lines // 1000}k: driver RSS", peak, unit="MiB",
            goal="< 200 MiB", met=peak < 200)
    )  # fmt: skip
    rows.append(
        Row("logs", "  in a terminal: delivery", 0 if not tty_lost else 1, unit="lost",
            goal="every line once, in order", met=not tty_lost, note=tty_lost)
    )  # fmt: skip
    rows.append(
        Row("logs", "  in a terminal: wall", tty_wall, floor=b, floor_name="the ranks writing to files",
            goal="(no goal)", met=None)
    )  # fmt: skip
    tty_peak = tty_result["maxrss_mib"]
    rows.append(
        Row("logs", "  in a terminal: driver RSS", tty_peak, unit="MiB", goal="< 200 MiB",
            met=tty_peak < 200)
    )  # fmt: skip


def bench_failure(rows: list[Row], tmp: str, hosts: int, procs: int, reps: int) -> None:
    env = child_env(os.path.join(tmp, "home"))
    world = hosts * procs
    fail_rank = world - 3
    stamp = os.path.join(tmp, "raised.txt")
    env = dict(env, FAIL_STAMP=stamp, FAIL_RANK=str(fail_rank))
    say(f"failure: {hosts}x{procs}, rank {fail_rank} raises")
    lb, direct, total = [], [], []
    for _ in range(reps):
        seconds, result = run_fit(
            tmp,
            env,
            "dist_fail.py",
            hosts,
            procs,
            {"env": {"FAIL_STAMP": stamp, "FAIL_RANK": str(fail_rank)}},
        )
        if "raised_at" not in result:
            raise RuntimeError(f"fit() did not raise: {result}")
        with open(stamp) as f:
            lb.append(result["raised_at"] - float(f.read()))
        total.append(seconds)
        os.unlink(stamp)
        start = time.time()
        torchrun(tmp, env, "dist_fail.py", world)
        ended = time.time()
        with open(stamp) as f:
            raised = float(f.read())
        direct.append(ended - raised if raised >= start else float("nan"))
        os.unlink(stamp)
    rows.append(
        Row("failure", f"{hosts}x{procs}, one rank raises", statistics.median(lb),
            floor=statistics.median(direct), floor_name="plain torchrun's exit",
            goal="fit() raises within 5 s", met=statistics.median(lb) <= 5.0,
            note=f"whole fit() {statistics.median(total):.1f} s (world start-up included)")
    )  # fmt: skip


# --------------------------------------------------------------------------- main

SECTIONS = ("code", "data", "ranks", "logs", "failure")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI-like check)")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"subset of {','.join(SECTIONS)}"
    )
    parser.add_argument(
        "--reps", type=int, default=None, help="repetitions (default 3 quick, 2 full)"
    )
    args = parser.parse_args(argv)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    if not wanted or set(wanted) - set(SECTIONS):
        parser.error(f"--only: expected a subset of {','.join(SECTIONS)}; got {args.only!r}")
    quick = args.quick
    reps = args.reps or (3 if quick else 2)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import logging

    logging.getLogger("sagemaker").setLevel(logging.WARNING)
    logging.getLogger("sagemaker.config").setLevel(logging.WARNING)

    workdir = tempfile.mkdtemp(prefix="launchbay-scale-")
    rows: list[Row] = []
    moto = None
    started = time.time()
    print(f"CPUs: {os.cpu_count()}, memory {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / (1 << 30):.0f} GiB, "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {'quick' if quick else 'full'} sizes, {reps} reps")  # fmt: skip
    try:
        if {"code", "data"} & set(wanted):
            moto = Moto(workdir)
        tmp = os.path.join(workdir, "jobs")
        os.makedirs(tmp, exist_ok=True)
        prepare_scripts(tmp)
        for section in wanted:  # in the order asked for (--only logs,failure,... first)
            if section == "code":
                assert moto is not None  # noqa: S101
                sizes = [100, 500, 2000] if quick else [1000, 10000, 50000]
                bench_code(rows, moto, workdir, sizes, 1024 if quick else 4096, reps)
            elif section == "data":
                assert moto is not None  # noqa: S101
                cases = [(500, 4096), (2, 16 << 20)] if quick else [(10000, 4096), (4, 256 << 20)]
                bench_data(rows, moto, workdir, cases, reps if quick else 1)
            elif section == "ranks":
                shapes = [(1, 1), (2, 2)] if quick else [(1, 1), (2, 2), (4, 2), (8, 2)]
                bench_ranks(rows, tmp, shapes, reps)
            elif section == "logs":
                bench_logs(rows, tmp, 10_000 if quick else 100_000, 1 if quick else reps)
            elif section == "failure":
                hosts, procs = (2, 2) if quick else (8, 2)
                bench_failure(rows, tmp, hosts, procs, 1)
    finally:
        if moto is not None:
            moto.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        # printed also when a section fails or the run is interrupted: what was measured stays
        print_table(rows)
        print_end(rows, started)
    return 0


def print_end(rows: list[Any], started: float) -> None:
    """The run's last lines: the load average, how long it took, goals met and not met."""
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"the run took {time.time() - started:.0f} s")  # fmt: skip
    missed = [r for r in rows if r.met is False]
    print(f"goals met: {sum(r.met is True for r in rows)}, not met: {len(missed)}")


if __name__ == "__main__":
    sys.exit(main())
