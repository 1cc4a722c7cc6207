"""Second hostile round, Docker side: what a container can reach, and what the client reads back.

The containers run a minimal image made here, without a registry: ``docker import`` of a
root filesystem holding a static busybox and a ``train`` shell script that plays the hostile
container. The client (launchbay, often run as root) must

* never follow a link the container made: not ``/opt/ml/output/data -> <host dir>`` when
  packing ``output.tar.gz``, not ``/opt/ml/output/failure -> <host file>`` when reading the
  failure reason (issue 25, item 2);
* give the container exactly its channel's files: a single-file ``file://`` channel does not
  mount the file's directory, an S3 channel does not mount the shared S3 cache (item 3);
* refuse a job name whose containers another ``LAUNCHBAY_HOME`` runs, naming it, and leave
  that job alone.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from job_outputs import containers_left, file_uri
from launchbay import Estimator, JobError, JobFailedError

pytestmark = pytest.mark.docker

IMAGE = "launchbay-test/hostile:busybox"
HOST_SECRET = "HOST-ONLY-SECRET-4b1d"
SSH_KEY = "SSH-PRIVATE-KEY-77aa"
OTHER_OBJECT = "ANOTHER-JOBS-OBJECT-19ce"

TRAIN = r"""#!/bin/sh
echo "== mounts"
cat /proc/self/mountinfo
echo "== channel files"
cd /opt/ml/input/data && find . -type f | sort | while read -r f; do echo "file $f: $(cat "$f")"; done
env | grep '^PROBE_' | while IFS='=' read -r _name probe; do
  if cat "$probe" >/dev/null 2>&1; then echo "READABLE $probe: $(cat "$probe")"; fi
done
case "$MODE" in
  links)
    rm -rf /opt/ml/output/data
    ln -s "$HOST_DIR" /opt/ml/output/data
    ln -s "$HOST_FILE" /opt/ml/output/failure
    exit 3 ;;
  sleep)
    echo started
    sleep 60 ;;
