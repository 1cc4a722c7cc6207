"""``instance_type="local_process"`` end to end: real runtimes, real torchrun/mpirun, gloo on CPU.

Every test goes through ``fit()`` of a framework estimator, with ``LAUNCHBAY_HOME``
in a temporary directory. Training scripts live in ``local_process_scripts/``.
"""

from __future__ import annotations

import io
import json
import os
import time
from functools import partial
from pathlib import Path

import pytest

from factories import MPI_2X2, TORCH_2X2, checkpointing_job, estimator
from job_outputs import (
    archive_members,
    check_mpi_job,
    check_sigterm_checkpoints,
    check_torch_ddp_job,
    file_uri,
    fit_failure,
)
from job_processes import fit_in_child, interrupt, job_processes
from launchbay import ConfigurationError, JobError, JobFailedError
from launchbay.inputs import FileSystemInput, TrainingInput
from launchbay.tensorflow import TensorFlow

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
BUCKET = "local-process-data"


pytorch = partial(estimator, source_dir=SCRIPTS, instance_count=2)
tensorflow = partial(estimator, source_dir=SCRIPTS, instance_count=2, framework=TensorFlow)


def job_dir(home, job) -> Path:
    return Path(home) / "jobs" / job.name


# --------------------------------------------------------------------------- (a), (b)


def test_torch_distributed_2x2_trains_and_writes_model(home, tmp_path):
    out = tmp_path / "out"
    est = pytorch("torch_ddp.py", distribution=TORCH_2X2, out=out)
    est.fit(logs=False)
    check_torch_ddp_job(est, out)
    job = est.latest_training_job
    assert not job_processes(job_dir(home, job))
    # file:// only: no AWS session was ever needed.
    assert job.backend.stager._session is None


def test_mpi_2x2_with_mpi4py(home, tmp_path):
    out = tmp_path / "out"
    est = pytorch("mpi_check.py", distribution=MPI_2X2, out=out)
    est.fit(logs=False)
    check_mpi_job(est.latest_training_job, out)
    assert not job_processes(job_dir(home, est.latest_training_job))


@pytest.mark.parametrize(
    ("script", "distribution"),
    [
        ("torch_ddp.py", {"torch_distributed": {"enabled": True, "processes_per_host": 2}}),
        ("mpi_check.py", {"mpi": {"enabled": True, "processes_per_host": 2}}),
    ],
    ids=["torch_distributed", "mpi"],
)
def test_nothing_is_left_in_the_callers_tmpdir(home, tmp_path, monkeypatch, script, distribution):
    """torchelastic_* and OpenMPI session dirs go to a per-host TMPDIR removed with the job."""
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    est = pytorch(script, distribution=distribution, output_path=file_uri(tmp_path / "out"))
    est.fit(logs=False)
    assert est.latest_training_job.describe()["TrainingJobStatus"] == "Completed"
    assert sorted(os.listdir(tmpdir)) == []


# --------------------------------------------------------------------------- (c)


