"""``launchbay`` finds a Docker job's backend through the registry: submit, status, stop, list.

The command once had its own narrower choice of backend: a job of instance type
``local`` was submitted as if it ran on SageMaker (``--no-wait`` left no process
to run it, no stop request could reach it, it was reported as ``sagemaker``) and
described by the process backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from job_outputs import containers_left, networks_left
from launchbay.backends.docker import LABEL_JOB_DIR, network_name

SPEC = """\
entry_point: train.py
source_dir: src
role: arn:aws:iam::123456789012:role/SageMakerRole
instance_type: ml.m5.xlarge
instance_count: 1
hyperparameters:
  sleep: 120
"""
TRAIN = """\
import os, time
print("start on", os.environ["SM_CURRENT_HOST"], flush=True)
time.sleep(float(os.environ["SM_HP_SLEEP"]))
print("done on", os.environ["SM_CURRENT_HOST"], flush=True)
"""


def make_project(tmp_path: Path, image: str) -> dict[str, str]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "job.yaml").write_text(SPEC + f"image_uri: {image}\n")
    home = tmp_path / "home"
    return dict(os.environ, LAUNCHBAY_HOME=str(home), NO_COLOR="1", LAUNCHBAY_GRACE_SECONDS="2")


def cli(tmp_path: Path, env: dict[str, str], *args: str, timeout: float = 120):
    return subprocess.run(
        [sys.executable, "-m", "launchbay.cli", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def wait_for_line(log: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (log.exists() and text in log.read_text()):
        assert time.monotonic() < deadline, f"{text!r} never appeared in {log}"
        time.sleep(0.2)


def assert_nothing_left(docker_client, job_dir: Path, job: str) -> None:
    assert not containers_left(docker_client, label=f"{LABEL_JOB_DIR}={job_dir}")
    assert not networks_left(docker_client, lambda name: name == network_name(job))


def test_no_wait_runs_a_docker_job_detached_that_status_and_stop_reach(
    tmp_path, pytorch_image, docker_client
):
    env = make_project(tmp_path, pytorch_image)
    submitted = cli(tmp_path, env, "submit", "job.yaml", "--instance-type", "local",
                    "--no-wait", "--output", "json", "--job-name", "docker-detached")  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    summary = json.loads(submitted.stdout)
    assert (summary["status"], summary["backend"]) == ("InProgress", "docker")
    job_dir = Path(env["LAUNCHBAY_HOME"]) / "jobs" / "docker-detached"
    wait_for_line(job_dir / "logs" / "algo-1.log", "start on algo-1")  # the runner lives on
    status = cli(tmp_path, env, "status", "docker-detached", "--output", "json")
    assert status.returncode == 0, status.stderr
    described = json.loads(status.stdout)
    assert (described["status"], described["backend"]) == ("InProgress", "docker")
    assert described["instance_type"] == "local"

    stopped = cli(tmp_path, env, "stop", "docker-detached", "--output", "json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "Stopped"
    assert "stopping local training job docker-detached (runner pid" in stopped.stderr
    assert_nothing_left(docker_client, job_dir, "docker-detached")
    again = cli(tmp_path, env, "stop", "docker-detached")
    assert again.returncode == 0 and "already ended (Stopped)" in again.stderr
    listing = cli(tmp_path, env, "list", "--backend", "docker", "--output", "json")
    assert listing.returncode == 0, listing.stderr
    assert [
        (j["job_name"], j["backend"], j["status"]) for j in json.loads(listing.stdout)["jobs"]
    ] == [("docker-detached", "docker", "Stopped")]
    processes = cli(tmp_path, env, "list", "--backend", "local_process", "--output", "json")
    assert json.loads(processes.stdout)["jobs"] == []


def test_stop_from_another_shell_ends_a_foreground_docker_submit(
    tmp_path, pytorch_image, docker_client
):
    env = make_project(tmp_path, pytorch_image)
    runner = subprocess.Popen(
        [sys.executable, "-m", "launchbay.cli", "submit", "job.yaml", "--instance-type", "local",
         "--job-name", "docker-foreground", "--output", "json"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    job_dir = Path(env["LAUNCHBAY_HOME"]) / "jobs" / "docker-foreground"
    try:
        wait_for_line(job_dir / "logs" / "algo-1.log", "start on algo-1")
        stopped = cli(tmp_path, env, "stop", "docker-foreground", "--output", "json")
        assert stopped.returncode == 0, stopped.stderr
        summary = json.loads(stopped.stdout)
        assert (summary["status"], summary["backend"]) == ("Stopped", "docker")
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 143, err  # SIGTERM reads as an interrupt
    assert "local training job docker-foreground was stopped" in err
    assert json.loads(out)["backend"] == "docker"
    assert_nothing_left(docker_client, job_dir, "docker-foreground")
