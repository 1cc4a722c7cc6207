"""``fit(wait=False)`` on a local instance type: the job outlives the process that started it.

Issue 35 item 3 (docs/local.md, "fit(wait=False)"). Every test uses real processes: a
Python script that calls ``fit(wait=False)`` and exits, ``launchbay`` commands and
``Estimator.attach`` in other processes. Each test stops what it starts (the per-test
leftovers check counts a detached job's processes until it ends).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from factories import estimator as make_estimator
from job_outputs import file_uri
from launchbay import ConfigurationError, JobFailedError

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"

# The notebook's cells, as a plain script: build, fit(wait=False), exit.
STARTER = """
    import sys
    from launchbay.pytorch import PyTorch

    scripts, output, name, seconds = sys.argv[1:5]
    estimator = PyTorch(
        entry_point="sleepy.py", source_dir=scripts, role=None,
        instance_type="local_process", instance_count=1,
        framework_version="2.8.0", py_version="py312",
        hyperparameters={"seconds": float(seconds)}, output_path=output,
    )
    job = estimator.fit(wait=False, job_name=name)
    print("started", job.name, job.describe()["TrainingJobStatus"], flush=True)
"""

# Another process: attach to the job by name, follow it to its end, print its logs.
FOLLOWER = """
    import sys
    from launchbay.pytorch import PyTorch

    estimator = PyTorch.attach(sys.argv[1])
    description = estimator.latest_training_job.wait(logs="None")
    print("status", description["TrainingJobStatus"], flush=True)
    print("model", estimator.model_data, flush=True)
    estimator.logs()
