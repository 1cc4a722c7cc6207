"""Print a line, sleep a little (or until a file exists), save a model file."""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=0.0)
parser.add_argument("--until", default=None, help="a file to wait for (at most 120 s)")
args, _ = parser.parse_known_args()
host = os.environ["SM_CURRENT_HOST"]
print(f"hello from {host}")
time.sleep(args.seconds)
deadline = time.monotonic() + 120
while args.until and not os.path.exists(args.until) and time.monotonic() < deadline:
    time.sleep(0.05)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
    f.write(host)
print(f"goodbye from {host}")
