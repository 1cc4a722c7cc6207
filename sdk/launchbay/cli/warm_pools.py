"""``launchbay stop --warm-pool`` and the warm pools ``launchbay list`` shows (issue 36 item 2).

The pools are this ``$LAUNCHBAY_HOME``'s (:mod:`launchbay.backends.local.warm_pool`).
Listing them first ends those whose period is over or whose containers an engine
restart took away; nothing here touches the Docker engine when there are none.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
from typing import Any

from launchbay._docker import docker_client
from launchbay._home import local_home
from launchbay.backends.local import warm_pool
from launchbay.cli.console import EXIT_OK, info
from launchbay.cli.output import print_json
from launchbay.errors import ConfigurationError

__all__ = ["cmd_stop_pools", "live_pools", "print_pools"]


def _has_pools() -> bool:
    return os.path.isdir(os.path.join(local_home(), warm_pool.POOLS))


def live_pools() -> list[dict[str, Any]]:
    """The pools that still hold hosts (after a sweep); [] without touching the engine if none."""
    if not _has_pools():
        return []
    client = docker_client("Warm pools")
    return [p for p in warm_pool.list_pools(client) if p.get("Status") != "Terminated"]


def _when(stamp: Any) -> str:
    if not isinstance(stamp, int | float):
        return "-"
    return _dt.datetime.fromtimestamp(stamp, _dt.timezone.utc).strftime("%H:%M:%S UTC")


def print_pools(pools: list[dict[str, Any]]) -> None:
    """The pools as a table under the jobs (nothing when there are none)."""
    if not pools:
        return
    print()
    print(f"{'WARM POOL':<26} {'STATUS':<10} {'HOSTS':>5}  {'UNTIL':<13} {'LAST JOB':<40} IMAGE")
    for pool in pools:
        until = _when(pool.get("ExpiresAt")) if pool.get("Status") == "Available" else "-"
        print(
            f"{pool['WarmPool']:<26} {pool.get('Status') or '-':<10} "
            f"{pool.get('InstanceCount') or 0:>5}  {until:<13} {pool.get('LastJob') or '-':<40} "
            f"{pool.get('Image') or '-'}"
        )


def cmd_stop_pools(args: argparse.Namespace) -> int:
    """End every live warm pool of this local root (or the one ``args.job`` names)."""
    key = args.job or None
    if not _has_pools():
        ended: list[str] = []
    else:
        ended = warm_pool.stop_pools(docker_client("Warm pools"), key)
    if key is not None and not ended:
        known = [p["WarmPool"] for p in warm_pool.list_pools()]
        raise ConfigurationError(
            f"launchbay stop --warm-pool: no live warm pool {key!r} in {local_home()}. "
            f"Accepted: a pool `launchbay list` shows ({', '.join(known) or 'none'}), "
            "or no name to end them all."
        )
    if getattr(args, "output", None) == "json":
        print_json({"warm_pools_ended": ended})
    elif ended:
        info(f"ended {len(ended)} warm pool(s): {', '.join(ended)}")
    else:
        info("no warm pool to end")
    return EXIT_OK
