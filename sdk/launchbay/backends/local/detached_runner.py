"""The process that runs a local job for ``fit(wait=False)``, detached from its caller.

``python -m launchbay.backends.local.detached_runner <module:Backend> <instance type>
<job root> <request file>`` is started by
:meth:`~launchbay.backends.local.control.LocalBackend.start_detached` through
:func:`launchbay.backends.local.detached.start` (its own session, stdin closed, its
output in ``$LAUNCHBAY_HOME/cli/<job>.log``), holding the job's name lock the caller
handed down. It reads the stored request (and removes its file), plans it again on
this machine (the one derivation, :func:`~launchbay.backends.plan.plan_request`),
runs it as the caller would have (:meth:`LocalBackend.run`: the control loop,
``MaxRuntimeInSeconds``, the watchdog), accepts stop requests (SIGTERM, handled
as Ctrl-C: the job ends Stopped) and follows the job to its end, printing its log
lines. Exit code: 0 when the job completed, 1 otherwise, 2 when it could not start.
"""

from __future__ import annotations

import importlib
import logging
import sys

from launchbay.backends.local import detached
from launchbay.backends.local.control import LocalBackend
from launchbay.backends.plan import plan_request
from launchbay.backends.state import JobState
from launchbay.errors import LaunchbayError
from launchbay.runtime.names import COMPLETED

__all__ = ["main"]

logger = logging.getLogger("launchbay.backends.local")


def _backend(target: str, instance_type: str, job_root: str) -> LocalBackend:
    module, _, qualname = target.partition(":")
    cls = getattr(importlib.import_module(module), qualname)
    if not (isinstance(cls, type) and issubclass(cls, LocalBackend)):
        raise TypeError(f"{target} is not a local backend")
    backend = cls.for_instance_type(instance_type or None)
    if not isinstance(backend, LocalBackend):
        raise TypeError(f"{target} made {backend!r}, not a local backend")
    backend._job_root = job_root  # the caller's (a backend made with job_root=)
    return backend


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(f"usage: {__doc__.splitlines()[2].strip()}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="launchbay: %(message)s")
    target, instance_type, job_root, request_file = args
    try:
        request = detached.take_request(request_file)
        backend = _backend(target, instance_type, job_root)
        plan = plan_request(request)  # GPUs looked for again, on this machine
        job = backend.run(plan)  # adopts the name lock the caller handed down
    except (LaunchbayError, OSError, ValueError, TypeError) as exc:
        print(f"launchbay: error: the local job did not start: {exc}", file=sys.stderr)
        return 2
    backend.accept_stops(job.name)  # SIGTERM (launchbay stop, job.stop()) stops the job
    try:
        description = backend.wait(job.name, logs="All")
    except KeyboardInterrupt:  # the job was stopped on the way out
        return 1
    return 0 if JobState.from_description(description).status == COMPLETED else 1


if __name__ == "__main__":
    sys.exit(main())
