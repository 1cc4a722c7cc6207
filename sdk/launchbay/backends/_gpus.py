"""How a local job shares this machine's GPUs out among its hosts (docs/local.md).

A local job runs every host on this machine, so the hosts of a ``local_process``
or ``local_gpu`` job must not all see every GPU (NCCL refuses two ranks on one
device). The GPUs are found once per job, by the runtime's own detection
(:func:`launchbay.runtime.contract.detect_gpus`: nvidia-smi, the driver's list
or the device files, narrowed by the caller's ``CUDA_VISIBLE_DEVICES``), and
each host gets ``floor(GPUs / hosts)`` of them, contiguous and in order: 4 GPUs
and 2 hosts give ``0,1`` and ``2,3``. ``local_process`` hands a host its share as
``CUDA_VISIBLE_DEVICES``; ``local_gpu`` as the ``device_ids`` of its container's
device request. ``local`` (CPU containers) gets no GPU.

A job that cannot get a GPU per host is refused before anything starts: more
hosts than GPUs, ``local_gpu`` with no GPU at all, or an explicit
``processes_per_host`` above a host's share. With no GPU found, a
``local_process`` job runs on CPU as before.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from launchbay.errors import ConfigurationError
from launchbay.runtime.contract import detect_gpus
from launchbay.runtime.names import LOCAL_GPU, LOCAL_PROCESS

__all__ = ["split_gpus"]

_GPU_TYPES = (LOCAL_PROCESS, LOCAL_GPU)


def split_gpus(
    instance_type: str,
    hosts: int,
    processes_per_host: int | None = None,
    *,
    gpus: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    processes_argument: str = "processes_per_host",
) -> list[list[str]] | None:
    """Each host's GPU device ids, in host order; ``None`` when the job runs without GPUs.

    ``gpus`` are the devices to share out (default: found here, honouring
    ``CUDA_VISIBLE_DEVICES`` in ``environ``, default ``os.environ``).

    Raises:
        ConfigurationError: the job cannot get a GPU per host (see the module docstring);
            the message names the GPUs found, the hosts asked for and what would run.
    """
    if instance_type not in _GPU_TYPES:
        return None
    found = list(detect_gpus(environ) if gpus is None else gpus)
    if not found:
        if instance_type == LOCAL_GPU:
            raise ConfigurationError(
                f"Invalid instance_type={instance_type!r}: no GPU was found on this machine "
                "(nvidia-smi, /proc/driver/nvidia/gpus and /dev/nvidia* list none, or "
                "CUDA_VISIBLE_DEVICES hides them all), and local_gpu gives each container "
                "its own GPUs. Accepted: instance_type='local' (CPU containers) or "
                "'local_process', or run where a GPU is visible.",
                argument="instance_type",
                value=instance_type,
            )
        return None
    where = f"GPU(s) {','.join(found)} found ({len(found)}"
    where += ", after CUDA_VISIBLE_DEVICES)" if _visible_set(environ) else ")"
    cpu_run = (
        "instance_type='local' (CPU containers)"
        if instance_type == LOCAL_GPU
        else "CUDA_VISIBLE_DEVICES='' in your environment for a CPU (gloo) run"
    )
    if hosts > len(found):
        raise ConfigurationError(
            f"Invalid instance_count={hosts!r} for instance_type={instance_type!r}: a local "
            f"job gives each host its own GPUs, and {where} cannot give {hosts} hosts one "
            f"each. Accepted: instance_count <= {len(found)}, or one host with "
            f"processes_per_host={len(found)}, or {cpu_run}.",
            argument="instance_count",
            value=hosts,
        )
    share = len(found) // hosts
    if processes_per_host is not None and processes_per_host > share:
        raise ConfigurationError(
            f"Invalid {processes_argument}={processes_per_host!r} for instance_type="
            f"{instance_type!r}: a local job gives each host its own GPUs, and {where} give "
            f"each of {hosts} host(s) {share}, one per process. Accepted: "
            f"{processes_argument} <= {share}, fewer hosts (instance_count <= "
            f"{max(1, len(found) // processes_per_host)}), or {cpu_run}.",
            argument=processes_argument,
            value=processes_per_host,
        )
    return [found[i * share : (i + 1) * share] for i in range(hosts)]


def _visible_set(environ: Mapping[str, str] | None) -> bool:
    return "CUDA_VISIBLE_DEVICES" in (os.environ if environ is None else environ)
