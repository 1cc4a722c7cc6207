"""Failure triage on synthetic runs: which failure is the root cause, and how it is reported."""

from __future__ import annotations

import json
import re
import signal
from collections import deque
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchbay.runtime import _procs, _records, _triage, contract
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
    assert "Last lines (" in head and "m39.py" in head
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


# --------------------------------------------------------------- issue 22: launchers' children

LAUNCHER_ERROR = (
    "CalledProcessError: Command '['/usr/bin/python3', '-m', 'torch.distributed.run', "
    "'--nnodes', '2', '--node_rank', '1', '--nproc_per_node', '1', '--master_addr', 'algo-1', "
    "'--master_port', '29500', '/very/long/path/of/a/job/directory/of/this/machine/"
    "pytorch-training-2026-01-01-00-00-00-000/algo-2/code/child.py']' returned non-zero exit "
    "status 1."
)


def _launcher_plan(rank: int) -> LaunchPlan:
    """The plain launcher: one process per host, the entry point itself is rank ``rank``."""
    process = ProcessSpec("script", ["python"], {}, "/", output="rank", rank=rank)
    return LaunchPlan("plain", [process], 2, {rank: 0}, True)


def _start(ranks_dir: Path, rank: int, at: float = T0 + 0.1) -> None:
    record = {"rank": rank, "local_rank": 0, "host": f"algo-{rank + 1}", "pid": 4242}
    _records.write_record(_records.start_path(str(ranks_dir), rank), {**record, "timestamp": at})


def test_a_launcher_torn_down_before_its_record_is_not_a_rank_on_an_unknown_host(
    tmp_path: Path,
) -> None:
    """algo-1's launcher failed first; algo-2's was torn down (SIGTERM) before it wrote its
    record, after its torchrun worker's traceback had gone through its output. The
    traceback is the child's: the rank is the launcher, on algo-2, ended by SIGTERM."""
    shared = SharedDir(str(tmp_path / "shared"), "algo-2")
    SharedDir(shared.root, "algo-1").mark_host("failed", None, T0 + 2.0)
    ranks_dir = Path(shared.ranks_dir)
    _start(ranks_dir, 1)
    outcome = _outcome(
        {1: 0},
        main_codes={"script": 143},
        main_exit_times={"script": T0 + 2.6},
        teardown_reason="peer",
        teardown_at=T0 + 2.5,
    )
    state = outcome.ranks[1]
    state.pid = 4242
    state.traceback_seen_at = T0 + 1.0
    state.exceptions.append((T0 + 1.0, "AssertionError: worker 1 checks an invariant", True))
    state.stderr_tail.extend(_exc("AssertionError: worker 1 checks an invariant").splitlines())
    root = _triage.find_root_cause(
        outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(ranks_dir), shared=shared
    )
    assert root is not None
    assert (root.host, root.rank, root.exit_code) == ("algo-2", 1, 143)
    assert root.context == "its child raised AssertionError: worker 1 checks an invariant"
    assert root.timestamp > T0 + 2.0  # later than algo-1's failure: algo-1's report wins
    header = _triage.failure_report(root, []).splitlines()[0]
    assert "unknown host" not in header
    assert header.startswith("Rank 1 (local rank 0) on host algo-2 failed (exit code 143")


def _launcher_failed(tmp_path: Path, traceback: str) -> Outcome:
    """Rank 1 (algo-2)'s launcher recorded ``LAUNCHER_ERROR`` with ``traceback``; the outcome."""
    _start(tmp_path, 1)
    _record(
        tmp_path,
        1,
        T0 + 2.0,
        local_rank=0,
        host="algo-2",
        exit_code=1,
        error=LAUNCHER_ERROR,
        traceback=traceback,
    )
    return _outcome({1: 0}, main_codes={"script": 1}, main_exit_times={"script": T0 + 2.1})


