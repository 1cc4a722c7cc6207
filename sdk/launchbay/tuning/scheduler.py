"""How many trials of a local tuning job run at once, and which GPUs each gets.

:func:`plan_slots` turns ``max_parallel_jobs`` into :class:`Slots`: as many as the
plan asks, capped, for trials whose hosts run on this machine
(``JobPlan.on_this_machine``), by this machine's rank limit over all running trials
and by its GPUs, each trial its own share (on 4 GPUs, 1-GPU trials run 4 at a time
on disjoint GPUs). Trials on a Ray cluster are client-driven but their hosts are the
cluster's nodes: this machine never caps them (the Ray backend checks the cluster).
A trial takes a slot when it starts and gives it back when it ends.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from launchbay._capacity import local_capacity, split_gpus
from launchbay.backends.plan import JobPlan

__all__ = ["Slots", "plan_slots"]

logger = logging.getLogger("launchbay.tuning.local")

#: One slot's GPUs by host (``None``: its trials get no GPUs).
SlotGpus = dict[str, list[str]] | None


@dataclass
class Slots:
    """``parallel`` slots, each with its GPUs; the free ones, lowest first."""

    parallel: int
    gpus: list[SlotGpus]
    free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.free = list(range(self.parallel))

    def take(self) -> int:
        """The lowest free slot (there is one: the engine starts no more than ``parallel``)."""
        return self.free.pop(0)

    def give_back(self, slot: int) -> None:
        """The slot of a trial that ended is free again."""
        self.free.append(slot)
        self.free.sort()


def plan_slots(name: str, max_parallel_jobs: int, bases: Iterable[JobPlan]) -> Slots:
    """``max_parallel_jobs`` within this machine for the definitions' base plans ``bases``."""
    parallel = max_parallel_jobs
    reasons = []
    need_gpus = 0
    hosts: tuple[str, ...] = ()
    all_gpus: list[str] = []
    for base in bases:
        if not base.on_this_machine:  # a Ray cluster's nodes: its backend checks them
            continue
        ranks = len(base.hosts) * (base.processes_per_host or 1)
        limit = local_capacity()
        if ranks * parallel > limit.max_ranks:
            parallel = max(1, limit.max_ranks // ranks)
            reasons.append(f"{limit.max_ranks} ranks at once ({limit.reason})")
        if base.gpus is not None and base.placement.instance_type is not None:
            found = split_gpus(base.placement.instance_type, 1) or [[]]
            all_gpus = list(found[0])
            need = len(base.hosts) * (base.processes_per_host or 1)
            if need > need_gpus:
                need_gpus, hosts = need, base.hosts
    if need_gpus:
        by_gpus = max(1, len(all_gpus) // need_gpus)
        if by_gpus < parallel:
            parallel = by_gpus
            reasons.append(f"{len(all_gpus)} GPU(s), {need_gpus} per trial")
    if parallel < max_parallel_jobs:
        logger.warning(
            "Tuning job %s runs %d trial(s) at once, not max_parallel_jobs=%d: this machine "
            "runs %s.", name, parallel, max_parallel_jobs, " and ".join(reasons),
        )  # fmt: skip
    slots: list[SlotGpus] = []
    for i in range(parallel):
        if not need_gpus:
            slots.append(None)
            continue
        ids = all_gpus[i * need_gpus : (i + 1) * need_gpus]
        per_host = need_gpus // len(hosts)
        slots.append({h: ids[j * per_host : (j + 1) * per_host] for j, h in enumerate(hosts)})
    return Slots(parallel, slots)
