"""What the install extras bring (setup.cfg)."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _extra(name: str) -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    raw = config["options.extras_require"][name]
    return [line.split("#")[0].strip() for line in raw.splitlines() if line.split("#")[0].strip()]


def _names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_torch_extra_brings_numpy():
    # Without numpy every torch rank prints "Failed to initialize NumPy" once.
    assert {"torch", "numpy"} <= _names(_extra("torch"))


def test_test_extra_can_run_notebooks_in_a_kernel():
    assert {"nbclient", "nbformat", "ipykernel"} <= _names(_extra("test"))


def test_docker_extra_brings_the_wheel_build_backend():
    # images.build_runtime_wheel runs pip wheel --no-build-isolation: setuptools must be there.
    for extra in ("docker", "test"):
        assert {"docker", "setuptools"} <= _names(_extra(extra))
