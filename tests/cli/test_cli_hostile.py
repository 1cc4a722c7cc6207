"""The real command against what a hostile round found (issue 25): closed pipes, damaged
job directories, an unusable ``LAUNCHBAY_HOME``, duplicate and slow detached submits, a
full disk at a job's end, an unknown job without a region.

Every test drives ``python -m launchbay.cli`` in subprocesses with real local_process
jobs, real pipes, real files and file systems (a tmpfs in a private mount namespace).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchbay.errors import ConfigurationError

SPEC = """
    image_uri: 123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1
    entry_point: train.py
    source_dir: src
    role: arn:aws:iam::123456789012:role/SageMakerRole
    instance_type: local_process
    hyperparameters:
      epochs: 2
"""


def no_traceback(result: subprocess.CompletedProcess) -> None:
    for text in (result.stdout or "", result.stderr or ""):
        assert "Traceback (most recent call last)" not in text, text


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def status_of(run_cli, name: str) -> dict:
    result = run_cli("status", name, "--output", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --------------------------------------------------------------------------- no such job


def test_an_unknown_job_without_a_region_is_no_such_job(run_cli, project, cli_env, tmp_path):
    """No local job and no AWS region: exit 1, "no such job", SageMaker not asked (docs/ci.md)."""
    env = {k: v for k, v in cli_env.items() if not k.startswith("AWS_")}
    missing = str(tmp_path / "no-aws-config")
    env.update(
        HOME=str(tmp_path / "user-home"),
        AWS_CONFIG_FILE=missing,
        AWS_SHARED_CREDENTIALS_FILE=missing,
        AWS_EC2_METADATA_DISABLED="true",
    )
    for command in ("status", "logs", "stop"):
        result = run_cli(command, "nope", env=env)
        assert result.returncode == 1, (command, result.stderr)
        no_traceback(result)
        assert "No training job named 'nope'" in result.stderr
        assert "no local job of that name" in result.stderr
        assert "SageMaker was not asked because no AWS region is configured" in result.stderr
        assert "region_name=None" not in result.stderr


# --------------------------------------------------------------------------- damaged job dirs


def _damage(jobs: Path, good: Path) -> dict[str, str]:
    """Copies of a finished job, each damaged one way; name -> what the message names."""
    status = json.loads((good / "status.json").read_text())

    def copy(name: str) -> Path:
        shutil.copytree(good, jobs / name, symlinks=True)
        return jobs / name

    def write_status(name: str, value: object) -> None:
        (copy(name) / "status.json").write_text(json.dumps(value))

    (copy("truncated") / "status.json").write_text((good / "status.json").read_text()[:100])
    (copy("not-json") / "status.json").write_text("hello\n")
    write_status("a-list", [1, 2])
    (copy("no-status") / "status.json").unlink()
    write_status("no-state", {k: v for k, v in status.items() if k != "TrainingJobStatus"})
    write_status("bad-resources", dict(status, ResourceConfig="x"))
    write_status("bad-count", dict(status, ResourceConfig={"InstanceType": "local_process",
                                                           "InstanceCount": "many"}))  # fmt: skip
    write_status("huge-count", dict(status, ResourceConfig={"InstanceType": "local_process",
                                                            "InstanceCount": 10**12}))  # fmt: skip
    directory = copy("status-is-dir")
    (directory / "status.json").unlink()
    (directory / "status.json").mkdir()
    (jobs / "a-file").write_text("not a job directory\n")
    # An unfinished job (its client gone) whose request.json is damaged: finishing it reads it.
    unfinished = copy("bad-request")
    (unfinished / "status.json").write_text(
        json.dumps(
            dict(
                status,
                TrainingJobStatus="InProgress",
                SecondaryStatus="Training",
                LocalClient="nohost:1",
            )
        )  # fmt: skip
    )
    (unfinished / "request.json").write_text("{")
    return {
        "truncated": "status.json is not valid JSON",
        "not-json": "status.json is not valid JSON",
        "a-list": "status.json holds a JSON list, not an object",
        "no-status": "status.json is missing",
        "no-state": "status.json has TrainingJobStatus=None",
        "bad-resources": "status.json has ResourceConfig='x'",
        "bad-count": "status.json has instance counts ['many']",
        "huge-count": "status.json has instance counts [1000000000000]",
        "status-is-dir": "status.json is a directory, not a file",
        "a-file": "a-file is not a directory",
        "bad-request": "request.json is not valid JSON",
    }


def test_damaged_job_directories_are_named_and_the_others_still_listed(run_cli, project, cli_env):
    spec = project.spec(SPEC)
    done = run_cli("submit", spec, "--job-name", "good")
    assert done.returncode == 0, done.stderr
    jobs = Path(cli_env["LAUNCHBAY_HOME"]) / "jobs"
    damaged = _damage(jobs, jobs / "good")

    listing = run_cli("list", "--backend", "local_process", "--output", "json")
    assert listing.returncode == 0, listing.stderr
    no_traceback(listing)
    assert [j["job_name"] for j in json.loads(listing.stdout)["jobs"]] == ["good"]
    for name, problem in damaged.items():
        warning = [line for line in listing.stderr.splitlines() if f"'{name}'" in line]
        assert len(warning) == 1 and problem in warning[0], (name, listing.stderr)
        assert str(jobs / name) in warning[0]
    everything = run_cli("list")  # every backend: the damaged ones are warned about once
    assert everything.returncode == 0 and "good" in everything.stdout, everything.stderr
    assert everything.stderr.count("'truncated' cannot be read") == 1

    for name, problem in damaged.items():
        for command in ("status", "logs"):
            result = run_cli(command, name)
            no_traceback(result)
            assert result.returncode == 1, (command, name, result.stderr)
            assert f"Local training job {name!r} cannot be read" in result.stderr
            assert problem in result.stderr, (command, name, result.stderr)
            assert str(jobs / name) in result.stderr
    assert status_of(run_cli, "good")["status"] == "Completed"


# --------------------------------------------------------------------------- LAUNCHBAY_HOME


@pytest.mark.parametrize("kind", ["a-file", "under-a-file", "proc"])
def test_an_unusable_launchbay_home_is_refused_with_a_message(
    run_cli, project, cli_env, tmp_path, kind, monkeypatch
):
    """A home that is a file, under a file, or where nothing can be made (/proc): the command
    exits 2 naming LAUNCHBAY_HOME, its value and what it needs; fit() raises ConfigurationError."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    home = {
        "a-file": str(a_file),
        "under-a-file": str(a_file / "home"),
        "proc": f"/proc/launchbay-{os.getpid()}/home",
    }[kind]
    env = dict(cli_env, LAUNCHBAY_HOME=home)
    spec = project.spec(SPEC)
    for args in (("submit", spec), ("submit", spec, "--no-wait"), ("submit", spec, "--dry-run")):
        result = run_cli(*args, env=env)
        no_traceback(result)
        assert result.returncode == 2, (args, result.stderr)
        assert f"Invalid LAUNCHBAY_HOME={home!r}" in result.stderr
        assert "Accepted: a directory this user can create and write to" in result.stderr
        assert result.stdout == ""

    from launchbay import Estimator

    monkeypatch.setenv("LAUNCHBAY_HOME", home)
    for output_path in (None, f"file://{tmp_path / 'out'}"):  # the job root is checked too
        estimator = Estimator(
            image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:1",
            role="arn:aws:iam::123456789012:role/SageMakerRole",
            instance_type="local_process",
            instance_count=1,
            output_path=output_path,
        )
        with pytest.raises(ConfigurationError) as info:
            estimator.fit(wait=False)
        assert info.value.argument == "LAUNCHBAY_HOME" and home in str(info.value)


