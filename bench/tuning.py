"""The local tuning scheduler's cost per trial, measured side by side (issue 23).

One run prints one table. The same trials (a script that works ``--work`` seconds,
sleeping, and prints ``loss=<value>``) run four ways:

* **tuner**: ``HyperparameterTuner.fit()`` with ``local_process`` trials, Random
  strategy, ``max_parallel_jobs=1`` (and then P at once);
* **fit() x N**: the same trials as plain local jobs, one ``Estimator.fit()`` after
  another, with the values the tuner drew (the floor of the scheduler: each trial
  is a local job);
* **Optuna**: an Optuna study (RandomSampler) whose objective is ``subprocess.run``
  of the same script, parsing its last ``loss=`` line: no launchbay in between;
* **bare**: the script run N times with ``subprocess.run``.

Rows: the scheduler's overhead per trial, ``(tuner - fit() x N) / N`` (goal: at most
0.3 s), launchbay's whole cost per trial against Optuna (a local job's staging,
logs, records and metrics included), and the parallel speedup of ``max_parallel_jobs=P``
against the sequential tuner (goal: at least 0.8 x ``min(P, cores)``), with Optuna's
``n_jobs=P`` beside it.

Usage, from the repository root::

    python bench/tuning.py                 # 8 trials of 1 s, P=2, 2 reps (about 2 minutes on 2 cores)
    python bench/tuning.py --trials 16 --parallel 4 --reps 3

Each time is the median of ``--reps`` runs; the load average is printed per row.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "sdk"))

from scale import median_time, print_end, say  # noqa: E402 - bench/scale.py's helpers

TRIAL = """\
import argparse
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--work", type=float, default=1.0)
args, _ = parser.parse_known_args()
time.sleep(args.work)
print(f"loss={(args.lr - 0.3) ** 2!r}", flush=True)
"""
REGEX = r"loss=([0-9.eE+-]+)"


@dataclass
class Row:
    case: str
    value: float
    unit: str = "s"
    beside: str = ""
    goal: str = ""
    met: bool | None = None
    load: float = field(default_factory=lambda: os.getloadavg()[0])


def print_table(rows: list[Row]) -> None:
    head = f"{'case':<44} {'value':>10} {'load':>5}  {'beside':<44} {'goal':<30} met"
    print("\n" + head)
    print("-" * len(head))
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        value = f"{r.value:.3f} {r.unit}" if r.unit else f"{r.value:.2f}x"
        print(f"{r.case:<44} {value:>10} {r.load:5.2f}  {r.beside:<44} {r.goal:<30} {met}")


class Bench:
    def __init__(self, workdir: Path, trials: int, work: float) -> None:
        self.src = workdir / "src"
        self.src.mkdir()
        (self.src / "trial.py").write_text(TRIAL)
        self.workdir = workdir
        self.trials = trials
        self.work = work
        self.runs = 0

    def estimator(self, **hyperparameters: Any) -> Any:
        from launchbay.pytorch import PyTorch

        return PyTorch(
            entry_point="trial.py", source_dir=str(self.src), role=None,
            instance_type="local_process", instance_count=1, framework_version="2.8.0",
            py_version="py312", hyperparameters={"work": self.work, **hyperparameters},
            output_path=(self.workdir / "out").as_uri(),
            metric_definitions=[{"Name": "loss", "Regex": REGEX}],
        )  # fmt: skip

    def name(self, what: str) -> str:
        self.runs += 1
        return f"b-{what}-{self.runs}-{os.getpid() % 10000}"

    def tune(self, parallel: int) -> list[float]:
        """One tuning job; returns the lr values it drew."""
        from launchbay.tuner import ContinuousParameter, HyperparameterTuner

        tuner = HyperparameterTuner(
            self.estimator(), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
            metric_definitions=[{"Name": "loss", "Regex": REGEX}], objective_type="Minimize",
            strategy="Random", max_jobs=self.trials, max_parallel_jobs=parallel, random_seed=1,
        )  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):
            tuner.fit(job_name=self.name(f"p{parallel}"))
        summaries = tuner.latest_tuning_job.training_jobs()
        assert all(s["TrainingJobStatus"] == "Completed" for s in summaries), summaries  # noqa: S101
        assert len(summaries) == self.trials  # noqa: S101
        return [float(s["TunedHyperParameters"]["lr"]) for s in summaries]

    def fits(self, values: list[float]) -> None:
        for lr in values:
            estimator = self.estimator(lr=lr)
            with contextlib.redirect_stdout(io.StringIO()):
                estimator.fit(job_name=self.name("fit"), logs="None")

    def run_script(self, lr: float) -> float:
        out = subprocess.run(
            [sys.executable, str(self.src / "trial.py"), "--lr", repr(lr), "--work", str(self.work)],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        return float(re.findall(REGEX, out)[-1])

    def bare(self, values: list[float]) -> None:
        for lr in values:
            self.run_script(lr)

    def optuna(self, parallel: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(direction="minimize", sampler=optuna.samplers.RandomSampler(1))
        study.optimize(
            lambda trial: self.run_script(trial.suggest_float("lr", 0.01, 1.0)),
            n_trials=self.trials, n_jobs=parallel,
        )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=8, help="trials per tuning job (default 8)")
    parser.add_argument(
        "--work", type=float, default=1.0, help="seconds each trial works (default 1)"
    )
    parser.add_argument("--parallel", type=int, default=2, help="max_parallel_jobs P (default 2)")
    parser.add_argument(
        "--reps", type=int, default=2, help="runs per measurement (median; default 2)"
    )
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="launchbay-bench-tuning-"))
    os.environ["LAUNCHBAY_HOME"] = str(workdir / "home")
    warnings.filterwarnings("ignore", message="framework_version=")
    cores = os.cpu_count() or 1
    n, reps, p = args.trials, args.reps, args.parallel
    started = time.time()
    print(f"CPUs: {cores}, load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{n} trials of {args.work:g} s, P={p}, {reps} reps")  # fmt: skip
    bench = Bench(workdir, n, args.work)
    rows: list[Row] = []
    try:
        values = bench.tune(1)  # warm-up: imports, the first staging; also the values to replay
        say("sequential tuner")
        tune1 = median_time(lambda: bench.tune(1), reps)
        say("plain fit() x N")
        fit = median_time(lambda: bench.fits(values), reps)
        say("Optuna + subprocess.run")
        opt1 = median_time(lambda: bench.optuna(1), reps)
        say("bare subprocess.run x N")
        bare = median_time(lambda: bench.bare(values), reps)
        say(f"parallel tuner, P={p}")
        tunep = median_time(lambda: bench.tune(p), reps)
        say(f"Optuna n_jobs={p}")
        optp = median_time(lambda: bench.optuna(p), reps)
        rows += [
            Row(f"tuner, {n} trials, 1 at a time", tune1,
                beside=f"fit() x{n} {fit:.2f} s, Optuna {opt1:.2f} s, bare {bare:.2f} s"),
            Row("scheduler overhead per trial (vs fit())", (tune1 - fit) / n,
                beside=f"({tune1:.2f} - {fit:.2f}) / {n}", goal="<= 0.3 s", met=(tune1 - fit) / n <= 0.3),
            Row("launchbay cost per trial (vs Optuna)", (tune1 - opt1) / n,
                beside=f"({tune1:.2f} - {opt1:.2f}) / {n}; a local job each"),
            Row("a local job per trial (fit() vs bare)", (fit - bare) / n,
                beside=f"({fit:.2f} - {bare:.2f}) / {n}"),
            Row("Optuna's own cost per trial (vs bare)", (opt1 - bare) / n,
                beside=f"({opt1:.2f} - {bare:.2f}) / {n}"),
            Row(f"tuner, {n} trials, {p} at a time", tunep, beside=f"Optuna n_jobs={p}: {optp:.2f} s"),
            Row(f"parallel speedup, P={p}", tune1 / tunep, unit="",
                beside=f"Optuna: {opt1 / optp:.2f}x; min(P, cores) = {min(p, cores)}",
                goal=f">= {0.8 * min(p, cores):.1f}x (0.8 x min(P, cores))",
                met=tune1 / tunep >= 0.8 * min(p, cores)),
        ]  # fmt: skip
    finally:
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)
        print_table(rows)
        print_end(rows, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
