"""A small, dependency-free progress bar for S3 transfers.

The bar counts bytes and files at once and is safe to update from many worker
threads. It redraws at most a few times a second on one line (carriage return),
and writes a final line when closed; in a Jupyter kernel it is a display updated
in place (:class:`NotebookLine`), so saved cell outputs hold no ``\r``. It is
shown when the output stream is a terminal or the code runs in a Jupyter
kernel; callers can force it on or off.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["NotebookLine", "Progress", "in_notebook", "progress_enabled"]

_BAR_WIDTH = 24
_MIN_REDRAW_INTERVAL = 0.1  # seconds


def in_notebook() -> bool:
    """True when running inside a Jupyter (ZMQ) kernel."""
    return _in_notebook()


class NotebookLine:
    """One line of text in a Jupyter cell's output, replaced in place as it changes.

    A carriage return cannot redraw a line there: the saved output keeps every
    state, ``\r`` included. This shows the text as a display (IPython's
    ``display(..., display_id=True)``) and updates that display, so the cell
    (and the saved notebook) holds only the last text.
    """

    def __init__(self) -> None:
        self._handle: Any = None
        self._text: str | None = None

    def update(self, text: str) -> None:
        """Show ``text`` (nothing is sent when it did not change)."""
        if text == self._text:
            return
        self._text = text
        try:
            from IPython.display import display

            bundle = {"text/plain": text}
            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        except Exception:  # a display problem must never break a transfer or a job
            self._handle = None


def _in_notebook() -> bool:
    """True when running inside a Jupyter (ZMQ) kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:  # pragma: no cover - defensive: a broken IPython must not break uploads
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_enabled(progress: bool | None, stream: TextIO | None = None) -> bool:
    """Resolve the ``progress`` argument: ``True``/``False`` force it, ``None`` means auto.

    Auto shows the bar when ``stream`` (default: ``sys.stderr``) is a TTY or when
    running in a Jupyter notebook.
    """
    if progress is not None:
        return bool(progress)
    stream = sys.stderr if stream is None else stream
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        pass
    return _in_notebook()


def format_bytes(count: float) -> str:
    """Human-readable byte count (binary units): ``1536`` -> ``'1.5 KiB'``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


class Progress:
    """A thread-safe bytes-and-files progress bar.

    Use as a context manager; call :meth:`update` from any thread::

        with Progress("upload", total_bytes=n, total_files=k, enabled=True) as bar:
            bar.update(nbytes=4096, files=1)

    When ``enabled`` is false nothing is drawn. ``callback``, if given, is
    called with each positive or negative byte increment (drawn or not), from
    the updating thread, like boto3's ``Callback``.
    """

    def __init__(
        self,
        label: str,
        *,
        total_bytes: int,
        total_files: int,
        enabled: bool,
        stream: TextIO | None = None,
        callback: Callable[[int], object] | None = None,
    ) -> None:
        self.label = label
        self._callback = callback
        self.total_bytes = max(int(total_bytes), 0)
        self.total_files = max(int(total_files), 0)
        self.enabled = enabled
        self._stream = stream
        self._lock = threading.Lock()
        self._bytes = 0
        self._files = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._closed = False
        self._last_len = 0
        # In a notebook (and writing where the notebook shows it) the bar is a display
        # updated in place; elsewhere one line redrawn with carriage returns.
        self._notebook = (
            NotebookLine()
            if enabled and stream in (None, sys.stderr, sys.stdout) and _in_notebook()
            else None
        )

    # -- counters ---------------------------------------------------------------
    @property
    def bytes_done(self) -> int:
        """Bytes transferred so far."""
        return self._bytes

    @property
    def files_done(self) -> int:
        """Files completed so far."""
        return self._files

    def update(self, nbytes: int = 0, files: int = 0) -> None:
        """Add ``nbytes`` transferred bytes and ``files`` completed files."""
        if nbytes and self._callback is not None:
            self._callback(nbytes)
        if not self.enabled:
            return
        with self._lock:
            self._bytes += nbytes
            self._files += files
            now = time.monotonic()
            if now - self._last_draw >= _MIN_REDRAW_INTERVAL:
                self._last_draw = now
                self._draw(end="")

    def close(self) -> None:
        """Draw the final state and end the line (idempotent)."""
        if not self.enabled:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._draw(end="\n")

    def __enter__(self) -> Progress:
        if self.enabled:
            with self._lock:
                self._draw(end="")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- rendering --------------------------------------------------------------
    def render(self) -> str:
        """The current bar as one line of text (without the leading carriage return)."""
        elapsed = max(time.monotonic() - self._start, 1e-9)
        if self.total_bytes:
            fraction = min(self._bytes / self.total_bytes, 1.0)
        elif self.total_files:
            fraction = min(self._files / self.total_files, 1.0)
        else:
            fraction = 1.0
        filled = int(round(fraction * _BAR_WIDTH))
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        rate = format_bytes(self._bytes / elapsed)
        return (
            f"{self.label} [{bar}] {fraction * 100:5.1f}% "
            f"{format_bytes(self._bytes)}/{format_bytes(self.total_bytes)} "
            f"{self._files}/{self.total_files} files {rate}/s {elapsed:.1f}s"
        )

    def _draw(self, end: str) -> None:
        line = self.render()
        if self._notebook is not None:
            self._notebook.update(line)
            return
        stream = sys.stderr if self._stream is None else self._stream
        pad = " " * max(self._last_len - len(line), 0)
        self._last_len = len(line)
        try:
            stream.write("\r" + line + pad + end)
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must not fail a transfer
            self.enabled = False
