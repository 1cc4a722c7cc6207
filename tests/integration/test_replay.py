"""Replay a SageMaker job on this machine (issue 35 item 4; docs/rehearsing.md, "Replay").

Jobs are created on the moto server, once by SageMaker SDK v2 itself and once by
launchbay, each with a code archive on moto's S3. moto reports every job Completed
and keeps no ``Environment`` (``set_moto_environment`` puts the job's environment
where SageMaker's description has it), so the failure brought home is the
script's own: it raises on ``algo-2``, and its traceback is shown here. What each
host's script saw (``hyperparameters.json`` and the environment) is compared key
by key with the job's description.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from factories import sagemaker_arguments, sagemaker_estimator
from launchbay import ConfigurationError, JobError, JobFailedError
from launchbay.pytorch import PyTorch
from launchbay.replay import parse_inputs, replay, replay_request, sagemaker_gpus

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
ACCOUNT = "123456789012"
BUCKET = "replay-bucket"
ENVIRONMENT = {"MY_SETTING": "from-sagemaker", "NCCL_DEBUG": "INFO"}
HYPERPARAMETERS = {"epochs": 3, "name": "abc", "lr": 0.1, "layers": [64, 32]}
#: The launchbay jobs replayed here (PyTorch 2.3 on moto, from ``src/train.py``).
sagemaker_job = functools.partial(
    sagemaker_estimator,
    instance_type="ml.c5.xlarge",
    hyperparameters=HYPERPARAMETERS,
    environment=ENVIRONMENT,
)

#: Prints what the host saw (one JSON line), reads its channel if it has one, and
#: raises on algo-2 when the job ran more than one host: once algo-1 has printed (a
#: marker in this machine's temporary directory; 20 s at most), since a failing rank
#: ends the others (at once under one torchrun for every host).
SCRIPT = """\
import json, os, tempfile, time
config = os.environ["SM_INPUT_CONFIG_DIR"]
with open(os.path.join(config, "hyperparameters.json")) as f:
    hps = json.load(f)
env = {k: os.environ.get(k) for k in ENV_KEYS}
train = os.environ.get("SM_CHANNEL_TRAIN")
data = sorted(os.listdir(train)) if train else None
print("SEEN " + json.dumps({"host": os.environ["SM_CURRENT_HOST"], "hps": hps, "env": env,
                            "data": data, "gpus": os.environ.get("SM_NUM_GPUS")}), flush=True)
marker = os.path.join(tempfile.gettempdir(), "replay-seen-" + os.environ["TRAINING_JOB_NAME"])
if os.environ["SM_CURRENT_HOST"] == "algo-1" and "algo-2" in json.loads(os.environ["SM_HOSTS"]):
    open(marker, "w").close()
if os.environ["SM_CURRENT_HOST"] == "algo-2":
    deadline = time.monotonic() + 20
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if os.path.exists(marker):
        os.unlink(marker)
    raise ValueError("replayed failure on algo-2")
