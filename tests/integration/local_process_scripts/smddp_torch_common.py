"""Shared by smddp_torch.py and smddp_torch_legacy.py: their model, arguments, device and data.

Needs torch (smddp_data.py, which the TensorFlow script uses too, does not).
"""

import argparse

import torch
from smddp_data import dataset
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(8, 4)
        self.out = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def arguments(*, fail_rank=False):
    """``--batch-size``, ``--steps``, ``--lr`` and, with ``fail_rank``, ``--fail-rank``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.1)
    if fail_rank:
        parser.add_argument("--fail-rank", type=int, default=-1)
    args, _ = parser.parse_known_args()
    return args


def device(local_rank):
    """The GPU ``local_rank`` where there is one (made current), else the CPU."""
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def loader(args, rank, world):
    """``rank``'s slices of ``args.steps`` global batches of ``args.batch_size``."""
    # SageMaker data parallel: scale the batch size by the world size
    batch_size = max(args.batch_size // world, 1)
    x, y = dataset(args.batch_size * args.steps)
    train_dataset = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    sampler = DistributedSampler(train_dataset, num_replicas=world, rank=rank, shuffle=False)
    return DataLoader(train_dataset, batch_size=batch_size, sampler=sampler)


def parameters(model):
    """The DDP ``model``'s parameters as lists, by name."""
    return {k: v.tolist() for k, v in model.module.state_dict().items()}
