"""A throwaway venv for a job's interpreter: this environment's packages, minus some.

``local_process`` hosts run the interpreter that called ``fit()``. A test that needs
that interpreter to differ from the test environment's -- a package installed into it
by the job, or one missing from it -- runs ``fit()`` in a driver script under
:func:`make` 's python. The venv is made without pip (fast, offline); its
site-packages holds a link to every entry of this environment's site-packages
except those ``without`` names, so what it imports is exactly this environment's
(launchbay, torch, pip) and what the job installs lands in the venv alone.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path


def _hidden(entry: str, without: Iterable[str]) -> bool:
    for name in without:
        pattern = re.escape(name).replace("_", "[-_]")
        if re.fullmatch(rf"{pattern}(-[^/]*\.(dist|egg)-info|\.pth|\.py)?", entry, re.IGNORECASE):
            return True
    return False


def make(root: Path, without: Iterable[str] = ()) -> Path:
    """A venv at ``root``; returns its python."""
    without = list(without)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    for directory in site.getsitepackages():
        if not os.path.isdir(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            target = purelib / entry
            if entry == "__pycache__" or _hidden(entry, without) or os.path.lexists(target):
                continue
            target.symlink_to(os.path.join(directory, entry))
    return python
