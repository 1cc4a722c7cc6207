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

A rank is the process the runtime (or its launcher) started; what the processes
it starts in turn do is context, never a failure of a rank of its own. A user's
launcher (the entry point, which starts ``python -m torch.distributed.run`` or
its own workers) fails as itself, on its host and with its exit code, and the
reason adds what its child raised: from the child's record when the child ran
the bootstrap too (``rank-<N>.child-<pid>.json``), else from the tracebacks seen
in the rank's output before the rank ended. A traceback in the output of a rank
whose records are reachable is never a candidate: had the rank raised, its end
record would say so.

The root cause is the earliest rank-level candidate -- so a rank that raised
is reported, not its peers that died later of the broken collective or of
being torn down. Errors that read like fallout of another rank's death
(gloo "connection closed by peer", NCCL aborts and timeouts, broken pipes) only
win when nothing else failed: a crashed rank is seen by its runtime a few
milliseconds after its peers have already raised, so time alone would blame
them. Host-level candidates (a launcher's exit, another host's mark, setup
errors) count only when no rank-level candidate exists. Candidates after a
requested stop are consequences of it.

Written on failure: ``<base>/output/failure`` and
``<base>/output/launchbay-failure.json``. The failure file starts with the reason
(SageMaker shows the start of the file as FailureReason): whole lines within
:data:`HEAD_LIMIT` characters naming host, rank, exit code, the child's error, a
hint where one applies, and the last traceback lines (the earliest of those are
left out first, and the text says so). A line too long for its place
keeps its start and its end around ``[...]`` (:func:`._procs.shorten_line`);
nothing is cut mid-phrase. The other ranks and their stderr tails follow. ::

    {"host", "rank", "local_rank", "exit_code", "timestamp", "error",
     "traceback_tail", "cause", "context", "hint", "reporting_host",
     "ranks": [{"rank", "host", "exit_code", "stderr_tail"}, ...]}

