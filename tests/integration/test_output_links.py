"""Outputs and checkpoints never follow a symbolic link out of the directory being packed.

A training script (or container) can leave links in its model dir, output data
dir and checkpoint dir. Links that stay inside the dir are kept as links (tar
symlink members, ``file://`` links); a link that leaves it is skipped with a
warning naming it; a loop (``latest -> .``) neither fails nor hangs. Real tar
files, real processes, moto's server for ``s3://``.
"""

from __future__ import annotations

import logging
import os
import tarfile
from pathlib import Path

import pytest

from factories import estimator as make_estimator
from job_outputs import tar_contents
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.staging import LocalStager

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

BUCKET = "links-data"
SECRET = b"host-only secret"


def request_for(tmp_path, **extra):
    request = {
        "TrainingJobName": "job-1",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "local_process"},
        "OutputDataConfig": {"S3OutputPath": f"file://{tmp_path}/out"},
        "InputDataConfig": [],
    }
    request.update(extra)
    return request


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "host-secret.txt"
    path.write_bytes(SECRET)
    return path


def hostile_tree(root: Path, secret: Path) -> None:
    """A dir as a hostile script leaves it: good files and links, escaping links, a loop."""
    (root / "sub").mkdir(parents=True, exist_ok=True)
    (root / "weights.pt").write_bytes(b"weights")
    (root / "sub" / "epoch-3.pt").write_bytes(b"epoch 3")
    os.symlink("sub/epoch-3.pt", root / "best.pt")  # inside, relative
    os.symlink(".", root / "latest")  # a loop
    os.symlink(str(root / "weights.pt"), root / "sub" / "abs.pt")  # inside, absolute
    os.symlink(str(secret), root / "stolen.txt")  # out, absolute
    os.symlink("../" * 12 + str(secret).lstrip("/"), root / "sub" / "dotdot.txt")  # out, ..
    os.symlink("latest/sub/..", root / "chain")  # inside through another link (= root)
    os.symlink("chain/../" + secret.name, root / "chained.txt")  # out through two links
    os.symlink("loop-b", root / "loop-a")
    os.symlink("loop-a", root / "loop-b")
    os.symlink(str(secret.parent), root / "hostdir")  # a dir outside


EXPECTED_FILES = {"weights.pt": b"weights", "sub/epoch-3.pt": b"epoch 3"}
EXPECTED_LINKS = {
    "best.pt": "sub/epoch-3.pt",
    "latest": ".",
    "sub/abs.pt": "../weights.pt",
    "chain": ".",
}
ESCAPING = ["stolen.txt", "sub/dotdot.txt", "chained.txt", "loop-a", "loop-b", "hostdir"]


def assert_no_secret_anywhere(root: Path) -> None:
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink():
                target = os.path.realpath(path)
                assert not target.startswith(str(root.parent / "host-secret")), path
                continue
            if path.suffix == ".gz":
                with tarfile.open(path) as tar:
                    for member in tar.getmembers():
                        if member.isfile():
                            assert tar.extractfile(member).read() != SECRET, (path, member.name)
            else:
                assert path.read_bytes() != SECRET, path


