"""Cross-process control: acting on a local job that another process runs.

A local job runs in its client process. What the local backends do about a job
run elsewhere lives here, on the files of :mod:`.detached` and the name locks
of :mod:`.record`:

* :func:`start_runner`: ``fit(wait=False)``'s job run by a runner process of its
  own (:mod:`.detached_runner`), its request stored for it;
* :func:`stop_elsewhere`: ``stop()`` of a job this process does not run: through
  its runner when that accepts stop requests (SIGTERM), else, once its client is
  gone, by waiting for its watchdog to let the name go and finishing it
  (:func:`~launchbay.backends.local.recovery.finish_orphan`);
* :func:`wait_for_end`: following a job another process runs to its end (its
  status file), failing it when nothing runs it any more.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from launchbay.backends.local import detached
from launchbay.backends.local.hosts import RUNTIME_MARGIN, grace_from
from launchbay.backends.local.record import LOCKS_DIR, NameLock, client_pid
from launchbay.backends.local.recovery import (
    LocalJobs,
    finish_orphan,
    runs_elsewhere,
    stored_plan,
)
from launchbay.backends.plan import JobPlan
from launchbay.backends.state import JobState
from launchbay.errors import JobError
from launchbay.runtime.for_client import is_alive
from launchbay.runtime.names import FAILED

logger = logging.getLogger("launchbay.backends.local")

__all__ = ["start_runner", "stop_elsewhere", "wait_for_end"]


def start_runner(jobs: LocalJobs, plan: JobPlan, lock: NameLock) -> None:
    """Run the (checked) plan's job in a runner process of its own; ``lock`` is its name's.

    The runner (:mod:`launchbay.backends.local.detached_runner`) makes a backend of
    ``jobs``' class and runs the stored request as ``run`` would; the lock is handed
    down to it (:func:`.detached.start`).

    Raises:
        JobError: the runner exited before the job started (naming its output).
    """
    name = plan.name
    try:
        request_file = detached.write_request(name, plan.request)
    except BaseException:
        lock.release()
        raise
    target = f"{type(jobs).__module__}:{type(jobs).__qualname__}"
    command = [
        sys.executable, "-m", "launchbay.backends.local.detached_runner",
        target, plan.placement.instance_type or "", jobs.job_root, request_file,
    ]  # fmt: skip
    run = detached.start(name, command, os.path.join(jobs.job_dir(name), "status.json"), lock=lock)
    if not run.started:
        raise JobError(
            f"The local training job {name!r} did not start: its runner exited with "
            f"code {run.exit_code} (output in {run.log_path}):\n{run.output.strip()}"
        )
    logger.info("Started local training job %s detached (runner pid %d)", name, run.pid)


def stop_elsewhere(jobs: LocalJobs, name: str) -> None:
    """Stop job ``name``, which this process does not run, and wait (see ``LocalBackend.stop``).

    Raises:
        JobError: another process runs the job and does not accept stop
            requests (stop it there), or the job did not end in time.
    """
    # a job whose client is gone is finished here
    state = JobState.from_description(jobs.describe(name))
    if state.terminal:
        return
    grace = grace_from(stored_plan(jobs.job_dir(name), name), jobs.grace_seconds)
    if detached.stop(name, jobs.describe, grace) is not None:
        return
    pid = client_pid(state.client or "")
    if pid is not None and not is_alive(pid):
        # Its watchdog is finishing it: wait until it lets the name go.
        path = os.path.join(jobs.job_root, LOCKS_DIR, f"{name}.lock")
        deadline = time.monotonic() + grace + RUNTIME_MARGIN + 60
        while time.monotonic() < deadline:
            lock = NameLock.try_acquire(path)
            if lock is not None:
                try:
                    finish_orphan(jobs, name)
                finally:
                    lock.release()
                return
            time.sleep(0.2)
    raise JobError(
        f"Local training job {name!r} was started by another process "
        f"({state.client}) that still runs it; stop it there "
        "(Ctrl-C, or SIGTERM to that process)."
    )


def wait_for_end(jobs: LocalJobs, name: str, description: dict[str, Any]) -> dict[str, Any]:
    """Wait for a job another process runs to end (its status file); its last description."""
    gone = 0
    while not (state := JobState.from_description(description)).terminal:
        gone = gone + 1 if state.training and not runs_elsewhere(jobs, name) else 0
        if gone >= 3:  # no host process for a while: whoever ran the job is gone
            description["TrainingJobStatus"] = FAILED
            description["FailureReason"] = (
                "The process that ran this local job ended before the job did; "
                f"see {jobs.job_dir(name)}"
            )
            break
        time.sleep(1.0)
        description = jobs.describe(name)
    return description
