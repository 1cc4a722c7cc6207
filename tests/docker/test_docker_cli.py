"""The real ``launchbay`` command with ``--instance-type local``: submit, follow from another shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from job_outputs import containers_left
from launchbay.backends.docker import LABEL_JOB_DIR

pytestmark = pytest.mark.docker

SPEC = """\
entry_point: train.py
source_dir: src
role: arn:aws:iam::123456789012:role/SageMakerRole
instance_type: ml.m5.xlarge
instance_count: 2
hyperparameters:
  sleep: 4
"""
TRAIN = """\
import os, time
print("start on", os.environ["SM_CURRENT_HOST"], flush=True)
time.sleep(float(os.environ["SM_HP_SLEEP"]))
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("trained")
print("done on", os.environ["SM_CURRENT_HOST"], flush=True)
"""


def test_submit_detached_then_follow_logs_from_another_process(
    tmp_path, pytorch_image, docker_client
):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "job.yaml").write_text(SPEC + f"image_uri: {pytorch_image}\n")
    env = dict(os.environ, LAUNCHBAY_HOME=str(tmp_path / "home"), NO_COLOR="1")

    def cli(*args, timeout=120):
        return subprocess.run(
            [sys.executable, "-m", "launchbay.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    # `--no-wait` returns at once; this process keeps running the job in the background
    # only while it lives, so the job is run by a `submit` that waits, started here.
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "launchbay.cli",
            "submit",
            "job.yaml",
            "--instance-type",
            "local",
            "--job-name",
            "docker-cli",
            "--output",
            "json",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        status_file = tmp_path / "home" / "jobs" / "docker-cli" / "status.json"
        while not status_file.exists():
            assert runner.poll() is None, runner.communicate()
        follow = cli("logs", "docker-cli", "--follow")  # from another process, to the end
        assert follow.returncode == 0, follow.stderr
        for rank, host in enumerate(("algo-1", "algo-2")):
            assert f"{host} | [rank {rank}] done on {host}" in follow.stdout, follow.stdout
        out, err = runner.communicate(timeout=120)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    summary = json.loads(out)
    assert summary["status"] == "Completed" and summary["instance_type"] == "local"
    status = cli("status", "docker-cli", "--output", "json")
    assert json.loads(status.stdout)["status"] == "Completed"
    job_dir = Path(env["LAUNCHBAY_HOME"]) / "jobs" / "docker-cli"
    assert not containers_left(docker_client, label=f"{LABEL_JOB_DIR}={job_dir}")
