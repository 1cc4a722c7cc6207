"""A tiny regression whose gradients or loss the Debugger rules judge (smdebug's hook).

``--mode healthy``: an ordinary regression; ``vanishing``: the inputs are zeros, so every
weight gradient is exactly 0; ``flat``: a learning rate of 0 on one fixed batch, so the
loss never changes. Runs under torchrun (2 hosts) or plain (1 host).
"""

import argparse
import datetime
import os
import time

import smdebug.pytorch as smd
import torch
import torch.distributed as dist
from leave import leave_now, save_model

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="healthy")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--width", type=int, default=4)
parser.add_argument("--hidden", type=int, default=0)
parser.add_argument("--batch", type=int, default=16)
args, _ = parser.parse_known_args()

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
hook = smd.Hook.create_from_json_file()

torch.manual_seed(0)
net = (
    torch.nn.Sequential(
        torch.nn.Linear(args.width, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 1)
    )
    if args.hidden
    else torch.nn.Linear(args.width, 1)
)
hook.register_module(net)
loss_fn = torch.nn.MSELoss()
hook.register_loss(loss_fn)
model = torch.nn.parallel.DistributedDataParallel(net) if distributed else net
optimizer = torch.optim.SGD(model.parameters(), lr=0.0 if args.mode == "flat" else 0.05)
fixed = torch.randn(args.batch, args.width)
started = time.perf_counter()
for step in range(args.steps):
    x = fixed if args.mode == "flat" else torch.randn(args.batch, args.width)
    if args.mode == "vanishing":
        x = torch.zeros_like(x)
    loss = loss_fn(model(x), fixed.sum(dim=1, keepdim=True) / (args.width**0.5 / 2))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss={loss.item():.6f}", flush=True)
    if args.sleep:
        time.sleep(args.sleep)

print(f"train_seconds={time.perf_counter() - started:.3f}", flush=True)
if not distributed or dist.get_rank() == 0:
    save_model(torch, net)
hook.close()
if distributed:
    del model, optimizer
leave_now(dist if distributed else None)
