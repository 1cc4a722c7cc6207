"""A PyTorch script on the SMDDP library's current API (library >= 1.4), as its guide writes it.

``import smdistributed.dataparallel.torch.torch_smddp``, then
``dist.init_process_group(backend="smddp")``, torch's own DDP and DistributedSampler.
Every rank reports its final parameters (and rank 0 its initial ones) in
``rank-<N>.json``. ``--fail-rank R`` makes rank R raise at step 2.
"""

import os

# SageMaker data parallel: import the library's PyTorch backend
import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
import torch
import torch.distributed as dist
from smddp_data import world_report, write_report
from smddp_torch_common import Net, arguments, device, loader, parameters
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(backend="smddp")


def main():
    args = arguments(fail_rank=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    on = device(local_rank)
    batches = loader(args, rank, world)

    torch.manual_seed(rank)  # different on every rank: DDP starts them all from rank 0's
    model = DDP(Net().to(on))
    initial = parameters(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    for step, (data, target) in enumerate(batches):
        if rank == args.fail_rank and step == 2:
            raise ValueError(f"boom from rank {rank}")
        loss = torch.nn.functional.mse_loss(model(data.to(on)), target.to(on))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    total = torch.tensor([float(rank)], device=on)
    dist.all_reduce(total)
    report = world_report(rank, world, local_rank, total.item())
    report["backend"] = str(dist.get_backend())
    report["params"] = parameters(model)
    if rank == 0:
        report["initial"] = initial
        torch.save(model.module.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
    write_report(rank, report)
    dist.barrier()


if __name__ == "__main__":
    main()
