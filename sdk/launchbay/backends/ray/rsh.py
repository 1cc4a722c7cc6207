"""mpirun's launch agent on a Ray cluster: ``python -m launchbay.backends.ray.rsh HOST COMMAND...``.

What ``ssh HOST COMMAND`` is to mpirun on SageMaker: the master host's
``mpirun`` runs it (``OMPI_MCA_plm_rsh_agent``, set by
:class:`~launchbay.backends.ray.agent.HostAgent`) to start ``orted`` on
another host, and the master's runtime runs it to hand the workers its exit
status. ``HOST`` is the address mpirun was given for the host
(``LAUNCHBAY_HOST_ADDRESSES``, read by the runtime's own reader); the command
runs under ``/bin/sh -c`` on that host's node, started by the host's actor
(:meth:`HostAgent.run_command`) with the host's environment, in its tree. Its
output comes back here, and this process exits with its exit status, as ssh
would. The cluster is ``RAY_ADDRESS`` (the agent sets it to its own cluster's);
the actors are found by the names in ``LAUNCHBAY_RAY_ACTORS``.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from launchbay.runtime.settings import RuntimeSettings

__all__ = ["main", "ACTORS_SETTING", "NAMESPACE"]

#: JSON: host name -> the name of its actor (set by the Ray host runner).
ACTORS_SETTING = "LAUNCHBAY_RAY_ACTORS"
#: The Ray namespace of launchbay's host actors.
NAMESPACE = "launchbay"


def main(argv: list[str] | None = None) -> int:
    """Run ``COMMAND`` on ``HOST`` through its actor; the command's exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m launchbay.backends.ray.rsh HOST COMMAND...", file=sys.stderr)
        return 2
    target, command = args[0], " ".join(args[1:])
    addresses = RuntimeSettings.from_environ().host_addresses
    by_address = {address: host for host, address in addresses.items()}
    host = target if target in addresses else by_address.get(target)
    actors = json.loads(os.environ.get(ACTORS_SETTING) or "{}")
    if host is None or host not in actors:
        print(f"ray_rsh: no host of this job at {target!r} ({addresses})", file=sys.stderr)
        return 255
    import ray

    ray.init(
        address=os.environ.get("RAY_ADDRESS") or "auto",
        namespace=NAMESPACE,
        log_to_driver=False,
        logging_level=logging.ERROR,
    )
    try:
        actor = ray.get_actor(actors[host], namespace=NAMESPACE)
        number = ray.get(actor.run_command.remote(command))
        offset, code = 0, None
        out = sys.stdout.buffer
        while code is None:
            data, code = ray.get(actor.command_poll.remote(number, offset, 1.0))
            if data:
                out.write(data)
                out.flush()
                offset += len(data)
        return int(code)
    except Exception as exc:  # the host's actor or node is gone: as an ssh that cannot connect
        print(f"ray_rsh: {host}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 255
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
