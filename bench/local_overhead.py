"""What local_process adds on top of running the script yourself, measured side by side.

1. A no-op script: ``fit()`` with ``instance_type="local_process"`` against
   ``python script.py`` directly. Goal: under 1 s of overhead.
2. A 2 hosts x 2 processes torch_distributed job (all-reduce and a few steps of a
   tiny model on gloo) through ``fit()`` against the same script under plain
   ``torchrun`` with the same world (``--nproc_per_node 4``). Goal: at most 1.3x.

Each is run ``--reps`` times, alternating, and the medians are compared.
Usage: ``python bench/local_overhead.py [--reps 5]``.

Plain ``torchrun`` with torch 2.13 sometimes fails a run whose ranks all
finished: gloo aborts an interpreter at exit ("terminate called without an
active exception"). Such a direct run is still timed (the work was done), and
counted in the summary; a ``fit()`` run must succeed, or the bench stops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOOP = "print('noop')\n"

DDP = """
import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for _ in range(20):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
if dist.get_rank() == 0:
    os.makedirs(os.environ.get("SM_MODEL_DIR", "model"), exist_ok=True)
dist.barrier()  # gloo aborts a rank that tears down while a peer still talks
dist.destroy_process_group()
"""

FIT = """
import sys
from launchbay.pytorch import PyTorch

src, script, distributed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
kwargs = {}
if distributed:
    kwargs["distribution"] = {"torch_distributed": {"enabled": True, "processes_per_host": 2}}
est = PyTorch(entry_point=script, source_dir=src, instance_type="local_process",
              instance_count=2 if distributed else 1, framework_version="2.13",
              py_version="py311", **kwargs)
est.fit(logs=False)
"""


def timed(argv: list[str], env: dict[str, str], cwd: str, check: bool = True) -> tuple[float, int]:
    """Seconds ``argv`` took, and its exit code (non-zero raises with ``check``)."""
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=cwd, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="launchbay-bench-") as tmp:
        src = Path(tmp, "src")
        src.mkdir()
        (src / "noop.py").write_text(NOOP)
        (src / "ddp.py").write_text(DDP)
        (Path(tmp) / "fit.py").write_text(FIT)
        env = dict(os.environ, LAUNCHBAY_HOME=str(Path(tmp, "home")), PYTHONUNBUFFERED="1")
        py = sys.executable
        torchrun = [py, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4"]
        cases = [
            (
                "no-op script",
                [py, str(src / "noop.py")],
                [py, str(Path(tmp, "fit.py")), str(src), "noop.py", "0"],
            ),
            (
                "2x2 torch_distributed",
                [*torchrun, str(src / "ddp.py")],
                [py, str(Path(tmp, "fit.py")), str(src), "ddp.py", "1"],
            ),
        ]
        results = []
        direct_failures = 0
        for name, direct, launchbay in cases:
            timed(launchbay, env, tmp)  # warm caches (code staging, bytecode)
            d_times, l_times = [], []
            for rep in range(args.reps):
                seconds, code = timed(direct, env, tmp, check=False)
                d_times.append(seconds)
                note = "" if code == 0 else f" (direct exited {code})"
                direct_failures += code != 0
                l_times.append(timed(launchbay, env, tmp)[0])
                print(
                    f"  {name:<22} rep {rep + 1}: direct {d_times[-1]:.2f} s, "
                    f"launchbay fit() {l_times[-1]:.2f} s{note}",
                    flush=True,
                )
            results.append((name, statistics.median(d_times), statistics.median(l_times)))

    print(f"\n== summary (median of {args.reps} runs)")
    print(f"  {'case':<22} {'direct':>8} {'fit()':>8} {'overhead':>9} {'ratio':>7}")
    for name, direct, fit in results:
        print(f"  {name:<22} {direct:7.2f}s {fit:7.2f}s {fit - direct:8.2f}s {fit / direct:6.2f}x")
    noop, ddp = results
    print(f"\nno-op overhead {noop[2] - noop[1]:.2f} s (goal < 1 s)")
    print(f"2x2 torch_distributed ratio {ddp[2] / ddp[1]:.2f}x (goal <= 1.3x)")
    print(
        f"direct runs that exited non-zero (torchrun's gloo teardown abort): {direct_failures}; "
        f"fit() runs that failed: 0"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
