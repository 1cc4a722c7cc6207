"""2-host torch_distributed job: all-reduce the rank, train a tiny DDP model, save it on rank 0.

Each rank writes what it saw to ``$SM_OUTPUT_DATA_DIR/rank-<N>.json`` (it ends up
in output.tar.gz). With ``--fail-rank R`` rank R raises mid-run instead, after
writing the time of the failure to ``--fail-stamp``.
"""

import argparse
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
from leave import leave_now, save_model

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-stamp", default="")
args, _ = parser.parse_known_args()

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank)])
dist.all_reduce(total)

report = {
    "rank": rank,
    "world": world,
    "local_rank": int(os.environ["LOCAL_RANK"]),
    "host": os.environ["SM_CURRENT_HOST"],
    "hosts": json.loads(os.environ["SM_HOSTS"]),
    "sum": total.item(),
    # what torchrun gives each rank (a torchrun per host, or one for every local host)
    "torchrun": {
        name: os.environ.get(name)
        for name in (
            "RANK",
            "WORLD_SIZE",
            "LOCAL_WORLD_SIZE",
            "GROUP_RANK",
            "GROUP_WORLD_SIZE",
            "ROLE_WORLD_SIZE",
        )
    },
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)

torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(args.steps):
    if rank == args.fail_rank and step == 2:
        with open(args.fail_stamp, "w") as f:
            f.write(repr(time.time()))
        raise ValueError(f"boom from rank {rank}")
    x = torch.randn(8, 4)
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if args.fail_rank >= 0:
        time.sleep(0.5)
    print(f"step {step} loss {loss.item():.4f}")

if rank == 0:
    save_model(torch, model.module)
del model, optimizer
leave_now(dist)
