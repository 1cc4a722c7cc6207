"""The dependency-free progress bar."""

from __future__ import annotations

import io
import threading

from launchbay._progress import Progress, format_bytes, progress_enabled


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_detection_follows_the_stream() -> None:
    assert progress_enabled(None, _Tty()) is True
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(True, io.StringIO()) is True
    assert progress_enabled(False, _Tty()) is False


def test_counts_bytes_and_files_from_many_threads() -> None:
    out = io.StringIO()
    with Progress("upload", total_bytes=4000, total_files=1000, enabled=True, stream=out) as bar:
        threads = [
            threading.Thread(target=lambda: [bar.update(4, 1) for _ in range(250)])
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert (bar.bytes_done, bar.files_done) == (4000, 1000)
    last = out.getvalue().rstrip("\n").split("\r")[-1]
    assert last.startswith("upload [########################] 100.0%")
    assert "1000/1000 files" in last and "3.9 KiB/3.9 KiB" in last
    assert out.getvalue().endswith("\n")


def test_disabled_bar_writes_nothing() -> None:
    out = io.StringIO()
    with Progress("x", total_bytes=1, total_files=1, enabled=False, stream=out) as bar:
        bar.update(1, 1)
    assert out.getvalue() == ""


def test_format_bytes() -> None:
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(200 * 1024**2) == "200.0 MiB"
