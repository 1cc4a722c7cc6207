"""Reading what a program wrote to a pseudo-terminal (``pty.openpty()``) in a test.

Importable because ``tests/`` is on ``sys.path`` through its conftest.
"""

from __future__ import annotations

import os
import select


def read_pty(master: int, idle: float = 0.2) -> str:
    """Everything readable on ``master`` until nothing more comes for ``idle`` seconds."""
    chunks = []
    while select.select([master], [], [], idle)[0]:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode()
