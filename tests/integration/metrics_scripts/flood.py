"""A training script that floods its log, for the metrics tests (no torch, nothing heavy).

In order: ``--repeat`` lines ``loss=<repeat_value>``; ``--counting`` lines ``loss=<i>``
(i = 0, 1, ...) with ``--noise_mb`` MB of ordinary output after the first half of
them (or alone when there are none); a line of ``--long_a`` letters ``a``; the line
``loss=<last>`` when given; then it sleeps ``--sleep`` seconds (SIGTERM ends it).
Writes ``<marks>/<job>.json`` once everything is printed (``printed``: true).
"""

import argparse
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--repeat", type=int, default=0)
parser.add_argument("--repeat_value", type=str, default="9.0")
parser.add_argument("--counting", type=int, default=0)
parser.add_argument("--noise_mb", type=float, default=0.0)
parser.add_argument("--long_a", type=int, default=0)
parser.add_argument("--last", type=str, default="")
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--marks", type=str, default="")
args, _ = parser.parse_known_args()

out = sys.stdout
block = f"loss={args.repeat_value}\n" * 10000
for _ in range(args.repeat // 10000):
    out.write(block)
out.write(f"loss={args.repeat_value}\n" * (args.repeat % 10000))


def noise() -> None:
    line = "step done: nothing to report here, just ordinary training chatter....\n"  # 72 bytes
    count = int(args.noise_mb * 1_000_000) // len(line)
    for start in range(0, count, 10000):
        out.write(line * min(10000, count - start))


half = args.counting // 2
out.write("".join(f"loss={i}\n" for i in range(half)))
noise()
out.write("".join(f"loss={i}\n" for i in range(half, args.counting)))
if args.long_a:
    out.write("a" * args.long_a + "\n")
if args.last:
    out.write(f"loss={args.last}\n")
out.flush()
if args.marks:
    job = json.loads(os.environ.get("SM_TRAINING_ENV", "{}")).get("job_name") or "job"
    with open(os.path.join(args.marks, f"{job}.json"), "w") as f:
        json.dump({"job": job, "printed": True}, f)
time.sleep(args.sleep)
