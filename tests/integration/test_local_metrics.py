"""Metrics of local jobs, recorded from their logs (issue 31 items 1, 2 and 11).

Each job runs ``metrics_scripts/flood.py`` as a ``local_process`` host: it floods its
log with metric lines or ordinary output, may print a line that makes a backtracking
regex run for ever, then prints a last value. The promises:

* the tuning objective is the last value the trial logged, however much it logged
  before (the logs are read to their end before the trial ends);
* a regex that backtracks never holds the client: Ctrl-C and ``max_run`` act within
  30 s, and the job's metrics say why they stop where they stop;
* every metric line is kept, and the metrics are complete when ``fit()`` returns.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_local_lifecycle import job_processes

from factories import estimator as make_estimator
from job_outputs import file_uri
from launchbay.analytics import TrainingJobAnalytics
from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "metrics_scripts"
LOSS = {"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}
#: Exponential on a line of a's without a b: ``flood.py --long_a 5000`` never ends matching.
BACKTRACKING = {"Name": "stuck", "Regex": r"(a+)+b"}
#: The generous bound within which Ctrl-C and max_run act (the issue's; a hang exceeds it).
BOUND = 30.0


def flood(tmp_path: Path, **hyperparameters) -> PyTorch:
    return make_estimator(
        "flood.py",
        SCRIPTS,
        hyperparameters=hyperparameters,
        out=tmp_path / "out",
        metric_definitions=[LOSS],
    )


def metrics_lines(job_dir: str | Path) -> list[dict]:
    """The job's ``metrics.jsonl`` (docs/tuning.md): one JSON object per line."""
    text = (Path(job_dir) / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize(
    "before", [{"repeat": 400_000}, {"noise_mb": 15}], ids=["400k-metric-lines", "15MB-of-output"]
)
def test_the_objective_is_the_last_logged_value_after_a_flood(home, tmp_path, before):
    tuner = HyperparameterTuner(
        flood(tmp_path, last="0.5", **before), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=[LOSS], objective_type="Minimize", strategy="Random", max_jobs=1,
    )  # fmt: skip
    tuner.fit(job_name="m-flood")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed", description
    (trial,) = tuner.latest_tuning_job.training_jobs()
    assert trial["FinalHyperParameterTuningJobObjectiveMetric"]["Value"] == 0.5
    values = list(TrainingJobAnalytics(trial["TrainingJobName"]).dataframe()["value"])
    assert values == [9.0] * before.get("repeat", 0) + [0.5]
    assert metrics_lines(trial["LocalJobDir"])[-1] == {"final": True}


def start_driver(tmp_path: Path, mode: str, job_name: str, **options) -> subprocess.Popen[str]:
    """``metrics_scripts/metrics_driver.py``: one fit() or tuner.fit() in a client process."""
    (tmp_path / "marks").mkdir()
    options = {
        "mode": mode, "job_name": job_name, "output": file_uri(tmp_path / "out"),
        "metric_definitions": [LOSS, BACKTRACKING], **options,
    }  # fmt: skip
    options["hyperparameters"] = {"marks": str(tmp_path / "marks"), **options["hyperparameters"]}
    return subprocess.Popen(
        [sys.executable, str(SCRIPTS / "metrics_driver.py"), json.dumps(options)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def wait_until_printed(tmp_path: Path, driver: subprocess.Popen[str]) -> float:
    """The moment the job has printed everything (its mark), the backtracking line included."""
    deadline = time.monotonic() + 120
    while not list((tmp_path / "marks").glob("*.json")):
        if driver.poll() is not None:
            pytest.fail(driver.communicate()[0])
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.1)
    return time.monotonic()


def ended_within(driver: subprocess.Popen[str], seconds: float, what: str) -> str:
    """The driver's output once it exited; fails (and kills it) if it takes longer."""
    try:
        return driver.communicate(timeout=seconds)[0]
    except subprocess.TimeoutExpired:
        driver.kill()
        output = driver.communicate()[0]
        pytest.fail(f"{what} did not act within {seconds:g} s:\n{output[-3000:]}")


def backtracking_line(job_dir: Path) -> int:
    """Where flood.py's line of a's starts in the host's log (the runtime prints lines first)."""
    return (job_dir / "logs" / "algo-1.log").read_bytes().index(b"a" * 5000)


def result(output: str) -> dict:
    """The driver's last ``driver: <JSON>``; what its stderr printed after it is not ours to
    parse (stdout and stderr share the pipe: a late log line once made this raise)."""
    text = output.rsplit("driver: ", 1)[1]
    description, _end = json.JSONDecoder().raw_decode(text)
    return description


def test_a_backtracking_regex_does_not_delay_ctrl_c(home, tmp_path):
    driver = start_driver(
        tmp_path, "fit", "m-ctrl-c", hyperparameters={"repeat": 3, "long_a": 5000, "sleep": 600}
    )
    try:
        wait_until_printed(tmp_path, driver)
        time.sleep(1.0)  # the regex is deep in its search now
        driver.send_signal(signal.SIGINT)
        output = ended_within(driver, BOUND, "Ctrl-C")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert "driver: KeyboardInterrupt" in output, output
    status = json.loads((home / "jobs" / "m-ctrl-c" / "status.json").read_text())
    assert status["TrainingJobStatus"] == "Stopped"
    # the values before the backtracking line are kept, and the file says why they end there
    records = metrics_lines(home / "jobs" / "m-ctrl-c")
    assert [v for r in records for v in r.get("values", {}).get("loss", [])] == [9.0] * 3
    end = records[-1]
    assert end["final"] is True
    assert "'stuck'" in end["incomplete"] and "(a+)+b" in end["incomplete"]
    assert f"at byte {backtracking_line(home / 'jobs' / 'm-ctrl-c')} of " in end["incomplete"]
    assert "logs/algo-1.log" in end["incomplete"]
    assert "stop being recorded" in output and "(a+)+b" in output  # the warning
    assert job_processes(home / "jobs" / "m-ctrl-c") == []


def test_a_backtracking_regex_does_not_delay_max_run_and_the_trial_says_why_it_has_no_objective(
    home, tmp_path
):
    driver = start_driver(
        tmp_path, "tune", "m-max-run", max_run=5,
        hyperparameters={"repeat": 3, "long_a": 5000, "last": "0.5", "sleep": 600},
    )  # fmt: skip
    try:
        printed = wait_until_printed(tmp_path, driver)
        output = ended_within(driver, 5 + BOUND - (time.monotonic() - printed), "max_run")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    description = result(output)
    (trial,) = description["trials"]
    assert trial["TrainingJobStatus"] == "Stopped", trial
    assert "FinalHyperParameterTuningJobObjectiveMetric" not in trial
    assert trial["ObjectiveStatus"] == "Failed"
    why = trial["FailureReason"]
    assert "incomplete" in why and "'stuck'" in why and "(a+)+b" in why, why
    job = trial["TrainingJobName"]
    assert f"at byte {backtracking_line(home / 'jobs' / job)} of " in why, why
    assert "logs/algo-1.log" in why, why
    assert description["HyperParameterTuningJobStatus"] == "Failed"
    assert "No objective metric was found" not in description["FailureReason"]
    assert "(a+)+b" in description["FailureReason"]
    training = json.loads((home / "jobs" / job / "status.json").read_text())
    assert "MaxRuntimeInSeconds" in training["FailureReason"]


def test_every_metric_line_is_kept_and_complete_when_fit_returns(home, tmp_path):
    count = 300_000
    estimator = flood(tmp_path, counting=count, noise_mb=3)
    estimator.fit(logs=False)
    # no wait, no refresh: the metrics are whole once fit() has returned
    values = list(estimator.training_job_analytics.dataframe()["value"])
    assert values == [float(i) for i in range(count)]
    job_dir = Path(estimator.latest_training_job.describe()["LocalJobDir"])
    assert metrics_lines(job_dir)[-1] == {"final": True}
    assert sorted(p.name for p in job_dir.iterdir() if p.name.startswith("metrics")) == [
        "metrics.jsonl"
    ]
    assert list(job_dir.rglob("*.tmp")) == []
    assert job_processes(job_dir) == []  # the recorder process ended with the job


def test_a_job_without_a_metrics_file_has_its_whole_logs_read_when_analytics_ask(home, tmp_path):
    count = 20_000
    estimator = flood(tmp_path, counting=count, noise_mb=3)  # 3 MB without a metric midway
    estimator.fit(logs=False)
    job_dir = Path(estimator.latest_training_job.describe()["LocalJobDir"])
    for name in ("metrics.jsonl", "metrics.json"):  # as a job of a version that kept none
        (job_dir / name).unlink(missing_ok=True)
    values = list(estimator.training_job_analytics.dataframe()["value"])
    assert values == [float(i) for i in range(count)]
    assert not [p for p in job_dir.iterdir() if p.name.startswith("metrics")]  # read only
