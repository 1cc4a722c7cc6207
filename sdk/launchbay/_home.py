"""The local root every local file of launchbay lives under: ``$LAUNCHBAY_HOME``, else ``~/.launchbay``.

Jobs (``jobs/``), the S3 and code caches (``cache/``), outputs of local runs
(``output/``), job names and detached clients each have a folder there.
"""

from __future__ import annotations

import os

__all__ = ["local_home"]


def local_home() -> str:
    """The local root: ``$LAUNCHBAY_HOME``, else ``~/.launchbay`` (absolute), read at each call."""
    root = os.environ.get("LAUNCHBAY_HOME") or "~/.launchbay"
    return os.path.abspath(os.path.expanduser(root))
