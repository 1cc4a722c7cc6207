"""Fixtures for the runtime tests (see :mod:`.jobs`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .jobs import JobFactory


@pytest.fixture
def local_job(tmp_path: Path) -> Iterator[JobFactory]:
    """Factory of local multi-host jobs; asserts none of their processes is left."""
    factory = JobFactory(tmp_path)
    yield factory
    left = []
    for job in factory.jobs:
        remaining = job.leftovers()
        if remaining:
            left.append((job.root, [p.info.get("cmdline") for p in remaining]))
        job.kill()
    assert not left, f"processes left behind: {left}"
