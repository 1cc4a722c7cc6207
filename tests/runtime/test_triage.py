"""Failure triage on synthetic runs: which failure is the root cause, and how it is reported."""

from __future__ import annotations

import json
import signal
from collections import deque
from pathlib import Path

from launchbay.runtime import _records, _triage, contract
from launchbay.runtime._shared import SharedDir
from launchbay.runtime._supervisor import Outcome, RankState
from launchbay.runtime.launchers.base import LaunchPlan, ProcessSpec

T0 = 1_700_000_000.0
GLOO = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
    "peer [127.0.0.1]:1234"
)


def _plan(ranks: dict[int, int], launcher_rank: int | None = None) -> LaunchPlan:
    process = ProcessSpec("torchrun", ["torchrun"], {}, "/", rank=launcher_rank)
    return LaunchPlan("torch_distributed", [process], 4, ranks, True, fifo=True)


def _record(ranks_dir: Path, rank: int, at: float, **fields: object) -> None:
    record = {
        "rank": rank,
        "local_rank": rank % 2,
        "host": f"algo-{rank // 2 + 1}",
        "pid": 100 + rank,
    }
    record.update({"timestamp": at, **fields})
    _records.write_record(_records.end_path(str(ranks_dir), rank), record)


def _outcome(ranks: dict[int, int], **fields: object) -> Outcome:
    outcome = Outcome(exit_code=1, started_at=T0, **fields)
    outcome.ranks = {r: RankState(r, lr) for r, lr in ranks.items()}
    return outcome


def _exc(message: str, where: str = "train.py") -> str:
    return f'Traceback (most recent call last):\n  File "{where}", line 3, in <module>\n{message}\n'


