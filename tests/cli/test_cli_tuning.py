"""``launchbay submit/status/stop/list`` with a spec's ``tuning:`` section (issue 23).

Local tuning jobs run real ``local_process`` trials (``tuning_scripts/trial.py``:
``loss=<value>`` once per epoch); the SageMaker side goes to the moto server, which
creates, describes and lists tuning jobs (each Completed at once).
"""

from __future__ import annotations

import datetime
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from launchbay.cli import jobs, output, tuning

from .test_cli_local import leftovers

TRIALS = Path(__file__).parents[1] / "integration" / "tuning_scripts"
ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
# Written for SageMaker; runs locally by changing only the instance type on the command line.
SPEC = f"""
    framework: pytorch
    framework_version: "2.3"
    py_version: py311
    entry_point: trial.py
    source_dir: {TRIALS}
    role: {ROLE}
    instance_type: ml.g5.xlarge
    hyperparameters:
      epochs: 2
    metric_definitions:
      - {{Name: loss, Regex: "loss=([0-9.eE+-]+)"}}
    tuning:
      objective_metric_name: loss
      objective_type: Minimize
      strategy: Random
      random_seed: 5
      max_jobs: 4
      max_parallel_jobs: 2
      hyperparameter_ranges:
        lr: {{type: continuous, min_value: 0.01, max_value: 1.0, scaling_type: Logarithmic}}
        optimizer: {{type: categorical, values: [sgd, adam]}}
      tags:
        team: ml
"""


def local(*args: str) -> tuple[str, ...]:
    return (*args, "--instance-type", "local_process")


