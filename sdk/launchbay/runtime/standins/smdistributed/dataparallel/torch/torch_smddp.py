"""``import smdistributed.dataparallel.torch.torch_smddp``: the ``smddp`` backend.

Importing this module registers ``"smddp"`` with ``torch.distributed``, so
``dist.init_process_group(backend="smddp")`` works. The process group it creates
is torch's own: NCCL when CUDA is available (as on SageMaker's GPU instances),
gloo on CPU. Every collective and ``DistributedDataParallel`` then run on it
unchanged; the results are those of NCCL/gloo, only the speed differs from
SageMaker's implementation.
"""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

if TYPE_CHECKING:  # the c10d class NCCL and gloo derive from (not dist.Backend, a name string)
    from torch._C._distributed_c10d import Backend as C10dBackend

__all__ = ["BACKEND", "create_backend", "uses_cuda"]

BACKEND = "smddp"


def uses_cuda() -> bool:
    """Whether the backend runs on NCCL (CUDA present) rather than gloo."""
    return torch.cuda.is_available()


def _local_device() -> None:
    if uses_cuda() and os.environ.get("LOCAL_RANK", "").isdigit():
        # The real library pins one GPU per process by local rank; so does NCCL here.
        count = torch.cuda.device_count()
        if count:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % count)


def create_backend(
    store: dist.Store, rank: int, world_size: int, timeout: datetime.timedelta
) -> C10dBackend:
    """The process-group backend ``init_process_group(backend="smddp")`` gets."""
    if uses_cuda():
        _local_device()
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, world_size, options)
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


if BACKEND not in dist.Backend.backend_list:
    dist.Backend.register_backend(
        BACKEND, create_backend, devices=["cuda"] if uses_cuda() else ["cpu"]
    )
