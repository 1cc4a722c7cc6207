"""Local stand-ins for libraries that exist only inside SageMaker's images.

This directory (not the package) is what goes on a rank's ``sys.path``: it holds
top-level packages such as ``smdistributed`` (a local implementation of the
documented ``smdistributed.dataparallel`` API; see docs/smddp.md).

Who puts it there: the per-rank bootstrap (:mod:`launchbay.runtime._bootstrap`),
and only when ``LAUNCHBAY_STANDINS=1``. Only the local backends (``local_process``
and local Docker) set that variable; a SageMaker job never has it, so the runtime
there never adds this directory. The directory is *appended* to ``sys.path``, so a
real library anywhere on the path (site-packages, PYTHONPATH, the code directory)
is found first and the stand-in is never imported beside it.

This module is standard library only; the stand-ins import their framework
(torch, tensorflow) only when a script imports them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import MutableMapping

from launchbay.runtime.names import ENV

__all__ = ["DIRECTORY", "ENV_FLAG", "enabled", "add_to_sys_path", "add_to_pythonpath"]

#: The directory holding the stand-in top-level packages.
DIRECTORY = os.path.dirname(os.path.abspath(__file__))

#: Set to ``"1"`` by the local backends only.
ENV_FLAG = ENV.STANDINS


def enabled(environ: MutableMapping[str, str] | None = None) -> bool:
    """Whether this process belongs to a local job that may use the stand-ins."""
    environ = os.environ if environ is None else environ
    return environ.get(ENV_FLAG) == "1"


def add_to_sys_path() -> None:
    """Append :data:`DIRECTORY` to ``sys.path`` (last, so real libraries win)."""
    if DIRECTORY not in sys.path:
        sys.path.append(DIRECTORY)


def add_to_pythonpath(environ: MutableMapping[str, str]) -> None:
    """For non-Python entry points: add :data:`DIRECTORY` to ``PYTHONPATH``.

    ``PYTHONPATH`` comes before site-packages, so the directory is added only
    when no real ``smdistributed`` is importable here.
    """
    if importlib.util.find_spec("smdistributed") is not None:
        return
    parts = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if DIRECTORY not in parts:
        environ["PYTHONPATH"] = os.pathsep.join([*parts, DIRECTORY])