""".replace("ENV_KEYS", repr(sorted(ENVIRONMENT)))


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(SCRIPT)
    monkeypatch.chdir(tmp_path)
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket=BUCKET, Key="data/train/a.csv", Body=b"1,2\n")
    return src


def set_moto_environment(job_name: str, environment: dict[str, str]) -> None:
    """Keep the job's Environment where SageMaker's description has it (moto drops it).

    The moto server runs in this process (``ThreadedMotoServer``); its job's
    attributes are what DescribeTrainingJob returns.
    """
    from moto.sagemaker.models import sagemaker_backends

    sagemaker_backends[ACCOUNT]["us-west-2"].training_jobs[job_name].environment = dict(environment)


def v2_job(name: str, **overrides) -> None:
    """A job created by SageMaker SDK v2 on moto (its code archive on moto's S3)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from sagemaker.pytorch import PyTorch as V2PyTorch

    from compat.harness import no_v2_telemetry, v2_session

    kwargs = sagemaker_arguments(
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        framework_version="2.3.0",
        hyperparameters=HYPERPARAMETERS,
        environment=ENVIRONMENT,
        output_path=f"s3://{BUCKET}/out",
        code_location=f"s3://{BUCKET}/code",
        sagemaker_session=v2_session("us-west-2"),
    )
    kwargs.update(overrides)
    with no_v2_telemetry():
        V2PyTorch(**kwargs).fit({"train": f"s3://{BUCKET}/data/train"}, wait=False, job_name=name)
    set_moto_environment(name, ENVIRONMENT)


def seen(output: str) -> dict[str, dict]:
    """Each host's ``SEEN`` line, by host."""
    found = {}
    for line in output.splitlines():
        if "SEEN " in line:
            record = json.loads(line.split("SEEN ", 1)[1])
            found[record["host"]] = record
    return found


def assert_same_as_described(record: dict, description: dict) -> None:
    """The host's hyperparameters and environment, key by key, against the description."""
    described = description["HyperParameters"]
    assert sorted(record["hps"]) == sorted(described)
    for key, value in described.items():
        if key == "sagemaker_submit_directory":
            continue  # the local copy of the same archive (checked by the caller)
        assert record["hps"][key] == value, key
    for key, value in description["Environment"].items():
        assert record["env"][key] == value, key


def test_replay_of_an_sdk_v2_job_shows_the_failing_hosts_traceback(
    session, home, code, capsys, caplog
):
    v2_job("v2-replay-1")
    description = session.sagemaker_client.describe_training_job(TrainingJobName="v2-replay-1")
    assert description["TrainingJobStatus"] == "Completed"  # moto: the script never ran there

    caplog.set_level(logging.WARNING, logger="launchbay.replay")
    with pytest.raises(JobFailedError) as failed:
        replay("v2-replay-1", sagemaker_session=session, job_name="v2-replay-1-here")
    out = capsys.readouterr().out

    # The failing rank's traceback, here, under its host's prefix and in the error.
    assert 'algo-2 | [rank 1]     raise ValueError("replayed failure on algo-2")' in out
    assert "algo-2 | [rank 1] ValueError: replayed failure on algo-2" in out
    assert "host algo-2" in str(failed.value)
    assert "ValueError: replayed failure on algo-2" in str(failed.value)

    # Both hosts ran the same entry point with the described hyperparameters and environment.
    hosts = seen(out)
    assert sorted(hosts) == ["algo-1", "algo-2"]
    submit = json.loads(description["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = submit[len("s3://") :].split("/", 1)
    archive = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    for record in hosts.values():
        assert_same_as_described(record, description)
        copy = json.loads(record["hps"]["sagemaker_submit_directory"])
        assert copy.startswith("file://" + str(home / "source"))
        assert Path(copy[len("file://") :]).read_bytes() == archive
        assert record["data"] == ["a.csv"]  # the job's own channel, read from S3
        assert record["gpus"] == "0"

    # What cannot be mapped is said: the p4d's GPUs on this CPU machine.
    notes = [r.getMessage() for r in caplog.records if r.name == "launchbay.replay"]
    assert any("ml.p4d.24xlarge has 8 GPU(s) per host (16 in all)" in n for n in notes), notes
    assert any("runs without a GPU" in n for n in notes), notes

    # The replay wrote nothing where the SageMaker job writes.
    listed = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="out/")
    assert listed.get("KeyCount", 0) == 0


def test_attach_then_replay_a_launchbay_job_with_other_hosts_and_inputs(
    session, home, code, tmp_path, capsys
):
    est = sagemaker_job(instance_count=2, sagemaker_session=session)
    est.fit({"train": f"s3://{BUCKET}/data/train"}, wait=False, job_name="lb-replay-1")
    set_moto_environment("lb-replay-1", ENVIRONMENT)
    local_data = tmp_path / "local-train"
    local_data.mkdir()
    (local_data / "b.csv").write_text("3,4\n")

    attached = PyTorch.attach("lb-replay-1", sagemaker_session=session)
    job = attached.replay(instance_count=1, inputs={"train": str(local_data)}, job_name="lb-here")
    out = capsys.readouterr().out

    assert job.describe()["TrainingJobStatus"] == "Completed"  # one host: no algo-2 to fail
    assert attached.latest_training_job.name == "lb-replay-1"  # still the SageMaker job
    description = attached.latest_training_job.describe()
    (record,) = seen(out).values()
    assert_same_as_described(record, description)
    assert record["data"] == ["b.csv"]  # the channel given instead of the job's
    local = job.describe()
    assert local["ResourceConfig"]["InstanceType"] == "local_process"
    assert local["ResourceConfig"]["InstanceCount"] == 1
    assert local["OutputDataConfig"]["S3OutputPath"] == f"file://{home}/output/lb-here"


def test_replay_request_keeps_the_script_side_and_moves_the_rest_here():
    request = {
        "TrainingJobName": "job-2024-05-01-12-00-00-000",
        "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
        "RoleArn": ROLE,
        "HyperParameters": {"a": "1", "sagemaker_submit_directory": '"s3://b/k.tar.gz"'},
        "Environment": {"X": "1"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "ContentType": "text/csv",
                "DataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://b/train",
                        "S3DataType": "S3Prefix",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            },
        ],  # fmt: skip
        "OutputDataConfig": {"S3OutputPath": "s3://b/out", "KmsKeyId": "key"},
        "ResourceConfig": {
            "InstanceType": "ml.g5.12xlarge",
            "InstanceCount": 3,
            "VolumeSizeInGB": 30,
            "KeepAlivePeriodInSeconds": 600,
        },  # fmt: skip
        "CheckpointConfig": {"S3Uri": "s3://b/ckpt", "LocalPath": "/opt/ml/checkpoints"},
        "VpcConfig": {"Subnets": ["s"], "SecurityGroupIds": ["g"]},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
    }
    new, notes = replay_request(
        request,
        inputs={"train": "file:///data", "extra": "s3://b/extra"},
        code_uri="file:///home/source/abc/sourcedir.tar.gz",
        home="/home",
    )
    assert new["TrainingJobName"].startswith("job-replay-")
    assert new["ResourceConfig"] == {
        "InstanceType": "local_process", "InstanceCount": 3, "VolumeSizeInGB": 30
    }  # fmt: skip
    assert new["HyperParameters"] == {
        "a": "1", "sagemaker_submit_directory": '"file:///home/source/abc/sourcedir.tar.gz"'
    }  # fmt: skip
    assert new["Environment"] == {"X": "1"}
    assert new["StoppingCondition"] == {"MaxRuntimeInSeconds": 60}
    train, extra = new["InputDataConfig"]
    assert train["ContentType"] == "text/csv"
    assert train["DataSource"]["S3DataSource"]["S3Uri"] == "file:///data"
    assert train["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key"
    assert extra["ChannelName"] == "extra"
    out = f"file:///home/output/{new['TrainingJobName']}"
    assert new["OutputDataConfig"] == {"S3OutputPath": out}
    assert new["CheckpointConfig"] == {
        "S3Uri": f"{out}/checkpoints",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert "VpcConfig" not in new
    assert any("VpcConfig" in n for n in notes)
    assert any("warm pool" in n for n in notes)
    assert any("KMS key" in n for n in notes)
    assert request["OutputDataConfig"]["S3OutputPath"] == "s3://b/out"  # not changed in place


def test_replay_errors_name_the_argument_the_value_and_what_is_accepted(tmp_path):
    request = {"TrainingJobName": "j", "ResourceConfig": {"InstanceType": "ml.c5.xlarge"}}
    with pytest.raises(ConfigurationError, match=r"instance_type='ml.c5.xlarge'.*'local_process'"):
        replay_request(request, instance_type="ml.c5.xlarge", home=str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"instance_count=0.*integer 1 or more"):
        replay_request(request, instance_count=0, home=str(tmp_path))
    efs = {
        **request,
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"FileSystemDataSource": {}}}],
    }
    with pytest.raises(ConfigurationError, match=r"inputs='train'.*--input train=URI"):
        replay_request(efs, home=str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"--input='train'.*CHANNEL=URI"):
        parse_inputs(["train"])
    with pytest.raises(ConfigurationError, match=r"--input='train=/no/such/dir'.*exists"):
        parse_inputs(["train=/no/such/dir"])
    assert parse_inputs(["train=s3://b/p", f"test={tmp_path}"]) == {
        "train": "s3://b/p",
        "test": f"file://{tmp_path}",
    }
    assert (sagemaker_gpus("ml.p4d.24xlarge"), sagemaker_gpus("ml.c5.xlarge")) == (8, 0)
    assert sagemaker_gpus("ml.p9.huge") is None