esac
echo done
"""


@pytest.fixture(scope="module")
def hostile_image(docker_client) -> str:
    """A busybox image made with ``docker import`` (no registry, no pull)."""
    busybox = shutil.which("busybox")
    assert busybox, "busybox-static is needed (.ci/run installs it)"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(busybox, arcname="bin/busybox")
        for name in (
            "sh",
            "cat",
            "env",
            "grep",
            "find",
            "sort",
            "ln",
            "rm",
            "sleep",
            "echo",
            "mkdir",
        ):
            info = tarfile.TarInfo(f"bin/{name}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)
        for directory in ("tmp", "proc", "sys", "dev", "etc", "opt/ml", "usr/bin"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        data = TRAIN.encode()
        info = tarfile.TarInfo("usr/bin/train")
        info.size = len(data)
        info.mode = 0o755
        tar.addfile(info, io.BytesIO(data))
    subprocess.run(
        ["docker", "import", "--change", "ENV PATH=/usr/bin:/bin", "-", IMAGE],
        input=buffer.getvalue(),
        check=True,
        capture_output=True,
    )
    return IMAGE


def _estimator(image: str, tmp_path: Path, **kwargs) -> Estimator:
    options = dict(
        image_uri=image,
        role=None,
        instance_type="local",
        instance_count=1,
        output_path=file_uri(tmp_path / "out"),
    )
    options.update(kwargs)
    return Estimator(**options)


def test_the_client_follows_no_link_the_container_makes(home, tmp_path, hostile_image):
    """Item 2: ``output/data -> host dir`` is not packed, ``failure -> host file`` not read."""
    host_dir = tmp_path / "host-dir"
    host_dir.mkdir()
    (host_dir / "credentials").write_text(HOST_SECRET)
    host_file = tmp_path / "shadow"
    host_file.write_text(HOST_SECRET)
    est = _estimator(
        hostile_image,
        tmp_path,
        environment={"MODE": "links", "HOST_DIR": str(host_dir), "HOST_FILE": str(host_file)},
    )
    with pytest.raises(JobFailedError) as raised:
        est.fit(logs=False)
    assert HOST_SECRET not in str(raised.value)
    job = est.latest_training_job
    description = job.describe()
    assert description["TrainingJobStatus"] == "Failed"
    assert HOST_SECRET not in description["FailureReason"]
    assert "exit code 3" in description["FailureReason"]
    job_dir = home / "jobs" / job.name
    assert HOST_SECRET not in (job_dir / "status.json").read_text()
    prefix = tmp_path / "out" / job.name / "output"
    assert HOST_SECRET not in (prefix / "failure").read_text()
    with tarfile.open(prefix / "output.tar.gz") as tar:
        assert tar.getnames() == []
    for path in prefix.rglob("*"):
        if path.is_file():
            assert HOST_SECRET.encode() not in path.read_bytes(), path
    # The host's files are untouched.
    assert (host_dir / "credentials").read_text() == HOST_SECRET
    assert host_file.read_text() == HOST_SECRET


def test_a_container_is_given_exactly_its_channels_files(home, tmp_path, hostile_image, session):
    """Item 3: neither the user's directory around a file channel nor the S3 cache is mounted."""
    s3 = session.s3_client
    for bucket in ("hostile-mine", "hostile-other"):
        s3.create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
    for index in range(3):
        s3.put_object(Bucket="hostile-mine", Key=f"data/part-{index}", Body=f"mine-{index}")
    for index in range(5):
        s3.put_object(Bucket="hostile-other", Key=f"x/obj-{index}", Body=OTHER_OBJECT)
    user_home = tmp_path / "me"
    (user_home / ".ssh").mkdir(parents=True)
    (user_home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    (user_home / "train.csv").write_text("a,b\n1,2")
    # Another job's download fills the shared S3 cache first.
    other = _estimator(hostile_image, tmp_path, sagemaker_session=session)
    other.fit({"other": "s3://hostile-other/x"}, logs=False)
    cache = home / "cache" / "s3" / "objects"
    cached_other = [p for p in cache.rglob("*") if p.is_file()]
    assert len(cached_other) == 5
    probes = [
        str(user_home / ".ssh" / "id_rsa"),
        f"/opt/ml/input/data/file/../../../../..{user_home}/.ssh/id_rsa",
        *(str(p) for p in cached_other),
    ]
    est = _estimator(
        hostile_image,
        tmp_path,
        environment={f"PROBE_{i}": probe for i, probe in enumerate(probes)},
        sagemaker_session=session,
    )
    est.fit({"file": file_uri(user_home / "train.csv"), "s3": "s3://hostile-mine/data"}, logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    log = (home / "jobs" / job.name / "logs" / "algo-1.log").read_text()
    files = sorted(line for line in log.splitlines() if line.startswith("file "))
    assert files == [
        "file ./file/train.csv: a,b",
        "file ./s3/part-0: mine-0",
        "file ./s3/part-1: mine-1",
        "file ./s3/part-2: mine-2",
    ], log
    assert "READABLE" not in log
    assert SSH_KEY not in log and OTHER_OBJECT not in log
    mounts = log.split("== mounts", 1)[1].split("== channel files", 1)[0]
    for outside in (str(user_home), str(home / "cache")):
        assert f" {outside} " not in mounts and f" {outside}/" not in mounts, mounts


def test_a_job_name_running_from_another_home_is_refused_by_name(
    tmp_path, hostile_image, monkeypatch, docker_client
):
    """Message: a clash with another LAUNCHBAY_HOME's running job, not a raw 409 Conflict."""
    monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", "2")
    first_home = tmp_path / "home-1"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(first_home))
    first = _estimator(hostile_image, tmp_path, environment={"MODE": "sleep"})
    first.fit(job_name="hostile-clash", wait=False)
    try:
        deadline = time.monotonic() + 60
        log = first_home / "jobs" / "hostile-clash" / "logs" / "algo-1.log"
        while time.monotonic() < deadline and not (log.exists() and "started" in log.read_text()):
            time.sleep(0.2)
        monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home-2"))
        second = _estimator(hostile_image, tmp_path)
        with pytest.raises(JobError) as raised:
            second.fit(job_name="hostile-clash", logs=False)
        message = str(raised.value)
        assert "409" not in message
        assert str(first_home / "jobs" / "hostile-clash") in message
        assert "another job_name" in message
        assert not (tmp_path / "home-2" / "jobs" / "hostile-clash").exists()
        running = docker_client.containers.list(filters={"name": "launchbay-hostile-clash-algo-1"})
        assert running, "the first job's container must be left running"
    finally:
        monkeypatch.setenv("LAUNCHBAY_HOME", str(first_home))
        first.latest_training_job.stop()
        with pytest.raises(JobFailedError, match="Stopped"):
            first.latest_training_job.wait(logs=False)
    assert not containers_left(docker_client, name="launchbay-hostile-clash-algo-1")
    assert os.path.isdir(first_home / "jobs" / "hostile-clash")
