"""The Linux kernel calls the runtime makes through the C library (ctypes), in one place.

A host's own namespaces (:mod:`launchbay.runtime._netns`), its host names and ``/opt/ml``
(:mod:`launchbay.runtime._hostnames`) and its process supervision
(:mod:`launchbay.runtime._procs`) call ``unshare``, ``setns``, ``mount``, ``sethostname``
and ``prctl``. The flags they pass and the way a failed call becomes an :class:`OSError`
(with ``errno`` and the call named) live here. Standard library only: this runs inside
the host.
"""

from __future__ import annotations

import ctypes
import os
import select
from collections.abc import Sequence
from typing import Any

__all__ = [
    "readable",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "check",
    "libc",
    "setns",
    "write_proc_file",
]

# unshare(2) / setns(2) namespace flags.
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

# mount(2) flags.
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def libc() -> ctypes.CDLL:
    """The process's C library, keeping ``errno`` for :func:`check`."""
    return ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    """Raise ``OSError(errno, "<what>: <strerror>")`` when a C call returned non-zero."""
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def setns(path: str, kind: int, what: str) -> None:
    """Enter the namespace whose ``/proc/<pid>/ns/<kind>`` file is ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        check(libc().setns(fd, kind), f"setns({what})")
    finally:
        os.close(fd)


def write_proc_file(path: str, text: str) -> None:
    """Write ``text`` in one ``write`` (``/proc/<pid>/uid_map`` and friends take no more)."""
    with open(path, "wb") as f:
        f.write(text.encode())


def readable(objects: Sequence[Any], timeout: float | None) -> list[Any]:
    """Those of ``objects`` (files, sockets or descriptors) that are ready to read, or have
    hung up, within ``timeout`` seconds (None: until one is).

    ``select.select(objects, [], [], timeout)[0]`` without its limit: ``select`` refuses a
    descriptor numbered 1024 or more, and a notebook's process that has opened many files
    reaches those numbers. ``poll`` has no such limit and makes no descriptor of its own.
    """
    poller = select.poll()
    by_fd: dict[int, Any] = {}
    for obj in objects:
        fd = obj if isinstance(obj, int) else obj.fileno()
        by_fd[fd] = obj
        poller.register(fd, select.POLLIN | select.POLLPRI)
    events = poller.poll(None if timeout is None else max(0, int(timeout * 1000)))
    return [by_fd[fd] for fd, _ in events]