def test_replay_of_an_unknown_job_says_so(session, home):
    with pytest.raises(JobError, match="no-such-job"):
        replay("no-such-job", sagemaker_session=session)
    assert not os.path.exists(home / "jobs" / "no-such-job")


def test_replay_of_a_network_isolated_job_reads_its_code_channel(session, home, code, capsys):
    est = sagemaker_job(enable_network_isolation=True, sagemaker_session=session)
    est.fit({"train": f"s3://{BUCKET}/data/train"}, wait=False, job_name="iso-replay-1")
    set_moto_environment("iso-replay-1", ENVIRONMENT)
    description = session.sagemaker_client.describe_training_job(TrainingJobName="iso-replay-1")

    job = replay("iso-replay-1", sagemaker_session=session, job_name="iso-here")
    (record,) = seen(capsys.readouterr().out).values()
    assert job.describe()["TrainingJobStatus"] == "Completed"
    assert_same_as_described(record, description)
    # The submit directory is the description's own, inside the code channel (which a
    # local_process host sees under its own tree, where SageMaker has /opt/ml).
    assert description["HyperParameters"]["sagemaker_submit_directory"] == (
        '"/opt/ml/input/data/code/sourcedir.tar.gz"'
    )
    assert record["hps"]["sagemaker_submit_directory"].endswith(
        '/iso-here/algo-1/input/data/code/sourcedir.tar.gz"'
    )
    (code_channel,) = [c for c in job.describe()["InputDataConfig"] if c["ChannelName"] == "code"]
    assert code_channel["DataSource"]["S3DataSource"]["S3Uri"].startswith(
        "file://" + str(home / "source")
    )


