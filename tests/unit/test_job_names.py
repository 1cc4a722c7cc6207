"""Generated job names never repeat on this machine, whatever LAUNCHBAY_HOME each process
uses: local Docker jobs name their containers and network after the job, on one engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

NAME_IN_A_FROZEN_MILLISECOND = (
    "import time; time.time = lambda: 1_790_000_000.5\n"
    "from launchbay._names import name_from_base\n"
    "print(name_from_base('homes-apart'))\n"
)


def test_processes_with_homes_of_their_own_get_different_names_in_one_millisecond(tmp_path):
    procs = []
    for i in range(3):
        env = {**os.environ, "LAUNCHBAY_HOME": str(tmp_path / f"home-{i}")}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", NAME_IN_A_FROZEN_MILLISECOND],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    names = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs), names
    assert len(set(names)) == 3, names
    for name in names:  # SDK v2's pattern, in the frozen second: only the milliseconds differ
        assert re.fullmatch(r"homes-apart-2026-09-21-14-13-20-\d{3}", name), name
