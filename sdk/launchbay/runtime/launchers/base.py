"""Types shared by the launchers: the context they build from and the plan they return.

A launcher is a pure function ``LaunchContext -> LaunchPlan``. The plan is data
(argv, env, cwd of each process; which global ranks run on this host) plus a
few callables for coordination that only the supervisor invokes (gates that
hold the start until peers are ready, waiters that stand in for processes on
hosts that run none, hooks when the job ends).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from launchbay.runtime.code import EntryPoint
from launchbay.runtime.contract import TrainingEnv
from launchbay.runtime.settings import RuntimeSettings

__all__ = [
    "BOOTSTRAP_MODULE",
    "LaunchContext",
    "ProcessSpec",
    "LaunchPlan",
    "Gate",
    "Waiter",
    "python_target",
    "bootstrap_argv",
    "shell_command",
]

BOOTSTRAP_MODULE = "launchbay.runtime._bootstrap"


@dataclass(frozen=True)
class LaunchContext:
    """Everything a launcher needs to build its plan.

    ``base_env`` is the complete environment every rank gets (the runtime's own
    environment plus SM_*, PYTHONPATH, ...). ``io_dir`` is where the supervisor
    creates per-rank FIFOs; ``ranks_dir`` where ranks write their records.
    """

    env: TrainingEnv
    entry: EntryPoint
    args: list[str]
    base_env: dict[str, str]
    settings: RuntimeSettings
    python: str
    io_dir: str
    ranks_dir: str

    @property
    def code_dir(self) -> str:
        """The directory the entry point runs in."""
        return self.env.paths.code_dir


@dataclass(frozen=True)
class ProcessSpec:
    """One process the supervisor starts.

    ``role``: ``"main"`` (the job's outcome), ``"aux"`` (started with the main
    processes, stopped when they are done, e.g. a TF parameter server) or
    ``"service"`` (started before the gate opens, stopped at the end, e.g. sshd).
    ``output``: ``"rank"`` (the process is rank ``rank``; its lines are that
    rank's), ``"launcher"`` (a launcher's own output, passed through) or
    ``"mpi-tags"`` (mpirun ``--tag-output`` lines, relabelled by rank).
    """

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    role: str = "main"
    output: str = "launcher"
    rank: int | None = None


class Gate(Protocol):
    """Holds the start of the main processes until peers are ready."""

    def poll(self, now: float) -> bool:
        """True once ready; raises :class:`~launchbay.runtime.errors.TrainingSetupError` on timeout."""
        ...


class Waiter(Protocol):
    """Stands in for the main processes on a host that runs none (MPI workers)."""

    def poll(self, now: float) -> int | None:
        """The host's exit code once the job is over, else ``None``."""
        ...


@dataclass
class LaunchPlan:
    """What the supervisor runs on this host."""

    launcher: str
    processes: list[ProcessSpec]
    world_size: int
    host_ranks: dict[int, int]
    label_ranks: bool
    fifo: bool = False
    gate: Gate | None = None
    waiter: Waiter | None = None
    before_start: list[Callable[[], None]] = field(default_factory=list)
    periodic: list[Callable[[float], None]] = field(default_factory=list)
    on_finish: list[Callable[[int], None]] = field(default_factory=list)
    stop_via_shared_dir: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def main_processes(self) -> list[ProcessSpec]:
        """The processes whose exit decides the job."""
        return [p for p in self.processes if p.role == "main"]


def python_target(entry: EntryPoint, args: list[str]) -> list[str]:
    """``[script, args...]`` or ``["-m", module, args...]`` for a Python entry point."""
    if entry.kind == "module":
        return ["-m", str(entry.module), *args]
    return [entry.name, *args]


def bootstrap_argv(python: str, entry: EntryPoint, args: list[str]) -> list[str]:
    """``python -m launchbay.runtime._bootstrap <target>`` for a Python entry point."""
    return [python, "-m", BOOTSTRAP_MODULE, *python_target(entry, args)]


def shell_command(entry: EntryPoint, args: list[str]) -> list[str]:
    """``/bin/sh -c './name args'`` with every user-controlled piece quoted (the toolkit's form)."""
    quoted = " ".join(shlex.quote(a) for a in args)
    return ["/bin/sh", "-c", f"./{shlex.quote(entry.name)} {quoted}".rstrip()]
