"""Every live display launchbay draws, and the one place that decides how to draw it.

A display is some whole lines (a finished build step, a log line, a stack event)
and at most one *live line* that changes (a transfer's bar, a job's status, the
running build step). :func:`environment` decides, once per display, where it
draws; nothing else in launchbay looks at ``isatty`` or at Jupyter:

``"terminal"``
    The stream is a TTY (and ``TERM`` is not ``dumb``). `rich`_ draws the live
    line in place (redrawn, cut to the terminal's width) and prints whole lines
    above it; colours unless ``NO_COLOR`` is set.
``"notebook"``
    A Jupyter kernel (IPython's ``ZMQInteractiveShell``) and the stream is
    ``sys.stdout`` or ``sys.stderr``. The live line is an IPython display updated
    in place (:class:`NotebookLine`): a carriage return would stay in the saved
    cell output, a display keeps only its last text. Whole lines go to the stream
    (with ANSI colours, which Jupyter renders).
``"plain"``
    Anything else: a file, a pipe, a CI log. Whole lines only, without control
    characters: each kind of display prints a line when it starts and ends and
    a bounded number in between (a transfer: at most one per tenth done; a
    build: one per step and a heartbeat per 30 s; a job: one per status).

``"quiet"`` draws nothing (``progress=False``).

rich is imported only when a display draws in a terminal or in colour, so
``import launchbay`` (and a display in a CI log) never imports it.

.. _rich: https://rich.readthedocs.io
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

__all__ = [
    "Display",
    "NotebookLine",
    "Progress",
    "environment",
    "format_bytes",
    "in_notebook",
    "progress_enabled",
]

#: Width of a notebook's live line; longer text is cut with "...".
NOTEBOOK_WIDTH = 160
#: Seconds between two redraws of a transfer bar.
REDRAW_INTERVAL = 0.1
#: Seconds between two plain lines of a transfer (besides its first and last).
PLAIN_INTERVAL = 5.0

_ENVIRONMENTS = ("terminal", "notebook", "plain", "quiet")
_BAR_WIDTH = 24


# --------------------------------------------------------------------------- detection


def in_notebook() -> bool:
    """True when running inside a Jupyter (ZMQ) kernel."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:  # a broken IPython must not break a transfer or a job
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def environment(stream: TextIO | None = None) -> str:
    """Where a display on ``stream`` (default ``sys.stderr``) draws.

    ``"terminal"`` (a TTY whose ``TERM`` is not ``dumb``), ``"notebook"``
    (``sys.stdout``/``sys.stderr`` in a Jupyter kernel) or ``"plain"``.
    """
    stream = sys.stderr if stream is None else stream
    if _isatty(stream) and os.environ.get("TERM", "").lower() not in ("dumb", "unknown"):
        return "terminal"
    if stream in (sys.stdout, sys.stderr) and in_notebook():
        return "notebook"
    return "plain"


def progress_enabled(progress: bool | None, stream: TextIO | None = None) -> bool:
    """Resolve a ``progress`` argument: ``True``/``False`` force it, ``None`` means auto.

    Auto shows the display in a terminal or a notebook (:func:`environment`), not in
    a file, a pipe or a CI log.
    """
    if progress is not None:
        return bool(progress)
    return environment(stream) != "plain"


