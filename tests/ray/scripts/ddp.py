"""2 hosts x 2 ranks under torchrun: an all_reduce across Ray nodes, then a model file."""

import json
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
host = os.environ["SM_CURRENT_HOST"]
print(f"rank {rank} of {world} on {host} sum={value.item():g}", flush=True)
report = {
    "rank": rank,
    "world": world,
    "host": host,
    "sum": value.item(),
    "master": os.environ.get("MASTER_ADDR"),
    "algo_1": socket.gethostbyname("algo-1"),
    "model_dir": os.environ["SM_MODEL_DIR"],
    "pid": os.getpid(),
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
if rank == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.json"), "w") as f:
        json.dump(report, f)
dist.destroy_process_group()
