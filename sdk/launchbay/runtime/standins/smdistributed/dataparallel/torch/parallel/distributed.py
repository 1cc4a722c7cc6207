"""``smdistributed.dataparallel.torch.parallel.distributed.DistributedDataParallel`` (legacy).

torch's ``DistributedDataParallel`` on the ``smddp`` process group, with the
legacy signature: gradients are averaged across every process in buckets of
``bucket_cap_mb`` (torch's default when ``None``).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """Data-parallel wrapper of ``module``; see the module docstring."""

    def __init__(
        self,
        module: torch.nn.Module,
        device_ids: list[int] | None = None,
        output_device: Any = None,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        **kwargs: Any,
    ) -> None:
        options: dict[str, Any] = dict(kwargs)
        if bucket_cap_mb is not None:
            options["bucket_cap_mb"] = bucket_cap_mb
        super().__init__(
            module,
            device_ids=device_ids,
            output_device=output_device,
            broadcast_buffers=broadcast_buffers,
            process_group=process_group,
            **options,
        )
