"""The local backends' staging (:mod:`launchbay.backends.local.staging`) without starting any host.

Channels, the S3 cache, sharding, outputs and checkpoints, against files and a
real moto server.
"""

from __future__ import annotations

import json
import os
import tarfile

import pytest

from launchbay import ConfigurationError, InputError
from launchbay.backends.local.layout import JobLayout, host_names
from launchbay.backends.local.staging import LocalStager, check_request

BUCKET = "staging-data"


def request_for(tmp_path, channels=(), hosts=2, **extra):
    request = {
        "TrainingJobName": "job-1",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceCount": hosts, "InstanceType": "local_process"},
        "OutputDataConfig": {"S3OutputPath": f"file://{tmp_path}/out"},
        "InputDataConfig": [
            {
                "ChannelName": name,
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": uri,
                        "S3DataDistributionType": distribution,
                    }
                },
            }
            for name, uri, distribution in channels
        ],
    }
    request.update(extra)
    return request


@pytest.fixture
def layout(tmp_path):
    return JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1", "algo-2"])


def channel_files(layout, host, channel):
    root = os.path.join(layout.host_dir(host), "input", "data", channel)
    found = {}
    for dirpath, _dirs, names in os.walk(root, followlinks=True):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def test_layout_and_host_names(tmp_path, layout):
    assert host_names({"ResourceConfig": {"InstanceCount": 3}}) == ["algo-1", "algo-2", "algo-3"]
    groups = {"ResourceConfig": {"InstanceGroups": [{"InstanceCount": 1}, {"InstanceCount": 2}]}}
    assert host_names(groups) == ["algo-1", "algo-2", "algo-3"]
    assert layout.job_dir == str(tmp_path / "jobs" / "job-1")
    for path in (layout.shared_dir, layout.logs_dir, layout.host_dir("algo-2")):
        assert os.path.isdir(path)
    assert layout.log_file("algo-1") == os.path.join(layout.job_dir, "logs", "algo-1.log")


def test_check_request_refuses_what_cannot_run_locally(tmp_path):
    efs = request_for(tmp_path)
    efs["InputDataConfig"] = [
        {
            "ChannelName": "train",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": "fs-1",
                    "FileSystemType": "EFS",
                    "DirectoryPath": "/data",
                    "FileSystemAccessMode": "ro",
                }
            },
        }
    ]
    with pytest.raises(ConfigurationError, match="EFS fs-1:/data"):
        check_request(efs)
    pipe = request_for(tmp_path, [("train", "s3://b/k", "FullyReplicated")])
    pipe["InputDataConfig"][0]["InputMode"] = "Pipe"
    with pytest.raises(ConfigurationError, match="Pipe"):
        check_request(pipe)
    with pytest.raises(InputError, match="nothing exists"):
        check_request(request_for(tmp_path, [("train", f"file://{tmp_path}/none", "x")]))


def test_file_channels_are_linked_and_sharded(tmp_path, layout):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    for name in ("a", "b", "c"):
        (data / f"{name}.txt").write_text(name)
    (data / "sub" / "d.txt").write_text("d")
    single = tmp_path / "single.csv"
    single.write_text("1,2")
    request = request_for(
        tmp_path,
        [
            ("full", f"file://{data}", "FullyReplicated"),
            ("sharded", f"file://{data}", "ShardedByS3Key"),
            ("one", f"file://{single}", "FullyReplicated"),
        ],
    )
    LocalStager(home=str(tmp_path / "home")).stage_channels(request, layout)
    full = os.path.join(layout.host_dir("algo-2"), "input", "data", "full")
    assert os.path.islink(full) and os.path.realpath(full) == str(data)
    everything = {"a.txt": "a", "b.txt": "b", "c.txt": "c", "sub/d.txt": "d"}
    assert channel_files(layout, "algo-1", "full") == everything
    first = channel_files(layout, "algo-1", "sharded")
    second = channel_files(layout, "algo-2", "sharded")
    assert first == {"a.txt": "a", "c.txt": "c"}
    assert second == {"b.txt": "b", "sub/d.txt": "d"}
    assert channel_files(layout, "algo-1", "one") == {"single.csv": "1,2"}


def _bucket(session, objects):
    s3 = session.s3_client
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    return s3


def _gets(session):
    calls = []
    session.s3_client.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: calls.append(params["Key"])
    )
    return calls


def test_s3_cache_downloads_once_and_again_after_a_change(tmp_path, session, layout):
    s3 = _bucket(session, {"d/x.txt": "x1", "d/y/z.txt": "z", "d/w.txt": "w"})
    gets = _gets(session)
    request = request_for(tmp_path, [("train", f"s3://{BUCKET}/d", "FullyReplicated")])
    stager = LocalStager(session, home=str(tmp_path / "home"))
    stager.stage_channels(request, layout)
    assert sorted(gets) == ["d/w.txt", "d/x.txt", "d/y/z.txt"]
    expected = {"x.txt": "x1", "y/z.txt": "z", "w.txt": "w"}
    assert channel_files(layout, "algo-2", "train") == expected
    index = json.loads((tmp_path / "home" / "cache" / "s3" / "index.json").read_text())
    assert set(index) == {f"s3://{BUCKET}/d/{k}" for k in ("x.txt", "y/z.txt", "w.txt")}

    gets.clear()
    other = JobLayout.create(str(tmp_path / "jobs"), "job-2", ["algo-1"])
    LocalStager(session, home=str(tmp_path / "home")).stage_channels(request, other)
    assert gets == []
    assert channel_files(other, "algo-1", "train") == expected

    s3.put_object(Bucket=BUCKET, Key="d/x.txt", Body=b"x2")
    stager.stage_channels(request, other)
    assert gets == ["d/x.txt"]
    assert channel_files(other, "algo-1", "train")["x.txt"] == "x2"
    # The first job's links still point at the version it started with.
    assert channel_files(layout, "algo-1", "train")["x.txt"] == "x1"


