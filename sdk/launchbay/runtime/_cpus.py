"""A ``local_process`` host's share of this machine's CPUs (launchbay/_capacity.py).

Standard library only: every rank that another host's launcher started imports it.
"""

from __future__ import annotations

import os

from launchbay.runtime.names import HOST_CPUS_ENV

__all__ = ["detect_num_cpus", "take_cpu_share"]


def take_cpu_share() -> None:
    """Run this process (and what it starts) on the host's CPUs in ``$LAUNCHBAY_HOST_CPUS``.

    Called first by a host's runtime, and by a rank that another host's launcher started
    once it has taken on its own host's environment (threads and processes started later
    inherit it). Nothing happens without the variable, or where the platform has no CPU
    affinity; a CPU gone offline since the client looked leaves every CPU in use.
    """
    value = os.environ.get(HOST_CPUS_ENV, "")
    if not value or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {int(cpu) for cpu in value.split(",")})
    except (ValueError, OSError):
        pass


def detect_num_cpus() -> int:
    """The CPUs this host may run on (``SM_NUM_CPUS``).

    The toolkit counts ``multiprocessing.cpu_count()``: every CPU of a SageMaker instance,
    which its processes may all run on. A ``local_process`` host of a multi-host job runs on
    its share of this machine (:func:`take_cpu_share`), and counts that share.
    """
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1
