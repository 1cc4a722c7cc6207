"""2-host MPI job: mpi4py all-reduce of the rank; rank 0 trains a tiny model and saves it."""

import json
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, world = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank, op=MPI.SUM)
report = {
    "rank": rank,
    "world": world,
    "local_rank": int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"]),
    "host": os.environ["SM_CURRENT_HOST"],
    "hosts": json.loads(os.environ["SM_HOSTS"]),
    "sum": total,
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
print(f"rank {rank} of {world} on {report['host']}: sum {total}")
comm.Barrier()

if rank == 0:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x = torch.randn(8, 4)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
