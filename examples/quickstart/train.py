"""A small data-parallel training script written for SageMaker (torch.distributed, gloo).

It runs unchanged on SageMaker, in launchbay's local modes, or under plain torchrun:
hyperparameters arrive as ``--name value`` arguments, data from SM_CHANNEL_TRAIN
(synthetic when absent), and the model goes to SM_MODEL_DIR.
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=512)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    host = os.environ.get("SM_CURRENT_HOST", "localhost")
    torch.manual_seed(1234 + rank)

    # Synthetic regression data y = 3x - 2 + noise, a different shard on every rank.
    x = torch.randn(args.samples, 1)
    y = 3 * x - 2 + 0.05 * torch.randn_like(x)
    model = nn.parallel.DistributedDataParallel(nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for epoch in range(args.epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if rank == 0 and (epoch % 5 == 4 or epoch == args.epochs - 1):
            print(f"epoch {epoch + 1}/{args.epochs} loss {loss.item():.4f}", flush=True)

    print(f"{host} rank {rank}/{world} done", flush=True)
    if rank == 0:
        model_dir = os.environ.get("SM_MODEL_DIR", "model")
        os.makedirs(model_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(model_dir, "model.pt"))
        weight, bias = model.module.weight.item(), model.module.bias.item()
        with open(os.path.join(model_dir, "metrics.json"), "w") as fh:
            json.dump({"weight": weight, "bias": bias, "loss": loss.item(), "world": world}, fh)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
