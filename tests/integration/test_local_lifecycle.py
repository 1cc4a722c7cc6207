"""Local jobs under concurrency and dying drivers (issue 12): real drivers, real ranks.

Each driver is ``local_process_scripts/lifecycle_driver.py`` in a child process
(its own ``fit()``), so the tests see what a second terminal, a killed notebook
kernel or a ``kill -9`` does to a job.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from factories import estimator as make_estimator
from job_outputs import archive_members, file_uri
from job_processes import job_processes
from launchbay import JobError
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
JOB_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


_DRIVERS: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def no_driver_left_behind():
    """A test that fails midway must not leave its driver (and so its job) running."""
    yield
    while _DRIVERS:
        driver = _DRIVERS.pop()
        if driver.poll() is not None:
            continue
        try:
            helpers = [
                p
                for p in psutil.Process(driver.pid).children()
                if "launchbay.backends.local.watchdog" in p.cmdline()
            ]
        except psutil.Error:
            helpers = []
        driver.kill()
        driver.communicate(timeout=30)
        for watchdog in helpers:  # it stops the job's hosts; let it finish
            with contextlib.suppress(psutil.Error):
                watchdog.wait(60)


def start_driver(**options) -> subprocess.Popen[str]:
    options.setdefault("source_dir", str(SCRIPTS))
    driver = subprocess.Popen(
        [sys.executable, str(SCRIPTS / "lifecycle_driver.py"), json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    _DRIVERS.append(driver)
    return driver


def wait_for_markers(marker: Path, count: int, driver: subprocess.Popen[str]) -> dict[str, int]:
    """``{host: rank pid}`` once ``count`` ranks wrote their ``started-<host>`` marker."""
    deadline = time.monotonic() + 90
    while len(list(marker.glob("started-*"))) < count:
        assert driver.poll() is None, driver.communicate()[0]
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.1)
    time.sleep(0.2)  # the pid is written right after the file is created
    return {p.name[len("started-") :]: int(p.read_text()) for p in marker.glob("started-*")}


def finish(driver: subprocess.Popen[str], sig: int = signal.SIGINT, timeout: float = 60) -> str:
    if driver.poll() is None:
        driver.send_signal(sig)
    try:
        output, _ = driver.communicate(timeout=timeout)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return output


# --------------------------------------------------------------------------- defect 1


def test_a_second_fit_with_a_running_jobs_name_is_refused_and_touches_nothing(home, tmp_path):
    marker = tmp_path / "markers"
    marker.mkdir()
    name = "same-name-job"
    driver = start_driver(
        entry_point="checkpoint_on_sigterm.py",
        job_name=name,
        hyperparameters={"marker": str(marker)},
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 1}},
        output=file_uri(tmp_path / "out"),
    )
    try:
        ranks = wait_for_markers(marker, 2, driver)
        directory = Path(home) / "jobs" / name
        request = (directory / "request.json").read_text()
        second = make_estimator("sleepy.py", SCRIPTS, out=tmp_path / "out2")
        with pytest.raises(JobError) as caught:
            second.fit(job_name=name, logs=False)
        message = str(caught.value)
        assert f"named {name!r} is still running" in message
        assert f"started by process {os.uname().nodename}:{driver.pid}" in message
        assert "another job_name" in message
        # The running job is untouched: its directory, its request, its ranks.
        assert (directory / "request.json").read_text() == request
        assert sorted(p.name for p in marker.iterdir()) == ["started-algo-1", "started-algo-2"]
        assert all(psutil.pid_exists(pid) for pid in ranks.values())
        status = json.loads((directory / "status.json").read_text())
        assert status["TrainingJobStatus"] == "InProgress"
        assert not (tmp_path / "out2").exists()
    finally:
        output = finish(driver)
    assert driver.returncode == 42, output
    assert json.loads((directory / "status.json").read_text())["TrainingJobStatus"] == "Stopped"


def test_generated_names_never_collide_across_processes_in_the_same_millisecond(home, tmp_path):
    drivers = [
        start_driver(
            entry_point="sleepy.py",
            base_job_name="same-base",
            instance_count=1,
            hyperparameters={"seconds": 1},
            output=file_uri(tmp_path / "out"),
            frozen_time=1_790_000_000.5,
            logs=False,
        )
        for _ in range(3)
    ]
    outputs = [d.communicate(timeout=120)[0] for d in drivers]
    names = []
    for driver, output in zip(drivers, outputs, strict=True):
        assert driver.returncode == 0, output
        match = re.search(r"driver: job (\S+) Completed", output)
        assert match, output
        names.append(match.group(1))
    assert len(set(names)) == 3, names
    for name in names:
        assert JOB_NAME_RE.match(name) and len(name) <= 63, name
        # SDK v2's pattern, in the frozen second: only the milliseconds differ.
        assert re.fullmatch(r"same-base-2026-09-21-14-13-20-5\d\d", name), name
        model = archive_members(tmp_path / "out" / name / "output" / "model.tar.gz")
        assert list(model) == ["model.txt"]


# --------------------------------------------------------------------------- defect 7


def aborting(how: str, tmp_path: Path, distributed: bool) -> PyTorch:
    options = {}
    if distributed:
        options["distribution"] = {"torch_distributed": {"enabled": True, "processes_per_host": 2}}
    return make_estimator(
        "abort_at_exit.py",
        SCRIPTS,
        out=tmp_path / "out",
        instance_count=2,
        hyperparameters={"how": how, "torch": int(distributed)},
        **options,
    )


def host_logs(home, job) -> str:
    logs = Path(home) / "jobs" / job.name / "logs"
    return "".join(p.read_text() for p in sorted(logs.glob("*.log")))


@pytest.mark.parametrize("distributed", [False, True], ids=["plain", "torchrun-2x2"])
def test_an_abort_after_the_script_returned_is_a_warning_not_a_failure(home, tmp_path, distributed):
    est = aborting("python", tmp_path, distributed)
    est.fit(logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    model = archive_members(tmp_path / "out" / job.name / "output" / "model.tar.gz")
    assert sorted(model) == (
        ["model-0.txt", "model-1.txt", "model-2.txt", "model-3.txt"]
        if distributed
        else ["model-0.txt"]
    )
    logs = host_logs(home, job)
    assert "[launchbay] WARNING" in logs
    assert "after the training code had returned normally" in logs
    assert "gloo aborts at exit" in logs
    if not distributed:
        assert "killed by SIGABRT" in logs
    assert not job_processes(Path(home) / "jobs" / job.name)


def test_an_abort_in_interpreter_finalization_does_not_happen_to_a_finished_rank(home, tmp_path):
    # A C-level atexit abort() runs where gloo's destructors abort: after Python's
    # finalization. A rank whose code returned never gets there.
    est = aborting("c", tmp_path, distributed=True)
    est.fit(logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    assert "SIGABRT" not in host_logs(home, job)


def test_an_abort_before_the_script_returned_still_fails_the_job(home, tmp_path):
    from launchbay import JobFailedError

    est = aborting("before", tmp_path, distributed=True)
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    assert caught.value.status == "Failed"
    # (How the signal is named is issue 12's defect 9, tested with it.)
    assert "SIGABRT" in caught.value.reason
    assert "without a Python exception" in caught.value.reason
    assert "after the training code had returned normally" not in host_logs(
        home, est.latest_training_job
    )


# --------------------------------------------------------------------------- defect 8


def test_mpi_workers_learn_at_once_that_the_master_could_not_start(home, tmp_path):
    from launchbay import JobFailedError

    no_mpirun = tmp_path / "bin"
    no_mpirun.mkdir()
    est = make_estimator(
        "mpi_check.py",
        SCRIPTS,
        instance_count=2,
        distribution={"mpi": {"enabled": True, "processes_per_host": 1}},
        environment={"PATH": str(no_mpirun)},
        out=tmp_path / "out",
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    assert "needs 'mpirun' on PATH" in caught.value.reason
    job = est.latest_training_job
    worker_log = (Path(home) / "jobs" / job.name / "logs" / "algo-2.log").read_text()
    # The worker says why it ends, naming the master and its error, and does not wait.
    assert "Training failed: Host algo-1 failed" in worker_log, worker_log
    assert "needs 'mpirun' on PATH" in worker_log
    assert "did not start within" not in worker_log
    described = job.describe()
    took = (described["TrainingEndTime"] - described["TrainingStartTime"]).total_seconds()
    print(f"MPI job with no mpirun ended after {took:.1f} s")
    assert not job_processes(Path(home) / "jobs" / job.name)


# --------------------------------------------------------------------------- defect 4


def start_stoppable_job(tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """A driver running a 2-host job whose ranks write a checkpoint on SIGTERM, once started."""
    marker = tmp_path / "markers"
    marker.mkdir()
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "old.ckpt").write_text("from an earlier run")
    driver = start_driver(
        entry_point="checkpoint_on_sigterm.py",
        job_name=name,
        hyperparameters={"marker": str(marker)},
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 1}},
        checkpoint=file_uri(checkpoints),
        output=file_uri(tmp_path / "out"),
    )
    wait_for_markers(marker, 2, driver)
    return driver, marker, checkpoints


def watchdogs(name: str) -> list[psutil.Process]:
    """Live watchdog processes with ``name`` (a job name or job root) among their arguments."""
    found = []
    for proc in psutil.process_iter():
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if "launchbay.backends.local.watchdog" in cmdline and name in cmdline:
            found.append(proc)
    return found


def wait_for_final_status(directory: Path, timeout: float = 60) -> dict:
    """``status.json`` once it holds a final state (read as a file: nobody reconciles it)."""
    deadline = time.monotonic() + timeout
    while True:
        status = json.loads((directory / "status.json").read_text())
        if status["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "launchbay.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_finished_after_the_client(directory: Path, checkpoints: Path, status: dict) -> None:
    for host in ("algo-1", "algo-2"):
        assert (checkpoints / f"last-{host}.ckpt").read_text() == f"stopped on {host}"
        # Logs are complete: the ranks printed this after the client was gone.
        assert "checkpoint written on SIGTERM" in (directory / "logs" / f"{host}.log").read_text()
    assert status["TrainingEndTime"]
    assert not job_processes(directory)


def test_a_client_killed_by_sigkill_leaves_a_finished_job(home, tmp_path):
    name = "client-sigkill"
    driver, _marker, checkpoints = start_stoppable_job(tmp_path, name)
    directory = Path(home) / "jobs" / name
    assert len(watchdogs(name)) == 1
    driver.kill()
    driver.communicate(timeout=30)
    status = wait_for_final_status(directory)
    assert status["TrainingJobStatus"] == "Failed"
    reason = status["FailureReason"]
    assert reason.startswith("ClientError: the process that ran this local job")
    assert f":{driver.pid}) went away before the job ended" in reason
    check_finished_after_the_client(directory, checkpoints, status)
    failure = tmp_path / "out" / name / "output" / "failure"
    assert "went away" in failure.read_text()
    time.sleep(0.5)
    assert not watchdogs(name)
    shown = cli("status", name)
    assert shown.returncode == 0, shown.stderr
    assert "Failed" in shown.stdout
    stopped = cli("stop", name)  # a finished job: nothing to do, no error
    assert stopped.returncode == 0, stopped.stderr


def test_a_client_killed_by_sigterm_stops_its_job_like_ctrl_c(home, tmp_path):
    name = "client-sigterm"
    driver, _marker, checkpoints = start_stoppable_job(tmp_path, name)
    directory = Path(home) / "jobs" / name
    output = finish(driver, signal.SIGTERM)
    assert driver.returncode == -signal.SIGTERM, output
    assert "SIGTERM: stopping local training job client-sigterm" in output
    status = json.loads((directory / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped", status
    assert "the client process received SIGTERM" in status.get("FailureReason", ""), status
    check_finished_after_the_client(directory, checkpoints, status)
    assert not watchdogs(name)


@pytest.mark.parametrize("command", ["status", "stop", "fit"])
def test_status_and_stop_finish_a_job_whose_client_and_watchdog_died(home, tmp_path, command):
    name = f"client-gone-{command}"
    driver, _marker, checkpoints = start_stoppable_job(tmp_path, name)
    directory = Path(home) / "jobs" / name
    for watchdog in watchdogs(name):
        watchdog.kill()
    driver.kill()
    driver.communicate(timeout=30)
    # The hosts stop by themselves (they get SIGTERM when the client dies) ...
    deadline = time.monotonic() + 30
    while job_processes(directory):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert json.loads((directory / "status.json").read_text())["TrainingJobStatus"] == "InProgress"
    if command == "fit":  # a new job of that name first finishes the old one
        again = make_estimator("sleepy.py", SCRIPTS, out=tmp_path / "out2")
        again.fit(job_name=name, logs=False)
        assert again.latest_training_job.describe()["TrainingJobStatus"] == "Completed"
        failure = (tmp_path / "out" / name / "output" / "failure").read_text()
        assert "went away before the job ended" in failure
        for host in ("algo-1", "algo-2"):
            assert (checkpoints / f"last-{host}.ckpt").read_text() == f"stopped on {host}"
        return
    # ... and the first look at the job finishes it.
    result = cli(command, name)
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads((directory / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Failed"
    assert "went away before the job ended" in status["FailureReason"]
    check_finished_after_the_client(directory, checkpoints, status)
    if command == "status":
        assert "Failed" in result.stdout


# --------------------------------------------------------------------------- one way to end a job


def start_checkpointing_job(tmp_path: Path, name: str, *, finish: bool):
    """A 1-host job whose script writes a checkpoint that cannot be saved, then succeeds.

    The checkpoint destination lies below a regular file: restoring finds nothing there,
    saving cannot make the directory, whoever runs the tests (root too). With ``finish``
    the script returns at once; else once ``<marker>/finish`` exists.
    """
    marker = tmp_path / "markers"
    marker.mkdir()
    if finish:
        (marker / "finish").touch()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    driver = start_driver(
        entry_point="checkpoint_then_finish.py",
        job_name=name,
        instance_count=1,
        hyperparameters={"marker": str(marker)},
        checkpoint=file_uri(blocker / "checkpoints"),
        output=file_uri(tmp_path / "out"),
    )
    return driver, marker


def check_failed_by_the_checkpoint_save(tmp_path: Path, name: str, status: dict) -> None:
    assert status["TrainingJobStatus"] == "Failed", status
    assert status["SecondaryStatus"] == "Failed", status
    reason = status["FailureReason"]
    assert reason.startswith("ClientError: saving checkpoints failed: "), reason
    assert str(tmp_path / "a-file") in reason, reason
    assert status["TrainingEndTime"]
    # The outputs were written as for any failed job, naming the same reason.
    failure = (tmp_path / "out" / name / "output" / "failure").read_text()
    assert "saving checkpoints failed" in failure
    assert (tmp_path / "out" / name / "output" / "model.tar.gz").exists()


def test_a_failed_checkpoint_save_fails_a_job_whose_script_succeeded(home, tmp_path):
    name = "checkpoint-save-fails"
    driver, _marker = start_checkpointing_job(tmp_path, name, finish=True)
    output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 1, output
    assert f"driver: job {name} Failed" in output
    status = json.loads((Path(home) / "jobs" / name / "status.json").read_text())
    check_failed_by_the_checkpoint_save(tmp_path, name, status)


@pytest.mark.parametrize("finisher", ["watchdog", "status"])
def test_a_failed_checkpoint_save_fails_a_job_whose_client_died(home, tmp_path, finisher):
    """Orphan recovery ends a job by the live path's rules: never Completed when the
    checkpoints could not be saved.

    The client is frozen (SIGSTOP) mid-run while its host succeeds, then SIGKILLed: every
    host had succeeded, and only the job's end is left to the watchdog (or, the watchdog
    killed too, to ``launchbay status``).
    """
    name = f"orphan-save-fails-{finisher}"
    driver, marker = start_checkpointing_job(tmp_path, name, finish=False)
    rank = wait_for_markers(marker, 1, driver)["algo-1"]
    directory = Path(home) / "jobs" / name
    if finisher == "status":
        for watchdog in watchdogs(name):
            watchdog.kill()
    os.kill(driver.pid, signal.SIGSTOP)
    try:
        (marker / "finish").touch()
        success = directory / "algo-1" / "output" / "success"
        deadline = time.monotonic() + 60
        while not success.exists() or psutil.pid_exists(rank):
            assert time.monotonic() < deadline, "the host did not succeed"
            time.sleep(0.1)
    finally:
        driver.kill()
        driver.communicate(timeout=30)
    if finisher == "status":
        assert json.loads((directory / "status.json").read_text())["TrainingJobStatus"] == (
            "InProgress"
        )
        shown = cli("status", name)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "Failed" in shown.stdout
    status = wait_for_final_status(directory)
    check_failed_by_the_checkpoint_save(tmp_path, name, status)
    time.sleep(0.5)
    assert not watchdogs(name)


# --------------------------------------------------------------------------- 20 in a row


def test_twenty_2x2_torch_distributed_jobs_in_a_row_all_succeed_and_leave_nothing(
    home, tmp_path, monkeypatch
):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    est = make_estimator(
        "ddp_plain.py",
        SCRIPTS,
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        out=tmp_path / "out",
    )
    statuses = []
    for _ in range(20):
        est.fit(logs=False)
        job = est.latest_training_job
        statuses.append(job.describe()["TrainingJobStatus"])
        assert not job_processes(Path(home) / "jobs" / job.name), job.name
        assert "model.pt" in archive_members(
            tmp_path / "out" / job.name / "output" / "model.tar.gz"
        )
    assert statuses == ["Completed"] * 20
    assert {p.pid for p in me.children(recursive=True)} - before == set()
    assert not watchdogs(str(Path(home) / "jobs"))
    # Nothing at all: each host's TMPDIR (torchrun's torchelastic_*, torch's compile cache,
    # OpenMPI's session dir) is the job's own and goes with it.
    assert sorted(p.name for p in scratch.iterdir()) == []
