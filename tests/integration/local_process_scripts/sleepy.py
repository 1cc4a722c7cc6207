"""Print a line, sleep a little, save a model file."""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=0.0)
args, _ = parser.parse_known_args()
host = os.environ["SM_CURRENT_HOST"]
print(f"hello from {host}")
time.sleep(args.seconds)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
    f.write(host)
print(f"goodbye from {host}")
