"""launchbay.display: where a display draws, and each kind drawn into a plain stream and a terminal.

"Terminal" streams are a StringIO that says it is a TTY (what rich sees through
``isatty``) or a real pseudo-terminal; the Jupyter kernel runs in
tests/integration/test_notebook_output.py.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from launchbay import display
from launchbay._logs import LogPrinter
from launchbay.display import Display, Progress, environment, format_bytes, progress_enabled
from launchbay.images import _live
from terminal import read_pty

#: Control characters other than the newline, and ANSI escape sequences.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        return True


def screen(text: str) -> list[str]:
    """What a terminal shows at the end: a small emulator of the codes rich writes.

    Handles newlines, carriage returns, erase-line (``ESC[2K``, ``ESC[K``) and cursor
    up (``ESC[nA``); colours and cursor visibility are dropped.
    """
    rows, row, col = [""], 0, 0
    for token in re.split(r"(\x1b\[[0-9;?]*[A-Za-z]|\r|\n)", text):
        if token == "\n":
            row, col = row + 1, 0
            rows.extend([""] * (row + 1 - len(rows)))
        elif token == "\r":
            col = 0
        elif token in ("\x1b[2K", "\x1b[K"):
            rows[row] = "" if token == "\x1b[2K" else rows[row][:col]
        elif re.fullmatch(r"\x1b\[\d*A", token):
            row = max(row - int(token[2:-1] or 1), 0)
        elif token and not token.startswith("\x1b"):
            line = rows[row].ljust(col)
            rows[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return rows


# --------------------------------------------------------------------------- detection


def test_environment_of_streams(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    assert environment(io.StringIO()) == "plain"
    assert environment(Terminal()) == "terminal"
    closed = Terminal()
    closed.close()
    assert environment(closed) == "plain"
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            assert environment(tty) == "terminal"
    finally:
        os.close(master)
    monkeypatch.setenv("TERM", "dumb")  # cannot erase a line
    assert environment(Terminal()) == "plain"
    assert display.in_notebook() is False  # pytest is no Jupyter kernel


def test_progress_enabled_follows_the_environment(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    assert progress_enabled(None, Terminal()) is True
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(True, io.StringIO()) is True
    assert progress_enabled(False, Terminal()) is False


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(200 * 1024**2) == "200.0 MiB"


# --------------------------------------------------------------------------- transfers


def run_threads(bar: Progress) -> None:
    threads = [
        threading.Thread(target=lambda: [bar.update(4, 1) for _ in range(250)]) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_transfer_in_a_plain_stream_prints_a_bounded_number_of_plain_lines(monkeypatch):
    monkeypatch.setattr(display, "PLAIN_INTERVAL", 0.0)  # every tenth gets its line
    out = io.StringIO()
    with Progress("upload", total_bytes=4000, total_files=1000, enabled=True, stream=out) as bar:
        run_threads(bar)
    assert (bar.bytes_done, bar.files_done) == (4000, 1000)
    text = out.getvalue()
    assert not CONTROL.search(text) and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("upload [........................]   0.0% 0 B/3.9 KiB 0/1000")
    assert lines[-1].startswith("upload [########################] 100.0% 3.9 KiB/3.9 KiB")
    assert "1000/1000 files" in lines[-1]
    assert 2 <= len(lines) <= 12  # first, at most one per tenth, last: not one per update


def test_transfer_in_a_plain_stream_is_quiet_between_its_ends_when_quick():
    out = io.StringIO()
    with Progress("download", total_bytes=10, total_files=2, enabled=True, stream=out) as bar:
        for _ in range(10):
            bar.update(1)
        bar.update(files=2)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "100.0%" in lines[1] and "2/2 files" in lines[1]


def test_transfer_in_a_terminal_redraws_one_line_from_many_threads(monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")
    out = Terminal()
    with Progress("upload", total_bytes=4000, total_files=1000, enabled=True, stream=out) as bar:
        assert bar.env == "terminal"
        run_threads(bar)
    assert (bar.bytes_done, bar.files_done) == (4000, 1000)
    text = out.getvalue()
    assert "\r\x1b[2K" in text or text.count("upload") == 2  # redrawn in place
    shown = [line for line in screen(text) if line.strip()]
    assert len(shown) == 1  # one line on screen, in its final state
    assert shown[0].startswith("upload ") and "100.0%" in shown[0]
    assert "3.9 KiB/3.9 KiB 1000/1000 files" in shown[0]
    assert text.endswith("\n")  # the line ends: later output goes below it
    assert "\x1b[?25" not in text  # the cursor stays shown, even if a display is left open


def test_transfer_on_a_pseudo_terminal():
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w") as tty:
            with Progress("upload", total_bytes=10, total_files=1, enabled=True, stream=tty) as bar:
                bar.update(10, 1)
        text = read_pty(master)
    finally:
        os.close(master)
    assert "\r\x1b[2K" in text and "\x1b[?25" not in text
    assert "100.0% 10 B/10 B 1/1 files" in ANSI.sub("", text)


def test_disabled_transfer_writes_nothing_but_calls_back():
    out, seen = Terminal(), []
    with Progress(
        "x", total_bytes=1, total_files=1, enabled=False, stream=out, callback=seen.append
    ) as bar:
        bar.update(1, 1)
    assert out.getvalue() == "" and seen == [1]


def test_a_closed_stream_turns_a_display_off():
    for stream in (io.StringIO(), Terminal()):
        stream.close()
        with Progress("x", total_bytes=2, total_files=1, enabled=True, stream=stream) as bar:
            bar.update(2, 1)
        assert bar.env == "quiet"
        shown = Display(stream, "terminal")
        shown.update("status")
        shown.print("line")
        shown.close()
        assert shown.env == "quiet"


# --------------------------------------------------------------------------- job logs


def test_job_logs_in_a_plain_stream():
    out = io.StringIO()
    printer = LogPrinter(["algo-1", "algo-2"], out)
    assert not printer.live and not printer.colour
    printer.status("job | InProgress | Training")
    printer.print([("algo-1", "step 1/3\rstep 2/3\rstep 3/3"), ("algo-2", "crlf\r")])
    printer.status("job | Completed")
    printer.close()
    printer.message("[launchbay] done")
    assert out.getvalue() == (
        "job | InProgress | Training\n"
        "algo-1 | step 3/3\n"  # what a terminal would have shown
        "algo-2 | crlf\n"
        "job | Completed\n"
        "[launchbay] done\n"
    )


def test_job_logs_in_a_terminal_keep_the_status_below_the_lines(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = Terminal()
    printer = LogPrinter(["algo-1", "algo-2"], out)
    assert printer.live and printer.colour and printer.terminal
    printer.status("job | InProgress")
    printer.print([("algo-2", "b"), ("algo-1", "a")])
    printer.status("job | Completed")
    printer.close()
    printer.message("summary")
    text = out.getvalue()
    assert "\x1b[33malgo-2\x1b[0m | b\n\x1b[36malgo-1\x1b[0m | a\n" in text
    assert screen(text) == ["algo-2 | b", "algo-1 | a", "job | Completed", "summary", ""]


def test_no_color_keeps_the_live_line_but_drops_colours(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    out = Terminal()
    printer = LogPrinter(["algo-1"], out)
    assert printer.live and not printer.colour
    printer.print([("algo-1", "x")])
    assert out.getvalue() == "algo-1 | x\n"


# --------------------------------------------------------------------------- import


def test_import_launchbay_does_not_import_rich_nor_does_a_plain_display():
    code = (
        "import sys, io\n"
        "import launchbay, launchbay.session, launchbay.display, launchbay._logs\n"
        "assert 'rich' not in sys.modules, 'import'\n"
        "from launchbay.display import Progress\n"
        "from launchbay._logs import LogPrinter\n"
        "with Progress('x', total_bytes=1, total_files=1, enabled=True, stream=io.StringIO()) as b:\n"
        "    b.update(1, 1)\n"
        "LogPrinter(['algo-1'], io.StringIO()).print([('algo-1', 'hi')])\n"
        "assert 'rich' not in sys.modules, 'plain'\n"
        "class T(io.StringIO):\n"
        "    def isatty(self): return True\n"
        "LogPrinter(['algo-1'], T()).status('drawn')\n"
        "assert 'rich' in sys.modules, 'terminal'\n"
    )
    env = {**os.environ, "TERM": "xterm"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("env", ["terminal", "plain", "quiet"])
def test_display_prints_whole_lines_above_the_live_line(env):
    out = Terminal()
    with Display(out, env, colour=False, transient=True) as shown:
        shown.update("working")
        shown.print("one")
        shown.print_lines([("two",), ("three",)])
        shown.update("still working")
    text = out.getvalue()
    if env == "quiet":
        assert text == ""
        return
    if env == "plain":
        assert text == "one\ntwo\nthree\n"
        return
    assert [line for line in screen(text) if line] == ["one", "two", "three"]  # live line erased


# --------------------------------------------------------------------------- image builds and pushes

BUILD_STREAM = [
    "Step 1/3 : FROM base\n",
    " ---> 1234\n",
    "Step 2/3 : RUN pip install torch\n",
    " ---> Running in abc\n",
    "Collecting torch\n",
    "Installing collected",
    " packages: torch\n",
    "Removing intermediate container abc\n",
    " ---> 5678\n",
    "Step 3/3 : COPY x /x\n",
    " ---> Using cache\n",
    " ---> 9abc\n",
    "Successfully built 9abc\n",
]

PUSH_STREAM = [
    {"status": "The push refers to repository [localhost:5000/x]"},
    {"id": "aaa", "status": "Preparing"},
    {"id": "bbb", "status": "Preparing"},
    {"id": "aaa", "status": "Pushing", "progressDetail": {"current": 2**20, "total": 2**21}},
    {"id": "bbb", "status": "Layer already exists"},
    {"id": "aaa", "status": "Pushing", "progressDetail": {"current": 2**21, "total": 2**21}},
    {"id": "aaa", "status": "Pushed"},
    {"status": "v1: digest: sha256:0123 size: 123"},
]


def test_build_in_a_plain_stream_prints_steps_and_keeps_the_tail():
    out = io.StringIO()
    with _live.BuildDisplay(_live.display_for(None, out), "t") as build:
        for chunk in BUILD_STREAM:
            build.feed(chunk)
    text = out.getvalue()
    assert build.mode == "plain" and not CONTROL.search(text) and "\x1b" not in text
    assert "[1/3] FROM base" in text and "[2/3] RUN pip install torch" in text
    assert "[3/3] COPY x /x\n    cached" in text
    assert "Collecting torch" not in text  # plain lines name steps, not their output
    assert build.last_step == "Step 3/3 : COPY x /x"
    quiet = _live.BuildDisplay(_live.display_for(False, Terminal()), "t")
    for chunk in BUILD_STREAM[:7]:
        quiet.feed(chunk)
    assert quiet.mode == "quiet"
    assert list(quiet.tail) == ["Collecting torch", "Installing collected packages: torch"]


def test_build_in_a_terminal_redraws_the_running_step(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    out = Terminal()
    with _live.BuildDisplay(_live.display_for(None, out), "t") as build:
        assert build.mode == "live"
        for chunk in BUILD_STREAM[:5]:
            build.feed(chunk)
            time.sleep(0.12)
        drawn = out.getvalue()
    assert "\r\x1b[2K" in drawn and "[2/3] RUN pip install torch  0s  | Collecting torch" in drawn
    shown = [line for line in screen(out.getvalue()) if line]
    assert len(shown) == 2 and shown[0].startswith("[1/3] FROM base  ")  # finished steps stay
    assert shown[1].startswith("[2/3] RUN pip install torch  ") and shown[1].endswith(" s")


def test_push_in_a_plain_stream_and_in_a_terminal():
    out = io.StringIO()
    push = _live._PushDisplay(_live.display_for(None, out), "localhost:5000/x:v1")
    for chunk in PUSH_STREAM:
        push.feed(chunk)
    push.finish()
    assert out.getvalue() == (
        "  The push refers to repository [localhost:5000/x]\n"
        "  bbb: Layer already exists\n"
        "  aaa: Pushed\n"
        "  v1: digest: sha256:0123 size: 123\n"
    )
    out = Terminal()
    push = _live._PushDisplay(_live.display_for(True, out), "localhost:5000/x:v1")
    for chunk in PUSH_STREAM[:4]:
        time.sleep(0.11)  # the line is redrawn at most every 0.1 s
        push.feed(chunk)
    assert "Pushing localhost:5000/x:v1: 0 layers done, 1.0/2.0 MiB" in out.getvalue()
    push.finish()
    assert not [line for line in screen(out.getvalue()) if line]  # erased when done


def test_a_cut_line_fits_the_terminal_and_a_log_line_is_never_cut(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    out = Terminal()
    shown = Display(out, "terminal")
    shown.print("[6/41] RUN " + "x" * 100 + "  failed after 5.2 s", cut=True)
    shown.print("algo-1 | " + "y" * 100)
    assert screen(out.getvalue()) == ["[6/41] RUN " + "x" * 28 + "…", "algo-1 | " + "y" * 100, ""]