# --------------------------------------------------------------------------- closed pipes


def test_a_failed_job_read_through_a_closed_pipe_still_exits_1(project, cli_env):
    """`launchbay submit job.yaml | head -3` of a failing job: exit 1, job followed to its end."""
    spec = project.spec(SPEC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchbay.cli", "submit", str(spec), "--job-name", "piped",
         "--set", "hyperparameters.sleep=2", "--set", "hyperparameters.fail=late"],
        cwd=project.root, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        for _ in range(3):  # as `head -3`: read three lines, then go away
            proc.stdout.readline()
        proc.stdout.close()
        stderr = proc.stderr.read()
        assert proc.wait(timeout=60) == 1, stderr
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "BrokenPipeError" not in stderr, stderr
    assert "launchbay/cli/" not in stderr  # the script's traceback only, in the reason
    assert "boom: late" in stderr  # the failure reason, on stderr
    status = Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "piped" / "status.json"
    assert json.loads(status.read_text())["TrainingJobStatus"] == "Failed"  # not stopped


def test_a_completed_job_through_a_closed_pipe_exits_0_and_both_streams_may_close(project, cli_env):
    spec = project.spec(SPEC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchbay.cli", "submit", str(spec), "--job-name", "piped-ok",
         "--set", "hyperparameters.sleep=1"],
        cwd=project.root, env=cli_env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,  # as `2>&1 | head -1`
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    status = Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "piped-ok" / "status.json"
    assert json.loads(status.read_text())["TrainingJobStatus"] == "Completed"