def test_a_local_tuning_job_runs_and_status_and_list_know_it(run_cli, project):
    spec = project.spec(SPEC)
    result = run_cli(*local("submit", spec, "--output", "json", "--job-name", "t-cli"), timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)  # one JSON object on stdout, progress on stderr
    assert summary["tuning_job_name"] == "t-cli" and summary["status"] == "Completed"
    assert summary["backend"] == "local" and summary["strategy"] == "Random"
    assert summary["trials"] == {"completed": 4, "in progress": 0, "failed": 0, "stopped": 0}
    assert "t-cli InProgress | trials:" in result.stderr
    assert (
        summary["best_training_job"].startswith("t-cli-") and summary["objective_metric"] == "loss"
    )
    status = run_cli("status", "t-cli", "--output", "json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == summary
    # the best is the least of the trials' objectives (their own records)
    trials = []
    for number in range(1, 5):
        name = next(Path(project.root.parent / "home" / "jobs").glob(f"t-cli-00{number}-*")).name
        shown = json.loads(run_cli("status", name, "--output", "json").stdout)
        assert shown["status"] == "Completed"
        trials.append(name)
    assert summary["best_training_job"] in trials
    text = run_cli("status", "t-cli")
    assert "Tuning job: t-cli (local)" in text.stdout and "Status:     Completed" in text.stdout
    assert f"Best:       {summary['best_training_job']} loss=" in text.stdout
    listed = run_cli("list", "--tuning", "--output", "json", "--backend", "local_process")
    assert listed.returncode == 0, listed.stderr
    (item,) = json.loads(listed.stdout)["tuning_jobs"]
    assert item["tuning_job_name"] == "t-cli" and item["status"] == "Completed"
    assert item["backend"] == "local" and item["trials"]["completed"] == 4
    table = run_cli("list", "--tuning", "--backend", "local_process")
    assert table.stdout.splitlines()[0].split() == [
        "NAME",
        "STATUS",
        "TRIALS",
        "CREATED",
        "BACKEND",
    ]
    assert table.stdout.splitlines()[1].split()[:3] == ["t-cli", "Completed", "4/4"]
    stop = run_cli("stop", "t-cli")
    assert stop.returncode == 0 and "already ended (Completed); nothing to stop" in stop.stderr


def test_every_trial_failing_exits_1_and_the_record_says_failed(run_cli, project):
    spec = project.spec(SPEC)
    result = run_cli(
        *local("submit", spec, "--job-name", "t-cli-fail", "--set", "hyperparameters.optimizer=broken",
               "--set", "tuning.hyperparameter_ranges.optimizer.values=[broken]", "--set", "tuning.max_jobs=2"),
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Tuning job t-cli-fail failed" in result.stderr
    assert "Status:     Failed" in result.stdout and "2 failed" in result.stdout
    status = json.loads(run_cli("status", "t-cli-fail", "--output", "json").stdout)
    assert status["status"] == "Failed" and status["failure_reason"]


def test_an_invalid_tuning_section_exits_2_naming_the_line_and_key(run_cli, project):
    spec = project.spec(SPEC)
    bad_strategy = run_cli(*local("submit", spec, "--set", "tuning.strategy=Smart"))
    assert bad_strategy.returncode == 2
    assert "tuning.strategy" in bad_strategy.stderr and "Bayesian" in bad_strategy.stderr
    zero_log = project.spec(SPEC.replace("min_value: 0.01", "min_value: 0"), "zero.yaml")
    refused = run_cli(*local("submit", zero_log))
    assert refused.returncode == 2
    line = next(i for i, t in enumerate(zero_log.read_text().splitlines(), 1) if "lr:" in t)
    assert (
        f"zero.yaml:{line}" in refused.stderr
        and "tuning.hyperparameter_ranges.lr" in refused.stderr
    )
    assert "Logarithmic" in refused.stderr
    grid = run_cli(*local("submit", spec, "--set", "tuning.strategy=Grid"))
    assert grid.returncode == 2  # Grid takes categorical ranges only
    assert "tuning.hyperparameter_ranges" in grid.stderr and "strategy='Grid'" in grid.stderr
    no_wait = run_cli(*local("submit", spec, "--no-wait"))
    assert no_wait.returncode == 2 and "--no-wait" in no_wait.stderr
    missing = run_cli("status", "t-nowhere")
    assert missing.returncode in (1, 2) and "t-nowhere" in missing.stderr


def start_slow_tuning(run_cli, project, cli_env, name: str) -> subprocess.Popen:
    """``launchbay submit`` of a local tuning job of slow trials, once 2 trials run."""
    spec = project.spec(SPEC)
    command = [
        sys.executable, "-m", "launchbay.cli", *local("submit", str(spec), "--job-name", name,
        "--set", "hyperparameters.epochs=200", "--set", "hyperparameters.pause=0.2")
    ]  # fmt: skip
    submit = subprocess.Popen(
        command, cwd=project.root, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    running = 0
    while running < 2 and time.monotonic() < deadline and submit.poll() is None:
        time.sleep(0.5)
        shown = run_cli("status", name, "--output", "json")
        if shown.returncode == 0:
            running = json.loads(shown.stdout)["trials"]["in progress"]
    if running != 2:
        submit.kill()
        raise AssertionError(f"2 trials never ran at once: {submit.communicate()}")
    return submit


def test_stop_stops_a_running_local_tuning_job_and_its_trials(run_cli, project, cli_env):
    submit = start_slow_tuning(run_cli, project, cli_env, "t-cli-stop")
    try:
        stopped = run_cli("stop", "t-cli-stop", "--output", "json", timeout=90)
        assert stopped.returncode == 0, stopped.stderr
        summary = json.loads(stopped.stdout)
        assert summary["status"] == "Stopped"
        assert summary["trials"]["stopped"] == 2 and summary["trials"]["in progress"] == 0
        out, err = submit.communicate(timeout=60)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
    assert submit.returncode == 1, err
    assert "Status:     Stopped" in out
    assert leftovers("t-cli-stop") == []


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_submit_stops_the_tuning_job_and_every_trial(
    run_cli, project, cli_env, signum, code
):
    name = f"t-cli-{signal.Signals(signum).name.lower()}"
    submit = start_slow_tuning(run_cli, project, cli_env, name)
    try:
        submit.send_signal(signum)
        _, err = submit.communicate(timeout=90)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
    assert submit.returncode == code, err
    assert f"local tuning job {name} and its trials were stopped" in err
    summary = json.loads(run_cli("status", name, "--output", "json").stdout)
    assert summary["status"] == "Stopped" and summary["trials"]["in progress"] == 0
    assert summary["trials"]["stopped"] == 2
    assert leftovers(name) == []


def test_the_dry_run_prints_the_sagemaker_request(run_cli, project):
    spec = project.spec(SPEC)
    result = run_cli("submit", spec, "--dry-run", "--job-name", "t-cli-dry")
    assert result.returncode == 0, result.stderr
    request = json.loads(result.stdout)
    assert request["HyperParameterTuningJobName"] == "t-cli-dry"
    config = request["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Random" and config["RandomSeed"] == 5
    assert config["HyperParameterTuningJobObjective"] == {"Type": "Minimize", "MetricName": "loss"}
    assert config["ResourceLimits"] == {"MaxNumberOfTrainingJobs": 4, "MaxParallelTrainingJobs": 2}
    assert config["ParameterRanges"]["ContinuousParameterRanges"] == [
        {"Name": "lr", "MinValue": "0.01", "MaxValue": "1.0", "ScalingType": "Logarithmic"}
    ]
    assert config["ParameterRanges"]["CategoricalParameterRanges"] == [
        {"Name": "optimizer", "Values": ['"sgd"', '"adam"']}
    ]
    definition = request["TrainingJobDefinition"]
    assert definition["HyperParameterTuningResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    assert definition["StaticHyperParameters"]["epochs"] == "2"
    assert {"Key": "team", "Value": "ml"} in request["Tags"]


def test_the_dry_run_carries_early_stopping_hyperband_completion_and_warm_start(run_cli, project):
    spec = project.spec(SPEC)
    auto = run_cli(
        "submit", spec, "--dry-run", "--job-name", "t-cli-auto",
        "--set", "tuning.early_stopping_type=Auto", "--set", "tuning.strategy=Bayesian",
        "--set", "tuning.completion_criteria={target_objective_metric_value: 0.05, "
        "max_number_of_training_jobs_not_improving: 3, complete_on_convergence: true}",
        "--set", "tuning.warm_start={type: TransferLearning, parents: [t-old-b, t-old-a]}",
        "--set", "tuning.metric_definitions=[{Name: loss, Regex: 'final loss=([0-9.]+)'}]",
    )  # fmt: skip
    assert auto.returncode == 0, auto.stderr
    request = json.loads(auto.stdout)
    config = request["HyperParameterTuningJobConfig"]
    assert config["Strategy"] == "Bayesian" and config["TrainingJobEarlyStoppingType"] == "Auto"
    assert config["TuningJobCompletionCriteria"] == {
        "TargetObjectiveMetricValue": 0.05,
        "BestObjectiveNotImproving": {"MaxNumberOfTrainingJobsNotImproving": 3},
        "ConvergenceDetected": {"CompleteOnConvergence": "Enabled"},
    }
    assert request["WarmStartConfig"] == {
        "WarmStartType": "TransferLearning",
        "ParentHyperParameterTuningJobs": [
            {"HyperParameterTuningJobName": "t-old-a"}, {"HyperParameterTuningJobName": "t-old-b"}
        ],
    }  # fmt: skip
    metrics = request["TrainingJobDefinition"]["AlgorithmSpecification"]["MetricDefinitions"]
    assert metrics == [{"Name": "loss", "Regex": "final loss=([0-9.]+)"}]  # the section's own
    hyperband = run_cli(
        "submit", spec, "--dry-run", "--job-name", "t-cli-hb", "--set", "tuning.strategy=Hyperband",
        "--set", "tuning.hyperband={min_resource: 1, max_resource: 9}",
    )  # fmt: skip
    assert hyperband.returncode == 0, hyperband.stderr
    config = json.loads(hyperband.stdout)["HyperParameterTuningJobConfig"]
    assert config["StrategyConfig"] == {
        "HyperbandStrategyConfig": {"MinResource": 1, "MaxResource": 9}
    }


def test_sagemaker_tuning_jobs_through_the_moto_server(run_cli, project, moto_env):
    spec = project.spec(SPEC)
    submitted = run_cli("submit", spec, "--no-wait", "--job-name", "t-moto", env=moto_env)
    assert submitted.returncode == 0, submitted.stderr
    assert "Submitted t-moto" in submitted.stdout
    described = boto3.client("sagemaker").describe_hyper_parameter_tuning_job(
        HyperParameterTuningJobName="t-moto"
    )
    assert described["TrainingJobDefinition"]["StaticHyperParameters"]["epochs"] == "2"
    status = run_cli("status", "t-moto", "--output", "json", env=moto_env)
    assert status.returncode == 0, status.stderr
    summary = json.loads(status.stdout)
    assert summary["backend"] == "sagemaker" and summary["tuning_job_name"] == "t-moto"
    assert summary["status"] == described["HyperParameterTuningJobStatus"]
    waited = run_cli("submit", spec, "--job-name", "t-moto-wait", "--output", "json", env=moto_env)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["status"] == "Completed"
    listed = run_cli("list", "--tuning", "--backend", "sagemaker", "--output", "json", env=moto_env)
    assert listed.returncode == 0, listed.stderr
    names = {j["tuning_job_name"]: j for j in json.loads(listed.stdout)["tuning_jobs"]}
    assert {"t-moto", "t-moto-wait"} <= set(names)
    assert names["t-moto"]["backend"] == "sagemaker"
    stop = run_cli("stop", "t-moto", env=moto_env)
    assert stop.returncode == 0, stop.stderr
    assert "already ended (Completed); nothing to stop" in stop.stderr
    unknown = run_cli("status", "t-moto-nowhere", env=moto_env)
    assert unknown.returncode == 1 and "t-moto-nowhere" in unknown.stderr


def test_validate_checks_the_tuning_section_without_running_anything(run_cli, project, cli_env):
    spec = project.spec(SPEC)
    valid = run_cli("validate", spec)
    assert valid.returncode == 0, valid.stderr
    assert "tuning: Random search of loss" in valid.stdout and "valid (PyTorch" in valid.stdout
    hyperband = run_cli(
        "validate", spec, "--set", "tuning.strategy=Hyperband",
        "--set", "tuning.hyperband={min_resource: 5, max_resource: 2}",
    )  # fmt: skip
    assert hyperband.returncode == 2
    assert "tuning.hyperband" in hyperband.stderr and "min_resource" in hyperband.stderr
    unknown = run_cli("validate", spec, "--set", "tuning.max_job=3")
    assert unknown.returncode == 2 and "max_jobs" in unknown.stderr  # the closest known key
    assert not (Path(cli_env["LAUNCHBAY_HOME"]) / "tuning").exists()


def test_training_and_tuning_json_come_from_one_printer(capsys):
    """One ``--output json`` writer for both: dates as ISO 8601 (boto3 gives datetimes),
    anything else JSON has no form for as its ``str``."""
    assert jobs.print_json is tuning.print_json is output.print_json
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    output.print_json({"created": when, "day": when.date(), "path": Path("/x")})
    assert json.loads(capsys.readouterr().out) == {
        "created": "2026-01-02T03:04:05+00:00",
        "day": "2026-01-02",
        "path": "/x",
    }