def test_model_archive_keeps_inside_links_and_skips_escaping_ones(tmp_path, secret, caplog):
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1"])
    model = Path(layout.host_dir("algo-1")) / "model"
    data = Path(layout.host_dir("algo-1")) / "output" / "data"
    hostile_tree(model, secret)
    hostile_tree(data, secret)
    # How a container writes an absolute link: through its own path for the dir.
    os.symlink("/opt/ml/model/weights.pt", model / "container-abs.pt")
    with caplog.at_level(logging.WARNING, logger="launchbay"):
        LocalStager(home=str(tmp_path / "home")).collect_outputs(request_for(tmp_path), layout)
    prefix = tmp_path / "out" / "job-1" / "output"
    files, links = tar_contents(prefix / "model.tar.gz")
    assert files == EXPECTED_FILES
    assert links == {**EXPECTED_LINKS, "container-abs.pt": "weights.pt"}
    files, links = tar_contents(prefix / "output.tar.gz")
    assert files == EXPECTED_FILES
    assert links == EXPECTED_LINKS
    for rel in ESCAPING:
        assert any(
            rel in r.getMessage() and "Not packing" in r.getMessage() for r in caplog.records
        ), rel
    stolen = [r.getMessage() for r in caplog.records if "stolen.txt" in r.getMessage()]
    assert "which leaves" in stolen[0] and str(secret) in stolen[0]
    # The archive unpacks cleanly with tarfile's strictest filter: every link stays inside.
    with tarfile.open(prefix / "model.tar.gz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert (tmp_path / "unpacked" / "best.pt").read_bytes() == b"epoch 3"
    assert_no_secret_anywhere(tmp_path / "out")


def test_uncompressed_outputs_to_file_keep_links(tmp_path, secret):
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1"])
    hostile_tree(Path(layout.host_dir("algo-1")) / "model", secret)
    request = request_for(tmp_path)
    request["OutputDataConfig"]["CompressionType"] = "NONE"
    LocalStager(home=str(tmp_path / "home")).collect_outputs(request, layout)
    out = tmp_path / "out" / "job-1" / "output" / "model"
    assert os.readlink(out / "best.pt") == "sub/epoch-3.pt"
    assert os.readlink(out / "latest") == "."
    assert (out / "best.pt").read_bytes() == b"epoch 3"
    for rel in ESCAPING:
        assert not os.path.lexists(out / rel), rel
    assert_no_secret_anywhere(tmp_path / "out")


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_checkpoint_save_and_restore_never_leave_the_tree(
    tmp_path, session, secret, scheme, caplog
):
    if scheme == "s3":
        session.s3_client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
        )
        uri = f"s3://{BUCKET}/ck"
    else:
        uri = f"file://{tmp_path}/ck"
    request = request_for(tmp_path, CheckpointConfig={"S3Uri": uri})
    stager = LocalStager(session, home=str(tmp_path / "home"))
    first = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1"])
    assert stager.restore_checkpoints(request, first) == 0
    (directory,) = stager.checkpoint_dirs(request, first)
    hostile_tree(Path(directory), secret)
    with caplog.at_level(logging.WARNING, logger="launchbay"):
        stager.save_checkpoints(request, first)
    for rel in ESCAPING:
        assert any(
            rel in r.getMessage() and "Not saving" in r.getMessage() for r in caplog.records
        ), rel

    if scheme == "s3":
        listed = session.s3_client.list_objects_v2(Bucket=BUCKET, Prefix="ck/")["Contents"]
        saved = {
            o["Key"][3:]: session.s3_client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in listed
        }
        warned = [r.getMessage() for r in caplog.records if "S3 has no links" in r.getMessage()]
        assert any(m.startswith("Not uploading latest to s3://") for m in warned), warned
        # S3 has no links: file links go up as copies read inside the tree, dir links not at all.
        assert saved == {
            **EXPECTED_FILES,
            "best.pt": b"epoch 3",
            "sub/abs.pt": b"weights",
        }
    else:
        saved_dir = tmp_path / "ck"
        assert os.readlink(saved_dir / "best.pt") == "sub/epoch-3.pt"
        assert os.readlink(saved_dir / "latest") == "."
        for rel in ESCAPING:
            assert not os.path.lexists(saved_dir / rel), rel
        assert_no_secret_anywhere(saved_dir)
        # A saved tree that someone changed to hold an escaping link: restore skips it.
        os.symlink(str(secret), saved_dir / "planted.txt")

    second = JobLayout.create(str(tmp_path / "jobs"), "job-2", ["algo-1"])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="launchbay"):
        stager.restore_checkpoints(request, second)
    (restored,) = stager.checkpoint_dirs(request, second)
    restored = Path(restored)
    assert (restored / "weights.pt").read_bytes() == b"weights"
    assert (restored / "best.pt").read_bytes() == b"epoch 3"
    assert not os.path.lexists(restored / "planted.txt")
    if scheme == "file":
        assert os.readlink(restored / "latest") == "."
        assert any("planted.txt" in r.getMessage() for r in caplog.records)
    assert_no_secret_anywhere(restored)
    # Nothing restored and untouched is saved again.
    assert stager.save_checkpoints(request, second) == 0


def test_s3_checkpoint_restore_never_writes_through_a_link(tmp_path, session, secret):
    """A custom LocalPath kept between jobs holds ``sub -> <host dir>``; a key ``sub/x`` skips it."""
    session.s3_client.create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    session.s3_client.put_object(Bucket=BUCKET, Key="ck/sub/x.pt", Body=b"x")
    session.s3_client.put_object(Bucket=BUCKET, Key="ck/ok.pt", Body=b"ok")
    outside = tmp_path / "outside"
    outside.mkdir()
    local = tmp_path / "custom-ck"
    local.mkdir()
    os.symlink(str(outside), local / "sub")
    request = request_for(
        tmp_path, CheckpointConfig={"S3Uri": f"s3://{BUCKET}/ck", "LocalPath": str(local)}
    )
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1"])
    LocalStager(session, home=str(tmp_path / "home")).restore_checkpoints(request, layout)
    assert (local / "ok.pt").read_bytes() == b"ok"
    assert os.listdir(outside) == []


# --------------------------------------------------------------------------- end to end

HOSTILE_SCRIPT = """
import os
secret = os.environ["HOST_SECRET"]
model = os.environ["SM_MODEL_DIR"]
data = os.environ["SM_OUTPUT_DATA_DIR"]
ck = "/opt/ml/checkpoints" if os.path.isdir("/opt/ml/checkpoints") else os.path.join(
    os.path.dirname(model), "checkpoints")
for d in (model, data, ck):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "weights.pt"), "w") as f:
        f.write("weights")
    os.symlink(secret, os.path.join(d, "stolen.txt"))
    os.symlink(os.path.dirname(secret), os.path.join(d, "hostdir"))
    os.symlink(".", os.path.join(d, "latest"))
    os.symlink("weights.pt", os.path.join(d, "best.pt"))
print("wrote links")
"""


def test_local_process_job_packs_no_host_file(tmp_path, monkeypatch, secret):
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "hostile.py").write_text(HOSTILE_SCRIPT)
    estimator = make_estimator(
        "hostile.py",
        src,
        output_path=f"file://{tmp_path}/out",
        checkpoint_s3_uri=f"file://{tmp_path}/ck",
        environment={"HOST_SECRET": str(secret)},
    )
    estimator.fit(wait=True, logs=False)
    prefix = tmp_path / "out" / estimator.latest_training_job.name / "output"
    for name in ("model.tar.gz", "output.tar.gz"):
        files, links = tar_contents(prefix / name)
        assert files == {"weights.pt": b"weights"}, name
        assert links == {"latest": ".", "best.pt": "weights.pt"}, name
    assert (tmp_path / "ck" / "weights.pt").read_bytes() == b"weights"
    assert os.readlink(tmp_path / "ck" / "best.pt") == "weights.pt"
    assert not os.path.lexists(tmp_path / "ck" / "stolen.txt")
    assert_no_secret_anywhere(tmp_path / "out")
    assert_no_secret_anywhere(tmp_path / "ck")