# --------------------------------------------------------------------------- detached submits


def test_a_refused_duplicate_detached_submit_leaves_the_running_job_alone(
    run_cli, project, cli_env
):
    spec = project.spec(SPEC)
    name = "held"
    first = run_cli("submit", spec, "--no-wait", "--job-name", name,
                    "--set", "hyperparameters.sleep=120")  # fmt: skip
    assert first.returncode == 0, first.stderr
    runners = Path(cli_env["LAUNCHBAY_HOME"]) / "cli"
    runner = int((runners / f"{name}.pid").read_text().split()[0])
    try:
        wait_for(lambda: "sleeping" in (runners / f"{name}.log").read_text(), 60, "the job")
        log_before = (runners / f"{name}.log").read_text()
        pid_before = (runners / f"{name}.pid").read_text()

        again = run_cli("submit", spec, "--no-wait", "--job-name", name)
        no_traceback(again)
        assert again.returncode == 1, again.stderr
        assert f"A local training job named {name!r} is still running" in again.stderr
        assert (runners / f"{name}.pid").read_text() == pid_before
        assert (runners / f"{name}.log").read_text().startswith(log_before)  # not truncated
        assert status_of(run_cli, name)["status"] == "InProgress"

        stopped = run_cli("stop", name, "--output", "json", timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout)["status"] == "Stopped"
    finally:  # never leave the sleeping job behind
        with contextlib.suppress(OSError):
            if name in Path(f"/proc/{runner}/cmdline").read_text():
                os.kill(runner, signal.SIGTERM)


def test_a_slow_starting_detached_job_is_reported_starting_not_failed(
    run_cli, project, cli_env, tmp_path
):
    """The runner is still setting the job up (here: a GPU query that takes seconds) when
    the start wait ends: submitted, exit 0, and the job goes on to complete."""
    slow_bin = tmp_path / "slow-bin"
    slow_bin.mkdir()
    (slow_bin / "nvidia-smi").write_text("#!/bin/sh\nsleep 6\nexit 0\n")
    (slow_bin / "nvidia-smi").chmod(0o755)
    env = dict(cli_env, LAUNCHBAY_DETACHED_START_SECONDS="1")
    env["PATH"] = f"{slow_bin}{os.pathsep}{env.get('PATH', '')}"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    spec = project.spec(SPEC)
    status_file = Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "slow" / "status.json"

    result = run_cli("submit", spec, "--no-wait", "--output", "json", "--job-name", "slow",
                     env=env)  # fmt: skip
    registered = status_file.exists()
    no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert not registered  # it returned while the runner was still starting
    assert "did not start" not in result.stderr
    assert "local training job slow is still starting" in result.stderr
    summary = json.loads(result.stdout)
    assert (summary["job_name"], summary["status"]) == ("slow", "InProgress")
    assert summary["secondary_status"] == "Starting"

    final = wait_for(
        lambda: (
            status_file.exists()
            and status_of(run_cli, "slow")["status"] in ("Completed", "Failed", "Stopped")
            and status_of(run_cli, "slow")
        ),
        90,
        "the slow job to end",
    )
    assert final["status"] == "Completed", final


def test_the_start_wait_setting_is_checked(run_cli, project, cli_env):
    env = dict(cli_env, LAUNCHBAY_DETACHED_START_SECONDS="soon")
    result = run_cli("submit", project.spec(SPEC), "--no-wait", "--job-name", "never", env=env)
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    assert "Invalid LAUNCHBAY_DETACHED_START_SECONDS='soon'" in result.stderr
    assert not (Path(cli_env["LAUNCHBAY_HOME"]) / "jobs" / "never").exists()


