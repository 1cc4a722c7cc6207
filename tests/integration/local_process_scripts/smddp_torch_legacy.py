"""A PyTorch script on the SMDDP library's legacy API (library <= 1.3), as its guide wrote it.

``smdistributed.dataparallel.torch.distributed`` for the process group and the
library's own ``DistributedDataParallel``. Same training and reports as smddp_torch.py.
"""

import argparse

import smdistributed.dataparallel.torch.distributed as dist
import torch
from smddp_data import dataset, world_report, write_report
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(8, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.1)
    args, _ = parser.parse_known_args()

    assert dist.is_available() and dist.is_initialized()
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = dist.get_local_rank()
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    batch_size = max(args.batch_size // world, 1)
    x, y = dataset(args.batch_size * args.steps)
    train_dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    sampler = DistributedSampler(train_dataset, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(train_dataset, batch_size=batch_size, sampler=sampler)

    torch.manual_seed(rank)
    model = DDP(Net().to(device), broadcast_buffers=False)
    initial = {k: v.tolist() for k, v in model.module.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for data, target in loader:
        loss = torch.nn.functional.mse_loss(model(data.to(device)), target.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    gathered = [torch.zeros(1, device=device) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank)], device=device))
    token = torch.tensor([float(rank + 100)], device=device)
    dist.broadcast(token, src=0)
    report = world_report(rank, world, local_rank, total.item())
    report["local_size"] = dist.get_local_size()
    report["gathered"] = [t.item() for t in gathered]
    report["broadcast"] = token.item()
    report["params"] = {k: v.tolist() for k, v in model.module.state_dict().items()}
    if rank == 0:
        report["initial"] = initial
    write_report(rank, report)
    dist.barrier()


if __name__ == "__main__":
    main()