def launchbay(*args: str) -> subprocess.CompletedProcess:
    """The real command, in a process of its own, with this test's moto and home."""
    return subprocess.run(
        [sys.executable, "-m", "launchbay.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, NO_COLOR="1", PYTHONUNBUFFERED="1"),
    )


def test_the_command_replays_an_sdk_v2_job_and_exits_1_with_the_traceback(
    session, home, code, tmp_path
):
    v2_job("v2-replay-cli")
    description = session.sagemaker_client.describe_training_job(TrainingJobName="v2-replay-cli")

    result = launchbay("replay", "v2-replay-cli", "--output", "json", "--job-name", "cli-here")
    assert result.returncode == 1, result.stderr
    assert result.stdout.strip(), result.stderr
    summary = json.loads(result.stdout)  # one JSON object on stdout; logs on stderr
    assert (summary["job_name"], summary["status"]) == ("cli-here", "Failed")
    assert "algo-2 | [rank 1] ValueError: replayed failure on algo-2" in result.stderr
    assert "launchbay: error: Training job cli-here ended with status Failed" in result.stderr
    assert (
        "launchbay: warning: Replay of v2-replay-cli: ml.p4d.24xlarge has 8 GPU(s) per host"
        in result.stderr
    )
    hosts = seen(result.stderr)
    assert sorted(hosts) == ["algo-1", "algo-2"]
    for record in hosts.values():
        assert_same_as_described(record, description)

    local_data = tmp_path / "one-host"
    local_data.mkdir()
    (local_data / "c.csv").write_text("5,6\n")
    result = launchbay(
        "replay", "v2-replay-cli", "--instance-count", "1", "--input", f"train={local_data}"
    )
    assert result.returncode == 0, result.stderr
    (record,) = seen(result.stdout).values()
    assert record["data"] == ["c.csv"]
    assert "Completed" in result.stdout


def test_the_command_refuses_bad_arguments_naming_them(session, home, code):
    v2_job("v2-replay-bad")
    result = launchbay("replay", "v2-replay-bad", "--input", "train")
    assert result.returncode == 2
    assert "Invalid --input='train'" in result.stderr and "CHANNEL=URI" in result.stderr
    result = launchbay("replay", "v2-replay-bad", "--instance-type", "ml.c5.xlarge")
    assert result.returncode == 2
    assert "invalid choice: 'ml.c5.xlarge'" in result.stderr and "local_process" in result.stderr
    result = launchbay("replay", "no-such-job")
    assert result.returncode == 1 and "no-such-job" in result.stderr
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())


