"""Metrics recording of local jobs, measured side by side (issue 31 items 1, 2 and 11).

One run prints one table:

* **cost** at 250k, 500k and 1M metric lines: one ``local_process`` trial whose
  script prints N lines ``loss=<i>``, run by ``HyperparameterTuner.fit()`` (the
  recorder follows its log, the tuner reads ``metrics.jsonl`` every 0.2 s), beside
  the same script run by a plain ``Estimator.fit()`` without ``metric_definitions``
  (no recording). The client's CPU seconds (``RUSAGE_SELF``: every thread of the
  client) of each, their difference (the metrics' share in the client), and the
  recorder process's CPU seconds (the same log read again by
  ``launchbay.metrics.read_logs``, ``RUSAGE_CHILDREN``), each also per million lines:
  flat per-line costs are linear growth. Every value is checked kept, and the
  objective checked to be the last line's (after the measurement).
* **Ctrl-C and max_run** with 1M metric lines and then a line that makes
  ``(a+)+b`` backtrack (a regex that never ends on it): a client process runs
  ``fit()``; the seconds from SIGINT until that process ended, and from
  ``MaxRuntimeInSeconds`` (5 s after the job's start) until ``fit()`` returned.

Usage, from the repository root::

    python bench/metrics.py                       # 250k, 500k, 1M lines (a few minutes on 2 cores)
    python bench/metrics.py --sizes 100000 200000

Benchmarks print; they assert nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "sdk"))

from scale import print_end, say  # noqa: E402 - bench/scale.py's helpers

SCRIPT = """\
import argparse, json, os, sys, time

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=0)
parser.add_argument("--long_a", type=int, default=0)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--marks", type=str, default="")
args, _ = parser.parse_known_args()
for start in range(0, args.lines, 10000):
    sys.stdout.write("".join(f"loss={i}\\n" for i in range(start, min(start + 10000, args.lines))))
if args.long_a:
    sys.stdout.write("a" * args.long_a + "\\n")
sys.stdout.flush()
if args.marks:
    open(os.path.join(args.marks, "printed"), "w").close()
time.sleep(args.sleep)
"""
DRIVER = """\
import json, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, {sdk!r})
from launchbay.pytorch import PyTorch

options = json.loads(sys.argv[1])
estimator = PyTorch(
    entry_point="flood.py", source_dir=options["src"], role=None, instance_type="local_process",
    instance_count=1, framework_version="2.8.0", py_version="py312",
    hyperparameters=options["hyperparameters"], output_path=options["output"],
    metric_definitions=options["metric_definitions"], max_run=options.get("max_run", 86400),
)
try:
    estimator.fit(job_name=options["job_name"], logs=False)
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
except Exception as exc:
    print(f"driver: {{type(exc).__name__}}", flush=True)
"""
LOSS = {"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}
BACKTRACKING = {"Name": "stuck", "Regex": r"(a+)+b"}


@dataclass
class Row:
    case: str
    values: list[str]
    met: bool | None = None  # no goals here: the numbers are read side by side
    load: float = field(default_factory=lambda: os.getloadavg()[0])


def cpu(who: int = resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measured(fn: Callable[[], Any], who: int = resource.RUSAGE_SELF) -> tuple[float, float, Any]:
    """``(CPU seconds, wall seconds, result)`` of ``fn()``."""
    c0, t0 = cpu(who), time.monotonic()
    out = fn()
    return cpu(who) - c0, time.monotonic() - t0, out


class Bench:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.src = workdir / "src"
        self.src.mkdir()
        (self.src / "flood.py").write_text(SCRIPT)
        (workdir / "driver.py").write_text(DRIVER.format(sdk=str(ROOT / "sdk")))
        self.runs = 0

    def name(self, what: str) -> str:
        self.runs += 1
        return f"b-{what}-{self.runs}-{os.getpid() % 10000}"

    def estimator(self, metrics: bool, **hyperparameters: Any) -> Any:
        from launchbay.pytorch import PyTorch

        return PyTorch(
            entry_point="flood.py", source_dir=str(self.src), role=None,
            instance_type="local_process", instance_count=1, framework_version="2.8.0",
            py_version="py312", hyperparameters=hyperparameters,
            output_path=(self.workdir / "out").as_uri(),
            metric_definitions=[LOSS] if metrics else None,
        )  # fmt: skip

    def tune(self, lines: int) -> Any:
        """A tuning job of one trial printing ``lines`` metric lines; the trial's summary."""
        from launchbay.tuner import ContinuousParameter, HyperparameterTuner

        tuner = HyperparameterTuner(
            self.estimator(True, lines=lines), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
            metric_definitions=[LOSS], objective_type="Maximize", strategy="Random", max_jobs=1,
        )  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):
            tuner.fit(job_name=self.name("tune"))
        (trial,) = tuner.latest_tuning_job.training_jobs()
        return trial

    def check(self, trial: Any, lines: int) -> None:
        """Every value kept, and the objective is the last one (not measured)."""
        from launchbay.metrics import load_metrics

        objective = trial["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
        kept = [v for _, v in load_metrics(trial["LocalJobDir"])["metrics"]["loss"]]
        assert objective == lines - 1 and kept == list(range(lines)), (objective, len(kept))  # noqa: S101

    def fit(self, lines: int) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.estimator(False, lines=lines).fit(job_name=self.name("fit"), logs=False)

    def recorder(self, job_dir: str, lines: int) -> None:
        from launchbay.metrics import read_logs

        out = str(self.workdir / f"again-{self.runs}.jsonl")
        self.runs += 1
        reader = read_logs([os.path.join(job_dir, "logs", "algo-1.log")], [LOSS], out)
        assert len(reader.values["loss"]) == lines and reader.final  # noqa: S101

    def driver(
        self, job_name: str, lines: int, **options: Any
    ) -> tuple[subprocess.Popen[str], Path]:
        marks = self.workdir / f"marks-{job_name}"
        marks.mkdir()
        config = {
            "src": str(self.src), "output": (self.workdir / "out").as_uri(), "job_name": job_name,
            "metric_definitions": [LOSS, BACKTRACKING],
            "hyperparameters": {"lines": lines, "long_a": 5000, "sleep": 600, "marks": str(marks)},
            **options,
        }  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, str(self.workdir / "driver.py"), json.dumps(config)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while not (marks / "printed").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"the job did not print: {proc.communicate()[0][-2000:]}")
            time.sleep(0.05)
        return proc, marks

    def ctrl_c(self, lines: int, limit: float) -> float | None:
        """Seconds from SIGINT to the client process's end (None: not within ``limit``)."""
        proc, _ = self.driver(self.name("ctrl-c"), lines)
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        return self._ended(proc, sent, limit)

    def max_run(self, lines: int, limit: float, seconds: int = 5) -> float | None:
        """Seconds from MaxRuntimeInSeconds until fit() returned (None: not within ``limit``)."""
        name = self.name("max-run")
        proc, _ = self.driver(name, lines, max_run=seconds)
        ended = self._ended(proc, time.monotonic(), limit)
        if ended is None:
            return None
        home = Path(os.environ["LAUNCHBAY_HOME"])
        status = json.loads((home / "jobs" / name / "status.json").read_text())
        from datetime import datetime

        start = datetime.fromisoformat(status["TrainingStartTime"]).timestamp()
        return self.returned - (start + seconds)

    def _ended(self, proc: subprocess.Popen[str], since: float, limit: float) -> float | None:
        try:
            proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        self.returned = time.time()
        return time.monotonic() - since


