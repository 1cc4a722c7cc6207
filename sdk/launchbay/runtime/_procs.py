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
from collections.abc import Callable

from launchbay.runtime._linux import libc

__all__ = [
    "set_child_subreaper",
    "die_with_parent",
    "process_table",
    "descendants",
    "is_alive",
    "send_signal",
    "reap_adopted",
    "zombie_status",
    "exit_code_of_status",
    "crash_error",
    "signal_name",
    "describe_exit",
    "OOM_HINT",
    "shorten_line",
    "fit_lines",
]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return libc().prctl(option, value, 0, 0, 0) == 0
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


def zombie_status(pid: int) -> int | None:
    """The wait status (``waitpid`` format) of ``pid`` if it has ended but is not reaped yet.

    A rank's parent is its launcher (torchrun, orted), so the runtime cannot
    ``wait`` for it; while it is a zombie, Linux shows its status in field 52 of
    ``/proc/<pid>/stat``. ``None`` once the parent reaped it, or off Linux.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            data = f.read()
    except OSError:
        return None
    fields = data.rsplit(")", 1)[-1].split()
    if not fields or fields[0] not in ("Z", "X") or len(fields) < 50:
        return None
    try:
        return int(fields[49])
    except ValueError:
        return None


def exit_code_of_status(status: int | None) -> int | None:
    """A wait status as a shell exit code (128 + signal for a signal), ``None`` if unknown."""
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None


def crash_error(exit_code: int | None) -> str:
    """What a rank that ended without a Python exception (no end record) died of."""
    if exit_code is not None and exit_code > 128:
        return "the process was killed by a signal, without a Python exception"
    if exit_code is not None:
        return (
            f"the process ended with exit code {exit_code} without a Python exception "
            "(os._exit(), or a crash in native code)"
        )
    return (
        "the process ended without a Python exception (killed by a signal, a crash, or "
        "os._exit()); its exit status was not seen"
    )


def signal_name(signum: int) -> str:
    """``SIGKILL`` for 9; ``signal 99`` for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


#: After SIGKILL: nothing in the job sends it first, so the usual sender is the kernel.
OOM_HINT = (
    "; SIGKILL is what the kernel's out-of-memory killer sends: check the memory the "
    "ranks use against the machine's (or the container's) memory (dmesg shows OOM kills)"
)


def describe_exit(code: int | None, *, hint: bool = True) -> str:
    """How a process ended, in words: the one wording for ranks, launchers and hosts.

    ``code`` is a shell exit status (``128 + N`` for signal N, as the runtime and
    Docker report it) or a negative ``Popen.returncode`` (``-N``: killed by
    signal N). A SIGKILL gets :data:`OOM_HINT` unless ``hint`` is false.

    >>> describe_exit(-9, hint=False)
    'killed by SIGKILL (signal 9)'
    >>> describe_exit(137, hint=False)
    'exit code 137: killed by SIGKILL (signal 9)'
    """
    if code is None:
        return "exit status not seen"
    if code < 0 or code > 128:
        signum = -code if code < 0 else code - 128
        hint_text = OOM_HINT if hint and signum == signal.SIGKILL else ""
        killed = f"killed by {signal_name(signum)} (signal {signum}){hint_text}"
        return killed if code < 0 else f"exit code {code}: {killed}"
    return f"exit code {code}"


#: What stands for the middle of a line shortened by :func:`shorten_line`.
ELISION = " [...] "


def shorten_line(line: str, limit: int) -> str:
    """``line`` within ``limit`` characters, with its start and its end kept.

    A line that fits is returned whole. A longer one keeps about two thirds of
    the room for its start and one third for its end (where a command's "returned
    non-zero exit status 1" or an error's last words are), joined by
    :data:`ELISION`; each part is cut at a space when one is near, so words are
    not split.

    >>> shorten_line("a" * 10, 10)
    'aaaaaaaaaa'
    >>> shorten_line("one two three four five six seven eight nine ten", 30)
    'one two three [...] nine ten'
    """
    if len(line) <= limit:
        return line
    room = limit - len(ELISION)
    if room < 2:
        return line[: max(limit, 0)]
    head_len = room * 2 // 3
    tail_len = room - head_len
    head = line[:head_len]
    space = head.rfind(" ", head_len // 2)
    if space > 0:
        head = head[:space]
    tail = line[len(line) - tail_len :]
    space = tail.find(" ", 0, tail_len // 2)
    if space >= 0:
        tail = tail[space + 1 :]
    return head.rstrip() + ELISION + tail.lstrip()


def fit_lines(
    lines: list[str], limit: int, left_out: Callable[[int], str], *, more: int = 0
) -> str:
    """Whole ``lines`` from the first, joined by newlines, within ``limit`` characters.

    The lines that do not fit are dropped whole, from the last, and
    ``left_out(count)`` (a line saying how many were dropped and where they are)
    takes their place; ``more`` lines were left out before (the note is then
    always there, and counts them). A first line longer than ``limit`` is
    shortened with :func:`shorten_line`. Nothing is cut in the middle of a phrase.

    >>> print(fit_lines(["first", "second", "third"], 15, lambda n: f"[{n} more]"))
    first
    [2 more]
    """
    if not lines:
        return left_out(more)[:limit] if more else ""
    if not more and sum(len(line) + 1 for line in lines) - 1 <= limit:
        return "\n".join(lines)
    kept = [shorten_line(lines[0], limit)]
    used = len(kept[0])
    for line in lines[1:]:
        if used + 1 + len(line) > limit:
            break
        kept.append(line)
        used += 1 + len(line)
    while True:
        if len(kept) == len(lines) and not more:
            return "\n".join(kept)
        while len(kept) > 1 and not kept[-1].strip():  # no blank line before the note
            used -= 1 + len(kept.pop())
        note = left_out(len(lines) - len(kept) + more)
        if used + 1 + len(note) <= limit:
            return "\n".join([*kept, note])
        if len(kept) == 1:
            room = limit - 1 - len(note)
            if room < 1:
                return kept[0]
            return "\n".join([shorten_line(kept[0], room), note])
        used -= 1 + len(kept.pop())
