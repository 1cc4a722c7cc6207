"""``tensorboard_output_config`` with ``instance_type="local"``: real containers.

Each container writes a first TensorBoard event file, at the default
``/opt/ml/output/tensorboard`` or at a ``container_local_output_path`` of its own (mounted
from ``<job dir>/algo-N/output/tensorboard``), then waits for ``/opt/ml/output/go``. The
test makes it (through the host's tree) once it saw both hosts' first files at the
destination, the job still running; then both files of both hosts are there.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from job_outputs import file_uri
from launchbay.backends.local import tensorboard
from launchbay.debugger import TensorBoardOutputConfig

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

HOSTS = ("algo-1", "algo-2")
BUCKET = "docker-tensorboard"


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("where", ["file-default-path", "s3-own-path"])
def test_container_tensorboard_files_arrive_while_running_and_at_the_end(
    home, tmp_path, docker_pytorch, docker_client, session, monkeypatch, where
):
    monkeypatch.setattr(tensorboard, "SYNC_SECONDS", 0.5)
    s3 = session.s3_client
    if where == "file-default-path":
        config = TensorBoardOutputConfig(file_uri(tmp_path / "tensorboard"))
    else:
        s3.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
        config = TensorBoardOutputConfig(f"s3://{BUCKET}/tb", "/opt/tensorboard/logs")
    est = docker_pytorch(
        "tensorboard_writer.py",
        output_path=file_uri(tmp_path / "out"),
        hyperparameters={"wait": 300},
        tensorboard_output_config=config,
        sagemaker_session=session,
    )
    job = est.fit(wait=False)
    job_dir = Path(job.describe()["LocalJobDir"])

    def copied() -> dict[str, bytes]:
        if where == "file-default-path":
            return files_under(tmp_path / "tensorboard" / job.name / "tensorboard-output")
        prefix = f"tb/{job.name}/tensorboard-output/"
        found = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents") or []
        return {
            o["Key"][len(prefix) :]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in found
        }

    deadline = time.monotonic() + 240
    while sorted(rel.split("/")[0] for rel in copied()) != ["algo-1-first", "algo-2-first"]:
        status = job.describe()["TrainingJobStatus"]
        assert status == "InProgress", (status, job.describe().get("FailureReason"))
        assert time.monotonic() < deadline, "the first files never arrived"
        time.sleep(0.2)
    assert job.describe()["TrainingJobStatus"] == "InProgress"
    for host in HOSTS:
        (job_dir / host / "output" / "go").touch()
    description = job.wait(logs=False)
    assert description["TrainingJobStatus"] == "Completed", description.get("FailureReason")

    written = {}
    for host in HOSTS:
        # Whatever the path in the container, the host's files are here on this machine.
        written.update(files_under(job_dir / host / "output" / "tensorboard"))
    assert sorted(rel.split("/")[0] for rel in written) == [
        f"{h}-{step}" for h in HOSTS for step in ("first", "second")
    ]
    assert copied() == written
    expected = (
        str(tmp_path / "tensorboard" / job.name / "tensorboard-output")
        if where == "file-default-path"
        else f"s3://{BUCKET}/tb/{job.name}/tensorboard-output"
    )
    assert est.latest_job_tensorboard_artifacts_path() == expected
