"""The parallel runner of S3 transfers, and how a batch of them is stopped.

:mod:`launchbay.transfer` runs every batch here. The runner uses plain threads
rather than ``concurrent.futures``: executors refuse work once the interpreter
is shutting down, and a local job stopped from an ``atexit`` hook must still
save its outputs (if no thread can be started at all, the calling thread runs
the jobs one after the other). The calling thread only waits, in an
interruptible wait, so Ctrl-C (or SIGTERM turned into it) reaches it at once,
never stuck behind a transfer. The first failure or Ctrl-C stops a batch: no
new transfer starts, and transfers in flight stop at their next chunk (their
bodies, :class:`StopAwareBody`, and boto3's progress callbacks look at the
batch's stop event; a request aborted so is never retried,
:func:`_no_retry_when_cancelled`). Transfers run off the main thread (a local
job's, on its supervisor thread) stop the same way when an event given to
:func:`cancelled_by` is set.

Standard library only; boto3 objects are only handed in.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO

from launchbay.errors import TransferError

__all__ = ["STOP_GRACE", "cancelled_by", "run_parallel"]

logger = logging.getLogger("launchbay.transfer")

#: Seconds the calling thread waits for the worker threads after Ctrl-C (or an
#: outside cancellation) before it raises anyway; they stop at their next chunk.
STOP_GRACE = 1.0
#: Seconds between two looks of a waiting runner at the events of :func:`cancelled_by`.
_POLL = 0.1


class Cancelled(Exception):
    """A transfer stopped because its batch was stopped (never re-raised by the runner).

    Raised from the reads of a request body, the progress callbacks of boto3's
    managed transfers and the chunk loop of downloads, once the batch's stop
    event is set. botocore wraps it in a retryable ``HTTPClientError`` when it
    comes out of a body read; :func:`_no_retry_when_cancelled` unwraps it
    before any retry.
    """


_cancel_context = threading.local()


@contextlib.contextmanager
def cancelled_by(event: threading.Event, reason: str) -> Iterator[None]:
    """Stop the transfers this thread starts inside the block soon after ``event`` is set.

    For transfers run outside the main thread, which Ctrl-C never reaches (a
    local job's channels and outputs, staged by its supervisor thread): once
    ``event`` is set, no new transfer starts, those in flight stop at their
    next chunk, and the batch raises ``TransferError`` naming ``reason`` within
    about :data:`STOP_GRACE` seconds.
    """
    outer = getattr(_cancel_context, "events", ())
    _cancel_context.events = (*outer, (event, reason))
    try:
        yield
    finally:
        _cancel_context.events = outer


def _cancel_reason(events: Sequence[tuple[threading.Event, str]]) -> str | None:
    return next((reason for event, reason in events if event.is_set()), None)


def _no_retry_when_cancelled(caught_exception: BaseException | None = None, **_: Any) -> None:
    """``needs-retry`` hook: a request that a stopped batch aborted is not retried.

    botocore wraps whatever a body read raises in a retryable
    ``HTTPClientError``; the :class:`Cancelled` inside is raised instead.
    """
    inner = getattr(caught_exception, "kwargs", {}).get("error")
    if isinstance(inner, Cancelled):
        raise inner


def watch_cancellation(client: Any) -> None:
    """Install :func:`_no_retry_when_cancelled` on ``client`` (once; later calls do nothing)."""
    client.meta.events.register_first(
        "needs-retry.s3", _no_retry_when_cancelled, unique_id="launchbay-no-retry-when-cancelled"
    )


class StopAwareBody:
    """A request body whose reads raise :class:`Cancelled` once ``stop`` is set.

    http.client sends a file-like body a block (8-16 KiB) at a time, so a
    stopped batch stops its uploads in flight at the next block instead of
    after the whole body.
    """

    def __init__(self, raw: BinaryIO, stop: threading.Event, uri: str) -> None:
        self._raw = raw
        self._stop = stop
        self._uri = uri

    def read(self, size: int = -1) -> bytes:
        if self._stop.is_set():
            raise Cancelled(self._uri)
        return self._raw.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True


def run_parallel(
    jobs: Sequence[Callable[[], object]],
    workers: int,
    *,
    large: Sequence[Callable[[], object]] = (),
    stop: threading.Event | None = None,
) -> None:
    """Run ``jobs`` on up to ``workers`` threads, and ``large`` ones one at a time on one more.

    What a job returns is ignored.

    The calling thread only waits, and stays interruptible: Ctrl-C (a
    ``KeyboardInterrupt`` or ``SystemExit`` in it) sets ``stop``, waits at most
    :data:`STOP_GRACE` seconds for the threads and re-raises at once; the
    threads stop at their next chunk. The first failure of a job also sets
    ``stop``: jobs not started are dropped, jobs that watch ``stop`` end early,
    and once every thread has finished the first exception is re-raised (a
    ``KeyboardInterrupt`` or ``SystemExit`` before any other). Inside
    :func:`cancelled_by`, a set event stops the batch the same way, which then
    raises ``TransferError`` naming the reason. If no thread can be started
    (interpreter shutdown), the calling thread runs the jobs itself.
    """
    stop = stop if stop is not None else threading.Event()
    pending = collections.deque(jobs)
    heavy = collections.deque(large)
    errors: list[BaseException] = []
    lock = threading.Lock()
    events = getattr(_cancel_context, "events", ())
    lanes = [pending] * min(workers, len(pending)) + ([heavy] if heavy else [])
    running = [0]  # threads still working
    finished = threading.Event()

    def fail(exc: BaseException) -> None:
        with lock:
            errors.append(exc)
        stop.set()

    def work(queue: collections.deque[Callable[[], object]]) -> None:
        while not stop.is_set():
            with lock:
                if not queue:
                    return
                job = queue.popleft()
            try:
                job()
            except BaseException as exc:  # re-raised in the calling thread
                fail(exc)

    def lane(queue: collections.deque[Callable[[], object]]) -> None:
        try:
            work(queue)
        finally:
            with lock:
                running[0] -= 1
                if running[0] <= 0:
                    finished.set()

    running[0] = len(lanes)  # counted before any starts: the first to end must not be the last
    started = 0
    cancelled: str | None = None
    try:
        try:
            for queue in lanes:
                thread = threading.Thread(
                    target=lane, args=(queue,), name="launchbay-s3", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # interpreter shutdown: no new threads; this one does the rest
                    break
                started += 1
        finally:
            with lock:
                running[0] -= len(lanes) - started
                if running[0] <= 0:
                    finished.set()
        if started < len(lanes):
            work(heavy)  # the last lane: not started
            work(pending)
        # Event.wait is interruptible: Ctrl-C lands here, never in a transfer
        while not finished.wait(_POLL if events else None):
            cancelled = _cancel_reason(events)
            if cancelled is not None:
                logger.info("Stopping the transfers in flight: %s", cancelled)
                stop.set()
                finished.wait(STOP_GRACE)
                break
    except BaseException as exc:  # Ctrl-C (even while threads start): stop them, wait a moment
        fail(exc)
        _wait_briefly(finished)
        raise
    with lock:
        errors_now = list(errors)
    real = [e for e in errors_now if not isinstance(e, Cancelled)]
    if real:
        raise next((e for e in real if not isinstance(e, Exception)), real[0])
    if cancelled is not None or errors_now:
        raise TransferError(
            f"Transfers stopped before they finished: {cancelled or 'the batch was stopped'}. "
            "No file is left half-written."
        )


def _wait_briefly(finished: threading.Event) -> None:
    """Give the threads :data:`STOP_GRACE` seconds to stop (a second Ctrl-C ends it sooner)."""
    if not finished.wait(STOP_GRACE):
        logger.debug("Transfer threads still stopping; not waiting for them")
