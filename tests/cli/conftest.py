"""Fixtures for driving the real ``launchbay`` command in subprocesses.

* ``cli_env`` (function scope): the environment of one test's commands: the moto
  AWS environment of ``tests/conftest.py`` (so ``ml.*`` jobs go to the moto
  server through ``AWS_ENDPOINT_URL``), ``LAUNCHBAY_HOME`` in a temporary
  directory, a short stop grace period and no colours.
* ``moto_env`` (function scope): ``cli_env`` on a freshly reset moto server.
* ``run_cli``: runs ``python -m launchbay.cli ARGS`` with that environment and
  returns the completed process (text stdout/stderr).
* ``project``: a temporary directory with ``src/train.py`` (a plain script:
  ``--fail`` raises, ``--sleep`` sleeps, a model file is written) and a helper
  to write spec files into it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

TRAIN_SCRIPT = """\
import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--fail", default="")
parser.add_argument("--sleep", type=float, default=0.0)
args, _ = parser.parse_known_args()
print(f"epochs={args.epochs} on {os.environ['SM_CURRENT_HOST']}", flush=True)
if args.sleep:
    print("sleeping", flush=True)
    time.sleep(args.sleep)
if args.fail:
    raise RuntimeError(f"boom: {args.fail}")
with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w") as f:
    f.write("trained")
print("done", flush=True)
"""


class Project:
    """A temporary project: ``src/train.py`` and spec files next to it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / "src" / "train.py").write_text(TRAIN_SCRIPT)

    def spec(self, text: str, name: str = "job.yaml") -> Path:
        path = self.root / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path


RunCli = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def cli_env(moto_server: str, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)  # moto_server has pointed the AWS variables at the server
    env.update(
        {
            "LAUNCHBAY_HOME": str(tmp_path / "home"),
            "LAUNCHBAY_GRACE_SECONDS": "2",
            "NO_COLOR": "1",
            "PYTHONUNBUFFERED": "1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
    )
    return env


@pytest.fixture
def moto_env(aws: str, cli_env: dict[str, str]) -> dict[str, str]:
    """``cli_env`` on a freshly reset moto server (the ``aws`` fixture resets it)."""
    return cli_env


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "project")


@pytest.fixture
def run_cli(cli_env: dict[str, str], project: Project) -> RunCli:
    def run(*args: str, timeout: float = 60, env: dict[str, str] | None = None, **kw):
        return subprocess.run(
            [sys.executable, "-m", "launchbay.cli", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=kw.pop("cwd", project.root),
            env=env if env is not None else cli_env,
            **kw,
        )

    return run
