"""How a local job ends: failure triage across hosts, then checkpoints, outputs and the final record."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from launchbay.backends.local.logs import _log_tail
from launchbay.backends.local.record import _REASON_LIMIT, LocalJob
from launchbay.runtime.for_client import describe_exit, fit_lines
from launchbay.runtime.names import (
    COMPLETED,
    FAILED,
    STOPPED,
)

logger = logging.getLogger("launchbay.backends.local")


#: Last lines of the failing host given in a failure reason without a report.
_TAIL_LINES = 20
_FAILURE_CAUSE_ORDER = {
    "exception": 0,
    "exit": 1,
    "crash": 2,
    "launcher": 3,
    "host": 4,
    "setup": 5,
    "signal": 6,
}
#: Reports of a host that ended because of another's failure: stopped by the job's end
#: ("the job received SIGTERM"), or naming another host's failure.
_FALLOUT_CAUSES = ("signal", "host")


def _signal_death(code: int | None) -> bool:
    """Whether a host's exit code says it was killed by a signal (``-N``, or ``128 + N``)."""
    return code is not None and (code < 0 or code > 128)


def failure_reason(job: LocalJob, first_host: str, code: int | None) -> str:
    """The root cause across hosts: the earliest failure any host reported.

    ``first_host`` is the host seen failing first, with exit code ``code``. Killed by a
    signal without a report of its own, it is the cause, not the hosts stopped after it.

    Whole lines within the 1024 characters of FailureReason: the lines that do
    not fit are left out whole, and a last line says how many and where the
    whole report is (:func:`launchbay.runtime.for_client.fit_lines`).
    """
    reports: list[tuple[dict[str, Any], str]] = []
    for host in job.hosts:
        try:
            document = json.loads(job.layout.read_host_file(host, "launchbay-failure.json"))
        except ValueError:
            continue
        if isinstance(document, dict):
            reports.append((document, host))
    if first_host not in {host for _, host in reports} and _signal_death(code):
        # The first host to fail was killed (SIGKILL: the out-of-memory killer) and could
        # write no report; the others' reports of being stopped are fallout of it.
        reports = [r for r in reports if str(r[0].get("cause")) not in _FALLOUT_CAUSES]
    if reports:
        document, host = min(
            reports,
            key=lambda r: (
                float(r[0].get("timestamp") or 0),
                _FAILURE_CAUSE_ORDER.get(str(r[0].get("cause")), 9),
                r[1] != r[0].get("host"),
            ),
        )
        text = job.layout.read_host_file(host, "failure")
        if not text:
            text = _compose_reason(document)
        job.failed_host = host
    else:
        host = job.failed_host = first_host
        text = job.layout.read_host_file(first_host, "failure")
        if not text:
            tail = _log_tail(job.layout.log_file(first_host), _TAIL_LINES)
            how = describe_exit(code)
            text = f"Host {first_host} failed: {how}.\n" + "\n".join(tail)
    whole = os.path.join(job.layout.host_dir(host), "output", "failure")
    if not reports and not os.path.exists(whole):
        whole = job.layout.log_file(host)

    def left_out(count: int) -> str:
        lines = "line" if count == 1 else "lines"
        return f"[{count} more {lines} left out; the whole report: {whole}]"

    lines = ("AlgorithmError: " + text.strip()).splitlines()
    if sum(len(line) + 1 for line in lines) - 1 > _REASON_LIMIT and "" in lines:
        # The report's first paragraph is the reason (the runtime keeps it short):
        # the details after it (the ranks' stderr tails) are left out whole.
        reason = lines[: lines.index("")]
        return fit_lines(reason, _REASON_LIMIT, left_out, more=len(lines) - len(reason))
    return fit_lines(lines, _REASON_LIMIT, left_out)


def finish_job(job: LocalJob, status: str, reason: str | None) -> None:
    """Save checkpoints and outputs, then record the end state."""
    if job.stop_requested.is_set() and status != COMPLETED:
        status = STOPPED
        reason = reason or (f"The job was stopped: {job.stop_reason}" if job.stop_reason else None)
    with job.lock:
        job.ending = (status, reason)
    job.layout.forget_secrets()
    job._set_secondary("Uploading", "Uploading generated training model")
    try:
        job.stager.save_checkpoints(job.host_plan, job.layout)
    except Exception as exc:  # report it; the outputs must still be written
        logger.error("Saving the checkpoints of job %s failed: %s", job.name, exc)
        if status == COMPLETED:
            status, reason = FAILED, f"ClientError: saving checkpoints failed: {exc}"
    try:
        job.model_artifacts = job.stager.collect_outputs(
            job.host_plan, job.layout, reason if status != COMPLETED else None
        )
    except Exception as exc:  # report it; the job must still end
        logger.error("Writing the outputs of job %s failed: %s", job.name, exc)
        if status == COMPLETED:
            status, reason = FAILED, f"ClientError: writing the outputs failed: {exc}"
    job._set_secondary(status, _final_message(status, reason))
    with job.lock:
        job.end_time = job.transitions[-1]["StartTime"]
        job.transitions[-1]["EndTime"] = job.end_time
        job.status = status
        job.failure_reason = _whole_lines(reason) if reason else None
    job.save_final()
    status = job.status
    job.release_name()
    job.done.set()
    job.notify()
    if status == COMPLETED:
        logger.info("Local training job %s completed; model: %s", job.name, job.model_artifacts)
    else:
        logger.info(
            "Local training job %s ended %s (logs: %s)", job.name, status, job.layout.logs_dir
        )


def _whole_lines(reason: str) -> str:
    """A reason within 1024 characters, as whole lines (ones from failure_reason() fit)."""
    return fit_lines(
        reason.splitlines(), _REASON_LIMIT, lambda count: f"[{count} more lines left out]"
    )


def _final_message(status: str, reason: str | None) -> str:
    if status == COMPLETED:
        return "Training job completed"
    if reason:
        return reason.splitlines()[0][:200]
    return f"Training job {status.lower()}"


def _compose_reason(document: Mapping[str, Any]) -> str:
    host = document.get("host") or document.get("reporting_host") or "an unknown host"
    rank = document.get("rank")
    who = f"Rank {rank} on host {host}" if rank is not None else f"Host {host}"
    text = f"{who} failed with exit code {document.get('exit_code')}: {document.get('error') or ''}"
    if document.get("context"):
        text += f"; {document['context']}"
    if document.get("hint"):
        text += f"\n{document['hint']}"
    tail = str(document.get("traceback_tail") or "").strip()
    return text + ("\nLast lines:\n" + tail if tail else "")
