"""Failure triage: the one place where the run's data becomes a failure report.

Candidates, each with a time:

* end records of ranks that failed (an uncaught exception, a non-zero
  ``SystemExit``) or crashed (a runtime saw the process end without a record);
* another host's runtime marking itself failed (local modes);
* this host's launcher (torchrun/mpirun/script) exiting non-zero, a setup error,
  an MPI worker's wait that failed;
* ranks of a remote host seen through mpirun's tagged output (time the
  traceback appeared), when no record is reachable;
* a stop signal.

The root cause is the earliest rank-level candidate -- so a rank that raised
is reported, not its peers that died later of the broken collective or of
being torn down. Errors that read like fallout of another rank's death
(gloo "connection closed by peer", NCCL aborts and timeouts, broken pipes) only
win when nothing else failed: a crashed rank is seen by its runtime a few
milliseconds after its peers have already raised, so time alone would blame
them. Host-level candidates (a launcher's exit, another host's mark, setup
errors) count only when no rank-level candidate exists. Candidates after a
requested stop are consequences of it.

Written on failure: ``<base>/output/failure`` (its first 1024 characters name
host, rank, exit code and the last traceback lines; SageMaker shows those as
FailureReason) and ``<base>/output/launchbay-failure.json``::

    {"host", "rank", "local_rank", "exit_code", "timestamp", "error",
     "traceback_tail", "cause", "reporting_host",
     "ranks": [{"rank", "host", "exit_code", "stderr_tail"}, ...]}
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import asdict, dataclass
from typing import Any

from launchbay.runtime import _procs, _records
from launchbay.runtime._shared import SharedDir
from launchbay.runtime._supervisor import Outcome
from launchbay.runtime.contract import ContractPaths
from launchbay.runtime.launchers.base import LaunchPlan

__all__ = [
    "Failure",
    "find_root_cause",
    "is_collateral",
    "failure_report",
    "write_failure_files",
    "setup_failure",
]

TRACEBACK_LINES = 20
REASON_LIMIT = 1024

# Errors a rank gets because another rank died or hung (checked against the
# error and the last traceback lines).
_COLLATERAL = re.compile(
    r"connection closed by peer|connection reset by peer|remote worker crash|broken pipe"
    r"|communicator was aborted|collective operation timeout|ncclRemoteError|NCCL error"
    r"|DistNetworkError|gloo/transport|Socket Timeout|timed out",
    re.IGNORECASE,
)
_RANK_LEVEL = ("exception", "exit", "crash")


@dataclass
class Failure:
    """The root cause of a failed run."""

    host: str | None
    rank: int | None
    local_rank: int | None
    exit_code: int | None
    timestamp: float
    error: str
    traceback_tail: str
    cause: str


def _tail(text: str | None, lines: int = TRACEBACK_LINES) -> str:
    if not text:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


# What launchers print about a rank they saw die of a signal (torchrun's error summary,
# OpenMPI's mpirun, which may print "PID 0"): the pid or the MPI rank, and the signal.
_LAUNCHER_SIGNAL = (
    re.compile(r"exitcode\s*:\s*-(?P<sig>\d+)\s*\(pid:\s*(?P<pid>\d+)\)"),
    re.compile(r"Signal (?P<sig>\d+) \(\w+\) received by PID (?P<pid>\d+)"),
    re.compile(
        r"process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node \S+ exited on signal (?P<sig>\d+)"
    ),
)


def _signal_from_launchers(outcome: Outcome, pid: int | None, rank: int | None) -> int | None:
    """``128 + signal`` for a rank whose status the runtime missed, from its launcher's output.

    The launcher is the rank's parent and reaps it first (OpenMPI at once); what it
    prints about the death is the only record left.
    """
    for lines in outcome.launcher_tails.values():
        for line in lines:
            for pattern in _LAUNCHER_SIGNAL:
                match = pattern.search(line)
                if not match:
                    continue
                groups = match.groupdict()
                same_pid = pid is not None and int(groups["pid"]) == pid
                same_rank = groups.get("rank") is not None and int(groups["rank"]) == rank
                if same_pid or same_rank:
                    return 128 + int(groups["sig"])
    return None


def _host_failure(host: str, exit_code: int | None, timestamp: float, error: str) -> Failure:
    return Failure(host, None, None, exit_code, timestamp, error, "", "setup")


def find_root_cause(
    outcome: Outcome,
    plan: LaunchPlan,
    *,
    host: str,
    ranks_dir: str,
    shared: SharedDir | None,
) -> Failure | None:
    """The earliest failure of the run, or ``None`` if there is nothing to report."""
    since = outcome.started_at - 1.0
    _, ends = _records.read_records(ranks_dir)
    candidates: list[Failure] = []
    for rank, end in ends.items():
        if end.get("timestamp", 0) < since or not (end.get("exit_code") or end.get("crashed")):
            continue
        state = outcome.ranks.get(rank)
        tail = _tail(end.get("traceback")) or (
            "\n".join(list(state.stderr_tail)[-TRACEBACK_LINES:]) if state else ""
        )
        if end.get("crashed") and end.get("exit_code") is None:
            code = _signal_from_launchers(outcome, end.get("pid"), rank)
            if code is not None:
                end = dict(end, exit_code=code, error=_procs.crash_error(code))
        candidates.append(
            Failure(
                host=end.get("host"),
                rank=rank,
                local_rank=end.get("local_rank"),
                exit_code=end.get("exit_code"),
                timestamp=float(end["timestamp"]),
                error=end.get("error") or _procs.describe_exit(end.get("exit_code")),
                traceback_tail=tail,
                cause="crash"
                if end.get("crashed")
                else "exception"
                if end.get("traceback")
                else "exit",
            )
        )
    recorded = {c.rank for c in candidates}
    for rank, state in outcome.ranks.items():
        if rank in recorded or rank in ends or state.traceback_seen_at is None:
            continue
        tail = "\n".join(list(state.stderr_tail)[-TRACEBACK_LINES:])
        candidates.append(
            Failure(
                host=None,
                rank=rank,
                local_rank=state.local_rank if state.local_rank >= 0 else None,
                exit_code=None,
                timestamp=state.traceback_seen_at,
                error=_last_line(tail) or "traceback in the rank's output",
                traceback_tail=tail,
                cause="exception",
            )
        )
    if shared is not None:
        for other, mark in shared.host_marks().items():
            if other == host or mark.get("cause") != "failed" or mark.get("timestamp", 0) < since:
                continue
            candidates.append(
                Failure(
                    host=other,
                    rank=None,
                    local_rank=None,
                    exit_code=mark.get("exit_code"),
                    timestamp=float(mark["timestamp"]),
                    error=mark.get("error") or f"host {other} failed",
                    traceback_tail="",
                    cause="host",
                )
            )
    for spec in plan.main_processes:
        code = outcome.main_codes.get(spec.name)
        if not code:
            continue
        state = outcome.ranks.get(spec.rank) if spec.rank is not None else None
        tail_lines = (
            list(state.stderr_tail) if state else list(outcome.launcher_tails.get(spec.name, []))
        )
        tail = "\n".join(tail_lines[-TRACEBACK_LINES:])
        candidates.append(
            Failure(
                host=host,
                rank=spec.rank,
                local_rank=0 if spec.rank is not None else None,
                exit_code=code,
                timestamp=outcome.main_exit_times.get(spec.name, outcome.started_at),
                error=_last_line(tail) or f"{spec.name} failed ({_procs.describe_exit(code)})",
                traceback_tail=tail,
                cause="launcher" if spec.rank is None else "exit",
            )
        )
    if outcome.setup_error:
        candidates.append(
            _host_failure(host, 1, outcome.teardown_at or outcome.started_at, outcome.setup_error)
        )
    if outcome.waiter_code and outcome.waiter_reason:
        candidates.append(
            _host_failure(
                host,
                outcome.waiter_code,
                outcome.teardown_at or outcome.started_at,
                outcome.waiter_reason,
            )
        )
    ranked = [c for c in candidates if c.rank is not None and c.cause in _RANK_LEVEL]
    if ranked:
        candidates = ranked
    stop_at = outcome.teardown_at if outcome.teardown_reason in ("signal", "stop") else None
    if stop_at is not None:
        candidates = [c for c in candidates if c.timestamp < stop_at]
        if not candidates:
            signum = outcome.signal or signal.SIGTERM
            return Failure(
                host=host,
                rank=None,
                local_rank=None,
                exit_code=128 + signum,
                timestamp=stop_at,
                error=f"the job received {_procs.signal_name(signum)}; it was forwarded to every rank",
                traceback_tail="",
                cause="signal",
            )
    if not candidates:
        return None
    # Genuine failures before fallout; then earliest; on a tie the most informative.
    order = {"exception": 0, "exit": 1, "crash": 2, "launcher": 3, "host": 4, "setup": 5}
    return min(
        candidates,
        key=lambda c: (is_collateral(c), c.timestamp, order.get(c.cause, 9), c.rank or 0),
    )


def is_collateral(failure: Failure) -> bool:
    """Whether the failure reads like fallout of another rank's death (gloo/NCCL errors)."""
    if failure.cause not in ("exception", "exit"):
        return False
    tail = "\n".join(failure.traceback_tail.splitlines()[-3:])
    return bool(_COLLATERAL.search(failure.error) or _COLLATERAL.search(tail))


