"""smdistributed dataparallel (launchbay's local library): an all_reduce over 2 hosts x 2 ranks."""

import json
import os

import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
import torch
import torch.distributed as dist

dist.init_process_group(backend="smddp")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
host = os.environ["SM_CURRENT_HOST"]
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"smddp-{rank}.json"), "w") as f:
    json.dump({"rank": rank, "world": world, "host": host, "sum": value.item()}, f)
dist.destroy_process_group()