@pytest.mark.parametrize("strategy", ["parameter_server", "multi_worker_mirrored_strategy"])
def test_tensorflow_tf_config_per_host(home, tmp_path, strategy):
    out = tmp_path / "out"
    est = tensorflow(
        "tf_config_dump.py",
        distribution={strategy: {"enabled": True}},
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    members = archive_members(out / est.latest_training_job.name / "output" / "output.tar.gz")
    seen = {h: json.loads(members[f"tf-{h}.json"]) for h in ("algo-1", "algo-2")}
    base = int(seen["algo-1"]["master_port"])
    assert seen["algo-2"]["master_port"] == str(base)
    # Each host on the job's network (runtime._netns): algo-N is 10.213.0.N.
    one, two = "10.213.0.1", "10.213.0.2"
    for index, host in enumerate(("algo-1", "algo-2")):
        if strategy == "parameter_server":
            expected = {
                "cluster": {
                    "master": [f"{one}:{base}"],
                    "ps": [f"{one}:{base + 1}", f"{two}:{base + 3}"],
                    "worker": [f"{two}:{base + 2}"],
                },
                "environment": "cloud",
                "task": {"index": 0, "type": "master" if index == 0 else "worker"},
            }
        else:
            expected = {
                "cluster": {"worker": [f"{one}:{base}", f"{two}:{base + 1}"]},
                "environment": "cloud",
                "task": {"index": index, "type": "worker"},
            }
        assert seen[host]["tf_config"] == expected


# --------------------------------------------------------------------------- (d)


def test_rank_failure_is_reported_fast_and_leaves_no_process(home, tmp_path):
    stamp = tmp_path / "failed-at"
    est = pytorch(
        "torch_ddp.py",
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        hyperparameters={"steps": 40, "fail-rank": 3, "fail-stamp": str(stamp)},
        output_path=file_uri(tmp_path / "out"),
    )
    with pytest.raises(JobFailedError) as caught:
        est.fit(logs=False)
    raised_at = time.time()
    failed_at = float(stamp.read_text())
    assert raised_at - failed_at < 10
    error = caught.value
    assert error.status == "Failed"
    head = error.reason[:1024]
    assert "algo-2" in head
    assert "Rank 3" in head or "rank 3" in head
    assert "ValueError: boom from rank 3" in head
    directory = job_dir(home, est.latest_training_job)
    assert not job_processes(directory)
    failure = tmp_path / "out" / error.job_name / "output" / "failure"
    assert "boom from rank 3" in failure.read_text()
    assert (directory / "algo-2" / "output" / "launchbay-failure.json").exists()


# --------------------------------------------------------------------------- (e)


def test_sigint_stops_everything_and_keeps_the_sigterm_checkpoint(home, tmp_path):
    marker = tmp_path / "markers"
    marker.mkdir()
    checkpoints = tmp_path / "checkpoints"
    name = "sigint-job"
    job = checkpointing_job(checkpoints, tmp_path / "out", str(marker))
    with fit_in_child(job, name, lambda: len(list(marker.glob("started-*"))) >= 2, 60) as child:
        output = interrupt(child, within=10, timeout=30)
    assert child.returncode == 42, output
    assert output.count("restored checkpoints: ['old.ckpt']") == 2, output  # printed once each
    directory = Path(home) / "jobs" / name
    assert not job_processes(directory)
    check_sigterm_checkpoints(checkpoints)
    status = json.loads((directory / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped"


# --------------------------------------------------------------------------- (f)


def _count_get_object(session) -> list[str]:
    calls: list[str] = []
    session.s3_client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: calls.append(params["Key"])
    )
    return calls


def test_channels_from_file_and_s3_outputs_to_s3_and_file(home, tmp_path, session):
    s3 = session.s3_client
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for key, body in {
        "train/a.csv": "1,2",
        "train/sub/b.csv": "3,4",
        "shards/0.txt": "zero",
        "shards/1.txt": "one",
        "shards/2.txt": "two",
        "shards/3.txt": "three",
    }.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    local = tmp_path / "local-data"
    (local / "nested").mkdir(parents=True)
    (local / "x.txt").write_text("local x")
    (local / "nested" / "y.txt").write_text("local y")
    inputs = {
        "local": file_uri(local),
        "train": f"s3://{BUCKET}/train",
        "shards": TrainingInput(f"s3://{BUCKET}/shards/", distribution="ShardedByS3Key"),
    }
    gets = _count_get_object(session)

    # First run: S3 data, outputs to S3.
    est = pytorch("channels.py", sagemaker_session=session, output_path=f"s3://{BUCKET}/output")
    est.fit(inputs, logs=False)
    job = est.latest_training_job
    assert job.model_data == f"s3://{BUCKET}/output/{job.name}/output/model.tar.gz"
    assert gets, "the first run downloads the S3 channels"
    archives = tmp_path / "fetched"
    archives.mkdir()
    for name in ("model.tar.gz", "output.tar.gz"):
        s3.download_file(BUCKET, f"output/{job.name}/output/{name}", str(archives / name))
    model = archive_members(archives / "model.tar.gz")
    assert model == {
        "shared.txt": b"algo-1",
        "weights-algo-1.txt": b"algo-1",
        "weights-algo-2.txt": b"algo-2",
    }
    output = archive_members(archives / "output.tar.gz")
    seen = {h: json.loads(output[f"channels-{h}.json"]) for h in ("algo-1", "algo-2")}
    for host in ("algo-1", "algo-2"):
        assert seen[host]["local"] == {"x.txt": "local x", "nested/y.txt": "local y"}
        assert seen[host]["train"] == {"a.csv": "1,2", "sub/b.csv": "3,4"}
    assert seen["algo-1"]["shards"] == {"0.txt": "zero", "2.txt": "two"}
    assert seen["algo-2"]["shards"] == {"1.txt": "one", "3.txt": "three"}
    # file:// channels are linked, not copied.
    channel = job_dir(home, job) / "algo-1" / "input" / "data" / "local"
    assert channel.is_symlink() and channel.resolve() == local.resolve()

    # Second run: same S3 channels from the cache, outputs to file://.
    gets.clear()
    out = tmp_path / "out"
    est2 = pytorch("channels.py", sagemaker_session=session, output_path=file_uri(out))
    est2.fit(inputs, logs=False)
    assert gets == []
    prefix = out / est2.latest_training_job.name / "output"
    assert archive_members(prefix / "model.tar.gz") == model
    second = archive_members(prefix / "output.tar.gz")
    assert json.loads(second["channels-algo-2.json"]) == seen["algo-2"]


def test_file_system_input_cannot_run_locally(home, tmp_path):
    est = pytorch("sleepy.py", output_path=file_uri(tmp_path / "out"))
    with pytest.raises(ConfigurationError, match="cannot be reached by a local run"):
        est.fit({"train": FileSystemInput("fs-0123abcd", "EFS", "/data")}, logs=False)


# --------------------------------------------------------------------------- (g), (h)


def test_logs_prefixed_by_host_or_silent(home, tmp_path, capsys):
    est = pytorch("sleepy.py", output_path=file_uri(tmp_path / "out"))
    est.fit(logs=False)
    assert capsys.readouterr().out == ""
    est.fit(logs="All")
    lines = capsys.readouterr().out.splitlines()
    for host in ("algo-1", "algo-2"):
        assert f"{host} | [rank {int(host[-1]) - 1}] hello from {host}" in lines
        assert f"{host} | [rank {int(host[-1]) - 1}] goodbye from {host}" in lines
    assert all(line.startswith(("algo-1 | ", "algo-2 | ")) for line in lines)
    assert not any("\033[" in line for line in lines)


def test_fit_without_wait_returns_at_once(home, tmp_path, capsys):
    # The hosts wait for a file the test makes only after fit() returned: fit(wait=False)
    # cannot have waited for them (no timing bound needed).
    go = tmp_path / "go"
    est = pytorch(
        "sleepy.py", hyperparameters={"until": str(go)}, output_path=file_uri(tmp_path / "out")
    )
    job = est.fit(wait=False)
    assert job.describe()["TrainingJobStatus"] == "InProgress"
    go.touch()
    description = job.wait(logs=False)
    assert description["TrainingJobStatus"] == "Completed"
    assert description["LocalJobDir"] == str(job_dir(home, job))
    assert description["TrainingEndTime"] >= description["TrainingStartTime"]
    assert description["ModelArtifacts"]["S3ModelArtifacts"] == est.model_data
    assert Path(est.model_data[len("file://") :]).exists()
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("how", ["stop", "max_run"])
def test_stop_and_max_run_end_stopped_with_checkpoints_saved(home, tmp_path, how):
    marker = tmp_path / "markers"
    marker.mkdir()
    checkpoints = tmp_path / "checkpoints"
    est = pytorch(
        "checkpoint_on_sigterm.py",
        hyperparameters={"marker": str(marker)},
        checkpoint_s3_uri=file_uri(checkpoints),
        output_path=file_uri(tmp_path / "out"),
        max_run=3 if how == "max_run" else 3600,
    )
    job = est.fit(wait=False)
    deadline = time.monotonic() + 30
    while len(list(marker.glob("started-*"))) < 2:
        assert time.monotonic() < deadline, job.describe()
        time.sleep(0.05)
    assert job.describe()["SecondaryStatus"] == "Training"
    if how == "stop":
        job.stop()
        assert job.status == "Stopped"
    with pytest.raises(JobFailedError, match="Stopped"):
        job.wait(logs=False)
    description = job.describe()
    if how == "max_run":
        assert "MaxRuntimeInSeconds" in description["FailureReason"]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["last-algo-1.ckpt", "last-algo-2.ckpt"]
    assert not job_processes(job_dir(home, job))


def test_a_host_that_dies_without_a_report_is_named_with_its_last_log_lines(home, tmp_path):
    """The host's runtime is killed: no failure report, so the reason is how the host
    ended (the signal by name, with the out-of-memory hint of a SIGKILL) and the last
    lines of its log file, and the error shows the same tail."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "die.py").write_text(
        "import os, signal, time\n"
        "print('last words before the host dies', flush=True)\n"
        "time.sleep(1.0)  # the host's runtime writes the line to its log\n"
        "os.kill(os.getppid(), signal.SIGKILL)  # the host's runtime\n"
        "time.sleep(30)\n"
    )
    est = pytorch(
        "die.py", source_dir=str(src), instance_count=1, output_path=file_uri(tmp_path / "out")
    )
    failure = fit_failure(est)
    reason = failure.reason
    assert reason.startswith(
        "AlgorithmError: Host algo-1 failed: killed by SIGKILL (signal 9); SIGKILL is what "
        "the kernel's out-of-memory killer sends"
    ), reason
    assert "last words before the host dies" in reason
    assert "last words before the host dies" in str(failure)  # the log tail shown
    assert not job_processes(job_dir(home, est.latest_training_job))


def test_max_run_names_the_hosts_and_ranks_still_running(home, tmp_path):
    """algo-1 ends at once, both ranks of algo-2 are stuck: the reason names only those."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "stuck.py").write_text(
        "import os, time\nif os.environ['SM_CURRENT_HOST'] == 'algo-2':\n    time.sleep(120)\n"
    )
    est = pytorch(
        "stuck.py",
        source_dir=str(src),
        distribution={"mpi": {"enabled": True, "processes_per_host": 2}},
        output_path=file_uri(tmp_path / "out"),
        max_run=4,
    )
    failure = fit_failure(est, "Stopped")
    reason = failure.reason
    assert "MaxRuntimeInSeconds (4 seconds)" in reason
    assert "Still running when the limit was hit: host algo-2 (ranks 2, 3)." in reason, reason
    assert "algo-1" not in reason, reason
    assert not job_processes(job_dir(home, est.latest_training_job))


def test_log_prefixes_are_coloured_on_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    from launchbay._logs import LogPrinter

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    LogPrinter(["algo-1", "algo-2"], stream=stream).print([("algo-2", "hi")])
    assert stream.getvalue() == "\033[33malgo-2\033[0m | hi\n"


def test_a_finished_job_is_described_from_its_directory(home, tmp_path, capsys):
    from launchbay.backends import process
    from launchbay.backends.local import signals

    est = pytorch("sleepy.py", output_path=file_uri(tmp_path / "out"))
    job = est.fit(logs=False)
    directory = str(job_dir(home, job))
    signals.RUNNING_JOBS.pop(directory)  # as if another Python process had run it
    backend = process.ProcessBackend()
    description = backend.describe(job.name)
    assert description["TrainingJobStatus"] == "Completed"
    assert description["ModelArtifacts"]["S3ModelArtifacts"] == est.model_data
    assert description["TrainingEndTime"] >= description["TrainingStartTime"]
    backend.wait(job.name, logs=True)
    assert "algo-2 | [rank 1] goodbye from algo-2" in capsys.readouterr().out.splitlines()
    with pytest.raises(JobError, match="No local training job"):
        backend.describe("no-such-job")