def format_bytes(count: float) -> str:
    """Human-readable byte count (binary units): ``1536`` -> ``'1.5 KiB'``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- notebook


class NotebookLine:
    """One line of text in a Jupyter cell's output, replaced in place as it changes.

    A carriage return cannot redraw a line there: the saved output keeps every
    state, ``\\r`` included. This shows the text as a display (IPython's
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


# --------------------------------------------------------------------------- display

_CONSOLE_CLASS: Any = None


def _console_class() -> Any:
    """rich's Console (imported on first use), except that it never hides the cursor:
    a display that an exception leaves open must not leave the terminal without one."""
    global _CONSOLE_CLASS
    if _CONSOLE_CLASS is None:
        from rich.console import Console

        class _Console(Console):
            def show_cursor(self, show: bool = True) -> bool:
                return False

        _CONSOLE_CLASS = _Console
    return _CONSOLE_CLASS


#: A piece of a line: text, or ``(text, style)`` with a rich style such as ``"cyan"``.
Part = str | tuple[str, str]


class Display:
    """Whole lines and one live line on ``stream``, drawn as :func:`environment` says.

    Thread-safe: one lock orders every write, so lines and the live line never mix.
    A broken or closed stream turns the display off rather than failing the work
    it shows.

    Args:
        stream: Where to draw.
        env: ``"terminal"``, ``"notebook"``, ``"plain"`` or ``"quiet"``; default
            :func:`environment` of ``stream``.
        colour: Draw the styles of lines' parts; default: ``env`` is a terminal or
            a notebook and ``NO_COLOR`` is unset.
        transient: Erase the live line when closed (else its last text stays).
    """

    def __init__(
        self,
        stream: TextIO,
        env: str | None = None,
        *,
        colour: bool | None = None,
        transient: bool = False,
    ) -> None:
        env = environment(stream) if env is None else env
        if env not in _ENVIRONMENTS:
            raise ValueError(f"env={env!r}: one of {_ENVIRONMENTS}")
        self.stream = stream
        self.env = env
        if colour is None:
            colour = env in ("terminal", "notebook") and not os.environ.get("NO_COLOR")
        self.colour = bool(colour) and env != "quiet"
        self.transient = transient
        self.lock = threading.RLock()
        self._console: Any = None
        self._live: Any = None
        self._notebook: NotebookLine | None = None
        self._text = ""

    @property
    def live(self) -> bool:
        """Whether the live line is drawn (a terminal or a notebook)."""
        return self.env in ("terminal", "notebook")

    # -- rich, on first use
    def _rich_console(self) -> Any:
        if self._console is None:
            self._console = _console_class()(
                file=self.stream,
                force_terminal=True,
                force_jupyter=False,
                force_interactive=self.env == "terminal",
                color_system="auto" if self.env == "terminal" else "standard",
                no_color=not self.colour,
                highlight=False,
                markup=False,
                emoji=False,
                soft_wrap=True,
            )
        return self._console

    # -- output
    def print(self, *parts: Part, cut: bool = False) -> None:
        """Print one whole line made of ``parts`` (above the live line).

        ``cut``: a terminal shows it cut to its width ("…") rather than wrapped.
        """
        self.print_lines([parts], cut=cut)

    def print_lines(self, lines: Sequence[Sequence[Part]], *, cut: bool = False) -> None:
        """Print several whole lines at once, each a sequence of parts (``cut``: as :meth:`print`)."""
        if not lines:
            return
        with self.lock:
            if self.env == "quiet":
                return
            try:
                if self.env == "terminal" or self.colour:
                    from rich.text import Text

                    text = Text()
                    for index, parts in enumerate(lines):
                        if index:
                            text.append("\n")
                        for part in parts:
                            if isinstance(part, tuple):
                                text.append(part[0], style=part[1])
                            else:
                                text.append(part)
                    if cut and self.env == "terminal":
                        self._rich_console().print(
                            text, soft_wrap=False, no_wrap=True, overflow="ellipsis"
                        )
                    else:
                        self._rich_console().print(text)
                else:
                    self.stream.write(
                        "".join(
                            "".join(p[0] if isinstance(p, tuple) else p for p in parts) + "\n"
                            for parts in lines
                        )
                    )
                    self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stream must not fail the work
                self.env = "quiet"

    def update(self, text: str, renderable: Any = None) -> None:
        """Show ``text`` as the live line (a terminal draws ``renderable`` if given).

        Nothing is drawn in ``"plain"``: each caller prints its own bounded lines there.
        """
        with self.lock:
            if not self.live:
                return
            text = text.replace("\n", " ")
            try:
                if self.env == "notebook":
                    if self._notebook is None:
                        self._notebook = NotebookLine()
                    if len(text) > NOTEBOOK_WIDTH:
                        text = text[: NOTEBOOK_WIDTH - 3] + "..."
                    self._notebook.update(text)
                    return
                if self._live is None:
                    from rich.live import Live

                    self._live = Live(
                        console=self._rich_console(),
                        auto_refresh=False,
                        transient=self.transient,
                        redirect_stdout=False,
                        redirect_stderr=False,
                    )
                    self._live.start()
                if renderable is None:
                    if text == self._text:
                        return
                    from rich.text import Text

                    renderable = Text(text, no_wrap=True, overflow="ellipsis")
                self._text = text
                self._live.update(renderable, refresh=True)
            except (OSError, ValueError):
                self.env = "quiet"

    def clear(self) -> None:
        """End the live line: erased when ``transient``, else its last text stays.

        Lines printed afterwards go below it; a later :meth:`update` starts a new one.
        """
        with self.lock:
            live, self._live, self._text = self._live, None, ""
            try:
                if live is not None:
                    live.stop()
                if self._notebook is not None and self.transient:
                    self._notebook.update("")
            except (OSError, ValueError):
                self.env = "quiet"
            self._notebook = None

    def close(self) -> None:
        """Same as :meth:`clear`; the display may still print lines afterwards."""
        self.clear()

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --------------------------------------------------------------------------- transfers


class Progress:
    """A thread-safe bytes-and-files progress bar for transfers.

    Use as a context manager; call :meth:`update` from any thread::

        with Progress("upload", total_bytes=n, total_files=k, enabled=True) as bar:
            bar.update(nbytes=4096, files=1)

    In a terminal it is a rich bar redrawn at most every 0.1 s that stays on
    screen when closed; in a notebook a display updated in place; elsewhere
    (when forced on) plain lines: the first, one per further tenth done at most
    every 5 s, and the last. When ``enabled`` is false nothing is drawn.
    ``callback``, if given, is called with each byte increment (drawn or not)
    from the updating thread, like boto3's ``Callback``.
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
        stream = sys.stderr if stream is None else stream
        self._display = Display(stream, None if enabled else "quiet")
        self._lock = self._display.lock
        self._bytes = 0
        self._files = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._last_line = -PLAIN_INTERVAL
        self._tenths = -1
        self._closed = False

    @property
    def env(self) -> str:
        """Where the bar draws (see :func:`environment`)."""
        return self._display.env

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
            if self._display.env == "plain":
                tenths = int(self.fraction() * 10)
                if tenths > self._tenths and now - self._last_line >= PLAIN_INTERVAL:
                    self._draw(now)
            elif now - self._last_draw >= REDRAW_INTERVAL:
                self._draw(now)

    def close(self) -> None:
        """Draw the final state and end the line (idempotent)."""
        if not self.enabled:
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._draw(time.monotonic())
            self._display.close()

    def __enter__(self) -> Progress:
        if self.enabled:
            with self._lock:
                self._draw(time.monotonic())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- rendering --------------------------------------------------------------
    def fraction(self) -> float:
        """The part done, 0.0 to 1.0: by bytes, or by files when there are no bytes."""
        if self.total_bytes:
            return min(self._bytes / self.total_bytes, 1.0)
        if self.total_files:
            return min(self._files / self.total_files, 1.0)
        return 1.0

    def _counts(self) -> str:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        return (
            f"{self.fraction() * 100:5.1f}% "
            f"{format_bytes(self._bytes)}/{format_bytes(self.total_bytes)} "
            f"{self._files}/{self.total_files} files "
            f"{format_bytes(self._bytes / elapsed)}/s {elapsed:.1f}s"
        )

    def render(self) -> str:
        """The bar as one line of plain text (what a notebook or a CI log shows)."""
        filled = int(round(self.fraction() * _BAR_WIDTH))
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        return f"{self.label} [{bar}] {self._counts()}"

    def _draw(self, now: float) -> None:
        self._last_draw = now
        display = self._display
        if display.env == "plain":
            self._last_line = now
            self._tenths = int(self.fraction() * 10)
            display.print(self.render())
        elif display.env == "terminal":
            from rich.progress_bar import ProgressBar
            from rich.table import Table

            row = Table.grid(padding=(0, 1))
            for _ in range(3):
                row.add_column(no_wrap=True)
            row.add_row(
                self.label,
                ProgressBar(
                    total=1.0,
                    completed=self.fraction(),
                    width=_BAR_WIDTH,
                    complete_style="green",
                ),
                self._counts(),
            )
            display.update(self.render(), row)
        else:
            display.update(self.render())
