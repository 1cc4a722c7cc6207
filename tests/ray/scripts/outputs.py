"""A host that writes what outputs must survive: a big model, links inside, outside and absolute, a FIFO.

``--big-mb N`` (algo-1 only): ``model/big.bin`` of N MiB (a marker, then zeros).
Links in ``model/``: ``latest -> weights.pt`` (inside), ``abs`` (absolute, through
SM_MODEL_DIR, inside), ``escape -> /etc/hostname`` (leaves the tree), ``sub/up -> ..``
(inside, a directory); a FIFO ``model/apipe`` (sorts first). Every host writes
``output/data/<host>.txt``.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--big-mb", type=int, default=0)
args, _ = parser.parse_known_args()
host = json.loads(os.environ["SM_TRAINING_ENV"])["current_host"]
model, data = os.environ["SM_MODEL_DIR"], os.environ["SM_OUTPUT_DATA_DIR"]
os.makedirs(data, exist_ok=True)
with open(os.path.join(data, f"{host}.txt"), "w") as f:
    f.write(f"data of {host}\n")
if host == "algo-1":
    os.mkfifo(os.path.join(model, "apipe"))
    os.symlink(os.path.join(model, "weights.pt"), os.path.join(model, "abs"))
    os.symlink("/etc/hostname", os.path.join(model, "escape"))
    os.symlink("weights.pt", os.path.join(model, "latest"))
    os.makedirs(os.path.join(model, "sub"))
    os.symlink("..", os.path.join(model, "sub", "up"))
    with open(os.path.join(model, "weights.pt"), "w") as f:
        f.write("weights\n")
    if args.big_mb:
        block = bytes(1 << 20)
        with open(os.path.join(model, "big.bin"), "wb") as f:
            f.write(b"BIG-MODEL-MARKER")
            for _ in range(args.big_mb):
                f.write(block)
print(f"{host} wrote its outputs", flush=True)
