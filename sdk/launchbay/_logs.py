"""Streamed job output, the same for every backend: ``host | line`` and a live status line.

:class:`LogPrinter` is the one printer of job logs. The one follower,
:mod:`launchbay.backends.follow`, feeds it what every backend's events say: the
hosts' lines (a local host's log file, SageMaker's CloudWatch streams) and the
job's status. It draws through
:class:`launchbay.display.Display`, which decides where it draws:

* a terminal or a Jupyter notebook ("live"): host prefixes are coloured (one
  colour per host, ``NO_COLOR`` turns colours off) and the status is one line
  redrawn in place below the log lines (a notebook: a display updated in place);
* anything else (a file, a pipe, CI): plain text only, no carriage return and
  no ANSI escape code; every status is a line of its own.

A line that redraws itself with carriage returns (a script's own progress bar)
is printed as a terminal would show it: its text after the last ``\r``.

:func:`show_logs` reads the ``logs`` argument of ``fit()``/``wait()`` as SageMaker
SDK v2 does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from launchbay.display import Display, environment
from launchbay.errors import ConfigurationError

__all__ = ["LogPrinter", "show_logs", "sorted_hosts", "COLOURS"]

#: Colours of host prefixes (rich style names), in host order (algo-1 gets the first).
COLOURS = (
    "cyan", "yellow", "magenta", "green", "blue", "red",
    "bright_cyan", "bright_yellow", "bright_magenta", "bright_green", "bright_blue", "bright_red",
)  # fmt: skip

_LOGS_VALUES = {"all": True, "training": True, "rules": True, "none": False}
_LOGS_ACCEPTED = (
    "'All' or True (status and every host's log lines; SDK v2's 'Training' and 'Rules' "
    "count as 'All'), or 'None', False or None (status only)"
)


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
        env = environment(self.stream)
        self.terminal = env == "terminal"
        self.notebook = env == "notebook"
        self.live = env != "plain" if live is None else bool(live)
        if colour is None:
            colour = env != "plain" and not os.environ.get("NO_COLOR")
        self.colour = bool(colour)
        if self.live != (env != "plain"):  # forced: live anywhere draws as a terminal does
            env = "terminal" if self.live else "plain"
        self._display = Display(self.stream, env, colour=self.colour)
        self._lock = self._display.lock
        self._width = max((len(h) for h in hosts), default=0)
        self._prefixes: dict[str, tuple[str, str]] = {}
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
            if host not in self._prefixes:
                colour = COLOURS[len(self._prefixes) % len(COLOURS)]
                self._prefixes[host] = (host.ljust(self._width), colour)

    # -- output ----------------------------------------------------------------
    def print(self, lines: Iterable[tuple[str, str]]) -> None:
        """Print ``(host, line)`` pairs, each as ``host | line``."""
        with self._lock:
            rows = []
            for host, line in lines:
                if host not in self._prefixes:
                    self.add_host(host)
                text = line.rstrip("\r").rsplit("\r", 1)[-1]
                rows.append((self._prefixes[host], " | " + text))
            self._display.print_lines(rows)

    def message(self, text: str) -> None:
        """Print one line of the tool's own (no host prefix), above the live status."""
        self._display.print(text)

    def status(self, text: str) -> None:
        """Show the status: redrawn in place when live, a plain line otherwise."""
        with self._lock:
            if self._display.live:
                self._display.update(text)
            else:
                self._display.print(text.replace("\n", " "))

    def close(self) -> None:
        """End the live status line, leaving its last text on screen."""
        self._display.close()


def sorted_hosts(hosts: Iterable[str]) -> list[str]:
    """Host names in natural order (``algo-2`` before ``algo-10``)."""
    return sorted(set(hosts), key=_host_key)
