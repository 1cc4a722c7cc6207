"""Streamed job output, the same for every backend: ``host | line`` and a live status line.

:class:`LogPrinter` is the one printer of job logs. The local process backend
feeds it the lines of its host processes; the SageMaker backend feeds it the
CloudWatch events of every host and the job's status. What it draws depends on
where the output goes:

* a terminal or a Jupyter notebook ("live"): host prefixes are coloured (one
  colour per host, ``NO_COLOR`` turns colours off) and the status is one line
  redrawn in place with a carriage return, kept below the log lines;
* anything else (a file, a pipe, CI): plain text only, no carriage return and
  no ANSI escape code; every status is a line of its own.

:func:`show_logs` reads the ``logs`` argument of ``fit()``/``wait()`` as SageMaker
SDK v2 does.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from launchbay._progress import NotebookLine, _in_notebook
from launchbay.errors import ConfigurationError

__all__ = ["LogPrinter", "show_logs", "sorted_hosts", "COLOURS"]

#: ANSI colours of host prefixes, in host order (algo-1 gets the first).
COLOURS = ("36", "33", "35", "32", "34", "31", "96", "93", "95", "92", "94", "91")

_LOGS_VALUES = {"all": True, "training": True, "rules": True, "none": False}
_LOGS_ACCEPTED = (
    "'All' or True (status and every host's log lines; SDK v2's 'Training' and 'Rules' "
    "count as 'All'), or 'None', False or None (status only)"
)
_NOTEBOOK_WIDTH = 160


def show_logs(logs: Any) -> bool:
    """Whether ``logs`` (SDK v2's values) asks for the hosts' log lines.

    ``"All"``, ``True``, ``"Training"`` and ``"Rules"`` mean yes; ``"None"``,
    ``False`` and ``None`` mean status only. Strings are case-insensitive.

    Raises:
        ConfigurationError: any other value.
    """
    if logs is None or logs is False:
        return False
    if logs is True:
        return True
    if isinstance(logs, str) and logs.lower() in _LOGS_VALUES:
        return _LOGS_VALUES[logs.lower()]
    raise ConfigurationError.invalid("logs", logs, _LOGS_ACCEPTED)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _host_key(host: str) -> tuple[str, int]:
    """Natural order of host names: algo-2 before algo-10."""
    stem, _, number = host.rpartition("-")
    return (stem, int(number)) if number.isdigit() else (host, -1)


class LogPrinter:
    """Prints ``host | line`` (coloured per host when live) and a live status line.

    Thread-safe: one lock orders every write, so lines of several readers and
    the status line never mix within a line.

    Args:
        hosts: Hosts known at the start, in colour order (``algo-1`` first);
            their names set the prefix width. Others are added as they appear.
        stream: Where to write (default ``sys.stdout``, read when the printer
            is made).
        live: Redraw the status in place; default: the stream is a terminal,
            or ``sys.stdout``/``sys.stderr`` inside a Jupyter kernel.
        colour: Colour host prefixes; default: ``live`` and ``NO_COLOR`` unset.
    """

    def __init__(
        self,
        hosts: Sequence[str] = (),
        stream: TextIO | None = None,
        *,
        live: bool | None = None,
        colour: bool | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.terminal = _isatty(self.stream)
        notebook = not self.terminal and self.stream in (sys.stdout, sys.stderr) and _in_notebook()
        self.live = (self.terminal or notebook) if live is None else bool(live)
        if colour is None:
            colour = (self.terminal or notebook) and not os.environ.get("NO_COLOR")
        self.colour = bool(colour)
        self._lock = threading.RLock()
        self._width = max((len(h) for h in hosts), default=0)
        self._prefixes: dict[str, str] = {}
        self._status = ""
        self._shown = 0  # characters of the status line now on screen
        # Jupyter keeps every "\r" in the saved output: there the status is a display
        # updated in place, and a line's carriage-return redraws keep only their last state.
        self.notebook = notebook
        self._notebook_line = NotebookLine() if notebook and self.live else None
        for host in hosts:
            self.add_host(host)

    # -- hosts -----------------------------------------------------------------
    @property
    def hosts(self) -> list[str]:
        """The hosts with a prefix, in colour order."""
        return list(self._prefixes)

    def add_host(self, host: str) -> None:
        """Give ``host`` the next colour (no-op for a known host)."""
        with self._lock:
            if host in self._prefixes:
                return
            label = host.ljust(self._width)
            if self.colour:
                label = f"\033[{COLOURS[len(self._prefixes) % len(COLOURS)]}m{label}\033[0m"
            self._prefixes[host] = label + " | "

    def _prefix(self, host: str) -> str:
        if host not in self._prefixes:
            self.add_host(host)
        return self._prefixes[host]

    # -- output ----------------------------------------------------------------
    def print(self, lines: Iterable[tuple[str, str]]) -> None:
        """Print ``(host, line)`` pairs, each as ``host | line``."""
        with self._lock:
            if self.notebook:
                lines = [(host, line.rsplit("\r", 1)[-1]) for host, line in lines]
            text = "".join(f"{self._prefix(host)}{line}\n" for host, line in lines)
            if text:
                self._write(self._clear() + text + self._draw())

    def message(self, text: str) -> None:
        """Print one line of the tool's own (no host prefix), above the live status."""
        with self._lock:
            self._write(self._clear() + text + "\n" + self._draw())

    def status(self, text: str) -> None:
        """Show the status: redrawn in place when live, a plain line otherwise."""
        with self._lock:
            if not self.live:
                self._write(text + "\n")
                return
            if self._notebook_line is not None:
                self._notebook_line.update(text.replace("\n", " "))
                return
            if text == self._status and self._shown:
                return  # already on screen
            self._status = text
            self._write(self._clear() + self._draw())

    def close(self) -> None:
        """End the live status line, leaving its last text on screen."""
        with self._lock:
            if self.live and self._shown:
                self._write("\n")
            self._status = ""
            self._shown = 0

    # -- drawing ---------------------------------------------------------------
    def _clear(self) -> str:
        if not self._shown:
            return ""
        shown, self._shown = self._shown, 0
        if self.terminal:
            return "\r\033[K"
        return "\r" + " " * shown + "\r"  # notebooks: overwrite with blanks

    def _draw(self) -> str:
        if not self.live or not self._status:
            return ""
        width = (
            shutil.get_terminal_size((100, 24)).columns - 1 if self.terminal else _NOTEBOOK_WIDTH
        )
        text = self._status.replace("\n", " ")
        if len(text) > width:
            text = text[: max(width - 3, 1)] + "..."
        self._shown = len(text)
        return "\r" + text

    def _write(self, text: str) -> None:
        if not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass


def sorted_hosts(hosts: Iterable[str]) -> list[str]:
    """Host names in natural order (``algo-2`` before ``algo-10``)."""
    return sorted(set(hosts), key=_host_key)
