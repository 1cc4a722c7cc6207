"""Second hostile round, local side: secrets on disk, the job's own directories as links, the S3
cache, colliding S3 keys and link loops in ``file://`` channels.

Real ``local_process`` jobs (torch with gloo, OpenMPI), real files and links, moto's server
for S3. Each test failed on the code before its fix (issue 25, items 1, 4, 10, 23 and 25).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import tarfile
from pathlib import Path

import pytest

from factories import estimator
from launchbay import InputError
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.staging import LocalStager
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SECRET_VALUE = "s3cr3t-token-value-9f2c"
HOST_SECRET = b"host-only secret bytes"

# Rank 0 of every host looks, while the job runs, at the environments the hosts published
# for their ranks, and writes what it saw (modes only, never the contents) to its model dir.
ENV_PROBE = """
import hashlib, json, os, stat, sys, time
shared = os.environ.get("LAUNCHBAY_SHARED_DIR", "")
env_dir = os.path.join(shared, "mpi", "env")
seen = {}
for _ in range(50):
    if os.path.isdir(env_dir) and len(os.listdir(env_dir)) >= 2:
        break
    time.sleep(0.1)
if os.path.isdir(env_dir):
    seen["dir"] = oct(stat.S_IMODE(os.stat(env_dir).st_mode))
    for name in sorted(os.listdir(env_dir)):
        seen[name] = oct(stat.S_IMODE(os.stat(os.path.join(env_dir, name)).st_mode))
if os.environ.get("RANK", "0") == "0" or os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "modes.json"), "w") as f:
        json.dump(seen, f)
assert hashlib.sha256(os.environ["MY_TOKEN"].encode()).hexdigest() == "TOKEN_DIGEST"
print("probed", sorted(seen), flush=True)
""".replace("TOKEN_DIGEST", hashlib.sha256(SECRET_VALUE.encode()).hexdigest())


def _estimator(src: Path, entry: str, out: Path, **kwargs) -> PyTorch:
    return estimator(entry, src, out=out, **{"instance_count": 2, **kwargs})


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            if needle in path.read_bytes():
                found.append(path)
    return found


@pytest.mark.parametrize(
    "distribution",
    [
        {"torch_distributed": {"enabled": True}},
        {"mpi": {"enabled": True}},
        {"smdistributed": {"dataparallel": {"enabled": True}}},
    ],
    ids=["torch_distributed", "mpi", "smdistributed"],
)
def test_rank_environments_are_private_and_gone_after_the_job(
    home, tmp_path, distribution, monkeypatch
):
    """Item 1: the published environments hold AWS keys and environment= values."""
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + SECRET_VALUE)
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.py").write_text(ENV_PROBE)
    est = _estimator(
        src,
        "probe.py",
        tmp_path / "out",
        distribution=distribution,
        environment={"MY_TOKEN": SECRET_VALUE},
    )
    est.fit(logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    with tarfile.open(tmp_path / "out" / job.name / "output" / "model.tar.gz") as tar:
        modes = json.load(tar.extractfile("modes.json"))
    # While the job ran: 0600 files in a 0700 directory.
    assert modes["dir"] == "0o700", modes
    files = {k: v for k, v in modes.items() if k != "dir"}
    assert set(files) == {"algo-1.json", "algo-2.json"}, modes
    assert set(files.values()) == {"0o600"}, modes
    job_dir = home / "jobs" / job.name
    assert stat.S_IMODE(os.stat(job_dir).st_mode) == 0o700
    # After it: no published environment is left; what still holds a secret is 0600.
    assert not (job_dir / "shared" / "mpi" / "env").exists() or not os.listdir(
        job_dir / "shared" / "mpi" / "env"
    )
    for needle in (SECRET_VALUE.encode(), ("aws-" + SECRET_VALUE).encode()):
        for path in _files_holding(job_dir, needle):
            assert path.name in ("request.json", "status.json"), path
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_environments_of_killed_hosts_are_removed_without_following_links(tmp_path):
    """The client's sweep at the job's end removes what killed hosts left, through no link."""
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1", "algo-2"])
    env_dir = Path(layout.shared_dir) / "mpi" / "env"
    env_dir.mkdir(parents=True)
    (env_dir / "algo-1.json").write_text("{}")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "host-env.json").write_text("keep me")
    ranks = Path(layout.host_dir("algo-2")) / "output" / "ranks"
    ranks.parent.mkdir(parents=True)
    os.symlink(outside, ranks)  # a container made its ranks dir a link to a host directory
    own = Path(layout.host_dir("algo-1")) / "output" / "ranks"
    own.mkdir(parents=True)
    (own / "host-env.json").write_text("{}")
    layout.forget_secrets()
    assert not env_dir.exists()
    assert not (own / "host-env.json").exists()
    assert (outside / "host-env.json").read_text() == "keep me"


# --------------------------------------------------------------------------- item 4

LINKING_SCRIPT = """
import os, shutil
outside = os.environ["OUTSIDE"]
for var in ("SM_MODEL_DIR", "SM_OUTPUT_DATA_DIR"):
    d = os.environ[var]
    shutil.rmtree(d, ignore_errors=True)
    os.symlink(outside, d)
