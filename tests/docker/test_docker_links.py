"""Docker mode: what a hostile container leaves cannot pull host files into the outputs.

A container writes symbolic links into ``/opt/ml/model``, ``/opt/ml/output/data``
and ``/opt/ml/checkpoints`` that point at a file that exists only on the host.
The archives, the ``s3://`` checkpoint upload (moto's server) and the ``file://``
outputs must hold no byte of it; links inside the dirs stay links; the loop
``latest -> .`` neither fails nor hangs the job. Also: the compose file, which
holds the job's environment values, is readable by its owner only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from factories import estimator
from job_outputs import file_uri, tar_contents

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
    est = estimator(
        "hostile.py",
        src,
        instance_type="local",
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


CODE_CHECK_SCRIPT = r"""
import io, json, os, sys, tarfile, tempfile
sys.path.insert(0, "/lb")
from launchbay.runtime import code
from launchbay.runtime.errors import UnsafeArchiveError

cases = json.loads(sys.argv[1])
result = {"has_data_filter": hasattr(tarfile, "data_filter"), "version": sys.version.split()[0]}
for case, members in cases.items():
    work = tempfile.mkdtemp()
    archive = os.path.join(work, "s.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        for kind, name, payload in [["file", "train.py", "x"], *members]:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload.encode()))
                continue
            info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "dir": tarfile.DIRTYPE}[kind]
            info.linkname = payload
            tar.addfile(info)
    dest = os.path.join(work, "code")
    try:
        code.safe_extract(archive, dest)
        refused = False
    except UnsafeArchiveError:
        refused = True
    except Exception as exc:  # extraction itself failed part way
        refused = f"{type(exc).__name__}: {exc}"
    result[case] = {"refused": refused, "inside": os.listdir(dest),
                    "outside": sorted(set(os.listdir(work)) - {"s.tar.gz", "code"})}
print(json.dumps(result))
"""


def test_code_archive_check_holds_on_the_images_python_without_the_data_filter(
    pytorch_image, docker_client, tmp_path
):
    """The training image's Python (Debian bookworm 3.11.2) has no tarfile data filter."""
    import json

    from runtime.test_runtime_code import CHAINED

    sdk = Path(__file__).resolve().parents[2] / "sdk"
    output = docker_client.containers.run(
        pytorch_image,
        ["python3", "-c", CODE_CHECK_SCRIPT, json.dumps(CHAINED)],
        volumes={str(sdk): {"bind": "/lb", "mode": "ro"}},
        network_disabled=True,
        remove=True,
        entrypoint=[],
    )
    result = json.loads(output.decode().strip().splitlines()[-1])
    assert result.pop("has_data_filter") is False, "the image's Python grew the filter"
    result.pop("version")
    for case, outcome in result.items():
        assert outcome == {"refused": True, "inside": [], "outside": []}, (case, outcome)
