"""Writes TensorBoard files where the job's TensorBoardOutputConfig says, in two steps.

The directory is the ``LocalPath`` of ``input/config/tensorboardoutputconfig.json``,
as smdebug finds it (on a ``local_process`` host, mapped under the host's own
directory; in a container, the path the config names). Each host writes
``<host>-first/``, then (with ``--wait``) waits until ``output/go`` appears in its
tree, which the test makes once it saw the first files arrive at the destination,
writes ``<host>-second/`` and ends (exit 1 with ``--fail``, at once after the first
files with ``--fail-early``).

torch.utils.tensorboard's SummaryWriter writes the event files when tensorboard is
installed; otherwise a plain file of the same name stands for one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--wait", type=float, default=0.0)
parser.add_argument("--fail", type=int, default=0)
parser.add_argument("--fail-early", type=int, default=0)
args, _ = parser.parse_known_args()

host = os.environ["SM_CURRENT_HOST"]
with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "tensorboardoutputconfig.json")) as f:
    log_root = json.load(f)["LocalPath"]


def write(name: str, step: int) -> None:
    log_dir = os.path.join(log_root, f"{host}-{name}")
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        os.makedirs(log_dir, exist_ok=True)
        event = f"events.out.tfevents.{time.time():.0f}.{host}.{os.getpid()}.0"
        with open(os.path.join(log_dir, event), "w") as out:
            out.write(f"{host} {name} step {step}\n")
        return
    writer = SummaryWriter(log_dir=log_dir)
    writer.add_scalar("loss", 1.0 / (step + 1), step)
    writer.close()


write("first", 0)
print(f"{host} wrote its first TensorBoard files under {log_root}", flush=True)
if args.fail_early:
    sys.exit(1)
if args.wait:
    go = os.path.join(os.environ["SM_OUTPUT_DIR"], "go")
    deadline = time.monotonic() + args.wait
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            print(f"{host}: no {go} within {args.wait} s", flush=True)
            sys.exit(3)
        time.sleep(0.1)
write("second", 1)
print(f"{host} wrote its second TensorBoard files", flush=True)
sys.exit(1 if args.fail else 0)
