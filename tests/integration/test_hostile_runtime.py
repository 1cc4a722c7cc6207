"""Hostile scripts and settings against real ``local_process`` jobs (issue 25).

* a script that prints a line of 100 MB without a newline, then a ``\\r`` progress
  bar: the client's memory stays flat and the bar's updates are shown as they come;
* a grace period that is not a finite number of seconds is refused before the job
  starts, by the one rule the runtime uses too;
* channel names ``.`` and ``..`` and checkpoint paths that leave or overlap the
  container contract are refused before anything is made or removed;
* an MPI job whose entry point is a shell script records its ranks, so a
  ``max_run`` stop names only the rank still running;
* a host whose runtime dies of a signal is reported by the signal's name.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from factories import estimator
from job_outputs import file_uri, fit_failure
from launchbay import ConfigurationError, JobFailedError
from launchbay.backends.plan import plan_request
from launchbay.backends.process import ProcessBackend
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

MB = 1 << 20


#: One process a host under mpirun.
MPI_1 = {"mpi": {"enabled": True, "processes_per_host": 1}}


def pytorch(entry_point: str, source_dir: Path, **kwargs) -> PyTorch:
    return estimator(entry_point, source_dir, **kwargs)


def source(tmp_path: Path, files: dict[str, str]) -> Path:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    for name, text in files.items():
        (src / name).write_text(textwrap.dedent(text))
    return src


# --------------------------------------------------------------------------- item 7

LONG_LINE_SCRIPT = """\
import os, sys, time

# 100 MB of '~' and no newline, written in 1 MB chunks.
chunk = b"~" * (1 << 20)
for _ in range(100):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
# A progress bar that redraws itself: each update waits until the test has seen
# the one before on the client's output (it is shown live, not at the end).
go = os.environ["SM_HP_GO_DIR"]
for step in (1, 2, 3):
    sys.stdout.write(f"progress {step}/3\\r")
    sys.stdout.flush()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(go, str(step))):
        if time.monotonic() > deadline:
            sys.exit(f"progress {step}/3 was not shown while the job ran")
        time.sleep(0.05)
print("done")
"""

DRIVER = """\
import sys
from launchbay.pytorch import PyTorch

source_dir, output, go = sys.argv[1:4]
estimator = PyTorch(
    entry_point="long_line.py", source_dir=source_dir, role=None,
    instance_type="local_process", instance_count=1, framework_version="2.8.0",
    py_version="py312", output_path=output, hyperparameters={"go_dir": go},
)
estimator.fit(logs=True)
# VmHWM: the peak of this process's own memory. Not getrusage's ru_maxrss, which a process
# started by a large parent (pytest after thousands of tests) inherits across exec.
with open("/proc/self/status") as status:
    peak_kb = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