Hint: where ``local_process`` hosts share this machine's loopback
(``$LAUNCHBAY_HOST_NETWORK=shared`` in the runtime's environment), a failure
whose text says a port was taken (``EADDRINUSE``, "Address already in use",
"Could not start gRPC server") gets a line naming that cause and the way out.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from launchbay.runtime import _procs, _records
from launchbay.runtime._shared import SharedDir
from launchbay.runtime._supervisor import Outcome
from launchbay.runtime.contract import ContractPaths
from launchbay.runtime.launchers.base import LaunchPlan
from launchbay.runtime.names import SETTING

__all__ = [
    "Failure",
    "find_root_cause",
    "is_collateral",
    "failure_report",
    "write_failure_files",
    "setup_failure",
    "network_hint",
    "HOST_NETWORK_VAR",
    "SHARED_LOOPBACK_HINT",
]

TRACEBACK_LINES = 20
REASON_LIMIT = 1024
#: The reason at the start of the failure file: within SageMaker's 1024 characters
#: after "AlgorithmError: ", with room for a line the client adds when it leaves
#: the lines after the reason out.
HEAD_LIMIT = REASON_LIMIT - len("AlgorithmError: ") - 128
#: How much of the head line the error and the child's error may take.
ERROR_LIMIT = 300
CONTEXT_LIMIT = 240
#: A traceback line in the reason.
LINE_LIMIT = 200

#: ``shared`` where the hosts of a local_process job share this machine's loopback
#: (set by the runtime of such a host); ``own`` where each has its own.
HOST_NETWORK_VAR = SETTING.HOST_NETWORK
SHARED_LOOPBACK_HINT = (
    "local_process hosts share this machine's loopback here, so the same port cannot be "
    "bound on two hosts; run with instance_type='local' (Docker), or allow unprivileged "
    "user namespaces (docs/local.md)."
)
_PORT_TAKEN = re.compile(
    r"EADDRINUSE|Address already in use|Could not start gRPC server", re.IGNORECASE
)

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
    #: What a process the rank started raised (``its child raised ...``), or "".
    context: str = ""
    #: A sentence on a known cause and the way out, or "".
    hint: str = ""


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
    starts, ends = _records.read_records(ranks_dir)
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
        if _has_records(starts, rank, since):
            continue  # it did not raise (its record would say so): a child's traceback
        tail = "\n".join(list(state.stderr_tail)[-TRACEBACK_LINES:])
        candidates.append(
            Failure(
                host=host if state.local_rank >= 0 else None,
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
        if not code or (spec.rank is not None and spec.rank in recorded):
            continue  # a rank's own end record says more than its exit code
        state = outcome.ranks.get(spec.rank) if spec.rank is not None else None
        tail_lines = (
            list(state.stderr_tail) if state else list(outcome.launcher_tails.get(spec.name, []))
        )
        tail = "\n".join(tail_lines[-TRACEBACK_LINES:])
        if spec.rank is not None and _has_records(starts, spec.rank, since):
            # Its output is its children's too, and it raised nothing (no end record).
            error = _procs.crash_error(code)
        else:
            error = _last_line(tail) or f"{spec.name} failed ({_procs.describe_exit(code)})"
        candidates.append(
            Failure(
                host=host,
                rank=spec.rank,
                local_rank=0 if spec.rank is not None else None,
                exit_code=code,
                timestamp=outcome.main_exit_times.get(spec.name, outcome.started_at),
                error=error,
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
    root = min(
        candidates,
        key=lambda c: (is_collateral(c), c.timestamp, order.get(c.cause, 9), c.rank or 0),
    )
    if root.rank is not None:
        root.context = _child_context(root, outcome, starts, ends, ranks_dir, since)
    root.hint = network_hint(root, outcome)
    return root


def _has_records(starts: dict[int, dict[str, Any]], rank: int, since: float) -> bool:
    """Whether ``rank`` started through the bootstrap in this run (so it records its end)."""
    start = starts.get(rank)
    return start is not None and float(start.get("timestamp") or 0) >= since


def _one_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _child_context(
    failure: Failure,
    outcome: Outcome,
    starts: dict[int, dict[str, Any]],
    ends: dict[int, dict[str, Any]],
    ranks_dir: str,
    since: float,
) -> str:
    """What a process the failing rank started raised first, as context ("" if nothing).

    A child's own record (it ran the bootstrap) says it best; else the first
    traceback in the rank's output before the rank's end record (its own
    traceback is printed after that record), when the rank records its end.
    """
    rank = failure.rank
    assert rank is not None  # noqa: S101 - callers pass rank failures only
    for child in _records.read_child_records(ranks_dir).get(rank, []):
        if float(child.get("timestamp") or 0) < since or not child.get("exit_code"):
            continue
        error = _one_line(str(child.get("error") or _procs.describe_exit(child.get("exit_code"))))
        if child.get("traceback"):
            return f"its child raised {error}"
        return f"its child failed: {error}"
    state = outcome.ranks.get(rank)
    if state is None or not _has_records(starts, rank, since):
        return ""
    end = ends.get(rank)
    until = float(end["timestamp"]) if end and end.get("timestamp") else float("inf")
    own = _one_line(str(end.get("error") or "")) if end else ""
    for seen_at, line, from_child in state.exceptions:
        if seen_at >= until or (own and _one_line(line) == own):
            continue
        if from_child:
            return f"its child raised {line}"
        return f"its output showed {line} before it ended"
    return ""


def network_hint(
    failure: Failure, outcome: Outcome | None = None, environ: Mapping[str, str] | None = None
) -> str:
    """:data:`SHARED_LOOPBACK_HINT` when a port was taken on hosts sharing the loopback.

    Only where ``$LAUNCHBAY_HOST_NETWORK`` is ``shared`` (``environ``, by default
    this runtime's environment), and only when the failure's error, traceback,
    child's error or the rank's stderr tail says a port was taken.
    """
    environ = os.environ if environ is None else environ
    if environ.get(HOST_NETWORK_VAR) != "shared":
        return ""
    texts = [failure.error, failure.traceback_tail, failure.context]
    state = outcome.ranks.get(failure.rank) if outcome and failure.rank is not None else None
    if state is not None:
        texts.extend(state.stderr_tail)
        texts.extend(line for _, line, _ in state.exceptions)
    return SHARED_LOOPBACK_HINT if any(_PORT_TAKEN.search(t) for t in texts if t) else ""


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
    # A host that failed to set up has no traceback after its reason: its message (which
    # names what to do) takes the room a rank's traceback lines would have.
    limit = ERROR_LIMIT if failure.rank is not None or failure.context else HEAD_LIMIT - 100
    error = _procs.shorten_line(_one_line(failure.error), limit)
    verb = "stopped" if failure.cause == "signal" else "failed"
    line = f"{who} {verb} ({_procs.describe_exit(failure.exit_code)}): {error}"
    if failure.context:
        line += "; " + _procs.shorten_line(_one_line(failure.context), CONTEXT_LIMIT)
    return line


def _head(failure: Failure) -> str:
    """The reason: whole lines within :data:`HEAD_LIMIT` characters (see the module doc)."""
    lines = [_procs.shorten_line(_header(failure), HEAD_LIMIT)]
    if failure.hint:
        lines.append(failure.hint)
    frames = [
        "  " + _procs.shorten_line(line, LINE_LIMIT)
        for line in failure.traceback_tail.splitlines()
        if line.strip()
    ]
    used = sum(len(line) + 1 for line in lines) - 1
    for dropped in range(len(frames) + 1):
        kept = frames[dropped:]
        if not kept:
            break
        title = "Last lines (earlier ones left out):" if dropped else "Last lines:"
        block = [title, *kept]
        if used + sum(len(line) + 1 for line in block) <= HEAD_LIMIT:
            lines.extend(block)
            break
    return "\n".join(lines)


def failure_report(failure: Failure, ranks: list[dict[str, Any]]) -> str:
    """The text of the failure file: the reason first (:func:`_head`), then the details."""
    head = _head(failure)
    others = [
        r
        for r in ranks
        if r["rank"] != failure.rank
        and (r.get("exit_code") not in (0, None) or r.get("stderr_tail"))
    ]
    parts = [head]
    if others:
        listed = ", ".join(
            f"{r['rank']} ({_procs.describe_exit(r.get('exit_code'), hint=False)})"
            for r in others[:32]
        )
        parts.append(
            _procs.shorten_line(
                f"Other ranks (failed later, or stopped when the job was torn down): {listed}",
                ERROR_LIMIT,
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
