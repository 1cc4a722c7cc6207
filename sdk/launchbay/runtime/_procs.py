"""Process-tree helpers for the runtime (Linux /proc, with a ``ps`` fallback).

The runtime must be able to find and stop *every* process a job started, also
those started in new sessions (torchrun puts each worker in its own session)
or orphaned when their parent died. It therefore makes itself a child
subreaper (orphans are re-parented to it, not to init) and finds descendants
by walking parent links.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

__all__ = [
    "set_child_subreaper",
    "die_with_parent",
    "process_table",
    "descendants",
    "is_alive",
    "send_signal",
    "reap_adopted",
]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_child_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process (Linux); returns success."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent() -> None:
    """``preexec_fn``: the child gets SIGKILL if the runtime dies (Linux only)."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def process_table() -> dict[int, tuple[int, str]]:
    """``pid -> (ppid, state)`` for every process visible to us."""
    table: dict[int, tuple[int, str]] = {}
    if os.path.isdir("/proc/self"):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            fields = data[data.rfind(b")") + 2 :].split()
            if len(fields) >= 2:
                table[int(name)] = (int(fields[1]), fields[0].decode())
        return table
    output = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, check=False
    ).stdout
    for line in output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = (int(parts[1]), parts[2][:1])
    return table


def descendants(root: int | None = None, *, include_zombies: bool = False) -> list[int]:
    """Every process below ``root`` (default: this process), parents before children."""
    root = os.getpid() if root is None else root
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        if include_zombies or table.get(pid, (0, "Z"))[1] != "Z":
            found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def is_alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rfind(b")") + 2 :].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def send_signal(pids: list[int] | set[int], sig: int) -> None:
    """Send ``sig`` to each pid, ignoring those already gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap_adopted(managed: set[int]) -> None:
    """Collect exit statuses of orphans re-parented to us (never those Popen manages)."""
    table = process_table()
    me = os.getpid()
    for pid, (ppid, state) in table.items():
        if ppid == me and state == "Z" and pid not in managed:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
