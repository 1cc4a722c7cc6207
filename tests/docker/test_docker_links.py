"""Docker mode: what a hostile container leaves cannot pull host files into the outputs.

A container writes symbolic links into ``/opt/ml/model``, ``/opt/ml/output/data``
and ``/opt/ml/checkpoints`` that point at a file that exists only on the host.
The archives, the ``s3://`` checkpoint upload (moto's server) and the ``file://``
outputs must hold no byte of it; links inside the dirs stay links; the loop
``latest -> .`` neither fails nor hangs the job. Also: the compose file, which
holds the job's environment values, is readable by its owner only.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile

import pytest

from job_outputs import file_uri
from launchbay.pytorch import PyTorch

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

BUCKET = "docker-links"
SECRET = b"host-only secret"

HOSTILE_SCRIPT = """
import os
secret = os.environ["HOST_SECRET"]
assert not os.path.exists(secret), "the host file must not be visible in the container"
for d in ("/opt/ml/model", "/opt/ml/output/data", "/opt/ml/checkpoints"):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "weights.pt"), "w") as f:
        f.write("weights")
    os.symlink(secret, os.path.join(d, "stolen.txt"))
    os.symlink(os.path.dirname(secret), os.path.join(d, "hostdir"))
    os.symlink(".", os.path.join(d, "latest"))
    os.symlink(os.path.join(d, "weights.pt"), os.path.join(d, "best.pt"))
print("links written")
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    root = tmp_path / "home"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(root))
    monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", "5")
    return root


def tar_contents(data) -> tuple[dict[str, bytes], dict[str, str]]:
    opened = (
        tarfile.open(fileobj=io.BytesIO(data)) if isinstance(data, bytes) else tarfile.open(data)
    )
    files, links = {}, {}
    with opened as tar:
        for member in tar.getmembers():
            assert member.isfile() or member.issym(), member.name
            if member.issym():
                links[member.name] = member.linkname
            else:
                files[member.name] = tar.extractfile(member).read()
    return files, links


def test_container_links_to_host_files_are_not_packed_or_uploaded(
    home, tmp_path, pytorch_image, docker_client, session
):
    from launchbay.images import parse_image_name

    spec = parse_image_name(pytorch_image)
    secret = tmp_path / "host-secret.txt"
    secret.write_bytes(SECRET)
    src = tmp_path / "src"
    src.mkdir()
    (src / "hostile.py").write_text(HOSTILE_SCRIPT)
    s3 = session.s3_client
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    est = PyTorch(
        entry_point="hostile.py",
        source_dir=str(src),
        role=None,
        instance_type="local",
        instance_count=1,
        framework_version=spec.framework_version,
        py_version="py311",
        output_path=file_uri(tmp_path / "out"),
        checkpoint_s3_uri=f"s3://{BUCKET}/ck",
        environment={"HOST_SECRET": str(secret), "SOME_TOKEN": "env-value"},
        sagemaker_session=session,
    )
    est.fit(logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    prefix = tmp_path / "out" / job.name / "output"
    for name in ("model.tar.gz", "output.tar.gz"):
        files, links = tar_contents(prefix / name)
        assert files == {"weights.pt": b"weights"}, name
        # The container's absolute link through /opt/ml/... is kept, made relative.
        assert links == {"latest": ".", "best.pt": "weights.pt"}, name
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="ck/")["Contents"]
    saved = {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}
    assert saved == {"ck/weights.pt": b"weights", "ck/best.pt": b"weights"}

    compose = home / "jobs" / job.name / "docker-compose.yaml"
    assert "env-value" in compose.read_text()
    assert stat.S_IMODE(os.stat(compose).st_mode) == 0o600
    for name in ("request.json", "status.json"):
        assert stat.S_IMODE(os.stat(home / "jobs" / job.name / name).st_mode) == 0o600, name
