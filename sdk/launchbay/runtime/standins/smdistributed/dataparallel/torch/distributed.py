"""``smdistributed.dataparallel.torch.distributed``: the legacy (library <= 1.3) API.

Each function works on the default process group, created with the ``smddp``
backend (:mod:`.torch_smddp`) by :func:`init_process_group`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as _dist

from .. import _world
from . import torch_smddp

__all__ = [
    "ReduceOp",
    "group",
    "is_available",
    "init_process_group",
    "is_initialized",
    "destroy_process_group",
    "get_rank",
    "get_world_size",
    "get_local_rank",
    "get_local_size",
    "get_backend",
    "barrier",
    "all_reduce",
    "reduce",
    "broadcast",
    "all_gather",
    "gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_single",
    "all_gather_object",
    "broadcast_object_list",
]

ReduceOp = _dist.ReduceOp
group = _dist.group


def is_available() -> bool:
    """True when the script was started as a rank of a distributed job."""
    return _dist.is_available() and _world.launched()


def init_process_group(*args: Any, **kwargs: Any) -> None:
    """Create the default process group on the ``smddp`` backend.

    Arguments are accepted for compatibility; the backend is always ``smddp`` and
    the rendezvous is the launcher's (``env://``). Calling it twice is harmless.
    """
    del args
    if _dist.is_initialized():
        return
    options = {k: v for k, v in kwargs.items() if k in ("timeout", "pg_options")}
    _dist.init_process_group(backend=torch_smddp.BACKEND, **options)


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has run."""
    return _dist.is_initialized()


def destroy_process_group(group: Any = None) -> None:
    """Tear the (default) process group down."""
    _dist.destroy_process_group(group)


def get_rank(group: Any = None) -> int:
    """Rank of this process (in ``group``, default the world)."""
    return _dist.get_rank(group)


def get_world_size(group: Any = None) -> int:
    """Number of processes (in ``group``, default the world)."""
    return _dist.get_world_size(group)


def get_local_rank() -> int:
    """Rank of this process among the processes of its host."""
    return _world.local_rank()


def get_local_size() -> int:
    """Number of processes on this host."""
    return _world.local_size()


def get_backend(group: Any = None) -> str:
    """The backend's name: ``smddp``."""
    return str(_dist.get_backend(group))


def barrier(group: Any = None, async_op: bool = False) -> Any:
    """Wait until every process of ``group`` gets here."""
    return _dist.barrier(group=group, async_op=async_op)


def all_reduce(
    tensor: torch.Tensor, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False
) -> Any:
    """Reduce ``tensor`` across every process, in place."""
    return _dist.all_reduce(tensor, op=op, group=group, async_op=async_op)


def reduce(
    tensor: torch.Tensor,
    dst: int,
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Reduce ``tensor`` onto rank ``dst``."""
    return _dist.reduce(tensor, dst, op=op, group=group, async_op=async_op)


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None, async_op: bool = False) -> Any:
    """Copy rank ``src``'s ``tensor`` to every process, in place."""
    return _dist.broadcast(tensor, src, group=group, async_op=async_op)


def all_gather(
    tensor_list: list[torch.Tensor], tensor: torch.Tensor, group: Any = None, async_op: bool = False
) -> Any:
    """Every process's ``tensor`` into ``tensor_list``."""
    return _dist.all_gather(tensor_list, tensor, group=group, async_op=async_op)


def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None = None,
    dst: int = 0,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Every process's ``tensor`` into ``gather_list`` on rank ``dst``."""
    return _dist.gather(tensor, gather_list, dst, group=group, async_op=async_op)


def scatter(
    tensor: torch.Tensor,
    scatter_list: list[torch.Tensor] | None = None,
    src: int = 0,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Rank ``src``'s ``scatter_list[i]`` into rank i's ``tensor``."""
    return _dist.scatter(tensor, scatter_list, src, group=group, async_op=async_op)


def reduce_scatter(
    output: torch.Tensor,
    input_list: list[torch.Tensor],
    op: Any = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Reduce ``input_list`` across processes; rank i keeps part i."""
    return _dist.reduce_scatter(output, input_list, op=op, group=group, async_op=async_op)


def all_to_all(
    output_tensor_list: list[torch.Tensor],
    input_tensor_list: list[torch.Tensor],
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Rank i's ``input_tensor_list[j]`` into rank j's ``output_tensor_list[i]``."""
    return _dist.all_to_all(output_tensor_list, input_tensor_list, group=group, async_op=async_op)


def all_to_all_single(
    output_t: torch.Tensor,
    input_t: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
    async_op: bool = False,
) -> Any:
    """Split ``input_t`` among the processes and gather their parts into ``output_t``."""
    return _dist.all_to_all_single(
        output_t, input_t, output_split_sizes, input_split_sizes, group=group, async_op=async_op
    )


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Every process's picklable ``obj`` into ``object_list``."""
    _dist.all_gather_object(object_list, obj, group=group)


def broadcast_object_list(object_list: list[Any], src: int = 0, group: Any = None) -> None:
    """Rank ``src``'s picklable objects into every process's ``object_list``."""
    _dist.broadcast_object_list(object_list, src, group=group)
