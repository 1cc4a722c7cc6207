"""An MPI rank: an allreduce over every host's ranks, written per rank."""

import json
import os

from mpi4py import MPI


def parent_tree() -> str:
    """The SAGEMAKER_BASE_DIR orted (this rank's parent) was started with."""
    with open(f"/proc/{os.getppid()}/environ", "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return dict(pairs).get(b"SAGEMAKER_BASE_DIR", b"").decode()


comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
host = os.environ["SM_CURRENT_HOST"]
print(f"mpi rank {comm.Get_rank()} of {comm.Get_size()} on {host} sum={total}", flush=True)
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"mpi-{comm.Get_rank()}.json"), "w") as f:
    report = {"rank": comm.Get_rank(), "size": comm.Get_size(), "host": host, "sum": total}
    json.dump(dict(report, parent_tree=parent_tree()), f)
