"""A rank's children are not ranks: a bootstrap started below a rank writes a child record.

A user's launcher (the entry point, rank N) may run ``python -m
launchbay.runtime._bootstrap`` itself, or a nested launcher may: that process
inherits the rank's ``LAUNCHBAY_RANK`` and ranks directory. It must not write the
rank's start or end record (the runtime would watch the wrong process, and
triage would take the child's error for the rank's): it writes
``rank-N.child-<pid>.json`` when it fails, and triage names it as the context
of the rank's own failure (issue 22).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from launchbay.runtime import _triage
from launchbay.runtime._supervisor import Outcome, RankState
from launchbay.runtime.launchers.base import LaunchPlan, ProcessSpec

LAUNCHER = """\
import subprocess, sys
subprocess.run([sys.executable, "-m", "launchbay.runtime._bootstrap", "child.py"], check=True)
"""
CHILD = "assert 1 + 1 == 3, 'the child checks a broken invariant'\n"


def test_a_bootstrap_below_a_rank_leaves_the_ranks_records_alone(tmp_path: Path) -> None:
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    (tmp_path / "child.py").write_text(CHILD)
    ranks = tmp_path / "ranks"
    env = dict(os.environ, LAUNCHBAY_RANKS_DIR=str(ranks), LAUNCHBAY_RANK="1")
    env["SM_CURRENT_HOST"] = "algo-2"
    for name in ("LAUNCHBAY_IO_DIR", "LAUNCHBAY_RANK_OWNER", "LAUNCHBAY_LOCAL_RANK"):
        env.pop(name, None)
    started = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "launchbay.runtime._bootstrap", "launcher.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "the child checks a broken invariant" in proc.stderr  # the child's traceback
    names = sorted(os.listdir(ranks))
    assert names[:2] == ["rank-1.child-" + names[0].split("child-")[1], "rank-1.json"], names
    assert names[2:] == ["rank-1.start.json"], names
    start = json.loads((ranks / "rank-1.start.json").read_text())
    end = json.loads((ranks / "rank-1.json").read_text())
    child = json.loads((ranks / names[0]).read_text())
    assert start["pid"] == end["pid"] != child["pid"]
    assert end["error"].startswith("CalledProcessError: Command ")
    assert child["error"] == "AssertionError: the child checks a broken invariant"
    assert (child["rank"], child["host"], child["child"]) == (1, "algo-2", True)

    spec = ProcessSpec("script", ["python"], {}, str(tmp_path), output="rank", rank=1)
    outcome = Outcome(
        exit_code=1,
        started_at=started,
        main_codes={"script": 1},
        main_exit_times={"script": time.time()},
    )
    outcome.ranks = {1: RankState(1, 0)}
    root = _triage.find_root_cause(
        outcome,
        LaunchPlan("plain", [spec], 2, {1: 0}, True),
        host="algo-2",
        ranks_dir=str(ranks),
        shared=None,
    )
    assert root is not None
    assert (root.rank, root.host, root.exit_code) == (1, "algo-2", 1)
    assert root.error.startswith("CalledProcessError: Command ")
    assert root.context == "its child raised AssertionError: the child checks a broken invariant"


def test_a_job_started_inside_a_rank_has_ranks_of_its_own(tmp_path: Path) -> None:
    """The mark is per ranks directory: a nested job's ranks record as ranks."""
    (tmp_path / "ok.py").write_text("print('fine')\n")
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    mark = json.dumps({"ranks_dir": str(outer), "rank": 0, "pid": os.getpid()})
    env = dict(os.environ, LAUNCHBAY_RANKS_DIR=str(inner), LAUNCHBAY_RANK="0")
    env["LAUNCHBAY_RANK_OWNER"] = mark
    env.pop("LAUNCHBAY_IO_DIR", None)
    subprocess.run(
        [sys.executable, "-m", "launchbay.runtime._bootstrap", "ok.py"],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=120,
    )
    assert sorted(os.listdir(inner)) == ["rank-0.json", "rank-0.start.json"]