print(f"PEAK_KB {peak_kb}", file=sys.stderr, flush=True)
"""


def test_a_long_line_without_a_newline_keeps_the_client_small_and_progress_live(home, tmp_path):
    """A 100 MB line without a newline once made the client hold (and re-read every
    0.2 s) the whole pending line, 427 MB of RSS; a ``\\r`` progress bar was shown only at
    the end. Now the line comes in pieces of at most 64 KiB (nothing dropped), the
    client's peak RSS stays far below the line's size, and each update of the bar is
    shown while the job runs (the script waits to see it before the next one)."""
    src = source(tmp_path, {"long_line.py": LONG_LINE_SCRIPT})
    go = tmp_path / "go"
    go.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, NO_COLOR="1", PYTHONUNBUFFERED="1")
    client = subprocess.Popen(
        [sys.executable, str(driver), str(src), file_uri(tmp_path / "out"), str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    tildes = longest = 0
    seen_steps = []
    hang = threading.Timer(300, client.kill)  # a bound on "did not hang", not a timing
    hang.start()
    try:
        assert client.stdout is not None
        for raw in client.stdout:
            longest = max(longest, len(raw))
            tildes += raw.count(b"~")
            for step in (1, 2, 3):
                if f"progress {step}/3".encode() in raw and step not in seen_steps:
                    seen_steps.append(step)
                    (go / str(step)).touch()
        stderr = client.stderr.read().decode() if client.stderr else ""
        assert client.wait(timeout=60) == 0, re.sub("~{80,}", "~...~", stderr)[-3000:]
    finally:
        hang.cancel()
        if client.poll() is None:
            client.kill()
            client.wait()
    assert seen_steps == [1, 2, 3]
    assert tildes == 100 * MB  # every byte of the line was shown
    assert longest <= 64 * 1024 + 200, longest  # in pieces of 64 KiB (plus the host prefix)
    peak_mb = int(stderr.split("PEAK_KB ")[1].split()[0]) / 1024
    assert peak_mb < 200, f"client peak RSS {peak_mb:.0f} MB for a 100 MB line"


# --------------------------------------------------------------------------- item 13

QUICK = {"quick.py": "print('quick job ran', flush=True)\n"}


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9", "soon"])
@pytest.mark.parametrize("where", ["caller", "environment"])
def test_a_grace_period_that_is_not_a_finite_number_of_seconds_is_refused(
    home, tmp_path, monkeypatch, value, where
):
    """``nan`` made a stop and ``max_run`` wait forever, ``inf`` overflowed a timer; the
    client silently took other values the runtime refused. One rule now refuses them
    all before the job starts, naming the variable, the value and what is accepted."""
    src = source(tmp_path, QUICK)
    kwargs = {}
    if where == "caller":
        monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", value)
        argument = "LAUNCHBAY_GRACE_SECONDS"
    else:
        kwargs["environment"] = {"LAUNCHBAY_GRACE_SECONDS": value}
        argument = "environment['LAUNCHBAY_GRACE_SECONDS']"
    est = pytorch("quick.py", src, output_path=file_uri(tmp_path / "out"), **kwargs)
    with pytest.raises(ConfigurationError) as caught:
        est.fit(job_name="bad-grace", logs=False)
    message = str(caught.value)
    assert f"Invalid {argument}={value!r}" in message, message
    assert "Accepted: a finite number of seconds from 0 to 3600" in message, message
    assert not (home / "jobs" / "bad-grace").exists()  # nothing was started


def test_the_grace_seconds_argument_follows_the_same_rule(home):
    for value in (float("nan"), float("inf"), -1.0, True):
        with pytest.raises(ConfigurationError, match=r"Invalid grace_seconds=.*Accepted: a finite"):
            ProcessBackend(grace_seconds=value)
    assert ProcessBackend(grace_seconds=0).grace_seconds == 0.0


def test_a_valid_grace_period_still_stops_a_job_on_time(home, tmp_path, monkeypatch):
    """``LAUNCHBAY_GRACE_SECONDS=1.5``: a script that ignores SIGTERM is killed after the
    grace period when ``max_run`` is hit, and the job ends Stopped."""
    monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", "1.5")
    src = source(
        tmp_path,
        {
            "stubborn.py": """\
            import signal, time
            signal.signal(signal.SIGTERM, lambda *a: print("ignoring SIGTERM", flush=True))
            print("started", flush=True)
            time.sleep(300)
            """
        },
    )
    est = pytorch("stubborn.py", src, output_path=file_uri(tmp_path / "out"), max_run=2)
    started = time.monotonic()
    with pytest.raises(JobFailedError, match="MaxRuntimeInSeconds"):
        est.fit(logs=False)
    assert time.monotonic() - started < 120  # did not hang


# --------------------------------------------------------------------------- item 14


@pytest.mark.parametrize("name", [".", ".."])
def test_channel_names_dot_and_dotdot_are_refused_before_anything_is_removed(home, tmp_path, name):
    """SageMaker's ChannelName pattern admits ``.`` and ``..``; staging them replaced
    ``input/data`` or ``input`` of each host (the job's configuration) and the job
    failed as an InternalError. fit(), the dry run and the backend refuse them."""
    src = source(tmp_path, QUICK)
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a")
    est = pytorch("quick.py", src, output_path=file_uri(tmp_path / "out"))
    for call in (est.fit, est.create_training_job_request):
        with pytest.raises(ConfigurationError) as caught:
            call({name: file_uri(data)}, job_name="dot-channel")
        message = str(caught.value)
        assert f"Invalid channel name {name!r} in inputs" in message, message
        assert "other than '.' and '..'" in message, message
    assert not (home / "jobs" / "dot-channel").exists()

    # A request built elsewhere reaches the backend: refused there, before the job dir.
    request = est.create_training_job_request({"train": file_uri(data)}, job_name="dot-channel")
    request["InputDataConfig"][0]["ChannelName"] = name
    backend = ProcessBackend(job_root=str(home / "jobs"))
    with pytest.raises(ConfigurationError, match=f"Invalid channel name {name!r}"):
        backend.run(plan_request(request))
    assert not (home / "jobs" / "dot-channel").exists()
    assert (data / "a.txt").read_text() == "a"


# --------------------------------------------------------------------------- item 15


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/opt/ml/../..", "has '..' segments"),
        ("/opt/ml", "is /opt/ml"),
        ("/opt/ml/", "is /opt/ml"),
        ("/opt", "holds /opt/ml"),
        ("/", "is the root directory"),
        ("/opt/ml/input/config", "lies in /opt/ml/input"),
        ("/opt/ml/./code", "lies in /opt/ml/code"),
        ("/opt/ml/model", "lies in /opt/ml/model"),
        ("/opt/ml/output/data", "lies in /opt/ml/output"),
        ("ckpt", "is not an absolute path"),
    ],
)
def test_a_checkpoint_path_that_leaves_or_overlaps_the_contract_is_refused(
    home, tmp_path, path, why
):
    """``/opt/ml/../..`` escaped the host's tree; ``/opt/ml`` restored the last job's
    ``input/config`` into the next one (its hyperparameters). The estimator refuses
    these (every instance type), and so does the backend for a request built elsewhere."""
    src = source(tmp_path, QUICK)
    for instance_type in ("local_process", "ml.m5.xlarge"):
        with pytest.raises(ConfigurationError) as caught:
            pytorch(
                "quick.py",
                src,
                instance_type=instance_type,
                role="arn:aws:iam::123456789012:role/SageMakerRole",
                checkpoint_local_path=path,
            )
        message = str(caught.value)
        assert f"Invalid checkpoint_local_path={path!r}" in message, message
        assert why in message, message
        assert "Accepted: an absolute path such as /opt/ml/checkpoints" in message, message

    est = pytorch(
        "quick.py",
        src,
        output_path=file_uri(tmp_path / "out"),
        checkpoint_s3_uri=file_uri(tmp_path / "ckpt"),
    )
    request = est.create_training_job_request(job_name="bad-checkpoint")
    request["CheckpointConfig"]["LocalPath"] = path
    with pytest.raises(ConfigurationError, match=r"Invalid checkpoint_local_path="):
        ProcessBackend(job_root=str(home / "jobs")).run(plan_request(request))
    assert not (home / "jobs" / "bad-checkpoint").exists()


def test_a_checkpoint_path_is_normalised_and_used(home, tmp_path):
    """``/opt/ml/ckpt/./run//`` is the host's ``<host dir>/ckpt/run``: the script sees
    it as its checkpoint dir and what it writes there is saved."""
    src = source(
        tmp_path,
        {
            "ckpt.py": """\
            import json, os
            config = os.path.join(os.environ["SAGEMAKER_BASE_DIR"], "input", "config")
            local = json.load(open(os.path.join(config, "checkpointconfig.json")))["LocalPath"]
            print("checkpoint dir", local, flush=True)
            with open(os.path.join(local, "last.ckpt"), "w") as f:
                f.write("saved")
            """
        },
    )
    est = pytorch(
        "ckpt.py",
        src,
        output_path=file_uri(tmp_path / "out"),
        checkpoint_s3_uri=file_uri(tmp_path / "ckpt"),
        checkpoint_local_path="/opt/ml/ckpt/./run//",
    )
    est.fit(job_name="normal-checkpoint", logs=False)
    host_dir = home / "jobs" / "normal-checkpoint" / "algo-1"
    config = json.loads((host_dir / "input" / "config" / "checkpointconfig.json").read_text())
    assert config["LocalPath"] == str(host_dir / "ckpt" / "run")
    assert (tmp_path / "ckpt" / "last.ckpt").read_text() == "saved"


# --------------------------------------------------------------------------- item 22


def test_max_run_of_an_mpi_job_with_a_shell_entry_point_names_only_the_rank_still_running(
    home, tmp_path
):
    """Shell ranks were exec'd, so they wrote no rank records and a ``max_run`` stop
    named every host still up, also the MPI master whose rank had long finished. The
    bootstrap now runs the program as a child and records its start and end."""
    src = source(
        tmp_path,
        {
            "stuck.sh": """\
            #!/bin/sh
            echo "rank $OMPI_COMM_WORLD_RANK on $SM_CURRENT_HOST"
            if [ "$SM_CURRENT_HOST" = "algo-2" ]; then sleep 120; fi
            echo "done on $SM_CURRENT_HOST"
            """
        },
    )
    est = pytorch(
        "stuck.sh", src, instance_count=2, distribution=MPI_1, out=tmp_path / "out", max_run=8
    )
    failure = fit_failure(est, "Stopped")
    reason = failure.reason
    assert "MaxRuntimeInSeconds (8 seconds)" in reason
    assert "Still running when the limit was hit: host algo-2 (rank 1)." in reason, reason
    assert "algo-1" not in reason, reason
    ranks = home / "jobs" / est.latest_training_job.name / "shared" / "ranks"
    first = json.loads((ranks / "rank-0.json").read_text())
    assert (first["host"], first["exit_code"]) == ("algo-1", 0)


def test_a_shell_rank_ends_as_its_program_ends(home, tmp_path):
    """The wrapped program's exit status is the rank's: a shell rank exiting 3 fails the
    job with exit code 3 in its end record and in the reason."""
    src = source(
        tmp_path,
        {
            "fail.sh": """\
            #!/bin/sh
            if [ "$SM_CURRENT_HOST" = "algo-2" ]; then echo "giving up" >&2; exit 3; fi
            sleep 60
            """
        },
    )
    est = pytorch("fail.sh", src, instance_count=2, distribution=MPI_1, out=tmp_path / "out")
    failure = fit_failure(est)
    reason = failure.reason
    assert "Rank 1 (local rank 0) on host algo-2 failed (exit code 3)" in reason, reason
    assert "./fail.sh exited with code 3" in reason, reason
    ranks = home / "jobs" / est.latest_training_job.name / "shared" / "ranks"
    assert json.loads((ranks / "rank-1.json").read_text())["exit_code"] == 3
