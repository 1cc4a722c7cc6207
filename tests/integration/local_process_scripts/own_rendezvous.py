"""A launcher script of the SageMaker-before-DDP era: its own rendezvous from ``SM_HOSTS``.

No ``distribution``: one process per host. ``MASTER_ADDR`` is the first host's
*name*, so torch's C++ TCPStore (``init_process_group``) has to resolve ``algo-1``
itself, as on SageMaker. Each host writes what it saw to
``$SM_MODEL_DIR/<host>.json`` (so it lands in model.tar.gz).
"""

import datetime
import json
import os
import socket
import subprocess

import torch
import torch.distributed as dist

hosts = json.loads(os.environ["SM_HOSTS"])
current = os.environ["SM_CURRENT_HOST"]
rank = hosts.index(current)
os.environ["MASTER_ADDR"] = hosts[0]
os.environ.setdefault("MASTER_PORT", "7777")

getent = subprocess.run(["getent", "hosts", *hosts], capture_output=True, text=True)
dist.init_process_group(
    "gloo", rank=rank, world_size=len(hosts), timeout=datetime.timedelta(seconds=60)
)
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
# A second C++ client, connecting by name to a store the first host serves.
store = dist.TCPStore(
    hosts[0],
    int(os.environ["MASTER_PORT"]) + 1,
    len(hosts),
    is_master=rank == 0,
    timeout=datetime.timedelta(seconds=60),
)
store.set(current, str(os.getpid()))
peers = {h: store.get(h).decode() for h in hosts}
dist.barrier()
dist.destroy_process_group()

report = {
    "host": current,
    "master_addr": os.environ["MASTER_ADDR"],
    "sum": total.item(),
    "getent": getent.stdout.split("\n"),
    "getent_rc": getent.returncode,
    "python": {h: socket.gethostbyname(h) for h in hosts},
    "peers": peers,
}
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{current}.json"), "w") as f:
    json.dump(report, f)
