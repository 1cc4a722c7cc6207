"""The real command against SageMaker on a moto server (reached through AWS_ENDPOINT_URL).

moto reports every job Completed at once and writes no logs; what it shows here
is what the command sends and how it reads the answers.
"""

from __future__ import annotations

import json

import boto3
import pytest

from factories import ROLE, job_spec
from launchbay import Estimator

REGION = "us-west-2"
SPEC = job_spec(
    """
    distribution:
      torch_distributed:
        enabled: true
    hyperparameters:
      epochs: 3
    inputs:
      train: s3://training-data/train
    tags:
      team: ml
    """,
    role="${LB_ROLE}",
    instance_type="ml.g5.xlarge",
    instance_count=2,
)


@pytest.fixture
def env(moto_env):
    return dict(moto_env, LB_ROLE=ROLE)


def clients():
    return boto3.client("sagemaker", region_name=REGION), boto3.client("s3", region_name=REGION)


def test_no_wait_creates_the_job(run_cli, project, env):
    spec = project.spec(SPEC)
    result = run_cli("submit", spec, "--no-wait", "--job-name", "cli-no-wait", env=env)
    assert result.returncode == 0, result.stderr
    assert "Submitted cli-no-wait" in result.stdout
    sagemaker, s3 = clients()
    job = sagemaker.describe_training_job(TrainingJobName="cli-no-wait")
    assert job["RoleArn"] == ROLE
    assert job["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    assert job["ResourceConfig"]["InstanceCount"] == 2
    assert job["HyperParameters"]["epochs"] == "3"
    assert job["HyperParameters"]["sagemaker_program"] == '"train.py"'
    assert job["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert job["InputDataConfig"][0]["ChannelName"] == "train"
    code = json.loads(job["HyperParameters"]["sagemaker_submit_directory"])
    bucket, key = code[len("s3://") :].split("/", 1)
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0  # the code was staged


def test_wait_json_exits_0_with_one_object(run_cli, project, env):
    spec = project.spec(SPEC)
    result = run_cli(
        "submit", spec, "--wait", "--output", "json", "--job-name", "cli-wait", env=env
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["job_name"] == "cli-wait" and summary["status"] == "Completed"
    assert summary["instance_type"] == "ml.g5.xlarge" and summary["backend"] == "sagemaker"
    assert summary["model_data"].startswith("s3://") and "cli-wait" in summary["model_data"]
    assert set(summary["timings"]) >= {"start", "end", "training_seconds", "billable_seconds"}
    assert summary["failure_reason"] is None


def test_dry_run_prints_the_request_and_creates_nothing(run_cli, project, env, monkeypatch):
    spec = project.spec(SPEC)
    result = run_cli("submit", spec, "--dry-run", "--job-name", "cli-dry-run", env=env)
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    monkeypatch.setenv("LB_ROLE", ROLE)
    estimator = Estimator.from_yaml(spec)
    assert request == estimator.create_training_job_request(
        estimator.spec_inputs, job_name="cli-dry-run"
    )
    sagemaker, s3 = clients()
    assert s3.list_buckets()["Buckets"] == []
    assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


def test_status_list_stop(run_cli, project, env):
    spec = project.spec(SPEC)
    for name in ("cli-first", "cli-second"):
        assert run_cli("submit", spec, "--no-wait", "--job-name", name, env=env).returncode == 0

    status = run_cli("status", "cli-first", "--output", "json", env=env)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "Completed"
    text = run_cli("status", "cli-second", env=env)
    assert "Completed" in text.stdout and "ml.g5.xlarge" in text.stdout

    listing = run_cli("list", "--output", "json", env=env)
    assert listing.returncode == 0, listing.stderr
    jobs = json.loads(listing.stdout)["jobs"]
    assert [j["job_name"] for j in jobs] == ["cli-second", "cli-first"]  # newest first
    assert {j["backend"] for j in jobs} == {"sagemaker"}
    limited = run_cli("list", "--max", "1", "--status", "Completed", env=env)
    # moto ignores SortOrder, so which one comes back is moto's choice; one does.
    rows = limited.stdout.splitlines()[1:]
    assert limited.returncode == 0 and len(rows) == 1 and "Completed" in rows[0]

    stop = run_cli("stop", "cli-first", env=env)  # moto's jobs have ended already
    assert stop.returncode == 0, stop.stderr
    assert "already ended (Completed)" in stop.stderr

    missing = run_cli("status", "no-such-job", env=env)
    assert missing.returncode == 1
    assert "no-such-job" in missing.stderr and "Traceback" not in missing.stderr


def test_role_is_required_for_sagemaker(run_cli, project, env):
    spec = project.spec(SPEC.replace("role: ${LB_ROLE}\n", ""))
    result = run_cli("submit", spec, "--no-wait", env=env)
    assert result.returncode == 2
    assert "role is required for SageMaker jobs" in result.stderr
    sagemaker, _ = clients()
    assert sagemaker.list_training_jobs()["TrainingJobSummaries"] == []


@pytest.mark.parametrize("stop_on_interrupt", [False, True])
def test_ctrl_c_stops_the_sagemaker_job_only_when_asked(
    project, moto_env, monkeypatch, capsys, stop_on_interrupt
):
    """moto ends jobs at once, so Ctrl-C is played in process by the backend's wait."""
    from launchbay import cli
    from launchbay.backends.sagemaker import SageMakerBackend

    def interrupted(self, name, logs="All"):
        raise KeyboardInterrupt

    stopped = []
    monkeypatch.setattr(SageMakerBackend, "wait", interrupted)
    monkeypatch.setattr(SageMakerBackend, "stop", lambda self, name: stopped.append(name))
    monkeypatch.setenv("LB_ROLE", ROLE)
    monkeypatch.setenv("LAUNCHBAY_HOME", moto_env["LAUNCHBAY_HOME"])
    args = ["submit", str(project.spec(SPEC)), "--job-name", "cli-ctrl-c", "--output", "json"]
    if stop_on_interrupt:
        args.append("--stop-on-interrupt")
    assert cli.main(args) == 130
    out = capsys.readouterr()
    assert json.loads(out.out)["job_name"] == "cli-ctrl-c"
    assert stopped == (["cli-ctrl-c"] if stop_on_interrupt else [])
    assert ("keeps running" in out.err) is not stop_on_interrupt
