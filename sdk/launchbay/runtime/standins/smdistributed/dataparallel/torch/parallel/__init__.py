"""``smdistributed.dataparallel.torch.parallel`` (legacy API)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