def test_the_command_with_no_wait_runs_the_replay_detached(session, home, code):
    v2_job("v2-replay-detached")
    result = launchbay(
        "replay", "v2-replay-detached", "--instance-count", "1", "--no-wait", "--job-name", "det-1"
    )
    assert result.returncode == 0, result.stderr
    assert "Submitted det-1" in result.stdout
    deadline = time.monotonic() + 120
    status = None
    while time.monotonic() < deadline:
        shown = launchbay("status", "det-1", "--output", "json")
        status = json.loads(shown.stdout)["status"] if shown.returncode == 0 else None
        if status in ("Completed", "Failed", "Stopped"):
            break
        time.sleep(1)
    assert status == "Completed"
    logs = launchbay("logs", "det-1")
    (record,) = seen(logs.stdout).values()
    assert record["hps"]["epochs"] == "3"


def test_a_replayed_keras2_era_sagemaker_tensorflow_job_gets_keras2(tmp_path):
    # A SageMaker TensorFlow 2.13 job keeps SageMaker's own image name in its replay; its
    # local_process hosts get TF_USE_LEGACY_KERAS=1 as a local TensorFlow 2.13 job's do.
    pytest.importorskip("tf_keras", reason="tf-keras: .ci/run installs it")
    from launchbay.backends.local.keras import legacy_keras_environment

    image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/tensorflow-training:2.13.0-cpu-py310"
    request = {
        "TrainingJobName": "tf-job",
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
    }
    new, _ = replay_request(request, home=str(tmp_path))
    assert new["AlgorithmSpecification"]["TrainingImage"] == image
    assert legacy_keras_environment(new, {}) == {"TF_USE_LEGACY_KERAS": "1"}
    assert legacy_keras_environment(new, {"TF_USE_LEGACY_KERAS": "0"}) == {}  # yours wins
    newer = {**new, "AlgorithmSpecification": {"TrainingImage": image.replace("2.13.0", "2.19.0")}}
    assert legacy_keras_environment(newer, {}) == {}


def test_replay_keeps_the_distribution_torchrun_on_every_host(session, home, code, capsys):
    pytest.importorskip("torch")
    est = sagemaker_job(
        instance_count=2,
        instance_type="ml.p4d.24xlarge",
        distribution={"torch_distributed": {"enabled": True}},
        sagemaker_session=session,
    )
    est.fit({"train": f"s3://{BUCKET}/data/train"}, wait=False, job_name="ddp-replay-1")
    set_moto_environment("ddp-replay-1", ENVIRONMENT)
    description = session.sagemaker_client.describe_training_job(TrainingJobName="ddp-replay-1")
    assert description["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"

    with pytest.raises(JobFailedError, match="replayed failure on algo-2"):
        replay("ddp-replay-1", sagemaker_session=session, job_name="ddp-here")
    out = capsys.readouterr().out
    # The job's distribution is launched as a local torch_distributed job is (torchrun,
    # one rank per host here: no GPU), and the failing rank is algo-2's.
    assert "algo-1 | [launchbay] INFO torch_distributed on algo-1: " in out
    assert "-m torch.distributed.run " in out
    assert "algo-2 | [rank 1] ValueError: replayed failure on algo-2" in out
    hosts = seen(out)
    assert sorted(hosts) == ["algo-1", "algo-2"]
    for record in hosts.values():
        assert_same_as_described(record, description)
