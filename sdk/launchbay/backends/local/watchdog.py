"""Finishes a local job whose client process died: ``python -m launchbay.backends.local.watchdog``.

:meth:`LocalBackend.run <launchbay.backends.local.control.LocalBackend.run>` starts one per
job, in its own session (a closed notebook kernel or a ``kill`` of the client's
process group does not reach it), with::

    python -m launchbay.backends.local.watchdog <module:Backend> <job root> <job name> <grace>

It blocks on the job's name lock (``<job root>/.locks/<name>.lock``), which the
client holds for the job's life and the kernel lets go when the client dies.
Once it has the lock it reads ``status.json``: a final state means there is
nothing to do (a client that ends its job normally kills its watchdog first
anyway). Otherwise the client went away mid-job, and the watchdog finishes the
job as the client would have: the hosts are stopped (SIGTERM, SIGKILL after the
grace period), checkpoints and outputs are saved, and the final state is
written (see :meth:`LocalBackend.finish_orphan`).

Nothing heavy is imported until the lock is taken: a waiting watchdog costs one
sleeping process.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys

from launchbay.backends.state import JobState
from launchbay.runtime.names import TERMINAL_STATUSES


def main(argv: list[str]) -> int:
    """Wait for the client to let the job go; finish the job if it had not ended."""
    target, job_root, name, grace = argv[1:5]
    fd = os.open(os.path.join(job_root, ".locks", f"{name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with open(os.path.join(job_root, name, "status.json"), encoding="utf-8") as f:
            status = JobState.from_description(json.load(f)).status
    except (OSError, ValueError, AttributeError):  # missing or damaged: finish_orphan says so
        status = None
    if status in TERMINAL_STATUSES:
        return 0
    import importlib
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    module, _, cls = target.partition(":")
    backend = getattr(importlib.import_module(module), cls)(
        job_root=job_root, grace_seconds=float(grace)
    )
    from launchbay.errors import LaunchbayError

    try:
        backend.finish_orphan(name)
    except LaunchbayError as exc:  # a damaged job directory: nothing more to do here
        logging.getLogger("launchbay.backends.local").error(
            "Could not finish job %s: %s", name, exc
        )
        return 1
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
