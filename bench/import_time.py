"""Import time: launchbay against SageMaker Python SDK v2, each in fresh interpreters.

Every measurement is a new ``python`` process that times its own import with
``time.perf_counter`` (interpreter start-up is excluded; it is the same for both).
Runs are interleaved, so drift on the machine affects every target alike, and the
median of ``--runs`` runs is reported, after one unmeasured warm-up run per target
(which also writes the ``.pyc`` files). Whole-process wall time minus a bare
``python -c pass`` is printed alongside for reference.

Goal: ``import launchbay`` at least 10x faster than ``import sagemaker``, and
``import launchbay`` must not import boto3.

    python bench/import_time.py [--runs 9] [--strict]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

GOAL_RATIO = 10.0

TARGETS = {
    "import launchbay": "import launchbay",
    "from launchbay.pytorch import PyTorch": "from launchbay.pytorch import PyTorch",
    "import sagemaker": "import sagemaker",
}
REFERENCE = "import sagemaker"

_TIMER = (
    "import time as _t\n"
    "_start = _t.perf_counter()\n"
    "{statement}\n"
    "print(repr(_t.perf_counter() - _start))\n"
)
_MODULES = (
    "import sys\n{statement}\nprint(int('boto3' in sys.modules), int('botocore' in sys.modules))\n"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SAGEMAKER_SUPPRESS_V2_WARNING"] = "1"
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def _python(code: str) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter; return its stdout and the process wall time."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"python -c {code!r} failed:\n{done.stderr.strip()}")
    lines = done.stdout.strip().splitlines()
    return (lines[-1] if lines else ""), wall


def measure(runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]], list[float]]:
    """(in-process import seconds, process wall seconds, baseline wall seconds)."""
    inside: dict[str, list[float]] = {name: [] for name in TARGETS}
    wall: dict[str, list[float]] = {name: [] for name in TARGETS}
    baseline: list[float] = []
    for statement in TARGETS.values():  # warm-up: compile .pyc, fill the page cache
        _python(_TIMER.format(statement=statement))
    _python("pass")
    for _ in range(runs):
        baseline.append(_python("pass")[1])
        for name, statement in TARGETS.items():
            out, seconds = _python(_TIMER.format(statement=statement))
            inside[name].append(float(out))
            wall[name].append(seconds)
    return inside, wall, baseline


def boto_imported(statement: str) -> tuple[bool, bool]:
    out, _ = _python(_MODULES.format(statement=statement))
    boto3, botocore = out.split()
    return boto3 == "1", botocore == "1"


def _versions() -> str:
    code = "import importlib.metadata as m\nprint(m.version('launchbay'), m.version('sagemaker'))\n"
    try:
        out, _ = _python(code)
    except SystemExit:
        return "versions unknown"
    ours, theirs = out.split()
    return f"launchbay {ours}, sagemaker {theirs}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="measured runs per target")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a goal is missed (for CI)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    print(f"python {sys.version.split()[0]} ({sys.executable}); {_versions()}")
    print(f"median of {args.runs} fresh interpreters per target, runs interleaved\n")
    inside, wall, baseline = measure(args.runs)
    base = statistics.median(baseline)

    medians = {name: statistics.median(values) for name, values in inside.items()}
    width = max(len(name) for name in TARGETS)
    print(f"{'target':<{width}}  {'import (ms)':>11}  {'min':>7}  {'max':>7}  {'wall-base':>9}")
    for name in TARGETS:
        values = inside[name]
        extra = statistics.median(wall[name]) - base
        print(
            f"{name:<{width}}  {medians[name] * 1e3:11.1f}  {min(values) * 1e3:7.1f}  "
            f"{max(values) * 1e3:7.1f}  {extra * 1e3:9.1f}"
        )
    print(f"{'(python -c pass, wall)':<{width}}  {'':>11}  {'':>7}  {'':>7}  {base * 1e3:9.1f}")

    print()
    reference = medians[REFERENCE]
    goals_met = True
    for name in TARGETS:
        if name == REFERENCE:
            continue
        ratio = reference / medians[name] if medians[name] > 0 else float("inf")
        verdict = "meets" if ratio >= GOAL_RATIO else "MISSES"
        goals_met &= ratio >= GOAL_RATIO
        print(f"{REFERENCE} / {name}: {ratio:.1f}x faster ({verdict} the {GOAL_RATIO:g}x goal)")

    print()
    for name, statement in TARGETS.items():
        if name == REFERENCE:
            continue
        boto3, botocore = boto_imported(statement)
        if name == "import launchbay":
            print(f"boto3 imported: {boto3}")
            goals_met &= not boto3
        else:
            print(f"boto3 imported by {name!r}: {boto3}")
        print(f"botocore imported by {name!r}: {botocore}")
    return 1 if args.strict and not goals_met else 0


if __name__ == "__main__":
    sys.exit(main())
