"""Write a checkpoint, then succeed once told to.

``--marker DIR``: ``started-<host>`` (holding the pid) is created there once the
checkpoint is written; the script returns (exit code 0) once ``DIR/finish`` exists.
"""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--marker", required=True)
args, _ = parser.parse_known_args()
host = os.environ["SM_CURRENT_HOST"]
checkpoints = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
os.makedirs(checkpoints, exist_ok=True)
with open(os.path.join(checkpoints, f"step-{host}.ckpt"), "w") as f:
    f.write(f"written on {host}")
with open(os.path.join(args.marker, f"started-{host}"), "w") as f:
    f.write(str(os.getpid()))
while not os.path.exists(os.path.join(args.marker, "finish")):
    time.sleep(0.1)
print(f"training finished on {host}")
