"""What ``launchbay images`` shows while it builds and pushes, drawn through launchbay.display.

:func:`display_for` picks where (:func:`launchbay.display.environment`): a terminal or a
notebook redraws one live line (the running step, the pushed bytes), a CI log gets plain
lines (a line per step and a heartbeat, a line per pushed layer), ``progress=False`` nothing.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Mapping
from typing import Any, TextIO

from launchbay.display import Display

#: Build steps whose output ends in these lines are quoted when they fail.
ERROR_TAIL_LINES = 25


def display_for(progress: bool | None, stream: TextIO) -> Display:
    """The display of a build or push: nothing for ``progress=False``, else as the stream is."""
    return Display(stream, "quiet" if progress is False else None, transient=True)


class BuildDisplay:
    """Shows a build's progress on a :class:`~launchbay.display.Display`.

    Live (a terminal or a notebook): one line redrawn in place (step, elapsed time, latest
    output line); each finished step stays behind as a line with its time. Plain (CI logs):
    a line when a step starts, its time when it ends, and a heartbeat with its latest output
    line every 30 s of a long step. Quiet: nothing. In every case the running step's last
    output lines are kept for the error message. A ticker thread keeps the live line and the
    heartbeat going while a step prints nothing (compiling, downloading).
    """

    HEARTBEAT = 30.0
    REDRAW = 0.1
    STEP_WIDTH = 140

    def __init__(self, display: Display, label: str) -> None:
        self.display = display
        self.label = label
        self.step = ""
        self.step_started = time.monotonic()
        self.tail: collections.deque[str] = collections.deque(maxlen=ERROR_TAIL_LINES)
        self.cached = False
        self.last_step = ""
        self._partial = ""
        self._last_draw = 0.0
        self._last_beat = 0.0
        self._lock = display.lock
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def mode(self) -> str:
        """``"live"``, ``"plain"`` or ``"quiet"`` (follows the display, which a broken
        stream turns quiet)."""
        env = self.display.env
        return "live" if self.display.live else "plain" if env == "plain" else "quiet"

    def __enter__(self) -> BuildDisplay:
        if self.mode != "quiet":
            self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        self.finish()
        self.display.clear()

    # -- input
    def feed(self, text: str) -> None:
        with self._lock:
            self._partial += text
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                self._line(line.rstrip("\r"))
            self._tick()

    def _line(self, line: str) -> None:
        if line.startswith("Step ") and " : " in line:
            self._end_step()
            self.step, self.step_started, self.cached = line, time.monotonic(), False
            self.tail.clear()
            self._last_beat = self.step_started
            if self.mode == "plain":
                self.display.print(self._short(line, self.STEP_WIDTH))
            return
        stripped = line.strip()
        if stripped == "---> Using cache":
            self.cached = True
            return
        if stripped.startswith(("--->", "Removing intermediate container")):
            return
        if stripped.startswith(("Successfully built", "Successfully tagged")) or not stripped:
            return
        self.tail.append(line)

    def _tick_loop(self) -> None:
        while not self._stop.wait(self.REDRAW if self.mode == "live" else 1.0):
            with self._lock:
                self._tick()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.mode == "live" and now - self._last_draw >= self.REDRAW:
            self._last_draw = now
            self._draw()
        elif self.mode == "plain" and self.step and now - self._last_beat >= self.HEARTBEAT:
            self._last_beat = now
            last = self.tail[-1].strip()[:100] if self.tail else "(no output yet)"
            self.display.print(f"    ... {now - self.step_started:.0f} s: {last}")

    def _end_step(self, failed: bool = False) -> None:
        if not self.step:
            return
        elapsed = time.monotonic() - self.step_started
        state = "failed" if failed else "cached" if self.cached else "done"
        if self.mode == "live":
            note = state if state != "done" else f"{elapsed:.1f} s"
            if failed:
                note = f"failed after {elapsed:.1f} s"
            self.display.print(f"{self._short(self.step, self.STEP_WIDTH)}  {note}", cut=True)
        elif self.mode == "plain" and (
            failed
            or elapsed >= 1.0
            or (self.cached and re.search(r" : (RUN|COPY|ADD) ", self.step))
        ):
            self.display.print(f"    {state}, {elapsed:.1f} s")
        self.last_step, self.step = self.step, ""

    def finish(self, failed: bool = False) -> None:
        """End the running step (``failed``: it failed); idempotent."""
        with self._lock:
            if self._partial:
                self._line(self._partial)
                self._partial = ""
            self._end_step(failed)

    # -- output
    @staticmethod
    def _short(step: str, width: int = 0) -> str:
        match = re.match(r"Step (\d+)/(\d+) : (.*)", step)
        text = step
        if match:
            number, total, instruction = match.groups()
            text = f"[{int(number):>{len(total)}}/{total}] {' '.join(instruction.split())}"
        if width and len(text) > width:
            text = text[: width - 3] + "..."
        return text

    def _draw(self) -> None:
        if not self.step:
            return
        elapsed = time.monotonic() - self.step_started
        last = self.tail[-1].strip() if self.tail else ""
        line = f"{self._short(self.step)}  {elapsed:.0f}s"
        if last:
            line = f"{self._short(self.step, 60)}  {elapsed:.0f}s  | {last}"
        self.display.update(line)  # cut to the terminal's width by the display


class LayerProgress:
    """Push or pull progress: bytes of all layers on one live line, or a line per finished layer.

    ``verb`` starts the live line; a layer counts as done at one of ``finished``
    (the engine's words); its bytes are counted from chunks with a total, only those
    of status ``counted`` when given (a pull reports extraction too, with its own total).
    """

    def __init__(
        self,
        display: Display,
        target: str,
        *,
        verb: str = "Pushing",
        finished: tuple[str, ...] = ("Pushed", "Layer already exists", "Mounted from"),
        counted: str | None = None,
    ) -> None:
        self.display, self.target = display, target
        self.verb, self.finished, self.counted = verb, finished, counted
        self.layers: dict[str, tuple[int, int]] = {}
        self.done: dict[str, str] = {}
        self._last = 0.0

    def feed(self, chunk: Mapping[str, Any]) -> None:
        layer, status = chunk.get("id"), str(chunk.get("status") or "")
        detail = chunk.get("progressDetail") or {}
        plain = self.display.env == "plain"
        if layer and detail.get("total") and self.counted in (None, status):
            self.layers[layer] = (int(detail.get("current") or 0), int(detail["total"]))
        if layer and status in self.finished:
            self.done[layer] = status
            if layer in self.layers:
                total = self.layers[layer][1]
                self.layers[layer] = (total, total)
            if plain:
                self.display.print(f"  {layer}: {status}")
        elif not layer and status and plain:
            self.display.print(f"  {status}")
        now = time.monotonic()
        if self.display.live and now - self._last > 0.1:
            self._last = now
            current = sum(c for c, _ in self.layers.values())
            total = sum(t for _, t in self.layers.values())
            self.display.update(
                f"{self.verb} {self.target}: {len(self.done)} layers done, "
                f"{current / 2**20:.1f}/{total / 2**20:.1f} MiB"
            )

    def finish(self) -> None:
        """Erase the live line (idempotent)."""
        self.display.clear()


#: A push's progress (the default :class:`LayerProgress`).
_PushDisplay = LayerProgress


def pull_progress(display: Display, target: str) -> LayerProgress:
    """A pull's progress: downloaded bytes, layers done at "Pull complete"/"Already exists"."""
    return LayerProgress(
        display,
        target,
        verb="Pulling",
        finished=("Pull complete", "Already exists"),
        counted="Downloading",
    )
