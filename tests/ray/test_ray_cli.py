"""``launchbay submit --instance-type ray`` and ``status``/``logs``/``list``/``stop`` of a Ray job.

The commands run in subprocesses, as a user runs them; the cluster is the session's
(tests/ray/conftest.py), named to them by ``RAY_ADDRESS``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

from ray_cluster_helpers import SCRIPTS

SPEC = f"""
    image_uri: launchbay/pytorch-training:2.8.0-cpu-py312
    entry_point: sleep.py
    source_dir: {SCRIPTS}
    instance_type: local_process
    instance_count: 2
"""


def test_submit_no_wait_then_status_logs_list_and_stop(ray_cluster, ray_home, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(textwrap.dedent(SPEC).lstrip("\n"))
    env = dict(
        os.environ,
        RAY_ADDRESS=ray_cluster.address,
        LAUNCHBAY_HOME=str(ray_home),
        LAUNCHBAY_GRACE_SECONDS="2",
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",
    )

    def cli(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "launchbay.cli", *args],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path,
        )  # fmt: skip

    submitted = cli(
        "submit", str(spec), "--instance-type", "ray", "--no-wait", "--output", "json",
        "--job-name", "ray-detached",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["status"] == "InProgress"
    log_file = ray_home / "jobs" / "ray-detached" / "logs" / "algo-2.log"
    deadline = time.monotonic() + 60
    while "sleeping on algo-2" not in (log_file.read_text() if log_file.exists() else ""):
        assert time.monotonic() < deadline, cli("logs", "ray-detached").stdout
        time.sleep(0.2)
    status = cli("status", "ray-detached", "--output", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "InProgress"
    listed = cli("list", "--backend", "ray")
    assert listed.returncode == 0, listed.stderr
    assert "ray-detached" in listed.stdout and "InProgress" in listed.stdout
    logs = cli("logs", "ray-detached")
    assert logs.returncode == 0, logs.stderr
    assert "algo-1 | " in logs.stdout and "sleeping on algo-2" in logs.stdout
    stopped = cli("stop", "ray-detached", "--output", "json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "Stopped"