def print_table(rows: list[Row], sizes: list[int]) -> None:
    head = f"{'case':<52}" + "".join(f"{f'{n:,} lines':>16}" for n in sizes) + f"{'load':>7}"
    print("\n" + head)
    print("-" * len(head))
    for r in rows:
        print(f"{r.case:<52}" + "".join(f"{v:>16}" for v in r.values) + f"{r.load:7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[250_000, 500_000, 1_000_000],
        help="metric lines per job (default 250000 500000 1000000)",
    )  # fmt: skip
    parser.add_argument(
        "--limit", type=float, default=120.0, help="seconds to wait for Ctrl-C/max_run (120)"
    )
    args = parser.parse_args(argv)
    sizes: list[int] = args.sizes
    workdir = Path(tempfile.mkdtemp(prefix="launchbay-bench-metrics-"))
    os.environ["LAUNCHBAY_HOME"] = str(workdir / "home")
    warnings.filterwarnings("ignore", message="framework_version=")
    started = time.time()
    print(f"CPUs: {os.cpu_count()}, load average at start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; sizes {sizes}")  # fmt: skip
    bench = Bench(workdir)
    rows: list[Row] = []
    try:
        bench.fit(10)  # warm-up: imports, the first staging
        tuned, plain, recorder, walls = [], [], [], []
        for n in sizes:
            say(f"{n:,} lines: tuner (recorded), fit() (not recorded), the recorder alone")
            c_tune, w_tune, trial = measured(lambda n=n: bench.tune(n))
            bench.check(trial, n)
            job_dir = str(trial["LocalJobDir"])
            c_fit, _, _ = measured(lambda n=n: bench.fit(n))
            c_rec, _, _ = measured(
                lambda n=n, d=job_dir: bench.recorder(d, n), resource.RUSAGE_CHILDREN
            )
            tuned.append(c_tune)
            plain.append(c_fit)
            recorder.append(c_rec)
            walls.append(w_tune)
        share = [t - p for t, p in zip(tuned, plain, strict=True)]
        per_m = [1e6 / n for n in sizes]
        rows += [
            Row("client CPU s, tuner (1 trial, recorded)", [f"{v:.2f}" for v in tuned]),
            Row("client CPU s, plain fit(), no metric_definitions", [f"{v:.2f}" for v in plain]),
            Row("client CPU s for the metrics (difference)", [f"{v:.2f}" for v in share]),
            Row("  ... per 1M lines", [f"{v * k:.2f}" for v, k in zip(share, per_m, strict=True)]),
            Row("recorder process CPU s (the same log again)", [f"{v:.2f}" for v in recorder]),
            Row("  ... per 1M lines", [f"{v * k:.2f}" for v, k in zip(recorder, per_m, strict=True)]),
            Row("tuner wall s (1 trial)", [f"{v:.2f}" for v in walls]),
        ]  # fmt: skip
        big = max(sizes)
        say(f"Ctrl-C with {big:,} lines and a backtracking (a+)+b")
        ctrl_c = bench.ctrl_c(big, args.limit)
        say(f"max_run=5 with {big:,} lines and a backtracking (a+)+b")
        max_run = bench.max_run(big, args.limit)
        blank = [""] * (len(sizes) - 1)

        def show(v: float | None) -> str:  # noqa: E306
            return f"> {args.limit:g}" if v is None else f"{v:.2f}"

        rows += [
            Row("s from SIGINT until the client process ended", [*blank, show(ctrl_c)]),
            Row("s from MaxRuntimeInSeconds until fit() returned", [*blank, show(max_run)]),
        ]  # fmt: skip
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        print_table(rows, sizes)
        print_end(rows, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