ck = os.path.join(os.path.dirname(os.environ["SM_MODEL_DIR"]), "checkpoints")
shutil.rmtree(ck, ignore_errors=True)
os.symlink(outside, ck)
print("replaced the job's directories by links", flush=True)
"""


def test_the_jobs_own_directories_replaced_by_links_are_not_followed(
    home, tmp_path, session, caplog
):
    """Item 4: SM_MODEL_DIR, SM_OUTPUT_DATA_DIR and the checkpoint dir made links out."""
    bucket = "hostile-ck"
    session.s3_client.create_bucket(
        Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_bytes(HOST_SECRET)
    src = tmp_path / "src"
    src.mkdir()
    (src / "linker.py").write_text(LINKING_SCRIPT)
    est = _estimator(
        src,
        "linker.py",
        tmp_path / "out",
        instance_count=1,
        environment={"OUTSIDE": str(outside)},
        checkpoint_s3_uri=f"s3://{bucket}/ck",
        sagemaker_session=session,
    )
    with caplog.at_level(logging.WARNING, logger="launchbay"):
        est.fit(logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    prefix = tmp_path / "out" / job.name / "output"
    for name in ("model.tar.gz", "output.tar.gz"):
        with tarfile.open(prefix / name) as tar:
            assert tar.getnames() == [], name
    listed = session.s3_client.list_objects_v2(Bucket=bucket, Prefix="ck/")
    assert listed.get("KeyCount", 0) == 0
    warned = " ".join(r.getMessage() for r in caplog.records)
    for rel in ("model", "output/data", "checkpoints"):
        assert f"algo-1/{rel} is a symbolic link to {str(outside)!r}" in warned, rel
    assert (outside / "id_rsa").read_bytes() == HOST_SECRET


# --------------------------------------------------------------------------- item 10

EDITING_SCRIPT = """
import os
channel = os.environ["SM_CHANNEL_TRAIN"]
with open(os.path.join(channel, "data.csv")) as f:
    print("read:", f.read(), flush=True)
if os.environ.get("EDIT") == "1":
    with open(os.path.join(channel, "data.csv"), "r+") as f:
        f.write("POISONED")
"""


def test_a_jobs_in_place_edit_of_its_s3_input_is_not_seen_by_later_jobs(home, tmp_path, session):
    """Item 10: SageMaker gives each job its own copy; the shared cache must act the same."""
    bucket = "hostile-cache"
    s3 = session.s3_client
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket=bucket, Key="train/data.csv", Body=b"original")
    src = tmp_path / "src"
    src.mkdir()
    (src / "edit.py").write_text(EDITING_SCRIPT)
    logs = []
    for edit in ("1", "0"):
        est = _estimator(
            src,
            "edit.py",
            tmp_path / "out",
            instance_count=1,
            environment={"EDIT": edit},
            sagemaker_session=session,
        )
        est.fit({"train": f"s3://{bucket}/train"}, logs=False)
        job = est.latest_training_job
        assert job.describe()["TrainingJobStatus"] == "Completed"
        logs.append((home / "jobs" / job.name / "logs" / "algo-1.log").read_text())
    assert "read: original" in logs[0]
    assert "read: original" in logs[1], logs[1]
    assert s3.get_object(Bucket=bucket, Key="train/data.csv")["Body"].read() == b"original"
    cached = list((home / "cache" / "s3" / "objects").rglob("*"))
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in cached if p.is_file())


# --------------------------------------------------------------------------- item 23


@pytest.mark.parametrize(
    ("keys", "named"),
    [
        (["dup/x", "dup//x"], ["s3://hostile-keys/dup/x", "s3://hostile-keys/dup//x"]),
        (["a", "a/b"], ["s3://hostile-keys/a", "s3://hostile-keys/a/b"]),
    ],
    ids=["same-path", "file-and-directory"],
)
def test_s3_keys_that_land_on_one_path_are_named(home, tmp_path, session, keys, named):
    s3 = session.s3_client
    s3.create_bucket(
        Bucket="hostile-keys", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    for key in keys:
        s3.put_object(Bucket="hostile-keys", Key=key, Body=b"x")
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1"])
    request = {
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {"S3DataSource": {"S3Uri": "s3://hostile-keys/"}},
            }
        ]
    }
    stager = LocalStager(session, home=str(home))
    with pytest.raises(InputError) as raised:
        stager.stage_channels(request, layout)
    message = str(raised.value)
    assert "inputs['train']" in message
    for uri in named:
        assert uri in message, message
    assert not (home / "cache" / "s3" / "objects").exists()  # refused before any download


# --------------------------------------------------------------------------- item 25


def test_a_sharded_file_channel_lists_each_file_once_through_link_loops(tmp_path, caplog):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    for name in ("a.csv", "b.csv", "sub/c.csv"):
        (data / name).write_text(name)
    os.symlink("..", data / "sub" / "up")  # a loop back to the channel's root
    os.symlink(".", data / "self")
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1", "algo-2"])
    request = {
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {
                        "S3Uri": f"file://{data}",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            }
        ]
    }
    with caplog.at_level(logging.WARNING, logger="launchbay"):
        LocalStager(home=str(tmp_path / "home")).stage_channels(request, layout)
    handed_out = []
    for host in ("algo-1", "algo-2"):
        channel = Path(layout.host_dir(host)) / "input" / "data" / "train"
        handed_out += [
            os.path.relpath(os.path.join(d, n), channel)
            for d, _dirs, names in os.walk(channel)
            for n in names
        ]
    assert sorted(handed_out) == ["a.csv", "b.csv", "sub/c.csv"]
    assert any("already listed" in r.getMessage() for r in caplog.records)