def test_a_launchers_own_exit_is_the_failure_and_its_childs_error_the_context(
    tmp_path: Path,
) -> None:
    outcome = _launcher_failed(tmp_path, _exc("subprocess." + LAUNCHER_ERROR, "launcher.py"))
    state = outcome.ranks[1]
    state.traceback_seen_at = T0 + 1.0
    state.exceptions.extend(
        [
            (T0 + 1.0, "AssertionError: worker 1 checks an invariant", True),
            (T0 + 1.5, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", True),
            # the launcher's own traceback, printed after its record
            (T0 + 2.05, "subprocess." + LAUNCHER_ERROR, False),
        ]
    )
    root = _triage.find_root_cause(
        outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None
    assert (root.host, root.rank, root.exit_code, root.cause) == ("algo-2", 1, 1, "exception")
    assert root.context == "its child raised AssertionError: worker 1 checks an invariant"
    header = _triage.failure_report(root, []).splitlines()[0]
    assert header.startswith(
        "Rank 1 (local rank 0) on host algo-2 failed (exit code 1): CalledProcessError: "
    )
    assert header.endswith(
        "returned non-zero exit status 1.; its child raised AssertionError: worker 1 checks an "
        "invariant"
    )


def test_a_childs_own_record_is_context_never_the_rank(tmp_path: Path) -> None:
    """A child that ran the bootstrap too leaves ``rank-N.child-PID.json``: context only."""
    _start(tmp_path, 1)
    _records.write_record(
        _records.child_path(str(tmp_path), 1, 777),
        {
            "rank": 1,
            "host": "algo-2",
            "pid": 777,
            "child": True,
            "timestamp": T0 + 1.0,
            "exit_code": 1,
            "error": "KeyError: 'MASTER_ADDR'",
            "traceback": _exc("KeyError: 'MASTER_ADDR'"),
        },
    )
    _record(tmp_path, 1, T0 + 2.0, local_rank=0, host="algo-2", exit_code=1, error="SystemExit: 1")
    outcome = _outcome({1: 0}, main_codes={"script": 1}, main_exit_times={"script": T0 + 2.1})
    root = _triage.find_root_cause(
        outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None
    assert (root.host, root.rank, root.exit_code) == ("algo-2", 1, 1)
    assert root.error == "SystemExit: 1"
    assert root.context == "its child raised KeyError: 'MASTER_ADDR'"


def _long_failure(tmp_path: Path) -> tuple[_triage.Failure, Outcome]:
    frames = "".join(
        f'  File "/very/long/path/{"d" * 120}/m{i}.py", line {i}, in f{i}\n    call_{i}()\n'
        for i in range(12)
    )
    outcome = _launcher_failed(
        tmp_path, "Traceback (most recent call last):\n" + frames + "subprocess." + LAUNCHER_ERROR
    )
    outcome.ranks[1].exceptions.append((T0 + 1, "AssertionError: " + "a long message " * 40, True))
    outcome.ranks[1].stderr_tail.extend([f"stderr line {i} " + "z" * 80 for i in range(40)])
    root = _triage.find_root_cause(
        outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None
    return root, outcome


def test_the_reason_keeps_whole_lines_within_1024_characters(tmp_path: Path) -> None:
    """The failure file's reason and the client's FailureReason: whole lines only. A line
    too long for its place keeps its start and end around "[...]"; lines that do not fit
    are left out whole, and the reason says so."""
    from launchbay.backends.local.finish import failure_reason
    from launchbay.backends.local.layout import JobLayout

    root, outcome = _long_failure(tmp_path / "ranks")
    layout = JobLayout.create(str(tmp_path / "jobs"), "job", ["algo-1", "algo-2"])
    p = contract.paths(layout.host_dir("algo-2"))
    _triage.write_failure_files(p, root, outcome, host="algo-2", ranks_dir=str(tmp_path / "ranks"))
    text = Path(p.failure_file).read_text()
    file_lines = text.splitlines()

    job = type("Job", (), {"hosts": list(layout.hosts), "layout": layout, "failed_host": None})()
    reason = failure_reason(job, "algo-2", 1)
    assert len(reason) <= 1024
    lines = reason.splitlines()
    assert lines[0] == "AlgorithmError: " + file_lines[0]
    # Every line is a whole line of the report; the last one says what was left out.
    assert lines[1:-1] == file_lines[1 : len(lines) - 1]
    assert re.fullmatch(
        r"\[\d+ more lines left out; the whole report: .*/algo-2/output/failure\]", lines[-1]
    ), lines[-1]
    # Long lines keep their ends: the exit status and the child's error are named.
    head = lines[0]
    assert head.startswith(
        "AlgorithmError: Rank 1 (local rank 0) on host algo-2 failed (exit code 1): "
        "CalledProcessError: Command '['/usr/bin/python3', '-m', 'torch.distributed.run',"
    )
    assert "returned non-zero exit status 1.; its child raised AssertionError: a long" in head
    assert head.endswith(" a long message")
    assert " [...] " in head
    # The reason's traceback: the last lines, whole or shortened at a space, and it says
    # that earlier ones were left out.
    assert "Last lines (earlier ones left out):" in lines
    assert lines[lines.index("Last lines (earlier ones left out):") + 1 :][-2].endswith(
        "returned non-zero exit status 1."
    )
    for line in lines:
        assert len(line) <= _triage.LINE_LIMIT + 2 or line in (lines[0], lines[-1])


def test_the_failure_files_reason_ends_at_a_line_within_its_limit(tmp_path: Path) -> None:
    root, outcome = _long_failure(tmp_path)
    text = _triage.failure_report(root, [])
    lines = text.splitlines()
    # The reason: the lines up to the ones about other ranks (none here) or the tails.
    reason = "\n".join(lines[: lines.index("") if "" in lines else len(lines)])
    assert len("AlgorithmError: " + reason) <= _triage.REASON_LIMIT - 100
    assert reason.splitlines()[-1].endswith("returned non-zero exit status 1.")


# --------------------------------------------------------------- issue 22: shared loopback


PORT_ERRORS = {
    "torch store": (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, "
        "message: address already in use"
    ),
    "gloo": "RuntimeError: [enforce fail at pair.cc:446] bind: Address already in use",
    "tensorflow": (
        "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC server"
    ),
}


@pytest.mark.parametrize("where", ["error", "child", "stderr"])
@pytest.mark.parametrize("kind", sorted(PORT_ERRORS))
def test_a_taken_port_on_hosts_sharing_the_loopback_names_the_cause_and_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, where: str
) -> None:
    monkeypatch.setenv("LAUNCHBAY_HOST_NETWORK", "shared")
    message = PORT_ERRORS[kind]
    _start(tmp_path, 1)
    error = message if where == "error" else "SystemExit: 1"
    _record(
        tmp_path,
        1,
        T0 + 2,
        local_rank=0,
        host="algo-2",
        exit_code=1,
        error=error,
        traceback=_exc(error),
    )
    outcome = _outcome({1: 0})
    if where == "child":
        outcome.ranks[1].exceptions.append((T0 + 1, message, True))
    if where == "stderr":
        outcome.ranks[1].stderr_tail.extend(["[W socket.cpp] " + message, "exiting"])
    root = _triage.find_root_cause(
        outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and root.hint == _triage.SHARED_LOOPBACK_HINT
    lines = _triage.failure_report(root, []).splitlines()
    assert lines[0].startswith("Rank 1 (local rank 0) on host algo-2 failed (exit code 1)")
    assert lines[1] == (
        "local_process hosts share this machine's loopback here, so the same port cannot be "
        "bound on two hosts; run with instance_type='local' (Docker), or allow unprivileged "
        "user namespaces (docs/local.md)."
    )
    # Own network per host, or no such variable (Docker, SageMaker): no hint.
    for value in ("own", None):
        if value is None:
            monkeypatch.delenv("LAUNCHBAY_HOST_NETWORK")
        else:
            monkeypatch.setenv("LAUNCHBAY_HOST_NETWORK", value)
        again = _triage.find_root_cause(
            outcome, _launcher_plan(1), host="algo-2", ranks_dir=str(tmp_path), shared=None
        )
        assert again is not None and again.hint == ""
        assert "loopback" not in _triage.failure_report(again, [])


def test_no_hint_for_other_errors_on_a_shared_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAUNCHBAY_HOST_NETWORK", "shared")
    _record(
        tmp_path, 0, T0 + 1, exit_code=1, error="ValueError: x", traceback=_exc("ValueError: x")
    )
    root = _triage.find_root_cause(
        _outcome({0: 0}), _plan({0: 0}), host="algo-1", ranks_dir=str(tmp_path), shared=None
    )
    assert root is not None and root.hint == ""


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.text(st.sampled_from("ab c-"), max_size=400), max_size=30),
    limit=st.integers(min_value=60, max_value=1024),
    more=st.integers(min_value=0, max_value=3),
)
def test_fit_lines_keeps_whole_lines_in_order_within_the_limit(
    lines: list[str], limit: int, more: int
) -> None:
    def note(count: int) -> str:
        return f"[{count} more lines left out]"

    text = _procs.fit_lines(lines, limit, note, more=more)
    assert len(text) <= limit
    if not lines:
        assert text == (note(more) if more else "")
        return
    out = text.split("\n")
    if out and out[-1].startswith("["):
        out, last = out[:-1], out[-1]
        assert last == note(len(lines) - len(out) + more)
    else:
        assert out == lines and not more
    if out:
        first, rest = out[0], out[1:]
        assert first == lines[0] or _procs.ELISION in first
        assert rest == lines[1 : len(out)]


def test_a_shortened_line_keeps_its_start_and_end_and_splits_no_word() -> None:
    line = "CalledProcessError: Command '[" + ", ".join(f"'arg{i}'" for i in range(80)) + "]'"
    line += " returned non-zero exit status 1."
    short = _procs.shorten_line(line, 200)
    assert len(short) <= 200
    head, tail = short.split(_procs.ELISION)
    assert line.startswith(head) and line.endswith(tail)
    assert tail.endswith("returned non-zero exit status 1.")
    assert line[len(head)] == " " and line[-len(tail) - 1] == " "  # cut at spaces
