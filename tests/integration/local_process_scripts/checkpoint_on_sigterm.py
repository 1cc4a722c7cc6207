"""Run until stopped; on SIGTERM write a last checkpoint and exit.

``--marker DIR``: a file ``started-<host>`` is created there once the handler is
installed, so the test knows when to interrupt.
"""

import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--marker", required=True)
args, _ = parser.parse_known_args()
host = os.environ["SM_CURRENT_HOST"]
checkpoints = os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints")
restored = sorted(os.listdir(checkpoints)) if os.path.isdir(checkpoints) else []
print(f"restored checkpoints: {restored}")


def on_sigterm(signum, frame):
    with open(os.path.join(checkpoints, f"last-{host}.ckpt"), "w") as f:
        f.write(f"stopped on {host}")
    print("checkpoint written on SIGTERM")
    sys.exit(0)


signal.signal(signal.SIGTERM, on_sigterm)
with open(os.path.join(args.marker, f"started-{host}"), "w") as f:
    f.write(str(os.getpid()))
while True:
    time.sleep(0.1)
