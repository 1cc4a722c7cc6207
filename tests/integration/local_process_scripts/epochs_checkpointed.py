"""Train ``--epochs`` epochs of ``--epoch-seconds`` each, checkpointing after every epoch.

With ``--resume true`` the script restores its checkpoint (``epochs-<host>.json`` in the
checkpoint dir) and goes on from there; with ``--resume false`` it never reads it and
starts from epoch 0 again, as a script that ignores its checkpoints does. SIGTERM ends
it at the end of the current epoch (its checkpoint written), as SageMaker asks. Each
finished epoch prints ``epoch N done on <host>``; ``--fail true`` raises instead.
"""

import argparse
import json
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--epoch-seconds", type=float, default=0.25)
parser.add_argument("--resume", default="true")
parser.add_argument("--fail", default="false")
args, _ = parser.parse_known_args()
host = os.environ["SM_CURRENT_HOST"]
checkpoints = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
os.makedirs(checkpoints, exist_ok=True)
path = os.path.join(checkpoints, f"epochs-{host}.json")
if args.fail == "true":
    raise RuntimeError(f"the script failed on {host}")

stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))


def save(epoch: int) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"epoch": epoch}, f)
    os.replace(tmp, path)


start = 0
if args.resume == "true" and os.path.exists(path):
    with open(path) as f:
        start = json.load(f)["epoch"]
print(f"starting at epoch {start} on {host}", flush=True)
if not os.path.exists(path):
    save(start)
for epoch in range(start + 1, args.epochs + 1):
    time.sleep(args.epoch_seconds)
    save(epoch)
    print(f"epoch {epoch} done on {host}", flush=True)
    if stopping:
        print(f"SIGTERM on {host}: checkpoint of epoch {epoch} saved", flush=True)
        sys.exit(0)
model_dir = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
with open(os.path.join(model_dir, f"trained-{host}.json"), "w") as f:
    json.dump({"from": start, "to": args.epochs}, f)
print(f"training finished on {host}", flush=True)
