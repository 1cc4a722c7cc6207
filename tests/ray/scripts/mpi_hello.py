"""An MPI rank: an allreduce over every host's ranks, written per rank."""

import json
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank())
host = os.environ["SM_CURRENT_HOST"]
print(f"mpi rank {comm.Get_rank()} of {comm.Get_size()} on {host} sum={total}", flush=True)
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"mpi-{comm.Get_rank()}.json"), "w") as f:
    json.dump({"rank": comm.Get_rank(), "size": comm.Get_size(), "host": host, "sum": total}, f)
