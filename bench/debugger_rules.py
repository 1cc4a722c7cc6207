"""Debugger rules on a local job, measured side by side (issue 34 item 2).

The same 1-host ``local_process`` job (tests/integration/local_process_scripts/smdebug_rules.py:
a small regression with smdebug's hook saving gradients and losses every few steps) runs
without rules, then with three (VanishingGradient, ExplodingTensor, LossNotDecreasing),
alternately, ``--repeat`` times each. The hook's configuration is the same in both, so the
difference is the rules: one niced process reading the tensors for the three while the job runs.

Printed per run and as medians: the training time (the script's training loop, as it
measured it), ``fit()``'s wall time (with rules it includes the rules
reading the last steps after the hosts ended), and their ratios with/without.

Usage, from the repository root (smdebug and torch installed)::

    python bench/debugger_rules.py                 # 3 x 2 runs, about 2 minutes on 2 cores
    python bench/debugger_rules.py --steps 3000 --repeat 5

The goal (issue 34): the training time grows by at most 10% with the rules. Keep the
machine otherwise idle: on 2 cores, anything else running (even at idle priority)
changes torch's time by more than that.

Benchmarks print; they assert nothing about time.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "sdk"))

from launchbay import CollectionConfig, DebuggerHookConfig  # noqa: E402
from launchbay.debugger import Rule, rule_configs  # noqa: E402
from launchbay.pytorch import PyTorch  # noqa: E402

SCRIPTS = ROOT / "tests" / "integration" / "local_process_scripts"


def run(
    out: Path, steps: int, width: int, interval: str, with_rules: bool
) -> tuple[float, float, dict]:
    gradients, losses = (
        CollectionConfig("gradients", {"save_interval": interval}),
        CollectionConfig("losses", {"save_interval": interval}),
    )
    rules = (
        [
            Rule.sagemaker(rule_configs.vanishing_gradient(), collections_to_save=[gradients]),
            Rule.sagemaker(rule_configs.exploding_tensor(), collections_to_save=[gradients]),
            Rule.sagemaker(
                rule_configs.loss_not_decreasing(),
                rule_parameters={"num_steps": "50", "diff_percent": "0.0"},
                collections_to_save=[losses],
            ),
        ]
        if with_rules
        else None
    )
    est = PyTorch(
        entry_point="smdebug_rules.py",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local_process",
        instance_count=1,
        framework_version="2.8.0",
        py_version="py312",
        output_path=out.as_uri(),
        hyperparameters={
            "mode": "healthy",
            "steps": steps,
            "width": width,
            "hidden": width,
            "batch": 256,
        },
        debugger_hook_config=DebuggerHookConfig(
            hook_parameters={"save_interval": interval}, collection_configs=[gradients, losses]
        ),
        rules=rules,
    )
    started = time.perf_counter()
    est.fit(logs=False)
    wall = time.perf_counter() - started
    description = est.latest_training_job.describe()
    log = Path(description["LocalJobDir"], "logs", "algo-1.log").read_text()
    seconds = float(log.rsplit("train_seconds=", 1)[1].split()[0])
    verdicts = {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
        for s in description.get("DebugRuleEvaluationStatuses", [])
    }
    return seconds, wall, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--save-interval", default="5")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        os.environ["LAUNCHBAY_HOME"] = os.path.join(tmp, "home")
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for index in range(args.repeat):
            for with_rules in (False, True):
                out = Path(tmp, f"out-{index}-{int(with_rules)}")
                seconds, wall, verdicts = run(
                    out, args.steps, args.width, args.save_interval, with_rules
                )
                results[with_rules].append((seconds, wall))
                label = "3 rules " if with_rules else "no rules"
                shown = ", ".join(f"{k}: {v}" for k, v in verdicts.items()) or "-"
                print(
                    f"run {index + 1} {label}: training {seconds:6.2f} s  fit() {wall:6.2f} s  {shown}",
                    flush=True,
                )
    base_t = statistics.median(s for s, _ in results[False])
    rule_t = statistics.median(s for s, _ in results[True])
    base_w = statistics.median(w for _, w in results[False])
    rule_w = statistics.median(w for _, w in results[True])
    print()
    print(f"{'median of ' + str(args.repeat):<22} {'no rules':>10} {'3 rules':>10} {'ratio':>7}")
    print(f"{'training (s)':<22} {base_t:>10.2f} {rule_t:>10.2f} {rule_t / base_t:>7.3f}")
    print(f"{'fit() wall (s)':<22} {base_w:>10.2f} {rule_w:>10.2f} {rule_w / base_w:>7.3f}")
    print(
        f"(1 host, {args.steps} steps, a {args.width}x{args.width} MLP, batch 256, tensors every {args.save_interval} steps; rules niced)"
    )


if __name__ == "__main__":
    main()
