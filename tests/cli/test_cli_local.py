"""The real command with ``--instance-type local_process``: the spec written for SageMaker runs here."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest

# Written for SageMaker (ml.* type, role, S3 output by default); runs locally by
# changing only the instance type on the command line.
SPEC = """
    image_uri: 123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1
    entry_point: train.py
    source_dir: src
    role: arn:aws:iam::123456789012:role/SageMakerRole
    instance_type: ml.m5.xlarge
    hyperparameters:
      epochs: 2
"""


def local(*args: str) -> tuple[str, ...]:
    return (*args, "--instance-type", "local_process")


def leftovers(marker: str) -> list[psutil.Process]:
    """Live processes whose command line or environment mentions ``marker``."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            text = " ".join(proc.info["cmdline"] or []) + str(proc.environ())
        except psutil.Error:
            continue
        if marker in text:
            found.append(proc)
    return found


def test_local_run_status_logs_list(run_cli, project, cli_env):
    spec = project.spec(SPEC)
    home = Path(cli_env["LAUNCHBAY_HOME"])
    result = run_cli(*local("submit", spec, "--output", "json", "--job-name", "local-ok"))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # exactly one JSON object on stdout
    assert summary["job_name"] == "local-ok" and summary["status"] == "Completed"
    assert summary["instance_type"] == "local_process" and summary["failure_reason"] is None
    assert summary["timings"]["start"] and summary["timings"]["end"]
    model = Path(urlparse(summary["model_data"]).path)
    assert summary["model_data"].startswith("file://") and model.is_relative_to(home)
    with tarfile.open(model) as tar:
        assert tar.extractfile("model.txt").read() == b"trained"
    assert "algo-1 | epochs=2 on algo-1" in result.stderr  # logs go to stderr in JSON mode

    status = run_cli("status", "local-ok")
    assert status.returncode == 0 and "Completed" in status.stdout
    assert "local_process" in status.stdout
    logs = run_cli("logs", "local-ok")
    assert logs.returncode == 0
    assert "algo-1 | epochs=2 on algo-1" in logs.stdout and "algo-1 | done" in logs.stdout
    follow = run_cli("logs", "local-ok", "--follow", timeout=20)  # ended: returns at once
    assert follow.returncode == 0 and follow.stdout == logs.stdout
    listing = run_cli("list", "--backend", "local_process", "--output", "json")
    assert listing.returncode == 0, listing.stderr
    assert {"job_name": "local-ok", "backend": "local_process", "status": "Completed"}.items() <= (
        json.loads(listing.stdout)["jobs"][0].items()
    )
    text = run_cli("list", "--status", "Completed")
    assert text.returncode == 0 and "local-ok" in text.stdout
    assert "local-ok" not in run_cli("list", "--status", "Failed").stdout


def test_local_failure_exits_1_with_reason(run_cli, project):
    spec = project.spec(SPEC)
    result = run_cli(*local("submit", spec, "--set", "hyperparameters.fail=diverged"))
    assert result.returncode == 1
    assert "Traceback" in result.stdout  # the script's own traceback, in its logs
    assert "ended with status Failed" in result.stderr
    assert "RuntimeError: boom: diverged" in result.stderr
    assert "launchbay/cli/" not in result.stderr  # never a traceback of the command


def test_ctrl_c_stops_the_local_job_and_exits_130(project, cli_env):
    spec = project.spec(SPEC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchbay.cli",
         *local("submit", str(spec), "--job-name", "interrupted", "--set", "hyperparameters.sleep=120")],
        cwd=project.root, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # wait until the script runs
            if "sleeping" in line:
                break
        else:
            pytest.fail(f"the job never started: {proc.stderr.read() if proc.stderr else ''}")
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
        assert time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    stderr = proc.stderr.read() if proc.stderr else ""
    assert "local training job interrupted was stopped" in stderr
    job_dir = str(Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "interrupted")
    assert leftovers(job_dir) == []
    status = json.loads((Path(job_dir) / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped"


def test_no_wait_detaches_then_stop(run_cli, project, cli_env):
    spec = project.spec(SPEC)
    args = local("submit", spec, "--no-wait", "--output", "json", "--job-name", "detached")
    result = run_cli(*args, "--set", "hyperparameters.sleep=120")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["status"] == "InProgress"
    status = run_cli("status", "detached", "--output", "json")
    assert json.loads(status.stdout)["status"] == "InProgress"
    stopped = run_cli("stop", "detached", "--output", "json", timeout=40)
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["status"] == "Stopped"
    job_dir = str(Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "detached")
    deadline = time.monotonic() + 10
    while leftovers(job_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers(job_dir) == []
    again = run_cli("stop", "detached")
    assert again.returncode == 0 and "already ended (Stopped)" in again.stderr


def test_waiting_for_a_detached_job_prints_its_logs_once(
    run_cli, project, cli_env, monkeypatch, capsys
):
    """A job another process runs (submit --no-wait): wait() follows its status file, then
    prints every host's log file from it, each line once."""
    from launchbay.backends.process import ProcessBackend

    spec = project.spec(SPEC)
    args = local("submit", spec, "--no-wait", "--job-name", "detached-logs")
    result = run_cli(*args, "--set", "hyperparameters.sleep=1", "--set", "instance_count=2")
    assert result.returncode == 0, result.stderr
    monkeypatch.setenv("LAUNCHBAY_HOME", cli_env["LAUNCHBAY_HOME"])
    description = ProcessBackend().wait("detached-logs", logs="All")
    assert description["TrainingJobStatus"] == "Completed"
    printed = capsys.readouterr().out.splitlines()
    for rank, host in enumerate(("algo-1", "algo-2")):
        mine = [line.partition(" | ")[2] for line in printed if line.startswith(f"{host} | ")]
        assert mine.count(f"[rank {rank}] epochs=2 on {host}") == 1, printed
        assert mine.count(f"[rank {rank}] done") == 1, printed


def test_stop_from_another_shell_ends_a_foreground_submit(run_cli, project, cli_env):
    spec = project.spec(SPEC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchbay.cli",
         *local("submit", str(spec), "--job-name", "foreground", "--set", "hyperparameters.sleep=120")],
        cwd=project.root, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "sleeping" in line:
                break
        stopped = run_cli("stop", "foreground", "--output", "json", timeout=40)
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["status"] == "Stopped"
        assert proc.wait(timeout=15) == 143  # SIGTERM reads as an interrupt
    finally:
        if proc.poll() is None:
            proc.kill()


def test_validate_and_submit_refuse_more_hosts_than_gpus(run_cli, project, cli_env, fake_gpus):
    """Issue 16: `launchbay validate` says up front what `submit` would refuse (docs/local.md)."""
    bin_dir = fake_gpus(2)
    env = {**cli_env, "PATH": f"{bin_dir}:{cli_env['PATH']}"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    (project.root / "src").mkdir(parents=True, exist_ok=True)
    (project.root / "src" / "train.py").write_text("print('never runs')\n")
    spec = project.spec(
        SPEC + "    distribution:\n      torch_distributed:\n        enabled: true\n"
    )
    for command in ("validate", "submit"):
        result = run_cli(command, spec, "--instance-type", "local_process", "--set",
                         "instance_count=3", env=env)  # fmt: skip
        assert result.returncode != 0, result.stdout
        assert "instance_count=3" in result.stderr and "GPU(s) 0,1 found (2)" in result.stderr
        assert "instance_count <= 2" in result.stderr, result.stderr
    assert not (Path(cli_env["LAUNCHBAY_HOME"]) / "jobs").exists()
