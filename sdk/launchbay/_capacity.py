"""What one local job may take of this machine: ranks (limits) and GPUs (shares).

## Ranks

How many ranks one local job may start on this machine.

A local job (``local_process``, ``local``, ``local_gpu``) runs every host and
every rank here: each host gets a directory tree (and, in Docker modes, a
container), each rank a process. A huge ``instance_count`` or
``processes_per_host`` must therefore be refused before anything is made,
with what this machine can run. SageMaker jobs (``ml.*``) are not limited here:
they keep SageMaker's own limits.

The rule (documented in docs/local.md): the ranks of one local job, hosts x
processes per host, are at most

    max(32, 8 x CPUs)                      oversubscription is fine for tests,
                                           a million processes is not
    capped at one rank per 256 MiB of memory,
    at one eighth of the soft process limit (ulimit -u), when there is one,
    at one eighth of the soft open-file limit (ulimit -n), when there is one,

and at least 1. ``$LAUNCHBAY_MAX_LOCAL_RANKS`` replaces the computed number.

Standard library only; the runtime's GPU detection is imported when a job asks for GPUs.


## GPUs

How a local job shares this machine's GPUs out among its hosts (docs/local.md).

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


## CPUs

A ``local_process`` job's hosts share this machine's CPUs out as a machine's hosts
would each have their own: with at least one CPU a host, each host gets
``floor(CPUs / hosts)`` of the CPUs this process may run on (the first hosts one more
while some are left over), contiguous and in order, and its runtime and every rank of it
run on those alone (``sched_setaffinity``; ``SM_NUM_CPUS`` counts them). Thread pools
that size themselves by the CPUs they may use (OpenMP, so PyTorch's intra-op threads;
TensorFlow's) then fit the host instead of each taking the whole machine: two hosts of
two processes on 2 CPUs otherwise run 8 spinning OpenMP threads on 2 cores, 3x slower
for a small model. One host, or more hosts than CPUs, keeps every CPU, as before.

A foundation (layer 1), not a backend: facts about this machine (its cores,
memory, limits and GPUs), read by the plan (:func:`launchbay.backends.plan.resolve_resources`)
and by local tuning's slots (:mod:`launchbay.tuning.scheduler`), so neither imports the
local wing (issue 33: the plan imports no backend).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from launchbay.errors import ConfigurationError
from launchbay.runtime.names import LOCAL_GPU, LOCAL_PROCESS

__all__ = [
    "LocalCapacity",
    "local_capacity",
    "check_local_ranks",
    "MAX_RANKS_ENV",
    "split_gpus",
    "split_cpus",
    "cpusets_of",
]

MAX_RANKS_ENV = "LAUNCHBAY_MAX_LOCAL_RANKS"
RANKS_FLOOR = 32
RANKS_PER_CPU = 8
MIB_PER_RANK = 256
PER_PROCESS_LIMIT_SHARE = 8  # a rank is a process with threads, pipes and log files


@dataclass(frozen=True)
class LocalCapacity:
    """The most ranks one local job may start here, and why."""

    max_ranks: int
    reason: str


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _memory_bytes() -> int | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_size <= 0:
        return None
    return pages * page_size


def _soft_limit(name: str) -> int | None:
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    which = getattr(resource, name, None)
    if which is None:
        return None
    soft, _hard = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def local_capacity(environ: Mapping[str, str] | None = None) -> LocalCapacity:
    """The most ranks (hosts x processes per host) one local job may start on this machine.

    Raises:
        ConfigurationError: ``$LAUNCHBAY_MAX_LOCAL_RANKS`` is set but not an integer >= 1.
    """
    env = os.environ if environ is None else environ
    override = env.get(MAX_RANKS_ENV, "").strip()
    if override:
        try:
            value = int(override)
        except ValueError:
            value = 0
        if value < 1:
            raise ConfigurationError.invalid(
                MAX_RANKS_ENV, override, "an integer 1 or more (the most ranks of a local job)"
            )
        return LocalCapacity(value, f"set by ${MAX_RANKS_ENV}")

    cpus = _cpus()
    limit = max(RANKS_FLOOR, RANKS_PER_CPU * cpus)
    parts = [f"the larger of {RANKS_FLOOR} and {RANKS_PER_CPU} per CPU ({cpus} CPUs)"]
    memory = _memory_bytes()
    if memory is not None:
        by_memory = memory // (MIB_PER_RANK * 1024 * 1024)
        parts.append(f"one per {MIB_PER_RANK} MiB of memory ({memory / 1024**3:.1f} GiB)")
        limit = min(limit, by_memory)
    for name, flag in (("RLIMIT_NPROC", "ulimit -u"), ("RLIMIT_NOFILE", "ulimit -n")):
        soft = _soft_limit(name)
        if soft is not None:
            parts.append(f"1/{PER_PROCESS_LIMIT_SHARE} of {flag} {soft}")
            limit = min(limit, soft // PER_PROCESS_LIMIT_SHARE)
    limit = max(1, limit)
    reason = parts[0] + (", capped at " + ", ".join(parts[1:]) if len(parts) > 1 else "")
    return LocalCapacity(limit, reason)


def check_local_ranks(
    instance_type: str,
    hosts: int,
    processes_per_host: int | None,
    *,
    hosts_argument: str = "instance_count",
    processes_argument: str = "processes_per_host",
) -> None:
    """Refuse a local job whose hosts x processes per host this machine cannot run.

    ``processes_per_host`` is ``None`` when the job leaves it to the runtime (one
    per GPU, else 1): counted as 1 here.

    Raises:
        ConfigurationError: naming the argument, the value, the limit and why.
    """
    capacity = local_capacity()
    per_host = processes_per_host or 1
    ranks = hosts * per_host
    if ranks <= capacity.max_ranks:
        return
    if hosts > capacity.max_ranks or processes_per_host is None:
        argument, value = hosts_argument, hosts
    else:
        argument, value = processes_argument, processes_per_host
    raise ConfigurationError(
        f"Invalid {argument}={value!r} for instance_type={instance_type!r}: a local job runs "
        f"every rank on this machine, and {hosts} host(s) x {per_host} process(es) per host = "
        f"{ranks} ranks is more than this machine runs in one job: at most "
        f"{capacity.max_ranks} ({capacity.reason}). Accepted: instance_count x "
        f"processes_per_host of at most {capacity.max_ranks}, an ml.* instance type to run on "
        f"SageMaker, or ${MAX_RANKS_ENV} set to a higher limit.",
        argument=argument,
        value=value,
    )


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
    from launchbay.runtime.contract import detect_gpus  # only when a job asks for GPUs

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


def split_cpus(hosts: int, cpus: Sequence[int] | None = None) -> list[list[int]] | None:
    """Each host's CPUs, in host order; ``None`` when every host keeps every CPU.

    ``cpus`` are the CPUs to share out (default: those this process may run on). ``None``
    for one host, for more hosts than CPUs (hosts then share them, as before), and where
    the platform has no CPU affinity.
    """
    if cpus is None:
        if not hasattr(os, "sched_getaffinity"):
            return None
        cpus = sorted(os.sched_getaffinity(0))
    if hosts < 2 or hosts > len(cpus):
        return None
    each, extra = divmod(len(cpus), hosts)
    shares, start = [], 0
    for index in range(hosts):
        end = start + each + (1 if index < extra else 0)
        shares.append(list(cpus[start:end]))
        start = end
    return shares


def cpusets_of(hosts: int) -> list[str | None]:
    """Each host's share of the CPUs as a cpuset (``"0,1"``); ``None`` each where every
    host keeps every CPU (:func:`split_cpus`)."""
    shares = split_cpus(hosts)
    if shares is None:
        return [None] * hosts
    return [",".join(map(str, share)) for share in shares]