def _rank_summaries(outcome: Outcome, ranks_dir: str, host: str) -> list[dict[str, Any]]:
    _, ends = _records.read_records(ranks_dir)
    summaries: dict[int, dict[str, Any]] = {}
    for rank, end in ends.items():
        if end.get("timestamp", 0) < outcome.started_at - 1.0:
            continue
        summaries[rank] = {
            "rank": rank,
            "host": end.get("host"),
            "exit_code": end.get("exit_code"),
            "stderr_tail": _tail(end.get("traceback")),
        }
    for rank, state in outcome.ranks.items():
        entry = summaries.setdefault(
            rank, {"rank": rank, "host": host if state.local_rank >= 0 else None, "exit_code": None}
        )
        if state.stderr_tail:
            entry["stderr_tail"] = "\n".join(state.stderr_tail)
        entry.setdefault("stderr_tail", "")
    return [summaries[r] for r in sorted(summaries)]


def _header(failure: Failure) -> str:
    where = f"host {failure.host}" if failure.host else "an unknown host"
    if failure.rank is not None:
        local = f" (local rank {failure.local_rank})" if failure.local_rank is not None else ""
        who = f"Rank {failure.rank}{local} on {where}"
    else:
        who = f"Host {failure.host}" if failure.host else "The job"
    error = failure.error if len(failure.error) <= 300 else failure.error[:297] + "..."
    verb = "stopped" if failure.cause == "signal" else "failed"
    return f"{who} {verb} ({_procs.describe_exit(failure.exit_code)}): {error}"


