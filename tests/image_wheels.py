"""The wheelhouse the training images are built with, the same folder ``.ci/run`` passes.

Shared by tests/docker and any other test that builds the images, so the image's context
hash (which covers the wheelhouse) matches CI's and the image is reused, not rebuilt.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

TORCH_VERSION = "2.13.0"
ROOT = Path(__file__).resolve().parent.parent


def torch_wheels() -> str | None:
    """The first of $PIP_FIND_LINKS' directories, then /opt/wheels, that holds torch's wheel.

    The same rule as .ci/run's.
    """
    for entry in [*(os.environ.get("PIP_FIND_LINKS") or "").split(), "/opt/wheels"]:
        path = entry[len("file://") :] if entry.startswith("file://") else entry
        if os.path.isdir(path) and glob.glob(os.path.join(path, f"torch-{TORCH_VERSION}*.whl")):
            return path
    return None


def image_wheelhouse() -> str:
    """``.ci/horovod.sh --wheelhouse <torch wheels>``: Horovod's cached wheel beside torch's.

    Builds Horovod (minutes) when this machine has no cached wheel for the installed torch,
    TensorFlow and Python (docs/horovod.md). Raises ``RuntimeError`` with the script's
    output when that fails.
    """
    torch_dir = torch_wheels()
    script = ROOT / ".ci" / "horovod.sh"
    # The script compiles against (and keys its cache by) the frameworks of this Python.
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(script), "--wheelhouse", *([torch_dir] if torch_dir else [])],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{script} --wheelhouse failed:\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1]
