"""A local job's logs: each host's ``logs/<host>.log``, written as hosts print and followed from the files.

Hosts' lines reach their log file through a reader thread (:func:`start_reader`,
a container's output) or are written by the host itself (:func:`start_watcher`
wakes the followers as the file grows). :func:`follow_lines` gives them as events
(:class:`~launchbay.backends.events.LogLines`), from the files, as :class:`LogFiles`
reads them; :func:`log_tail` gives a failure's last lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from launchbay.backends.local.hosts import POLL
from launchbay.backends.local.record import LocalJob

if TYPE_CHECKING:
    from launchbay.backends.local.signals import SigintFlag

import codecs
import collections
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from launchbay.backends.events import LogLines
from launchbay.backends.local.layout import (
    JobLayout,
)
from launchbay.runtime.names import (
    MAX_LOG_LINE,
)

logger = logging.getLogger("launchbay.backends.local")


_READER_JOIN = 5.0
#: Most bytes of one host's log file a follower reads at once (see LogFiles).
_READ_CHUNK = 1 << 20
#: What ends a line in a log file: a newline, or a carriage return (a progress bar).
_LINE_END = re.compile(rb"\r\n|\r|\n")
#: Most bytes read from the end of a host's log file for the last lines of a failure.
_TAIL_BYTES = 256 * 1024


class LogFiles:
    """Each host's ``logs/<host>.log``, read from where the last read stopped.

    Followers print from these files, not from memory: a driver whose display is
    slower than the ranks falls behind but never loses a line, and its memory
    stays flat however far behind it is, and however long a line is: each read
    takes at most :data:`_READ_CHUNK` bytes of a host, every byte is read once,
    and at most :data:`~launchbay.runtime.names.MAX_LOG_LINE` bytes of a line not
    yet ended are held. A longer line is shown in pieces of that size.

    A carriage return ends a line too, so a progress bar (``print(..., end="\\r")``)
    is shown as it moves; updates that a later one in the same read overwrites
    are skipped, as a terminal would overwrite them.
    """

    def __init__(self, layout: JobLayout) -> None:
        self.paths = {h: layout.log_file(h) for h in layout.hosts}
        self.offsets = dict.fromkeys(self.paths, 0)
        #: Per host: the bytes of a line not yet ended (at most MAX_LOG_LINE).
        self.pending = dict.fromkeys(self.paths, b"")
        #: Per host: the last read ended with a carriage return (a newline next belongs to it).
        self.after_cr = dict.fromkeys(self.paths, False)
        self.decoders = {
            h: codecs.getincrementaldecoder("utf-8")(errors="replace") for h in self.paths
        }

    def read(self, host: str, final: bool) -> list[str]:
        """The next lines of ``host`` (up to a chunk's worth), without line ends.

        A line longer than :data:`~launchbay.runtime.names.MAX_LOG_LINE` bytes
        comes in pieces of that size. With ``final`` (the host has stopped
        writing), a last line without a line end is returned too.
        """
        return self._next(host, final)[0]

    def _next(self, host: str, final: bool) -> tuple[list[str], bool]:
        """``(lines, whether anything was read)``; see :meth:`read`."""
        try:
            with open(self.paths[host], "rb") as f:
                f.seek(self.offsets[host])
                data = f.read(_READ_CHUNK)
        except OSError:
            return [], False
        self.offsets[host] += len(data)
        if self.after_cr[host] and data.startswith(b"\n"):
            data = data[1:]  # the second half of a \r\n split between two reads
        if data:
            self.after_cr[host] = data.endswith(b"\r")
        decoder = self.decoders[host]
        pieces: list[tuple[str, bool]] = []  # (text, ended by a lone carriage return)
        pending = self.pending[host]
        start = 0
        for match in _LINE_END.finditer(data):
            pending = self._cut(pending + data[start : match.start()], pieces, decoder)
            pieces.append((decoder.decode(pending), match.group() == b"\r"))
            pending, start = b"", match.end()
        pending = self._cut(pending + data[start:], pieces, decoder)
        at_end = len(data) < _READ_CHUNK
        if final and at_end and pending:
            pieces.append((decoder.decode(pending, final=True), False))
            pending = b""
        self.pending[host] = pending
        lines = [
            text
            for i, (text, overwritten) in enumerate(pieces)
            # A later piece of the same read draws over a carriage-return line (as on a
            # terminal): such a line is shown only as the last of the read.
            if not overwritten or (i == len(pieces) - 1 and text)
        ]
        return lines, bool(data) or bool(pieces)

    @staticmethod
    def _cut(pending: bytes, pieces: list[tuple[str, bool]], decoder: Any) -> bytes:
        """Move whole MAX_LOG_LINE pieces of a line not yet ended into ``pieces``."""
        if len(pending) <= MAX_LOG_LINE:
            return pending
        view = memoryview(pending)
        whole = (len(pending) - 1) // MAX_LOG_LINE * MAX_LOG_LINE  # leaves 1 to MAX bytes
        for offset in range(0, whole, MAX_LOG_LINE):
            pieces.append((decoder.decode(view[offset : offset + MAX_LOG_LINE]), False))
        return bytes(view[whole:])

    def new_lines(
        self, final: bool, hosts: Sequence[str] | None = None
    ) -> tuple[list[tuple[str, str]], bool]:
        """A chunk of new lines of every host (or of ``hosts``), ``(host, line)``; and whether any was read."""
        found: list[tuple[str, str]] = []
        progressed = False
        for host in self.paths if hosts is None else hosts:
            lines, read = self._next(host, final)
            found.extend((host, line) for line in lines)
            progressed = progressed or read
        return found, progressed

    def all_lines(self) -> Iterator[LogLines]:
        """What every host wrote so far, host by host, a chunk at a time."""
        for host in self.paths:
            while True:
                lines, progressed = self.new_lines(final=True, hosts=[host])
                if lines:
                    yield LogLines(tuple(lines))
                if not progressed:
                    break


def log_tail(path: str, lines: int) -> list[str]:
    """The last ``lines`` lines of a host's log file (``[]`` if it cannot be read).

    Only the file's last :data:`_TAIL_BYTES` are read, however long its lines; a
    progress bar's line is what a terminal shows of it (after its last ``\\r``).
    """
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(size - _TAIL_BYTES, 0))
            data = f.read(_TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    found = text.split("\n")
    if size > _TAIL_BYTES and len(found) > 1:
        found.pop(0)  # the end of a line that began before what was read
    if found and not found[-1]:
        found.pop()
    tail = collections.deque((line.rstrip("\r").rsplit("\r", 1)[-1] for line in found), lines)
    return list(tail)


def follow_lines(
    job: LocalJob, files: LogFiles | None, interrupts: SigintFlag | None = None
) -> Iterator[LogLines]:
    """The job's new lines (read from ``files``) as they come, until it is done and every line
    is read; with ``files`` None, only the wait.

    A Ctrl-C noted by ``interrupts`` is raised here, between two reads, never
    while a lock the supervisor thread needs is held. ``files`` keeps its place,
    so following again after an interrupt goes on where it stopped.
    """
    while True:
        if interrupts is not None and interrupts.pending():
            raise KeyboardInterrupt
        finished = job.done.is_set()  # then every host's log file is complete
        seen = job.output_count
        if files is not None:
            found, progressed = files.new_lines(finished)
            if found:
                yield LogLines(tuple(found))
            if progressed:
                continue
        if finished:
            return
        job.wait_for_output(seen, 0.2)


def pump_lines(job: LocalJob, host: str, lines: Iterable[str]) -> None:
    """Append every line ``host`` prints to its log file and wake the followers (a reader thread)."""
    try:
        with open(job.layout.log_file(host), "a", encoding="utf-8") as log:
            for line in lines:
                log.write(line + "\n")
                log.flush()
                job.note_output()
    except (OSError, ValueError) as exc:
        logger.debug("Log reader of %s/%s stopped: %s", job.name, host, exc)
    finally:
        job.notify()


def watch_log(job: LocalJob, path: str, running: Callable[[], bool]) -> None:
    """Wake the followers whenever a log file a host writes itself grows, until it has ended."""
    size = -1
    try:
        while True:
            ended = not running()
            try:
                now = os.path.getsize(path)
            except OSError:
                now = size
            if now != size:
                size = now
                job.note_output()
            elif ended:
                return
            time.sleep(POLL)
    finally:
        job.notify()


def _start_thread(
    job: LocalJob, host: str, target: Callable[..., None], *args: Any
) -> threading.Thread:
    reader = threading.Thread(
        target=target, args=args, name=f"launchbay-log-{job.name}-{host}", daemon=True
    )
    reader.start()
    return reader


def start_reader(job: LocalJob, host: str, lines: Iterable[str]) -> threading.Thread:
    """Start a daemon thread running :func:`pump_lines`; returns it (the runner hands it on,
    and the control loop keeps it in ``job.readers``)."""
    return _start_thread(job, host, pump_lines, job, host, lines)


def start_watcher(job: LocalJob, host: str, running: Callable[[], bool]) -> threading.Thread:
    """Start a daemon thread running :func:`watch_log` on ``host``'s log file; returns it."""
    return _start_thread(job, host, watch_log, job, job.layout.log_file(host), running)


def join_readers(readers: Iterable[threading.Thread]) -> None:
    """Let the log reader threads finish (each at most a few seconds; each one once)."""
    for reader in dict.fromkeys(readers):
        reader.join(_READER_JOIN)


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Lines of a byte stream whose chunks may end mid-line (or mid-character).

    A carriage return ends a line too (``\r\n`` is one end), so a progress bar is
    shown as it moves, as the ``local_process`` log reader does. A line never
    grows past :data:`~launchbay.runtime.names.MAX_LOG_LINE` characters: a
    longer one comes out in pieces of that size, so a container that prints
    hundreds of megabytes without a newline costs the client no more memory
    than short lines.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    carriage = False  # the last chunk ended with "\r": a "\n" next is the same end
    for chunk in chunks:
        text = decoder.decode(chunk)
        if carriage and text.startswith("\n"):
            text = text[1:]
        carriage = text.endswith("\r")
        pending += text
        *lines, pending = LINE_ENDS.split(pending)
        yield from lines
        while len(pending) > MAX_LOG_LINE:
            yield pending[:MAX_LOG_LINE]
            pending = pending[MAX_LOG_LINE:]
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


#: What ends a line of a container's output.
LINE_ENDS = re.compile("\r\n|\r|\n")
