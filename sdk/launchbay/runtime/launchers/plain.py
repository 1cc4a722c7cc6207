"""The plain launcher: one process per host running the entry point.

Python entry points run as ``python -m launchbay.runtime._bootstrap script.py
args`` (the bootstrap records an uncaught exception, then behaves exactly like
``python script.py``); other entry points as ``/bin/sh -c './name args'``, as
the toolkit runs them. The process is rank ``hosts.index(current_host)``.
In local jobs a non-Python entry point gets the local stand-ins through
``PYTHONPATH`` (Python ones through the bootstrap; see :mod:`..standins`).
"""

from __future__ import annotations

from launchbay.runtime import standins
from launchbay.runtime.launchers.base import (
    LaunchContext,
    LaunchPlan,
    ProcessSpec,
    bootstrap_argv,
    shell_command,
)

__all__ = ["plain_argv", "build"]


def plain_argv(ctx: LaunchContext) -> list[str]:
    """The command line of the single process."""
    if ctx.entry.is_python:
        return bootstrap_argv(ctx.python, ctx.entry, ctx.args)
    return shell_command(ctx.entry, ctx.args)


def build(ctx: LaunchContext, *, extra_env: dict[str, str] | None = None) -> LaunchPlan:
    """One process on this host; lines are labelled when the job has several hosts."""
    hosts = ctx.env.hosts
    rank = hosts.index(ctx.env.current_host)
    env = dict(ctx.base_env)
    env.update(extra_env or {})
    env.update({"LAUNCHBAY_RANK": str(rank), "LAUNCHBAY_LOCAL_RANK": "0"})
    env.pop("LAUNCHBAY_IO_DIR", None)
    if ctx.settings.standins and not ctx.entry.is_python:
        standins.add_to_pythonpath(env)
    process = ProcessSpec(
        name="script",
        argv=plain_argv(ctx),
        env=env,
        cwd=ctx.code_dir,
        output="rank",
        rank=rank,
    )
    return LaunchPlan(
        launcher="plain",
        processes=[process],
        world_size=len(hosts),
        host_ranks={rank: 0},
        label_ranks=len(hosts) > 1,
    )