def test_the_earliest_exception_wins_over_later_collective_errors(tmp_path: Path) -> None:
    ranks = {2: 0, 3: 1}
    _record(
        tmp_path,
        3,
        T0 + 5.0,
        exit_code=1,
        error="ValueError: bad batch",
        traceback=_exc("ValueError: bad batch"),
    )
    _record(tmp_path, 2, T0 + 5.2, exit_code=1, error=GLOO, traceback=_exc(GLOO))
    _record(
        tmp_path, 0, T0 + 4.9, exit_code=1, error=GLOO, traceback=_exc(GLOO)
    )  # fallout, earlier clock
    root = _triage.find_root_cause(
        _outcome(ranks), _plan(ranks), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None
    assert (root.rank, root.host, root.exit_code, root.cause) == (3, "algo-2", 1, "exception")
    assert root.traceback_tail.splitlines()[-1] == "ValueError: bad batch"


def test_a_crash_seen_late_still_beats_the_gloo_errors_it_caused(tmp_path: Path) -> None:
    ranks = {0: 0, 1: 1}
    _record(tmp_path, 0, T0 + 1.00, exit_code=1, error=GLOO, traceback=_exc(GLOO))
    _record(
        tmp_path,
        1,
        T0 + 1.05,
        exit_code=None,
        crashed=True,
        error="ended without a Python exception",
    )
    root = _triage.find_root_cause(
        _outcome(ranks), _plan(ranks), host="algo-1", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and (root.rank, root.cause) == (1, "crash")


def test_only_collective_errors_then_the_earliest(tmp_path: Path) -> None:
    ranks = {0: 0, 1: 1}
    _record(tmp_path, 1, T0 + 2, exit_code=1, error=GLOO, traceback=_exc(GLOO))
    _record(tmp_path, 0, T0 + 1, exit_code=1, error="DistBackendError: timed out", traceback="")
    root = _triage.find_root_cause(
        _outcome(ranks), _plan(ranks), host="algo-1", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and root.rank == 0


def test_host_level_candidates_only_without_rank_candidates(tmp_path: Path) -> None:
    ranks = {0: 0, 1: 1}
    shared = SharedDir(str(tmp_path / "shared"), "algo-1")
    # The other host's runtime marked itself failed.
    SharedDir(shared.root, "algo-2").mark_host("failed", 1, T0 + 0.5)
    outcome = _outcome(ranks, main_codes={"torchrun": 1}, main_exit_times={"torchrun": T0 + 0.7})
    outcome.launcher_tails["torchrun"] = deque(["rendezvous failed: timeout"])
    root = _triage.find_root_cause(
        outcome, _plan(ranks), host="algo-1", ranks_dir=shared.ranks_dir, shared=shared
    )
    assert root is not None and (root.host, root.rank, root.cause) == ("algo-2", None, "host")
    _record(
        Path(shared.ranks_dir),
        1,
        T0 + 3,
        exit_code=1,
        error="OSError: disk full",
        traceback=_exc("OSError: disk full"),
    )
    root = _triage.find_root_cause(
        outcome, _plan(ranks), host="algo-1", ranks_dir=shared.ranks_dir, shared=shared
    )
    assert root is not None and root.rank == 1


def test_a_stop_signal_is_the_reason_unless_something_failed_before(tmp_path: Path) -> None:
    ranks = {0: 0}
    outcome = _outcome(ranks, signal=signal.SIGTERM, teardown_reason="signal", teardown_at=T0 + 10)
    _record(tmp_path, 0, T0 + 10.5, exit_code=143, error="SystemExit: 143")
    root = _triage.find_root_cause(
        outcome, _plan(ranks), host="algo-1", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and (root.cause, root.exit_code) == ("signal", 143)
    assert "SIGTERM" in root.error
    _record(
        tmp_path, 0, T0 + 9, exit_code=1, error="ValueError: x", traceback=_exc("ValueError: x")
    )
    root = _triage.find_root_cause(
        outcome, _plan(ranks), host="algo-1", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and root.cause == "exception"


def test_stale_records_from_an_earlier_run_are_ignored(tmp_path: Path) -> None:
    ranks = {0: 0}
    _record(tmp_path, 0, T0 - 100, exit_code=1, error="old", traceback="old")
    assert (
        _triage.find_root_cause(
            _outcome(ranks),
            LaunchPlan("plain", [], 1, ranks, False),
            host="algo-1",
            ranks_dir=str(tmp_path),
            shared=None,
        )
        is None
    )


def test_failure_file_puts_the_essentials_in_the_first_1024_characters(tmp_path: Path) -> None:
    huge_frames = "".join(
        f'  File "/very/long/path/{"x" * 150}/m{i}.py", line {i}, in f{i}\n    call()\n'
        for i in range(40)
    )
    message = "ValueError: " + "y" * 2000
    ranks = {2: 0, 3: 1}
    _record(
        tmp_path,
        3,
        T0 + 1,
        exit_code=1,
        error=message,
        traceback="Traceback (most recent call last):\n" + huge_frames + message,
    )
    outcome = _outcome(ranks)
    outcome.ranks[2].stderr_tail.extend(["line"] * 30)
    root = _triage.find_root_cause(
        outcome, _plan(ranks), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None
    p = contract.paths(str(tmp_path / "base"))
    _triage.write_failure_files(
        p, root, outcome, host="algo-2", ranks_dir=str(tmp_path), user_message="my own reason"
    )
    text = Path(p.failure_file).read_text()
    head = text[:1024]
    assert head.startswith(
        "Rank 3 (local rank 1) on host algo-2 failed (exit code 1): ValueError: yyy"
    )
    assert "Last lines:" in head and "m39.py" in head
    assert "my own reason" in text
    report = json.loads(Path(p.failure_json_file).read_text())
    assert set(report) >= {
        "host",
        "rank",
        "local_rank",
        "exit_code",
        "timestamp",
        "error",
        "traceback_tail",
        "ranks",
    }
    assert report["timestamp"] == T0 + 1 and report["rank"] == 3
    assert [r["rank"] for r in report["ranks"]] == [2, 3]
    assert report["ranks"][0]["stderr_tail"].count("line") == 30
