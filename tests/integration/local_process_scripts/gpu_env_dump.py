"""Writes what each rank sees of its GPUs and CPUs to ``--dump``/<host>-<rank>.json (issue 16).

Runs on CPU: with torchrun it joins a gloo group (no CUDA needed), so the world
it reports is the one torchrun made from the host's GPU share.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--dump", required=True)
args, _ = parser.parse_known_args()

world = None
if "TORCHELASTIC_RUN_ID" in os.environ:  # torchrun; other ranks only report their environment
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    ones = torch.ones(1)
    dist.all_reduce(ones)
    world = int(ones.item())
    dist.destroy_process_group()

keys = ("CUDA_VISIBLE_DEVICES", "SM_NUM_GPUS", "SM_CURRENT_HOST", "LOCAL_RANK",
        "LOCAL_WORLD_SIZE", "WORLD_SIZE", "RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")  # fmt: skip
report = {key: os.environ.get(key) for key in keys}
report["allreduce_world"] = world
report["SM_NUM_CPUS"] = os.environ.get("SM_NUM_CPUS")
report["cpus"] = sorted(os.sched_getaffinity(0))  # the CPUs this rank may run on
host = os.environ["SM_CURRENT_HOST"]
rank = os.environ.get("RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
with open(os.path.join(args.dump, f"{host}-{rank}.json"), "w") as f:
    json.dump(report, f)
