"""Hostile YAML files for every reader of YAML at run time (issue 31, item 4).

``HOSTILE`` maps a case name to ``(make, expected)``: ``make(directory)`` puts the
file in ``directory`` and returns the path to name in ``SAGEMAKER_*_CONFIG_OVERRIDE``
or ``LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG``; ``expected`` are texts the refusal holds
besides that path. A FIFO and ``/dev/zero`` must never be opened for reading; the
others must be refused in bounded memory and time.

``run_limited`` runs a command under a memory and CPU-time limit with a timeout, so
a reader without limits fails the test (MemoryError, a traceback, a timeout) instead
of eating the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
from collections.abc import Callable
from pathlib import Path

MEMORY_LIMIT = 1536 * 1024 * 1024
CPU_SECONDS = 60


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def run_limited(args: list[str], env: dict[str, str], timeout: float = 60, **kw):
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=limited, **kw
    )


def billion_laughs(levels: int = 10) -> str:
    """A few hundred bytes standing for 9**levels strings, where the schema wants a mapping."""
    lines = ['x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"x{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]")
    return (
        "\n".join(lines)
        + f"\nSchemaVersion: '1.0'\nSageMaker:\n  TrainingJob:\n    Environment: *a{levels - 1}\n"
    )


def _write(name: str, content: bytes) -> Callable[[Path], str]:
    def make(directory: Path) -> str:
        path = directory / name
        path.write_bytes(content)
        return str(path)

    return make


def _fifo(directory: Path) -> str:
    path = directory / "fifo.yaml"
    os.mkfifo(path)
    return str(path)


def _dev_zero_link(directory: Path) -> str:
    path = directory / "zero.yaml"
    path.symlink_to("/dev/zero")
    return str(path)


HOSTILE: dict[str, tuple[Callable[[Path], str], tuple[str, ...]]] = {
    "fifo": (_fifo, ("it is a FIFO (named pipe)", "not a regular file")),
    "dev-zero": (lambda directory: "/dev/zero", ("it is a character device",)),
    "link-to-dev-zero": (_dev_zero_link, ("it is a character device", "leads to /dev/zero")),
    "billion-laughs": (
        _write("laughs.yaml", billion_laughs().encode()),
        ("expands to more than 100000 values",),
    ),
    "deep": (
        _write("deep.yaml", b"SageMaker: " + b"[" * 10_000 + b"]" * 10_000 + b"\n"),
        ("nest more than 64 levels",),
    ),
    "not-utf8": (
        _write("latin1.yaml", b"SchemaVersion: '1.0'\nSageMaker: {x: caf\xe9}\n"),
        ("is not UTF-8 text (byte 0xe9",),
    ),
    "oversized": (
        _write("huge.yaml", b"SchemaVersion: '1.0'\n" + b"# padding\n" * 120_000),
        ("is larger than 1048576 bytes",),
    ),
}
