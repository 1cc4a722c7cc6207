"""Local Docker mode against SDK v2's local mode and a bare ``docker run``, side by side.

One run, one image, one no-op script (``print('noop')``), for 1 and 2 instances:

1. launchbay: ``launchbay.Estimator(image_uri=IMAGE, instance_type="local",
   instance_count=N, entry_point="noop.py", ...).fit(logs=False)`` (the Docker
   Engine API, one container per instance on a per-job network).
2. SageMaker Python SDK v2 local mode: ``sagemaker.estimator.Estimator(...)`` with
   a ``LocalSession`` whose config says ``local_code: True`` (no S3 involved),
   timed twice: ``.fit(wait=True)`` with its default ``logs="All"``, its fastest
   path, which the goal is judged against; and ``.fit(wait=True, logs=False)``, the
   same call as launchbay's, where v2's local mode goes through ``wait_for_job``,
   which sleeps 5 s before its first look at a job that has already ended.
   Compose's output reaches stdout either way (captured here). v2 runs ``docker
   compose`` (Compose v2) or else ``docker-compose`` (Debian's 1.29.2 here),
   whichever its own lookup picks; the header says which. Its telemetry is opted out (``TelemetryOptOut``): no
   network here, and a telemetry call would only add to its time. The containers
   it leaves behind are removed after each run, outside the timing; so are launchbay's,
   which it removes itself in the background after ``fit()`` returns (the bench waits for
   that before the next case, outside the timing).
3. The floor: ``docker run --rm -v SRC:/opt/ml/code IMAGE python /opt/ml/code/noop.py``;
   for N instances, N of them at once, timed until the last one is done.

Each timing is the user's call until it returns: for the SDKs, the estimator's
constructor plus ``fit()`` in this process (both SDKs imported beforehand, as in
a notebook); for the floor, the ``docker`` CLI processes. Each case is warmed
up once (image layers in the page cache, imports done), then run ``--reps``
times with the order rotated every rep. Prints every time, then per instance
count the median (and min) of each, the ratios SDK v2 / launchbay (goal: at
least 3x, against v2's ``fit()``) and launchbay minus the floor (goal: at most
0.3 s), then the warm line beside the cold one: ``launchbay warm`` is the same
fit with ``keep_alive_period_in_seconds=600``, whose warm-up leaves a warm pool
that every timed run reuses (goal: no longer than the floor). Nothing here
asserts on a timing; a job that does not produce its model.tar.gz is an error.

Run from the repository root, on an otherwise idle machine::

    python bench/docker_overhead.py                       # 5 reps, 1 and 2 instances
    python bench/docker_overhead.py --reps 3 --image lbtest/dev:1 --counts 1

The image must have ``train`` on PATH (a launchbay training image does; build
it with ``launchbay images build pytorch ...``). No AWS service is reached:
dummy credentials and ``AWS_DEFAULT_REGION=us-west-2`` are set for SDK v2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_IMAGE = "launchbay/pytorch-training:2.13.0-cpu-py311"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
REGION = "us-west-2"
NOOP = "print('noop')\n"
CASES = ("docker run", "launchbay", "launchbay warm", "v2 fit()", "v2 logs=False")
V2_CASES = ("v2 fit()", "v2 logs=False")


def docker_out(*argv: str) -> str:
    done = subprocess.run(["docker", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def compose_command() -> tuple[list[str], str]:
    """The compose command SDK v2 will use (its own lookup) and that command's version."""
    from sagemaker.local.image import _SageMakerContainer

    prefix = list(_SageMakerContainer._get_compose_cmd_prefix())
    done = subprocess.run([*prefix, "version", "--short"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"SDK v2 picked {' '.join(prefix)!r}, which does not run: {done.stderr.strip()}"
        )
    return prefix, done.stdout.strip()


def remove_v2_containers(root: Path) -> int:
    """Remove the containers SDK v2's compose runs under ``root`` made (v2 never does)."""
    out = docker_out(
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        "label=com.docker.compose.project",
        "--format",
        '{{.ID}} {{.Label "com.docker.compose.project.working_dir"}}',
    )
    ids = [
        cid
        for cid, _, where in (line.partition(" ") for line in out.splitlines())
        if where == str(root) or where.startswith(f"{root}/")
    ]
    if ids:
        docker_out("rm", "-f", "-v", *ids)
    return len(ids)


def wait_for_background_removal(job_name: str, timeout: float = 30.0) -> None:
    """Until the job's exited containers and network are gone: launchbay removes them in
    the background after ``fit()`` returns; the next timed case must not pay for that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = docker_out("ps", "-aq", "--filter", f"label=launchbay.job={job_name}")
        left += docker_out("network", "ls", "-q", "--filter", f"name=launchbay-{job_name}")
        if not left:
            return
        time.sleep(0.05)
    raise RuntimeError(f"job {job_name}'s containers or network were not removed in {timeout} s")


def model_tar(uri: str) -> Path:
    path = Path(uri.removeprefix("file://"))
    if not path.is_file():
        raise RuntimeError(f"the job returned but wrote no model artifact at {uri}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="timed runs per case and count")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help="training image (train on PATH)")
    parser.add_argument("--counts", default="1,2", help="comma-separated instance counts")
    args = parser.parse_args(argv)
    try:
        counts = [int(c) for c in args.counts.split(",") if c.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--counts: expected positive integers like 1,2; got {args.counts!r}")
    if args.reps < 1:
        parser.error(f"--reps: expected at least 1; got {args.reps}")

    # Ctrl-C and SIGTERM stop the bench and run its finally block (containers, temp
    # dir). SDK v2's telemetry decorator returns from a ``finally`` and so swallows
    # a KeyboardInterrupt raised inside ``fit()``: the signal is also remembered
    # and raised again once the call returns.
    stopped: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        stopped.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def stop_if_signalled() -> None:
        if stopped:
            raise KeyboardInterrupt if stopped[0] == signal.SIGINT else SystemExit(128 + stopped[0])

    try:
        image_id = docker_out("image", "inspect", "--format", "{{.Id}}", args.image)
    except RuntimeError:
        parser.error(
            f"--image: {args.image!r} is not on this machine's Docker engine "
            "(`docker images` lists what is; build a launchbay image with "
            "`launchbay images build pytorch ...`)"
        )
    image_mb = int(docker_out("image", "inspect", "--format", "{{.Size}}", args.image)) / 2**20
    engine = docker_out("version", "--format", "{{.Server.Version}}")

    workdir = tempfile.mkdtemp(prefix="launchbay-bench-")
    src = Path(workdir, "src")
    src.mkdir()
    (src / "noop.py").write_text(NOOP)
    os.environ.update(
        {
            "LAUNCHBAY_HOME": str(Path(workdir, "home")),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
            "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
        }
    )
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    had_v2_network = bool(docker_out("network", "ls", "-q", "--filter", "name=^sagemaker-local$"))
    v2_root = Path(workdir, "v2-root")  # SDK v2's container_root: where its jobs live
    v2_root.mkdir()
    try:
        for name in ("sagemaker", "sagemaker.config", "botocore", "launchbay"):
            logging.getLogger(name).setLevel(logging.WARNING)  # before v2's config logger
        import sagemaker
        import sagemaker.estimator
        import sagemaker.local

        import launchbay

        compose, compose_version = compose_command()
        v2_session = sagemaker.local.LocalSession(
            sagemaker_config={
                "SchemaVersion": "1.0",
                "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}},
            }
        )
        v2_session.config = {"local": {"local_code": True, "container_root": str(v2_root)}}

        print(f"image {args.image} ({image_id[7:19]}, {image_mb:.0f} MiB), engine {engine}")
        print(
            f"SDK v2 {sagemaker.__version__} uses `{' '.join(compose)}` ({compose_version}); "
            "telemetry opted out"
        )
        print(f"CPUs: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.2f}")

        def run_floor(n: int) -> None:
            argv = ["docker", "run", "--rm", "-v", f"{src}:/opt/ml/code", args.image]
            procs = [
                subprocess.Popen(
                    [*argv, "python", "/opt/ml/code/noop.py"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
                for _ in range(n)
            ]
            outs = [p.communicate()[0] for p in procs]
            for proc, out in zip(procs, outs, strict=True):
                if proc.returncode != 0 or b"noop" not in out:
                    raise RuntimeError(f"docker run exited {proc.returncode}: {out.decode()}")

        def run_launchbay(n: int, keep_alive: int | None = None) -> Any:
            est = launchbay.Estimator(
                image_uri=args.image,
                role=None,
                instance_type="local",
                instance_count=n,
                entry_point="noop.py",
                source_dir=str(src),
                output_path=f"file://{workdir}/out-launchbay",
                keep_alive_period_in_seconds=keep_alive,
            )
            est.fit(logs=False)
            return est

        def run_v2(n: int, logs: bool) -> Any:
            est = sagemaker.estimator.Estimator(
                image_uri=args.image,
                role=ROLE,
                instance_count=n,
                instance_type="local",
                entry_point="noop.py",
                source_dir=str(src),
                output_path=f"file://{workdir}/out-v2",
                sagemaker_session=v2_session,
            )
            if logs:
                est.fit(wait=True)
            else:
                est.fit(wait=True, logs=False)
            return est

        runners: dict[str, Callable[[int], Any]] = {
            "docker run": run_floor,
            "launchbay": run_launchbay,
            # A second fit within the keep-alive period: the warm-up made the pool, and
            # each run leaves it Available for the next (WarmPoolStatus Reused).
            "launchbay warm": lambda n: run_launchbay(n, keep_alive=600),
            "v2 fit()": lambda n: run_v2(n, logs=True),
            "v2 logs=False": lambda n: run_v2(n, logs=False),
        }

        def timed(case: str, n: int) -> float:
            captured = io.StringIO()  # v2 copies compose's output to sys.stdout
            est = None
            start = time.perf_counter()
            try:
                with contextlib.redirect_stdout(captured):
                    est = runners[case](n)
                elapsed = time.perf_counter() - start
            except Exception:
                sys.stdout.write(captured.getvalue())
                raise
            finally:
                if case in V2_CASES:  # not timed: v2 leaves its containers behind
                    remove_v2_containers(v2_root)
                if case == "launchbay warm":  # not timed: the pool's next containers start
                    from launchbay.backends.local import warm_pool  # after fit() returned

                    warm_pool.wait_for_refills()
                if case == "launchbay" and est is not None:  # not timed, as v2's removal
                    wait_for_background_removal(est.latest_training_job.name)
                stop_if_signalled()
            if est is not None:
                model_tar(est.model_data)
            return elapsed

        results: dict[tuple[int, str], list[float]] = {}
        for n in counts:
            print(f"\n== {n} instance{'s' if n > 1 else ''}")
            for case in CASES:  # warm-up: page cache, imports, v2's network
                timed(case, n)
            for rep in range(args.reps):
                shift = rep % len(CASES)
                order = CASES[shift:] + CASES[:shift]
                times = {case: timed(case, n) for case in order}
                for case, elapsed in times.items():
                    results.setdefault((n, case), []).append(elapsed)
                print(
                    f"  rep {rep + 1}  "
                    + ", ".join(f"{case} {times[case]:6.2f} s" for case in CASES),
                    flush=True,
                )

        print(
            f"\nload average at end: {os.getloadavg()[0]:.2f} (timings are noisy on a busy machine)"
        )
        print(
            f"\n== summary: seconds, median of {args.reps} runs (min in brackets); "
            f"image {args.image}"
        )
        print(f"  {'instances':>9}" + "".join(f" {case:>14}" for case in CASES))
        medians: dict[tuple[int, str], float] = {}
        for n in counts:
            cells = []
            for case in CASES:
                values = results[(n, case)]
                medians[(n, case)] = statistics.median(values)
                cells.append(f"{medians[(n, case)]:5.2f} ({min(values):5.2f})")
            print(f"  {n:>9}" + "".join(f" {cell:>14}" for cell in cells))
        print("\n== ratios and overhead (of the medians)")
        print(
            f"  {'instances':>9} {'v2 fit()/launchbay':>19} {'v2 logs=False/launchbay':>24}"
            f" {'launchbay - floor':>18}"
        )
        worst_ratio, worst_gap = float("inf"), 0.0
        for n in counts:
            lb = medians[(n, "launchbay")]
            ratios = [medians[(n, case)] / lb for case in V2_CASES]
            gap = lb - medians[(n, "docker run")]
            worst_ratio, worst_gap = min(worst_ratio, ratios[0]), max(worst_gap, gap)
            print(f"  {n:>9} {ratios[0]:18.2f}x {ratios[1]:23.2f}x {gap:16.2f} s")
        print("\n== the warm line beside the cold one (a second fit within the keep-alive period)")
        print(f"  {'instances':>9} {'cold':>7} {'warm':>7} {'floor':>7} {'warm - floor':>13}")
        worst_warm = -float("inf")
        for n in counts:
            warm, cold = medians[(n, "launchbay warm")], medians[(n, "launchbay")]
            floor = medians[(n, "docker run")]
            worst_warm = max(worst_warm, warm - floor)
            print(f"  {n:>9} {cold:6.2f}s {warm:6.2f}s {floor:6.2f}s {warm - floor:12.2f}s")
        print(f"\nv2 fit() / launchbay: lowest {worst_ratio:.2f}x (goal >= 3x)")
        print(f"launchbay - floor: highest {worst_gap:.2f} s (goal <= 0.3 s)")
        print(f"launchbay warm - floor: highest {worst_warm:.2f} s (goal <= 0)")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        with contextlib.suppress(Exception):  # the warm case's pools end with the bench
            import docker
            from launchbay.backends.local import warm_pool

            warm_pool.stop_pools(docker.from_env(), now=True)
        with contextlib.suppress(RuntimeError):
            remove_v2_containers(v2_root)
        if not had_v2_network:
            subprocess.run(["docker", "network", "rm", "sagemaker-local"], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
