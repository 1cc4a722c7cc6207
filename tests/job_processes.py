"""The processes a test's jobs left running on this machine (importable: ``tests/`` is on
``sys.path``). Shared by the local process and the Ray tests."""

from __future__ import annotations

import os
from collections.abc import Callable

import psutil


def live_processes(matches: Callable[[psutil.Process], bool]) -> list[psutil.Process]:
    """Live processes but this one (zombies hold nothing) for which ``matches`` holds; a
    process that goes away or cannot be read while it is asked is passed over."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and matches(proc):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def job_processes(directory) -> list[psutil.Process]:
    """Live processes whose command line or environment mentions ``directory``."""
    needle = str(directory)

    def mentions(proc: psutil.Process) -> bool:
        return needle in " ".join(proc.cmdline()) + " " + " ".join(proc.environ().values())

    return live_processes(mentions)
