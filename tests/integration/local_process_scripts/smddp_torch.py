"""A PyTorch script on the SMDDP library's current API (library >= 1.4), as its guide writes it.

``import smdistributed.dataparallel.torch.torch_smddp``, then
``dist.init_process_group(backend="smddp")``, torch's own DDP and DistributedSampler.
Every rank reports its final parameters (and rank 0 its initial ones) in
``rank-<N>.json``. ``--fail-rank R`` makes rank R raise at step 2.
"""

import argparse
import os

# SageMaker data parallel: import the library's PyTorch backend
import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
import torch
import torch.distributed as dist
from smddp_data import dataset, world_report, write_report
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group(backend="smddp")


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
    parser.add_argument("--fail-rank", type=int, default=-1)
    args, _ = parser.parse_known_args()

    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    # SageMaker data parallel: scale the batch size by the world size
    batch_size = max(args.batch_size // world, 1)

    x, y = dataset(args.batch_size * args.steps)
    train_dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    sampler = DistributedSampler(train_dataset, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(train_dataset, batch_size=batch_size, sampler=sampler)

    torch.manual_seed(rank)  # different on every rank: DDP starts them all from rank 0's
    model = DDP(Net().to(device))
    initial = {k: v.tolist() for k, v in model.module.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for step, (data, target) in enumerate(loader):
        if rank == args.fail_rank and step == 2:
            raise ValueError(f"boom from rank {rank}")
        loss = torch.nn.functional.mse_loss(model(data.to(device)), target.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank)], device=device)
    dist.all_reduce(total)
    report = world_report(rank, world, local_rank, total.item())
    report["backend"] = str(dist.get_backend())
    report["params"] = {k: v.tolist() for k, v in model.module.state_dict().items()}
    if rank == 0:
        report["initial"] = initial
        torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
    write_report(rank, report)
    dist.barrier()


if __name__ == "__main__":
    main()
