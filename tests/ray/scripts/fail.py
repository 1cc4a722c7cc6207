"""Rank 3 (the second rank of algo-2) raises; the others wait in a barrier."""

import torch.distributed as dist

dist.init_process_group("gloo")
if dist.get_rank() == 3:
    raise ValueError("rank three broke on purpose")
dist.barrier()