# --------------------------------------------------------------------------- a full disk


FILLING_SCRIPT = """\
import os
import time

with open(os.path.join(os.environ["SM_MODEL_DIR"], "model.bin"), "wb") as f:
    f.write(os.urandom(256 * 1024))
print("model written", flush=True)
while not os.path.exists(os.environ["GO_PATH"]):  # the disk fills meanwhile
    time.sleep(0.05)
print("done", flush=True)
"""

# Another writer: fills the file system and keeps it full (what is freed is taken again
# within a millisecond) until told to stop.
KEEPER = """\
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
full = False
deadline = time.monotonic() + 120
with open(path, "ab", buffering=0) as f:
    while time.monotonic() < deadline and not os.path.exists(stop):
        try:
            f.write(b"x" * 4096)
        except OSError:
            if not full:
                full = True
                print("disk full", flush=True)
            time.sleep(0.001)  # whatever is freed is taken again at once
"""


@pytest.fixture
def small_fs(tmp_path):
    """A 24 MiB tmpfs in a private mount namespace: ``(mount point, nsenter prefix)``."""
    mount = tmp_path / "small"
    mount.mkdir()
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs -o size=24m tmpfs '{mount}' && echo mounted && exec sleep 600"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "mounted"
        yield mount, ["nsenter", "-t", str(holder.pid), "-m", "--"]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_full_disk_at_the_jobs_end_never_flips_its_record(project, cli_env, small_fs):
    """Another writer fills the disk the job directory is on while the job runs, and keeps it
    full: writing the model fails, the job ends Failed, and every later look at it says Failed
    too (the record is written in space set aside at the start), also once space is back."""
    mount, inside = small_fs
    home, filler = mount / "home", mount / "filler"
    go, stop = mount.parent / "go", mount.parent / "stop-filling"  # not on the small disk
    (project.root / "src" / "train.py").write_text(FILLING_SCRIPT)
    env = dict(cli_env, LAUNCHBAY_HOME=str(home), GO_PATH=str(go))

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*inside, sys.executable, "-m", "launchbay.cli", *args],
            capture_output=True, text=True, timeout=120, cwd=project.root, env=env,
        )  # fmt: skip

    submit = subprocess.Popen(
        [*inside, sys.executable, "-m", "launchbay.cli", "submit", str(project.spec(SPEC)),
         "--job-name", "full", "--output", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project.root, env=env,
    )  # fmt: skip
    keeper = None
    try:
        assert submit.stderr is not None
        for line in submit.stderr:
            if "model written" in line:
                break
        keeper = subprocess.Popen(
            [*inside, sys.executable, "-c", KEEPER, str(filler), str(stop)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert keeper.stdout is not None and keeper.stdout.readline().strip() == "disk full"
        go.write_text("")
        out, err = submit.communicate(timeout=120)
        assert submit.returncode == 1, err
        assert "writing it in the space set aside" in err  # the disk was full at the end
        assert "Traceback (most recent call last)" not in err
        reported = json.loads(out)
        assert reported["status"] == "Failed"
        assert "No space left on device" in reported["failure_reason"]

        while_full = cli("status", "full", "--output", "json")  # the disk is still full
        no_traceback(while_full)
        assert while_full.returncode == 0, while_full.stderr
        recorded = json.loads(while_full.stdout)
        assert (recorded["status"], recorded["failure_reason"]) == (
            "Failed", reported["failure_reason"])  # fmt: skip
    finally:
        stop.write_text("")
        if keeper is not None:
            keeper.wait(timeout=30)
        if submit.poll() is None:
            submit.kill()
    assert subprocess.run([*inside, "rm", "-f", str(filler)]).returncode == 0  # space is back
    for _ in range(2):
        later = cli("status", "full", "--output", "json")
        no_traceback(later)
        assert later.returncode == 0, later.stderr
        assert json.loads(later.stdout)["status"] == "Failed", later.stdout
    listed = json.loads(cli("list", "--backend", "local_process", "--output", "json").stdout)
    assert [(j["job_name"], j["status"]) for j in listed["jobs"]] == [("full", "Failed")]