"""


def python(tmp_path: Path, source: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    script = tmp_path / f"script-{abs(hash(source))}.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, **kwargs
    )


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchbay.cli", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def status_of(home: Path, name: str) -> dict:
    return json.loads((home / "jobs" / name / "status.json").read_text())


@contextlib.contextmanager
def stopped_at_the_end(*names: str):
    """Stop the named jobs if they still run when the test ends (nothing left behind)."""
    try:
        yield
    finally:
        for name in names:
            with contextlib.suppress(Exception):
                cli("stop", name, timeout=60)


def start_detached(tmp_path, name: str, seconds: str) -> None:
    """Runs ``STARTER`` in a Python process of its own: job ``name`` (``seconds`` long) started
    with ``fit(wait=False)``; checks that the script saw it InProgress and exited 0."""
    started = python(
        tmp_path, STARTER, str(SCRIPTS), file_uri(tmp_path / "out"), name, seconds, timeout=120
    )
    assert started.returncode == 0, started.stderr
    assert f"started {name} InProgress" in started.stdout


def test_a_job_started_by_fit_without_wait_outlives_its_script(home, tmp_path):
    name = "outlives-its-script"
    with stopped_at_the_end(name):
        start_detached(tmp_path, name, "4")
        # The script has exited; the job still runs, in a runner process of its own.
        assert status_of(home, name)["TrainingJobStatus"] == "InProgress"
        status = cli("status", name, "--output", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["status"] == "InProgress"
        listing = cli("list", "--backend", "local_process", "--output", "json")
        assert {"job_name": name, "status": "InProgress", "detached": True}.items() <= (
            json.loads(listing.stdout)["jobs"][0].items()
        )

        # Another process attaches by name and follows it to its end.
        followed = python(tmp_path, FOLLOWER, name, timeout=120)
        assert followed.returncode == 0, followed.stderr
        assert "status Completed" in followed.stdout
        model = f"model {file_uri(tmp_path / 'out')}/{name}/output/model.tar.gz"
        assert model in followed.stdout
        assert "algo-1 | hello from algo-1" in followed.stdout
        assert "algo-1 | goodbye from algo-1" in followed.stdout

    status = cli("status", name, "--output", "json")
    assert json.loads(status.stdout)["status"] == "Completed"
    logs = cli("logs", name)
    assert logs.returncode == 0, logs.stderr
    assert "algo-1 | hello from algo-1" in logs.stdout
    assert "algo-1 | goodbye from algo-1" in logs.stdout
    listing = cli("list", "--backend", "local_process", "--output", "json")
    assert json.loads(listing.stdout)["jobs"][0]["detached"] is False  # it ended


def test_the_attached_setting_stops_the_job_when_its_script_exits(home, tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHBAY_LOCAL_NO_WAIT", "attached")
    name = "stops-with-its-script"
    with stopped_at_the_end(name):
        start_detached(tmp_path, name, "120")
    status = status_of(home, name)  # stopped at interpreter exit, before the script ended
    assert status["TrainingJobStatus"] == "Stopped", status
    assert "the Python process that started it exited" in status["FailureReason"]


def test_a_bad_value_of_the_setting_is_refused_before_anything_starts(home, tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHBAY_LOCAL_NO_WAIT", "background")
    estimator = make_estimator("sleepy.py", SCRIPTS, out=tmp_path / "out")
    with pytest.raises(ConfigurationError) as raised:
        estimator.fit(wait=False, job_name="never-starts")
    message = str(raised.value)
    assert "LAUNCHBAY_LOCAL_NO_WAIT='background'" in message
    assert "'detached'" in message and "'attached'" in message
    assert not (home / "jobs" / "never-starts").exists()
    estimator.fit(job_name="waits", logs=False)  # with wait, the setting is not read


def test_max_run_bounds_a_detached_job_and_list_marks_it_while_it_runs(home, tmp_path):
    name = "detached-max-run"
    estimator = make_estimator(
        "sleepy.py", SCRIPTS, max_run=4, hyperparameters={"seconds": 120}, out=tmp_path / "out"
    )
    with stopped_at_the_end(name):
        job = estimator.fit(wait=False, job_name=name)
        runner = int((home / "cli" / f"{name}.pid").read_text().split()[0])
        assert runner != __import__("os").getpid()  # run by a process of its own
        listing = cli("list", "--backend", "local_process", "--output", "json")
        assert listing.returncode == 0, listing.stderr
        assert {"job_name": name, "status": "InProgress", "detached": True}.items() <= (
            json.loads(listing.stdout)["jobs"][0].items()
        )
        text = cli("list", "--backend", "local_process")
        assert any(
            line.startswith(name) and line.endswith("local_process (detached)")
            for line in text.stdout.splitlines()
        ), text.stdout
        started = time.monotonic()
        with pytest.raises(JobFailedError, match="Stopped"):
            job.wait(logs=False)
        assert time.monotonic() - started < 60
    description = job.describe()
    assert description["TrainingJobStatus"] == "Stopped"
    assert "MaxRuntimeInSeconds" in description["FailureReason"]
    text = cli("list", "--backend", "local_process")
    row = next(line for line in text.stdout.splitlines() if line.startswith(name))
    assert "(detached)" not in row


def test_start_job_runs_the_job_from_this_process_unless_it_may_detach(home, tmp_path):
    """``start_job`` (what ``fit()`` and ``launchbay submit`` start a job with) hands a local
    job to a runner process only when asked to (``may_detach``, ``fit(wait=False)``)."""
    estimator = make_estimator(
        "sleepy.py", SCRIPTS, hyperparameters={"seconds": 1}, out=tmp_path / "out"
    )
    job = estimator.start_job(job_name="started-here")
    assert job is estimator.latest_training_job
    assert not (home / "cli" / "started-here.pid").exists()  # this process runs it
    assert job.wait(logs="None")["TrainingJobStatus"] == "Completed"

    name = "may-detach"
    with stopped_at_the_end(name):
        detached = estimator.start_job(job_name=name, may_detach=True)
        assert (home / "cli" / f"{name}.pid").exists()  # a runner process of its own
        assert detached.wait(logs="None")["TrainingJobStatus"] == "Completed"
