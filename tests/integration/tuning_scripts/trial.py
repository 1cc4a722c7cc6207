"""A tiny trial for the local tuning tests: prints ``loss=<value>`` once per epoch.

loss at epoch e (1-based) = (lr - 0.3)**2 + slope / e, plus ``last_bump`` on an extra
last line when given (so the last value is not the smallest). Writes a JSON record
``<marks>/<job>.json`` (start and end times, the values printed, CUDA_VISIBLE_DEVICES,
how it ended) so the tests can check what ran when. Exits 3 when ``optimizer`` is
"broken". On SIGTERM it writes ``<checkpoint dir>/stopped-<job>.txt`` and ends "stopped".
No torch, nothing heavy.
"""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--optimizer", type=str, default="sgd")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--slope", type=float, default=1.0)
parser.add_argument("--pause", type=float, default=0.0)
parser.add_argument("--last_bump", type=float, default=None)
parser.add_argument("--marks", type=str, default="")
args, _ = parser.parse_known_args()

job = json.loads(os.environ.get("SM_TRAINING_ENV", "{}")).get("job_name") or str(os.getpid())
record = {
    "job": job,
    "start": time.time(),
    "values": [],
    "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "lr": args.lr,
    "optimizer": args.optimizer,
    "how": "running",
}


def save():
    if args.marks:
        path = os.path.join(args.marks, f"{job}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)


def on_term(signum, frame):
    checkpoints = "/opt/ml/checkpoints"
    if os.path.isdir(checkpoints) or os.environ.get("SM_CHECKPOINT_DIR"):
        directory = os.environ.get("SM_CHECKPOINT_DIR", checkpoints)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"stopped-{job}.txt"), "w") as f:
            f.write(f"{len(record['values'])}\n")
    record["how"] = "stopped"
    record["end"] = time.time()
    save()
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
save()
if args.optimizer == "broken":
    record["how"] = "failed"
    record["end"] = time.time()
    save()
    print("this optimizer is broken", file=sys.stderr, flush=True)
    sys.exit(3)
for epoch in range(1, args.epochs + 1):
    value = (args.lr - 0.3) ** 2 + args.slope / epoch
    record["values"].append(value)
    print(f"epoch {epoch} loss={value!r}", flush=True)
    save()
    time.sleep(args.pause)
if args.last_bump is not None:
    value = record["values"][-1] + args.last_bump
    record["values"].append(value)
    print(f"final loss={value!r}", flush=True)
record["end"] = time.time()
record["how"] = "completed"
save()