def failure_report(failure: Failure, ranks: list[dict[str, Any]]) -> str:
    """The text of the failure file: the essentials first, within 1024 characters."""
    header = _header(failure)
    lines = [line[:200] for line in failure.traceback_tail.splitlines() if line.strip()]
    while True:
        block = "\n".join(["Last lines:"] + [f"  {line}" for line in lines]) if lines else ""
        head = header + ("\n" + block if block else "")
        if len(head) <= REASON_LIMIT - 2 or not lines:
            break
        lines = lines[1:]
    others = [
        r
        for r in ranks
        if r["rank"] != failure.rank
        and (r.get("exit_code") not in (0, None) or r.get("stderr_tail"))
    ]
    parts = [head[:REASON_LIMIT]]
    if others:
        parts.append(
            "Other ranks (failed later, or stopped when the job was torn down): "
            + ", ".join(
                f"{r['rank']} ({_procs.describe_exit(r.get('exit_code'), hint=False)})"
                for r in others[:32]
            )
        )
    parts.append("")
    for r in ranks:
        if r.get("stderr_tail"):
            parts.append(f"--- rank {r['rank']} ({r.get('host') or '?'}) stderr tail ---")
            parts.append(r["stderr_tail"])
    return "\n".join(parts).rstrip() + "\n"


def write_failure_files(
    p: ContractPaths,
    failure: Failure,
    outcome: Outcome,
    *,
    host: str,
    ranks_dir: str,
    user_message: str | None = None,
) -> None:
    """Write ``output/failure`` and ``output/launchbay-failure.json`` for ``failure``."""
    os.makedirs(p.output_dir, exist_ok=True)
    ranks = _rank_summaries(outcome, ranks_dir, host)
    text = failure_report(failure, ranks)
    if user_message:
        text += f"\n--- failure message written by the training script ---\n{user_message}\n"
    with open(p.failure_file, "w", encoding="utf-8") as f:
        f.write(text)
    document = asdict(failure)
    document["reporting_host"] = host
    document["ranks"] = ranks
    _records.write_record(p.failure_json_file, document)


def setup_failure(host: str, message: str, timestamp: float, exit_code: int = 1) -> Failure:
    """A host-level failure before/outside any rank (bad entry point, unreachable peers, ...)."""
    return _host_failure(host, exit_code, timestamp, message)
