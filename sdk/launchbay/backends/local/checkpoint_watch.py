"""Whether a restarted job's script read the checkpoint files restored for it (inotify).

After a spot interruption or a retry, the checkpoints are restored into each host's
checkpoint dir before its script starts. A script that never reads them starts from
scratch, and on SageMaker that costs the whole run again. :class:`RestoredWatch`
watches the directories that hold the restored files with Linux inotify (no
privileges needed; ctypes on the C library) and notes each restored file that is
read: ``IN_ACCESS`` (a read) or ``IN_CLOSE_NOWRITE`` (closed after a read-only open).
Writing a file of the same name, renaming over it or listing the directory is not
reading it. inotify sees every process's reads, a container's through its bind
mount too. It must be stopped (:meth:`RestoredWatch.stop`) before launchbay reads the
files itself (saving the checkpoints).

Where inotify is missing (not Linux, no watches left), :meth:`RestoredWatch.start`
returns ``None`` and says why once in the log.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import struct
import sys
import threading
from collections.abc import Mapping

from launchbay.runtime.for_client import libc, readable

__all__ = ["RestoredWatch"]

logger = logging.getLogger("launchbay.backends.local")

_IN_ACCESS = 0x00000001
_IN_CLOSE_NOWRITE = 0x00000010
_IN_Q_OVERFLOW = 0x00004000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name (len bytes, NUL padded)
_READ_SIZE = 64 * 1024


class RestoredWatch:
    """Notes which restored checkpoint files are read while it runs.

    Args:
        restored: Each checkpoint dir (as this machine sees it) and the paths of the
            files restored into it, relative to it (``/``-separated).
    """

    def __init__(self, fd: int, restored: Mapping[str, set[str]], watches: dict[int, str]):
        self._fd = fd
        self._restored = restored
        self._watches = watches
        self._read: dict[str, set[str]] = {directory: set() for directory in restored}
        self._overflowed = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="launchbay-ckpt-watch", daemon=True)

    @classmethod
    def start(cls, restored: Mapping[str, set[str]]) -> RestoredWatch | None:
        """Watch the directories holding ``restored`` files; ``None`` where inotify cannot."""
        if not sys.platform.startswith("linux"):
            logger.info("Not watching the restored checkpoints: inotify needs Linux")
            return None
        try:
            c = libc()
            fd = c.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError) as exc:
            logger.info("Not watching the restored checkpoints: %s", exc)
            return None
        if fd < 0:
            logger.info("Not watching the restored checkpoints: inotify_init1: %s",
                        os.strerror(ctypes.get_errno()))  # fmt: skip
            return None
        watches: dict[int, str] = {}
        mask = _IN_ACCESS | _IN_CLOSE_NOWRITE
        for root, files in restored.items():
            for directory in sorted({os.path.dirname(os.path.join(root, rel)) for rel in files}):
                wd = c.inotify_add_watch(fd, os.fsencode(directory), mask)
                if wd < 0:
                    code = ctypes.get_errno()
                    if code != errno.ENOENT:
                        logger.info("Not watching %s: inotify_add_watch: %s",
                                    directory, os.strerror(code))  # fmt: skip
                    continue
                watches[wd] = directory
        watch = cls(fd, restored, watches)
        watch._thread.start()
        return watch

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                if readable([self._fd], 0.2):
                    self._drain()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return
            if not data:
                return
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & _IN_Q_OVERFLOW:
                    self._overflowed = True
                    continue
                if mask & _IN_ISDIR or not name or wd not in self._watches:
                    continue
                self._note(os.path.join(self._watches[wd], os.fsdecode(name)))

    def _note(self, path: str) -> None:
        for root, files in self._restored.items():
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if rel in files:
                with self._lock:
                    self._read[root].add(rel)

    def stop(self) -> dict[str, set[str]]:
        """Stop watching; each checkpoint dir and the restored files read in it."""
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(OSError):
            self._drain()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        if self._overflowed:
            logger.info("Some reads of the restored checkpoints may have been missed "
                        "(the inotify queue overflowed)")  # fmt: skip
        with self._lock:
            return {root: set(files) for root, files in self._read.items()}
