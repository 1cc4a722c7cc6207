"""The processes a test's jobs left running on this machine (importable: ``tests/`` is on
``sys.path``). Shared by the local process, Docker and Ray tests; ``fit_in_child`` runs a job's client in
a child process that a test interrupts or kills."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

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


def fit_command(keywords: dict[str, Any], name: str) -> list[str]:
    """The command line of ``interrupted_fit.py`` running job ``name`` of ``keywords``."""
    return [
        sys.executable,
        str(Path(__file__).parent / "interrupted_fit.py"),
        json.dumps(keywords),
        name,
    ]


@contextmanager
def started_child(
    command: list[str],
    started: Callable[[], bool],
    timeout: float,
    env: dict[str, str] | None = None,
    message: str = "the job did not start",
    poll: float = 0.1,
) -> Iterator[subprocess.Popen]:
    """``command`` in a child process (stdout and stderr piped together), yielded once
    ``started()`` holds; fails if the child ends first or ``timeout`` passes (``message``), and
    kills it if it is still running at the end."""
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        deadline = time.monotonic() + timeout
        while not started():
            assert child.poll() is None, child.communicate()[0]
            assert time.monotonic() < deadline, message
            time.sleep(poll)
        yield child
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=30)


def fit_in_child(
    keywords: dict[str, Any],
    name: str,
    started: Callable[[], bool],
    timeout: float,
    env: dict[str, str] | None = None,
) -> AbstractContextManager[subprocess.Popen]:
    """``interrupted_fit.py`` running job ``name`` of ``keywords``, as :func:`started_child`
    yields it."""
    return started_child(fit_command(keywords, name), started, timeout, env)


def interrupt(child: subprocess.Popen, within: float, timeout: float) -> str:
    """SIGINT to ``child``: checks it exited within ``within`` seconds; returns its output."""
    interrupted = time.monotonic()
    child.send_signal(signal.SIGINT)
    output, _ = child.communicate(timeout=timeout)
    assert time.monotonic() - interrupted < within, output
    return output


@contextmanager
def http_answers(answer: Callable[[str], bytes]) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 (the client machine, to a test's jobs) that answers each GET
    with ``answer(path)``; yields its port, and stops it at the end."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = answer(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
