"""A 2x2 torch_distributed job that ends as ordinary scripts do: it just returns.

No ``os._exit`` at the end: torch 2.13's gloo may abort this interpreter at
teardown, which launchbay must not count as a failure.
"""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank())])
dist.all_reduce(total)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for _ in range(20):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
if dist.get_rank() == 0:
    torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
dist.barrier()
dist.destroy_process_group()