def test_s3_sharding_and_an_object_uri(tmp_path, session, layout):
    _bucket(session, {f"s/{i}.txt": str(i) for i in range(5)} | {"one/file.csv": "f"})
    request = request_for(
        tmp_path,
        [
            ("shards", f"s3://{BUCKET}/s/", "ShardedByS3Key"),
            ("file", f"s3://{BUCKET}/one/file.csv", "FullyReplicated"),
        ],
    )
    LocalStager(session, home=str(tmp_path / "home")).stage_channels(request, layout)
    assert channel_files(layout, "algo-1", "shards") == {"0.txt": "0", "2.txt": "2", "4.txt": "4"}
    assert channel_files(layout, "algo-2", "shards") == {"1.txt": "1", "3.txt": "3"}
    assert channel_files(layout, "algo-2", "file") == {"file.csv": "f"}


def test_empty_s3_channel_is_an_error(tmp_path, session, layout):
    _bucket(session, {})
    request = request_for(tmp_path, [("train", f"s3://{BUCKET}/nothing", "FullyReplicated")])
    with pytest.raises(Exception, match="No S3 objects found"):
        LocalStager(session, home=str(tmp_path / "home")).stage_channels(request, layout)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_outputs_merge_hosts_first_wins(tmp_path, layout):
    for host in layout.hosts:
        _write(os.path.join(layout.host_dir(host), "model", "common.bin"), host)
        _write(os.path.join(layout.host_dir(host), "model", f"{host}.bin"), host)
    _write(os.path.join(layout.host_dir("algo-2"), "output", "data", "metrics.json"), "{}")
    request = request_for(tmp_path)
    uri = LocalStager(home=str(tmp_path / "home")).collect_outputs(request, layout, "it broke")
    prefix = tmp_path / "out" / "job-1" / "output"
    assert uri == f"file://{prefix}/model.tar.gz"
    with tarfile.open(prefix / "model.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert members == {"algo-1.bin": b"algo-1", "algo-2.bin": b"algo-2", "common.bin": b"algo-1"}
    with tarfile.open(prefix / "output.tar.gz") as tar:
        assert tar.getnames() == ["metrics.json"]
    assert (prefix / "failure").read_text() == "it broke"
    assert not [p for p in os.listdir(prefix) if p.startswith(".tmp")]


def test_uncompressed_outputs_to_s3(tmp_path, session, layout):
    _bucket(session, {})
    _write(os.path.join(layout.host_dir("algo-1"), "model", "w.bin"), "w")
    request = request_for(tmp_path)
    request["OutputDataConfig"] = {"S3OutputPath": f"s3://{BUCKET}/out", "CompressionType": "NONE"}
    uri = LocalStager(session, home=str(tmp_path / "home")).collect_outputs(request, layout)
    assert uri == f"s3://{BUCKET}/out/job-1/output/model/"
    body = session.s3_client.get_object(Bucket=BUCKET, Key="out/job-1/output/model/w.bin")
    assert body["Body"].read() == b"w"


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_checkpoints_restored_everywhere_and_only_changes_saved(tmp_path, session, scheme):
    layout = JobLayout.create(str(tmp_path / "jobs"), "job-1", ["algo-1", "algo-2"])
    if scheme == "s3":
        _bucket(session, {"ck/old.pt": "old", "ck/dir/keep.pt": "keep"})
        uri = f"s3://{BUCKET}/ck"
    else:
        root = tmp_path / "ck"
        _write(str(root / "old.pt"), "old")
        _write(str(root / "dir" / "keep.pt"), "keep")
        uri = f"file://{root}"
    request = request_for(tmp_path, CheckpointConfig={"S3Uri": uri})
    stager = LocalStager(session, home=str(tmp_path / "home"))
    assert stager.restore_checkpoints(request, layout) == 2
    dirs = stager.checkpoint_dirs(request, layout)
    assert dirs == [os.path.join(layout.host_dir(h), "checkpoints") for h in layout.hosts]
    for directory in dirs:
        assert sorted(os.listdir(directory)) == ["dir", "old.pt"]
    _write(os.path.join(dirs[0], "old.pt"), "new from algo-1")
    _write(os.path.join(dirs[1], "old.pt"), "new from algo-2")
    _write(os.path.join(dirs[1], "only-2.pt"), "2")
    assert stager.save_checkpoints(request, layout) == 2

    def read(rel):
        if scheme == "s3":
            return session.s3_client.get_object(Bucket=BUCKET, Key=f"ck/{rel}")["Body"].read()
        return (tmp_path / "ck" / rel).read_bytes()

    assert read("old.pt") == b"new from algo-1"
    assert read("only-2.pt") == b"2"
    assert read("dir/keep.pt") == b"keep"
