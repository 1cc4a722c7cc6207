"""``_bootstrap --exec``: a program that is not Python runs as a child of the rank wrapper.

The wrapper writes the rank's start and end records (exit code, ``128 + N`` for
signal N), forwards the signals it gets to the program once, and ends as the
program ended: the same exit status, or death by the same signal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_exec(tmp_path: Path, script: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, LAUNCHBAY_RANKS_DIR=str(tmp_path / "ranks"), LAUNCHBAY_RANK="4")
    env.pop("LAUNCHBAY_IO_DIR", None)
    return subprocess.Popen(
        [sys.executable, "-m", "launchbay.runtime._bootstrap", "--exec", "/bin/sh", "-c", script],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


def records(tmp_path: Path) -> tuple[dict, dict | None]:
    ranks = tmp_path / "ranks"
    start = json.loads((ranks / "rank-4.start.json").read_text())
    end_file = ranks / "rank-4.json"
    return start, json.loads(end_file.read_text()) if end_file.exists() else None


def test_a_program_that_exits_gives_its_status_and_an_end_record(tmp_path):
    proc = run_exec(tmp_path, "echo hello; exit 3")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert out == "hello\n"
    start, end = records(tmp_path)
    assert start["pid"] == end["pid"] == proc.pid
    assert end["exit_code"] == 3
    assert end["error"] == "echo hello; exit 3 exited with code 3"


def test_a_program_killed_by_a_signal_kills_the_wrapper_by_the_same_signal(tmp_path):
    proc = run_exec(tmp_path, "kill -KILL $$")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    _, end = records(tmp_path)
    assert end["exit_code"] == 128 + signal.SIGKILL
    assert (
        "was killed by SIGKILL (signal 9); SIGKILL is what the kernel's out-of-memory"
        in (end["error"])
    )


def test_a_signal_to_the_wrapper_reaches_the_program_once(tmp_path):
    proc = run_exec(
        tmp_path,
        'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.1; done',
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    deadline = time.monotonic() + 30
    while not (tmp_path / "ranks" / "rank-4.start.json").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # the rank's whole process group, as a launcher may
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert out == "got TERM\n"
    _, end = records(tmp_path)
    assert end["exit_code"] == 7
