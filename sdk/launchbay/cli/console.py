"""The command's console: its exit codes, its streams, its messages and its signals.

``launchbay`` writes its messages on stderr as ``launchbay: ...`` (:func:`info`,
:func:`error`); :func:`console` sets that up for one command and puts everything
back afterwards, treats SIGTERM as Ctrl-C, and lets the reader of stdout or stderr
leave (a closed pipe) without cutting the command short.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "console",
    "interrupted_code",
    "error",
    "info",
    "ReaderMayLeave",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

_TERMINATED = False


def _on_sigterm(signum: int, frame: Any) -> None:
    # Handled exactly like Ctrl-C: whoever handles SIGINT now (the local backend's
    # safe flag while it waits, else KeyboardInterrupt) sees it. CI systems cancel
    # a step with SIGTERM, so the local job is stopped and nothing is left running.
    global _TERMINATED
    _TERMINATED = True
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def console(verbose: bool) -> Iterator[None]:
    """Messages and warnings on stderr as ``launchbay: ...``; SIGINT/SIGTERM as interrupts.

    Everything is put back on exit, so ``main()`` can also run inside another program.
    stdout and stderr may be closed by their reader (``launchbay submit job.yaml |
    head -3``): what is written after that is dropped (:class:`ReaderMayLeave`)
    and the command goes on, so its exit code still says how the job ended.
    """
    global _TERMINATED
    _TERMINATED = False
    saved_streams = (sys.stdout, sys.stderr)
    sys.stdout, sys.stderr = ReaderMayLeave(sys.stdout), ReaderMayLeave(sys.stderr)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    package = logging.getLogger("launchbay")
    saved_logging = (package.level, package.propagate)
    package.addHandler(handler)
    package.setLevel(logging.DEBUG if verbose else logging.INFO)
    package.propagate = False

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        print(f"launchbay: warning: {message}", file=sys.stderr)

    saved_showwarning = warnings.showwarning
    warnings.showwarning = show
    saved_signals: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        saved_signals[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
        saved_signals[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        for signum, previous in saved_signals.items():
            signal.signal(signum, previous)
        warnings.showwarning = saved_showwarning
        package.removeHandler(handler)
        package.setLevel(saved_logging[0])
        package.propagate = saved_logging[1]
        sys.stdout, sys.stderr = saved_streams


class ReaderMayLeave:
    """A text stream whose reader may go away (a closed pipe): then writes are dropped.

    On the first :class:`BrokenPipeError` the stream's file descriptor is pointed
    at ``/dev/null``, so what is still buffered, every later write and the flush
    at exit go nowhere, quietly. The command is not cut short: ``submit`` still
    follows its job to the end and exits 1 when it failed, whatever reads (or
    stopped reading) its output.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_left = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._drop()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._drop()

    def _drop(self) -> None:
        self.reader_left = True
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        with contextlib.suppress(OSError, ValueError):
            self._stream.flush()  # what was buffered goes to /dev/null now

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def interrupted_code() -> int:
    """The exit code of an interrupted command: 143 after SIGTERM, else 130 (Ctrl-C)."""
    return EXIT_TERMINATED if _TERMINATED else EXIT_INTERRUPTED


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        prefix = "launchbay: " if record.levelno < logging.WARNING else "launchbay: warning: "
        if record.levelno >= logging.ERROR:
            prefix = "launchbay: error: "
        return prefix + record.getMessage()


def error(message: str) -> None:
    """``message`` on stderr as ``launchbay: error: ...`` (its further lines indented)."""
    lines = str(message).splitlines() or [""]
    print(f"launchbay: error: {lines[0]}", file=sys.stderr)
    for line in lines[1:]:
        print(f"  {line}" if line else "", file=sys.stderr)


def info(message: str) -> None:
    """``message`` on stderr as ``launchbay: ...``."""
    print(f"launchbay: {message}", file=sys.stderr, flush=True)
