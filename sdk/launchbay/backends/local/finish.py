"""How a local job ends: failure triage across hosts, then checkpoints, outputs and the final record.

:func:`finish_job` is the one way a local job ends, with one set of rules (final and
secondary status, checkpoints, outputs, end time, the final record), whether its client
is alive (the supervisor, with what it saw of the hosts) or gone: orphan recovery
(:meth:`LocalBackend.finish_orphan <launchbay.backends.local.control.LocalBackend.finish_orphan>`)
takes the job up from its record and asks :func:`orphan_outcome` what the hosts left
behind, then ends it through the same function.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from launchbay.backends.local.logs import log_tail
from launchbay.backends.local.record import REASON_LIMIT, LocalJob
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
#: The secondary statuses of a job stopped by a limit (its last one too).
_LIMITS = ("MaxRuntimeExceeded", "MaxWaitTimeExceeded")


def _signal_death(code: int | None) -> bool:
    """Whether a host's exit code says it was killed by a signal (``-N``, or ``128 + N``)."""
    return code is not None and (code < 0 or code > 128)


def _host_reports(job: LocalJob) -> list[tuple[dict[str, Any], str]]:
    """Each host's failure report (``output/launchbay-failure.json``) with the host, if any."""
    reports: list[tuple[dict[str, Any], str]] = []
    for host in job.hosts:
        try:
            document = json.loads(job.layout.read_host_file(host, "launchbay-failure.json"))
        except ValueError:
            continue
        if isinstance(document, dict):
            reports.append((document, host))
    return reports


def failure_reason(job: LocalJob, first_host: str, code: int | None) -> str:
    """The root cause across hosts: the earliest failure any host reported.

    ``first_host`` is the host seen failing first, with exit code ``code``. Killed by a
    signal without a report of its own, it is the cause, not the hosts stopped after it.

    Whole lines within the 1024 characters of FailureReason: the lines that do
    not fit are left out whole, and a last line says how many and where the
    whole report is (:func:`launchbay.runtime.for_client.fit_lines`).
    """
    reports = _host_reports(job)
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
            tail = log_tail(job.layout.log_file(first_host), _TAIL_LINES)
            how = describe_exit(code)
            text = f"Host {first_host} failed: {how}.\n" + "\n".join(tail)
    whole = os.path.join(job.layout.host_dir(host), "output", "failure")
    if not reports and not os.path.exists(whole):
        whole = job.layout.log_file(host)

    def left_out(count: int) -> str:
        lines = "line" if count == 1 else "lines"
        return f"[{count} more {lines} left out; the whole report: {whole}]"

    lines = ("AlgorithmError: " + text.strip()).splitlines()
    if sum(len(line) + 1 for line in lines) - 1 > REASON_LIMIT and "" in lines:
        # The report's first paragraph is the reason (the runtime keeps it short):
        # the details after it (the ranks' stderr tails) are left out whole.
        reason = lines[: lines.index("")]
        return fit_lines(reason, REASON_LIMIT, left_out, more=len(lines) - len(reason))
    return fit_lines(lines, REASON_LIMIT, left_out)


def orphan_outcome(
    job: LocalJob, *, started: bool, reason: str | None = None
) -> tuple[str, str | None]:
    """``(status, reason)`` of a job whose client went away, from what its hosts left behind.

    ``job`` is taken up from its record (its hosts stopped when ``started``). What the
    client would have found decides, by the live path's rules: every host succeeded
    (``output/success``): ``Completed``; a host failed by itself (a report that is not
    fallout of the stop): ``Failed`` with :func:`failure_reason`. Otherwise the job
    failed because its client went away, and says so (``reason`` when given). A record
    left while the client was ending the job (``LocalEnding``) never ends ``Completed``:
    what the client found is not known. :func:`finish_job` then ends the job.
    """
    if job.ending is not None and reason is None:
        # Its client was already ending it (writing the checkpoints and outputs) and
        # never recorded the end: it went away, or could not write status.json. What
        # it would have said is unknown: the job failed, and says why.
        found = job.ending[1] or f"it was ending {job.ending[0]}"
        return FAILED, (
            f"ClientError: the end of this local job was not recorded: its client "
            f"({job.client}) was saving the checkpoints and outputs and went away, or could "
            f"not write {job.layout.status_file}, before it recorded how the job ended "
            f"({found}). launchbay saved the checkpoints and outputs again."
        )
    if started and all(
        os.path.exists(os.path.join(job.layout.host_dir(h), "output", "success")) for h in job.hosts
    ):
        return COMPLETED, None
    if reason is not None:
        return FAILED, reason
    own = [
        host
        for document, host in _host_reports(job)
        if document.get("cause") not in _FALLOUT_CAUSES
    ]
    if started and own:
        return FAILED, failure_reason(job, own[0], None)
    return FAILED, (
        f"ClientError: the process that ran this local job ({job.client}) went away before "
        "the job ended (it was killed, or its notebook kernel was closed). launchbay "
        "stopped the hosts (SIGTERM, SIGKILL after the grace period) and saved the "
        "checkpoints and outputs."
    )


def finish_job(job: LocalJob, status: str, reason: str | None) -> None:
    """End ``job`` with ``status`` and ``reason``: the one way a local job ends.

    The supervisor calls it with what it saw of the hosts, orphan recovery with
    :func:`orphan_outcome`. A stop turns any end but success into ``Stopped``;
    checkpoints are saved and the outputs written in every end state, and a
    ``Completed`` job whose checkpoints or outputs could not be written ends
    ``Failed``, naming what failed; then the end time and the final record.
    """
    # A job stopped by a limit keeps it as its last secondary status, as on SageMaker.
    limit = job.secondary if job.secondary in _LIMITS and status == STOPPED else None
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
    job._set_secondary(limit or status, _final_message(status, reason))
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
        reason.splitlines(), REASON_LIMIT, lambda count: f"[{count} more lines left out]"
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
