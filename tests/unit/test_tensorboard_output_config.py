"""``TensorBoardOutputConfig`` (launchbay.debugger) and ``tensorboard_output_config=``.

The class takes SDK v2's arguments and writes SDK v2's request entry (the request
itself is compared with v2's in tests/compat, cases ``tensorboard-output-config-*``);
values are checked as the other arguments are. For local jobs: the config file the
hosts get, the container mount of a custom path, and the copy of new or changed files
(:meth:`Outputs.sync_tensorboard`, the thread of :class:`TensorBoardSync`).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from factories import sagemaker_estimator
from launchbay import ConfigurationError
from launchbay.backends.local import tensorboard
from launchbay.backends.local.layout import JobLayout
from launchbay.backends.local.outputs import Outputs
from launchbay.debugger import TensorBoardOutputConfig
from launchbay.pytorch import PyTorch
from launchbay.runtime.contract import paths, write_host_config

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.fixture(autouse=True)
def _region(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def pytorch(**kwargs) -> PyTorch:
    return sagemaker_estimator(**{"output_path": "s3://bucket/out", **kwargs})


# --------------------------------------------------------------------------- the class


def test_the_class_takes_sdk_v2s_arguments(monkeypatch):
    monkeypatch.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    from sagemaker.debugger import TensorBoardOutputConfig as V2

    ours = inspect.signature(TensorBoardOutputConfig).parameters
    theirs = inspect.signature(V2).parameters
    assert [(p.name, p.default) for p in ours.values()] == [
        (p.name, p.default) for p in theirs.values()
    ]
    for args in (("s3://bucket/tb",), ("s3://bucket/tb", "/opt/tb")):
        assert TensorBoardOutputConfig(*args).to_request_dict() == V2(*args)._to_request_dict()
        assert TensorBoardOutputConfig(*args)._to_request_dict() == V2(*args)._to_request_dict()


@pytest.mark.parametrize(
    ("args", "argument", "why"),
    [
        ((None,), "s3_output_path", "expected an 's3://bucket/prefix' URI or a 'file:///path'"),
        (("bucket/tb",), "s3_output_path", "expected an 's3://bucket/prefix' URI"),
        (("s3://Bad_Bucket/tb",), "s3_output_path", "is not a valid S3 bucket name"),
        (("s3://bucket", "logs"), "container_local_output_path", "It is not an absolute path"),
        (("s3://bucket", "/opt/ml"), "container_local_output_path", "It is /opt/ml"),
        (("s3://bucket", "/opt"), "container_local_output_path", "It holds /opt/ml"),
        (("s3://bucket", "/"), "container_local_output_path", "It is the root directory"),
        (("s3://bucket", "/opt/ml/output/"), "container_local_output_path", "contract owns"),
        (("s3://bucket", "/opt/ml/input/tb"), "container_local_output_path", "lies in"),
        (("s3://bucket", "/a/../opt/ml"), "container_local_output_path", "'..' segments"),
        (("s3://bucket", 3), "container_local_output_path", "It is int, not a string"),
    ],
)
def test_a_bad_value_names_the_argument_the_value_and_what_is_accepted(args, argument, why):
    with pytest.raises(ConfigurationError) as info:
        TensorBoardOutputConfig(*args)
    message = str(info.value)
    assert message.startswith(f"Invalid {argument}=")
    assert why in message
    assert "Accepted:" in message or "expected" in message


def test_paths_a_job_may_write_to_are_accepted():
    for path in ("/opt/ml/output/tensorboard", "/opt/ml/output/data/tb", "/opt/tb", "/logs/"):
        assert TensorBoardOutputConfig("file:///tmp/x", path).container_local_output_path == path


# --------------------------------------------------------------------------- the estimator


def test_the_estimator_sends_it_and_refuses_what_is_not_one(src):
    config = TensorBoardOutputConfig("s3://bucket/tb", "/opt/tb")
    request = pytorch(tensorboard_output_config=config).create_training_job_request(
        "s3://bucket/train", job_name="job-1"
    )
    assert request["TensorBoardOutputConfig"] == {
        "S3OutputPath": "s3://bucket/tb",
        "LocalPath": "/opt/tb",
    }
    assert "TensorBoardOutputConfig" not in pytorch().create_training_job_request(
        "s3://bucket/train", job_name="job-1"
    )
    with pytest.raises(ConfigurationError, match=r"Invalid tensorboard_output_config=\{"):
        pytorch(tensorboard_output_config={"s3_output_path": "s3://bucket/tb"})
    with pytest.raises(
        ConfigurationError, match=r"Invalid tensorboard_output_config.s3_output_path='file:///tb'"
    ):
        pytorch(tensorboard_output_config=TensorBoardOutputConfig("file:///tb"))
    local = pytorch(
        instance_type="local_process", role=None, output_path="file:///tmp/out",
        tensorboard_output_config=TensorBoardOutputConfig("file:///tb"),
    )  # fmt: skip
    assert local.create_training_job_request(job_name="j")["TensorBoardOutputConfig"] == {
        "S3OutputPath": "file:///tb"
    }


def test_the_request_rules_apply_to_the_local_path(src):
    long_path = "/opt/" + "x" * 4100
    with pytest.raises(ConfigurationError) as info:
        pytorch(tensorboard_output_config=TensorBoardOutputConfig("s3://bucket/tb", long_path))
    assert "tensorboard_output_config" in str(info.value)
    assert "4096" in str(info.value)


def test_yaml_and_attach_give_it_back(src, tmp_path):
    config = TensorBoardOutputConfig("s3://bucket/tb", "/opt/tb")
    est = pytorch(tensorboard_output_config=config)
    est.to_yaml(tmp_path / "job.yaml")
    assert "tensorboard_output_config" in (tmp_path / "job.yaml").read_text()
    again = PyTorch.from_yaml(tmp_path / "job.yaml")
    assert again.tensorboard_output_config == config

    from launchbay._attach import init_params_from_description

    described = {"TensorBoardOutputConfig": {"S3OutputPath": "https://b.s3.amazonaws.com/x"}}
    request = est.create_training_job_request("s3://bucket/train", job_name="job-1")
    params = init_params_from_description(PyTorch, {**request, **described}, region="us-west-2")
    # Kept as the service described it (its pattern admits https://), never refused.
    assert (
        params["tensorboard_output_config"].to_request_dict()
        == described["TensorBoardOutputConfig"]
    )


def test_the_unsupported_message_is_gone(src):
    from launchbay.arguments import UNSUPPORTED_V2_ARGUMENTS

    assert "tensorboard_output_config" not in UNSUPPORTED_V2_ARGUMENTS


# --------------------------------------------------------------------------- host config


def request_with(config: dict, hosts: int = 2) -> dict:
    return {
        "TrainingJobName": "tb-job",
        "ResourceConfig": {"InstanceType": "local_process", "InstanceCount": hosts},
        "OutputDataConfig": {"S3OutputPath": "file:///tmp/out"},
        "TensorBoardOutputConfig": config,
    }


def test_each_host_gets_the_config_smdebug_reads_with_its_own_directory(tmp_path):
    base = tmp_path / "algo-1"
    request = request_with({"S3OutputPath": "s3://bucket/tb"})
    write_host_config(str(base), request, "algo-1", ["algo-1", "algo-2"])
    written = json.loads(Path(paths(str(base)).tensorboard_config_file).read_text())
    assert written == {
        "S3OutputPath": "s3://bucket/tb",
        "LocalPath": str(base / "output" / "tensorboard"),
    }
    assert (base / "output" / "tensorboard").is_dir()
    # A container sees its own path; the directory made is the one mounted there.
    box = tmp_path / "box"
    own = request_with({"S3OutputPath": "s3://bucket/tb", "LocalPath": "/opt/tb/"})
    write_host_config(str(box), own, "algo-1", ["algo-1", "algo-2"], container_base="/opt/ml")
    written = json.loads(Path(paths(str(box)).tensorboard_config_file).read_text())
    assert written["LocalPath"] == "/opt/tb"
    assert (box / "output" / "tensorboard").is_dir()
    # Without the config, no file (a leftover one is removed).
    write_host_config(str(base), {**request, "TensorBoardOutputConfig": None}, "algo-1", ["algo-1"])
    assert not Path(paths(str(base)).tensorboard_config_file).exists()


def test_a_request_with_a_local_path_a_host_cannot_take_is_refused(tmp_path):
    from launchbay.backends.plan import plan_request
    from launchbay.backends.process import ProcessBackend

    request = request_with({"S3OutputPath": "s3://b/x", "LocalPath": "/opt/ml/output/"})
    request.update(
        AlgorithmSpecification={"TrainingImage": "x", "TrainingInputMode": "File"},
        RoleArn=ROLE,
        StoppingCondition={},
    )
    backend = ProcessBackend(job_root=tmp_path / "jobs")
    with pytest.raises(ConfigurationError) as info:
        backend.run(plan_request(request))
    assert str(info.value).startswith(
        "Invalid container_local_output_path='/opt/ml/output/'. TensorBoardOutputConfig "
        "LocalPath: it is /opt/ml/output, which the container contract owns. Accepted:"
    )
    assert not (tmp_path / "jobs" / "tb-job").exists()


def test_a_container_gets_its_own_path_mounted_from_its_tree(tmp_path):
    from launchbay.backends.docker import DockerBackend

    backend = DockerBackend(job_root=tmp_path / "jobs")
    hosts = ["algo-1", "algo-2"]
    job_dir = str(tmp_path / "jobs" / "tb-job")
    for local_path, mounted in (
        (None, None),
        ("/opt/ml/output/tensorboard", None),
        ("/opt/tb/logs/", "/opt/tb/logs"),
    ):
        config = {"S3OutputPath": "s3://bucket/tb"}
        if local_path:
            config["LocalPath"] = local_path
        specs = backend.host_specs(request_with(config), job_dir, hosts, local_code=True, grace=5)
        for spec in specs:
            source = os.path.join(job_dir, spec.host, "output", "tensorboard")
            if mounted is None:
                assert source not in spec.binds
            else:
                assert spec.binds[source]["bind"] == mounted
                assert spec.binds[source]["mode"] == "rw"


# --------------------------------------------------------------------------- the copy


@pytest.fixture
def layout(tmp_path) -> JobLayout:
    return JobLayout.create(str(tmp_path / "jobs"), "tb-job", ["algo-1", "algo-2"])


def write(layout: JobLayout, host: str, rel: str, text: str) -> Path:
    path = Path(layout.host_dir(host)) / "output" / "tensorboard" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def no_s3():
    raise AssertionError("a file:// copy uses no S3 client")


def test_only_new_or_changed_files_are_copied_and_the_first_host_wins(tmp_path, layout):
    dest = tmp_path / "dest"
    request = request_with({"S3OutputPath": f"file://{dest}"})
    outputs = Outputs(no_s3)
    prefix = dest / "tb-job" / "tensorboard-output"
    assert outputs.sync_tensorboard(request, layout) == 0  # nothing written yet

    write(layout, "algo-1", "run/events.1", "a1")
    write(layout, "algo-2", "run/events.2", "b1")
    write(layout, "algo-2", "shared.txt", "from algo-2")
    assert outputs.sync_tensorboard(request, layout) == 3
    assert (prefix / "run" / "events.1").read_text() == "a1"
    assert (prefix / "shared.txt").read_text() == "from algo-2"
    assert outputs.sync_tensorboard(request, layout) == 0  # nothing changed

    changed = write(layout, "algo-1", "run/events.1", "a1 and more")
    os.utime(changed, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert outputs.sync_tensorboard(request, layout) == 1
    assert (prefix / "run" / "events.1").read_text() == "a1 and more"

    # A name both hosts have: the first host's file (as for model.tar.gz).
    write(layout, "algo-1", "shared.txt", "from algo-1")
    assert outputs.sync_tensorboard(request, layout) == 1
    assert (prefix / "shared.txt").read_text() == "from algo-1"
    write(layout, "algo-2", "shared.txt", "algo-2 again")
    assert outputs.sync_tensorboard(request, layout) == 0

    # What was copied is remembered in the job directory: a fresh Outputs (the copy a
    # watchdog makes when the client is gone) sends nothing again.
    assert Outputs(no_s3).sync_tensorboard(request, layout) == 0
    # A file deleted on a host stays at the destination.
    os.unlink(Path(layout.host_dir("algo-2")) / "output" / "tensorboard" / "run" / "events.2")
    assert Outputs(no_s3).sync_tensorboard(request, layout) == 0
    assert (prefix / "run" / "events.2").read_text() == "b1"


def test_nothing_is_read_through_a_link_out_of_the_directory(tmp_path, layout, caplog):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the bucket")
    write(layout, "algo-1", "events.1", "a1")
    tb = Path(layout.host_dir("algo-1")) / "output" / "tensorboard"
    (tb / "leak").symlink_to(secret)
    (tb / "inside").symlink_to("events.1")
    dest = tmp_path / "dest"
    request = request_with({"S3OutputPath": f"file://{dest}"})
    outputs = Outputs(no_s3)
    with caplog.at_level(logging.WARNING, logger="launchbay.backends.local"):
        outputs.sync_tensorboard(request, layout)
        outputs.sync_tensorboard(request, layout)
    prefix = dest / "tb-job" / "tensorboard-output"
    assert sorted(p.name for p in prefix.iterdir()) == ["events.1", "inside"]
    assert os.readlink(prefix / "inside") == "events.1"
    warnings = [r.getMessage() for r in caplog.records if "leak" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, not at every turn


def test_the_copy_at_the_end_goes_with_the_outputs(tmp_path, layout):
    dest = tmp_path / "dest"
    request = request_with({"S3OutputPath": f"file://{dest}"})
    write(layout, "algo-2", "events.2", "b1")
    Outputs(no_s3).collect_outputs(request, layout, failure_reason="it failed")
    assert (dest / "tb-job" / "tensorboard-output" / "events.2").read_text() == "b1"


def test_a_local_path_outside_opt_ml_is_one_directory_the_hosts_share(tmp_path, layout):
    shared = tmp_path / "shared-tb"
    shared.mkdir()
    (shared / "events.x").write_text("x")
    request = request_with({"S3OutputPath": "file:///unused", "LocalPath": str(shared)})
    assert tensorboard.tensorboard_dirs(request, layout) == [str(shared)]
    contained = request_with({"S3OutputPath": "file:///unused", "LocalPath": "/opt/ml/model/tb"})
    assert tensorboard.tensorboard_dirs(contained, layout) == [
        os.path.join(layout.host_dir(h), "model", "tb") for h in ("algo-1", "algo-2")
    ]
    assert tensorboard.tensorboard_dirs(request_with({}), layout) == []
    assert tensorboard.destination(request_with({})) is None


def test_the_thread_copies_until_stopped_and_reports_a_failure_once(caplog):
    calls: list[float] = []
    failing = threading.Event()

    def sync() -> None:
        calls.append(time.monotonic())
        if failing.is_set():
            raise OSError("disk full")

    sync_thread = tensorboard.TensorBoardSync("tb-job", sync, interval=0.05).start()
    deadline = time.monotonic() + 10
    while len(calls) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with caplog.at_level(logging.WARNING, logger="launchbay.backends.local"):
        failing.set()
        count = len(calls)
        while len(calls) < count + 3:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        sync_thread.stop()
    stopped = len(calls)
    time.sleep(0.2)
    assert len(calls) == stopped  # nothing after stop()
    reports = [r.getMessage() for r in caplog.records if "disk full" in r.getMessage()]
    assert len(reports) == 1, reports
    assert "Copying the TensorBoard files of job tb-job failed" in reports[0]
