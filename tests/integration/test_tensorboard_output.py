"""``tensorboard_output_config`` in ``local_process`` jobs: TensorBoard files reach
``<s3_output_path>/<job>/tensorboard-output`` while the job runs and when it ends.

The script (``local_process_scripts/tensorboard_writer.py``) writes a first event file on
every host, then waits for ``output/go`` in its host's tree; the test makes it only once
it saw the first files at the destination (``file://``, and ``s3://`` on the moto
server), with the job still running. Then the hosts write a second file and end, and
both are there. A job that fails, or is stopped, gets its files copied at its end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from factories import estimator as make_estimator
from job_outputs import file_uri
from launchbay import JobFailedError
from launchbay.backends.local import tensorboard
from launchbay.debugger import TensorBoardOutputConfig
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "local_process_scripts"
HOSTS = ("algo-1", "algo-2")
BUCKET = "tensorboard-local"


def estimator(tmp_path: Path, destination: str, **kwargs) -> PyTorch:
    options = dict(instance_count=2, tensorboard_output_config=TensorBoardOutputConfig(destination))
    return make_estimator(
        "tensorboard_writer.py", SCRIPTS, out=tmp_path / "out", **options | kwargs
    )


def wait_until(found: Callable[[], bool], job, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not found():
        status = job.describe()["TrainingJobStatus"]
        assert status == "InProgress", f"the job ended {status} before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.1)


def host_files(job, host: str) -> dict[str, bytes]:
    """What ``host`` wrote to its TensorBoard dir (``output/tensorboard`` in its tree)."""
    root = Path(job.describe()["LocalJobDir"]) / host / "output" / "tensorboard"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def let_hosts_go(job) -> None:
    for host in HOSTS:
        (Path(job.describe()["LocalJobDir"]) / host / "output" / "go").touch()


@pytest.fixture
def quick_sync(monkeypatch):
    monkeypatch.setattr(tensorboard, "SYNC_SECONDS", 0.5)


def test_files_reach_a_file_destination_while_the_job_runs_and_at_its_end(
    home, tmp_path, quick_sync
):
    dest = tmp_path / "tensorboard"
    est = estimator(tmp_path, file_uri(dest), hyperparameters={"wait": 120})
    job = est.fit(wait=False)
    prefix = dest / job.name / "tensorboard-output"

    def arrived(step: str) -> list[Path]:
        return [p for h in HOSTS for p in (prefix / f"{h}-{step}").glob("events.out.tfevents.*")]

    wait_until(lambda: len(arrived("first")) == 2, job, "first files at the destination")
    # While the job runs: every host waits for its go-ahead, nothing else was written.
    assert job.describe()["TrainingJobStatus"] == "InProgress"
    assert arrived("second") == []
    let_hosts_go(job)
    description = job.wait(logs=False)
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")

    # After it: both files of both hosts, as the hosts wrote them, under one prefix.
    copied = {
        p.relative_to(prefix).as_posix(): p.read_bytes() for p in prefix.rglob("*") if p.is_file()
    }
    written = {rel: data for host in HOSTS for rel, data in host_files(job, host).items()}
    assert copied == written
    assert {rel.split("/")[0] for rel in copied} == {
        f"{h}-{step}" for h in HOSTS for step in ("first", "second")
    }
    assert est.latest_job_tensorboard_artifacts_path() == str(prefix)
    assert description["TensorBoardOutputConfig"] == {"S3OutputPath": file_uri(dest)}


def test_files_reach_an_s3_destination_while_the_job_runs_and_at_its_end(
    home, tmp_path, session, quick_sync
):
    s3 = session.s3_client
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    est = estimator(
        tmp_path,
        f"s3://{BUCKET}/runs/",
        sagemaker_session=session,
        output_path=f"s3://{BUCKET}/output",
        hyperparameters={"wait": 120},
    )
    job = est.fit(wait=False)
    prefix = f"runs/{job.name}/tensorboard-output/"

    def keys() -> list[str]:
        found = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents") or []
        return sorted(o["Key"][len(prefix) :] for o in found)

    wait_until(lambda: len(keys()) == 2, job, "first files in S3")
    assert job.describe()["TrainingJobStatus"] == "InProgress"
    assert sorted(k.split("/")[0] for k in keys()) == ["algo-1-first", "algo-2-first"]
    let_hosts_go(job)
    description = job.wait(logs=False)
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")

    written = {rel: data for host in HOSTS for rel, data in host_files(job, host).items()}
    assert keys() == sorted(written)
    for rel, data in written.items():
        assert s3.get_object(Bucket=BUCKET, Key=prefix + rel)["Body"].read() == data
    assert est.latest_job_tensorboard_artifacts_path() == f"s3://{BUCKET}/{prefix}".rstrip("/")


def test_a_failed_job_gets_its_files_copied_at_its_end(home, tmp_path, monkeypatch):
    # No copy while it runs: what arrives was copied when the job ended.
    monkeypatch.setattr(tensorboard, "SYNC_SECONDS", 3600.0)
    dest = tmp_path / "tensorboard"
    est = estimator(
        tmp_path,
        file_uri(dest),
        hyperparameters={"fail-early": 1},
        tensorboard_output_config=TensorBoardOutputConfig(
            file_uri(dest), container_local_output_path="/opt/ml/output/data/tb"
        ),
    )
    job = est.fit(wait=False)
    with pytest.raises(JobFailedError):
        job.wait(logs=False)
    description = job.describe()
    assert description["TrainingJobStatus"] == "Failed"
    prefix = dest / job.name / "tensorboard-output"
    # A custom LocalPath in /opt/ml is the host's own directory there. The host that
    # failed first wrote its file; the other one may have been stopped before it did.
    written = {}
    for host in HOSTS:
        source = Path(description["LocalJobDir"]) / host / "output" / "data" / "tb"
        for event in source.rglob("events.out.tfevents.*"):
            written[event.relative_to(source).as_posix()] = event.read_bytes()
    failed = description["LocalFailedHost"]
    assert any(rel.startswith(f"{failed}-first/") for rel in written), written
    copied = {
        p.relative_to(prefix).as_posix(): p.read_bytes() for p in prefix.rglob("*") if p.is_file()
    }
    assert copied == written


def test_a_stopped_job_gets_its_files_copied_at_its_end(home, tmp_path, monkeypatch):
    monkeypatch.setattr(tensorboard, "SYNC_SECONDS", 3600.0)
    dest = tmp_path / "tensorboard"
    est = estimator(tmp_path, file_uri(dest), instance_count=1, hyperparameters={"wait": 120})
    job = est.fit(wait=False)
    wait_until(lambda: bool(host_files(job, "algo-1")), job, "the first file on the host")
    job.stop()
    with pytest.raises(JobFailedError):
        job.wait(logs=False)
    assert job.describe()["TrainingJobStatus"] == "Stopped"
    prefix = dest / job.name / "tensorboard-output"
    copied = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    assert copied == set(host_files(job, "algo-1"))
    assert [rel.split("/")[0] for rel in copied] == ["algo-1-first"]
