"""A PyTorch script on the SMDDP library's legacy API (library <= 1.3), as its guide wrote it.

``smdistributed.dataparallel.torch.distributed`` for the process group and the
library's own ``DistributedDataParallel``. Same training and reports as smddp_torch.py.
"""

import smdistributed.dataparallel.torch.distributed as dist
import torch
from smddp_data import world_report, write_report
from smddp_torch_common import Net, arguments, device, loader, parameters
from smdistributed.dataparallel.torch.parallel.distributed import DistributedDataParallel as DDP

dist.init_process_group()


def main():
    args = arguments()
    assert dist.is_available() and dist.is_initialized()
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = dist.get_local_rank()
    on = device(local_rank)
    batches = loader(args, rank, world)

    torch.manual_seed(rank)
    model = DDP(Net().to(on), broadcast_buffers=False)
    initial = parameters(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for data, target in batches:
        loss = torch.nn.functional.mse_loss(model(data.to(on)), target.to(on))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank)], device=on)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    gathered = [torch.zeros(1, device=on) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank)], device=on))
    token = torch.tensor([float(rank + 100)], device=on)
    dist.broadcast(token, src=0)
    report = world_report(rank, world, local_rank, total.item())
    report["local_size"] = dist.get_local_size()
    report["gathered"] = [t.item() for t in gathered]
    report["broadcast"] = token.item()
    report["params"] = parameters(model)
    if rank == 0:
        report["initial"] = initial
    write_report(rank, report)
    dist.barrier()


if __name__ == "__main__":
    main()
