"""2-host torch_distributed job with smdebug's hook made from launchbay's debughookconfig.json.

The hook is created after ``init_process_group``: smdebug names the worker from
``torch.distributed.get_rank()`` when the hook is built (``worker_<rank>``). Each rank
writes what its hook read to ``$SM_OUTPUT_DATA_DIR/rank-<N>.json``.
"""

import datetime
import json
import os

import smdebug.pytorch as smd
import torch
import torch.distributed as dist
from leave import leave_now, save_model

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
hook = smd.Hook.create_from_json_file()

torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
hook.register_module(net)
loss_fn = torch.nn.MSELoss()
hook.register_loss(loss_fn)
model = torch.nn.parallel.DistributedDataParallel(net)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _step in range(4):
    x = torch.randn(8, 4)
    loss = loss_fn(model(x), x.sum(dim=1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

report = {
    "rank": rank,
    "world": world,
    "worker": hook.worker,
    "out_dir": hook.out_dir,
    "config_file": os.environ.get("SMDEBUG_CONFIG_FILE_PATH"),
    "save_all_workers": hook.save_all_workers,
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
if rank == 0:
    save_model(torch, net)
hook.close()
del model, optimizer
leave_now(dist)
