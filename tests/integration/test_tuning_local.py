"""Local hyperparameter tuning with real processes (issue 23): trials are local_process jobs.

Each trial runs ``tuning_scripts/trial.py``, which prints ``loss=<value>`` once per
epoch and writes ``<marks>/<trial>.json`` (its start and end times, the values it
printed, its CUDA_VISIBLE_DEVICES, how it ended), so each test checks what ran
from the trials' own records, never from timings.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest
from test_local_lifecycle import finish, job_processes

from job_outputs import file_uri
from job_processes import started_child
from launchbay.metrics import load_metrics
from launchbay.pytorch import PyTorch
from launchbay.tuner import (
    CategoricalParameter,
    ContinuousParameter,
    HyperbandStrategyConfig,
    HyperparameterTuner,
    StrategyConfig,
    WarmStartConfig,
    WarmStartTypes,
)

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "tuning_scripts"
METRICS = [{"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}]
TRIAL_NAME = re.compile(r"^(?P<job>.+)-(?P<number>\d{3})-[0-9a-f]{8}$")


def estimator(tmp_path: Path, **hyperparameters) -> PyTorch:
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    return PyTorch(
        entry_point="trial.py", source_dir=str(SCRIPTS), role=None,
        instance_type="local_process", instance_count=1, framework_version="2.8.0",
        py_version="py312", hyperparameters={"marks": str(marks), **hyperparameters},
        output_path=file_uri(tmp_path / "out"), metric_definitions=METRICS,
    )  # fmt: skip


def marks(tmp_path: Path) -> dict[str, dict]:
    """Each trial's own record, by trial name."""
    return {p.stem: json.loads(p.read_text()) for p in (tmp_path / "marks").glob("*.json")}


def peak(records) -> int:
    """Most trials running at one moment, from their own start and end times."""
    events = sorted(
        [(r["start"], 1) for r in records] + [(r["end"], -1) for r in records],
        key=lambda e: (e[0], e[1]),
    )
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def objective(summary) -> float | None:
    return (summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}).get("Value")


@pytest.mark.parametrize("objective_type", ["Minimize", "Maximize"])
def test_the_objective_is_the_last_logged_value_and_the_best_is_the_min_or_max(
    home, tmp_path, objective_type
):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=3, last_bump=0.5), "loss",
        {"lr": ContinuousParameter(0.01, 1.0, "Logarithmic")}, metric_definitions=METRICS,
        objective_type=objective_type, strategy="Random", max_jobs=4, max_parallel_jobs=2,
        random_seed=7,
    )  # fmt: skip
    tuner.fit(job_name=f"t-last-{objective_type.lower()}")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    assert description["TrainingJobStatusCounters"]["Completed"] == 4
    assert description["ObjectiveStatusCounters"] == {"Succeeded": 4, "Pending": 0, "Failed": 0}
    records = marks(tmp_path)
    summaries = tuner.latest_tuning_job.training_jobs()
    assert sorted(s["TrainingJobName"] for s in summaries) == sorted(records)
    for summary in summaries:
        name = summary["TrainingJobName"]
        assert TRIAL_NAME.match(name).group("job") == f"t-last-{objective_type.lower()}"
        printed = records[name]["values"]
        assert len(printed) == 4 and printed[-1] > min(printed)  # the bump: last is not the least
        assert objective(summary) == printed[-1]
        lr = summary["TunedHyperParameters"]["lr"]
        assert lr == repr(float(lr)) and 0.01 <= float(lr) <= 1.0
        assert records[name]["lr"] == float(lr)
        # every value as a time series in the trial's own directory
        stored = load_metrics(summary["LocalJobDir"])  # its metrics.jsonl
        assert [v for _, v in stored["metrics"]["loss"]] == printed and stored["final"]
    finals = [objective(s) for s in summaries]
    best = min(finals) if objective_type == "Minimize" else max(finals)
    assert objective(description["BestTrainingJob"]) == best
    assert tuner.best_training_job() == next(
        s["TrainingJobName"] for s in summaries if objective(s) == best
    )
    frame = tuner.analytics().dataframe()
    assert sorted(frame["FinalObjectiveValue"]) == sorted(finals)
    # another process's view: attach reads the record under LAUNCHBAY_HOME
    attached = HyperparameterTuner.attach(f"t-last-{objective_type.lower()}")
    assert attached.best_training_job() == tuner.best_training_job()
    assert attached.objective_type == objective_type
    assert len(attached.analytics().dataframe()) == 4


def test_at_most_max_parallel_jobs_run_at_once_and_the_peak_reaches_it(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=3, pause=1.0), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Random", max_jobs=6,
        max_parallel_jobs=3,
    )  # fmt: skip
    tuner.fit(job_name="t-parallel")
    records = list(marks(tmp_path).values())
    assert len(records) == 6 and all(r["how"] == "completed" for r in records)
    print("peak of trials running at once:", peak(records))
    assert peak(records) == 3
    assert tuner.describe()["LocalParallelTrainingJobs"] == 3


def test_trials_get_disjoint_gpus(home, tmp_path, fake_gpus):
    fake_gpus(4)
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=3, pause=1.0), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Random", max_jobs=6,
        max_parallel_jobs=4,
    )  # fmt: skip
    tuner.fit(job_name="t-gpus")
    records = list(marks(tmp_path).values())
    assert len(records) == 6
    assert {r["cuda"] for r in records} <= {"0", "1", "2", "3"}
    for a in records:  # trials that ran at the same time never shared a GPU
        for b in records:
            if a is not b and a["start"] < b["end"] and b["start"] < a["end"]:
                assert a["cuda"] != b["cuda"], (a, b)
    print("peak of trials running at once on 4 GPUs:", peak(records))
    assert peak(records) == 4
    summaries = tuner.latest_tuning_job.training_jobs()
    assert all(len(s["LocalGpus"]["algo-1"]) == 1 for s in summaries)


def test_a_failing_trial_is_reported_and_the_grid_goes_on(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss",
        {"optimizer": CategoricalParameter(["sgd", "broken"]),
         "lr": CategoricalParameter(["0.1", "0.35"])},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Grid",
        max_parallel_jobs=2,
    )  # fmt: skip
    tuner.fit(job_name="t-grid")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    counters = description["TrainingJobStatusCounters"]
    assert counters["Completed"] == 2 and counters["NonRetryableError"] == 2
    summaries = tuner.latest_tuning_job.training_jobs()
    combos = sorted(
        (json.loads(s["TunedHyperParameters"]["optimizer"]), json.loads(s["TunedHyperParameters"]["lr"]))
        for s in summaries
    )  # fmt: skip
    assert combos == [("broken", "0.1"), ("broken", "0.35"), ("sgd", "0.1"), ("sgd", "0.35")]
    for summary in summaries:
        if '"broken"' == summary["TunedHyperParameters"]["optimizer"]:
            assert summary["TrainingJobStatus"] == "Failed"
            assert "exit" in summary["FailureReason"].lower() or "3" in summary["FailureReason"]
            assert summary["ObjectiveStatus"] == "Failed" and objective(summary) is None
        else:
            assert summary["TrainingJobStatus"] == "Completed" and objective(summary) is not None
    assert json.loads(
        next(
            s for s in summaries if s["TrainingJobName"] == tuner.best_training_job()
        )["TunedHyperParameters"]["lr"]
    ) == "0.35"  # fmt: skip


def test_bayesian_searches_with_optuna_within_the_ranges(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss",
        {"lr": ContinuousParameter(0.01, 1.0, "Logarithmic"),
         "optimizer": CategoricalParameter(["sgd", "adam"])},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Bayesian", max_jobs=6,
        max_parallel_jobs=2, random_seed=3,
    )  # fmt: skip
    tuner.fit(job_name="t-bayes")
    summaries = tuner.latest_tuning_job.training_jobs()
    assert len(summaries) == 6 and all(s["TrainingJobStatus"] == "Completed" for s in summaries)
    for summary in summaries:
        assert 0.01 <= float(summary["TunedHyperParameters"]["lr"]) <= 1.0
        assert summary["TunedHyperParameters"]["optimizer"] in ('"sgd"', '"adam"')


def test_early_stopping_stops_a_trial_that_falls_behind_the_median(home, tmp_path):
    # one at a time, in grid order: a good trial, then a better one (never behind the
    # median), then a bad one, worse at its first step than the median of their running
    # averages there
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=8, pause=0.5), "loss",
        {"lr": CategoricalParameter(["0.31", "0.3", "0.95"])}, metric_definitions=METRICS,
        objective_type="Minimize", strategy="Grid", max_parallel_jobs=1,
        early_stopping_type="Auto",
    )  # fmt: skip
    tuner.fit(job_name="t-early")
    by_lr = {
        json.loads(s["TunedHyperParameters"]["lr"]): s
        for s in tuner.latest_tuning_job.training_jobs()
    }
    assert by_lr["0.3"]["TrainingJobStatus"] == by_lr["0.31"]["TrainingJobStatus"] == "Completed"
    behind = by_lr["0.95"]
    assert behind["TrainingJobStatus"] == "Stopped" and behind["LocalEarlyStopped"]
    record = marks(tmp_path)[behind["TrainingJobName"]]
    assert record["how"] == "stopped" and len(record["values"]) < 8
    assert objective(behind) == record["values"][-1]  # a stopped trial keeps its last value
    assert tuner.describe()["TrainingJobStatusCounters"]["Stopped"] == 1


def test_hyperband_stops_trials_at_max_resource_and_at_rungs(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=9, pause=0.4), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Hyperband", max_jobs=4,
        max_parallel_jobs=2, random_seed=5,
        strategy_config=StrategyConfig(HyperbandStrategyConfig(max_resource=3, min_resource=1)),
    )  # fmt: skip
    tuner.fit(job_name="t-hyperband")
    summaries = tuner.latest_tuning_job.training_jobs()
    assert len(summaries) == 4
    records = marks(tmp_path)
    for summary in summaries:  # no trial trains past its budget of 3 epochs (9 asked)
        record = records[summary["TrainingJobName"]]
        assert summary["TrainingJobStatus"] == "Stopped" and summary["LocalEarlyStopped"]
        assert record["how"] == "stopped" and len(record["values"]) < 9
        assert objective(summary) == record["values"][-1]


def test_warm_start_sees_the_parents_trials(home, tmp_path):
    ranges = {"lr": ContinuousParameter(0.01, 1.0)}
    parent = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss", ranges, metric_definitions=METRICS,
        objective_type="Minimize", strategy="Random", max_jobs=3, max_parallel_jobs=3,
        random_seed=1,
    )  # fmt: skip
    parent.fit(job_name="t-parent")
    parent_best = parent.describe()["BestTrainingJob"]
    child = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss", ranges, metric_definitions=METRICS,
        objective_type="Minimize", strategy="Bayesian", max_jobs=2, max_parallel_jobs=1,
        warm_start_config=WarmStartConfig(WarmStartTypes.IDENTICAL_DATA_AND_ALGORITHM, {"t-parent"}),
    )  # fmt: skip
    child.fit(job_name="t-child")
    description = child.describe()
    assert description["LocalWarmStartTrainingJobs"] == 3
    overall = description["OverallBestTrainingJob"]
    candidates = [objective(parent_best), objective(description["BestTrainingJob"])]
    assert objective(overall) == min(candidates)
    with pytest.raises(Exception, match="not a local tuning job here"):
        HyperparameterTuner(
            estimator(tmp_path), "loss", ranges, metric_definitions=METRICS, max_jobs=1,
            warm_start_config=WarmStartConfig(WarmStartTypes.TRANSFER_LEARNING, {"t-nothing"}),
        ).fit(job_name="t-orphan")  # fmt: skip


@contextlib.contextmanager
def tuning_driver(tmp_path: Path, job_name: str, epochs: int):
    """A tuning job of 2 parallel trials run by tests/.../tuning_driver.py in a process of
    its own, yielded once both trials have logged; killed if the test leaves it running."""
    (tmp_path / "marks").mkdir()
    options = {
        "marks": str(tmp_path / "marks"), "output": file_uri(tmp_path / "out"),
        "checkpoint": file_uri(tmp_path / "checkpoints"), "job_name": job_name,
        "max_jobs": 6, "max_parallel_jobs": 2, "hyperparameters": {"epochs": epochs, "pause": 0.2},
    }  # fmt: skip
    command = [sys.executable, str(SCRIPTS / "tuning_driver.py"), json.dumps(options)]

    def both_logged() -> bool:
        return sum(1 for r in marks(tmp_path).values() if r["values"]) >= 2

    with started_child(
        command, both_logged, 120, message="the trials did not start", poll=0.2
    ) as driver:
        yield driver


def test_ctrl_c_stops_every_trial_saves_checkpoints_and_leaves_nothing(home, tmp_path):
    with tuning_driver(tmp_path, "t-ctrl-c", epochs=1000) as driver:
        output = finish(driver, signal.SIGINT, timeout=120)
    assert "driver: KeyboardInterrupt" in output, output
    records = marks(tmp_path)
    assert len(records) == 2 and all(r["how"] == "stopped" for r in records.values()), records
    saved = list((tmp_path / "checkpoints").rglob("stopped-*.txt"))
    assert len(saved) == 2, output
    tuning = json.loads((home / "tuning" / "t-ctrl-c" / "tuning.json").read_text())
    assert tuning["HyperParameterTuningJobStatus"] == "Stopped"
    assert [s["TrainingJobStatus"] for s in tuning["LocalTrainingJobs"]] == ["Stopped"] * 2
    assert job_processes(home) == []
    assert HyperparameterTuner.attach("t-ctrl-c").describe()["HyperParameterTuningJobStatus"] == (
        "Stopped"
    )


def test_stop_tuning_job_stops_the_running_trials(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=1000, pause=0.2), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Random", max_jobs=5,
        max_parallel_jobs=2,
    )  # fmt: skip
    tuner.fit(job_name="t-stop", wait=False)
    deadline = time.monotonic() + 120
    while sum(1 for r in marks(tmp_path).values() if r["values"]) < 2:
        assert time.monotonic() < deadline, "the trials did not start"
        time.sleep(0.2)
    tuner.stop_tuning_job()
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Stopped"
    assert description["TrainingJobStatusCounters"]["Stopped"] == 2
    assert all(r["how"] == "stopped" for r in marks(tmp_path).values())
    assert job_processes(home) == []


def test_training_job_analytics_of_a_plain_local_fit(home, tmp_path):
    plain = estimator(tmp_path, epochs=3, lr=0.5)
    plain.fit(logs=False)
    frame = plain.training_job_analytics.dataframe()
    assert list(frame.columns) == ["timestamp", "metric_name", "value"]
    printed = marks(tmp_path)[plain.latest_training_job.name]["values"]
    assert list(frame["value"]) == printed and set(frame["metric_name"]) == {"loss"}
    assert (frame["timestamp"] >= 0).all()


def test_best_estimator_of_a_local_tuning_job_has_the_best_values_and_fits_again(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss",
        {"lr": ContinuousParameter(0.01, 1.0), "optimizer": CategoricalParameter(["sgd", "adam"])},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Random", max_jobs=3,
        max_parallel_jobs=2, random_seed=3,
    )  # fmt: skip
    tuner.fit(job_name="t-best-estimator")
    best = tuner.describe()["BestTrainingJob"]
    for source in (tuner, HyperparameterTuner.attach("t-best-estimator")):
        best_estimator = source.best_estimator()
        assert isinstance(best_estimator, PyTorch)
        assert best_estimator.latest_training_job.name == best["TrainingJobName"]
        # the trial's values, as SageMaker passed them (JSON text for a framework estimator)
        hyperparameters = best_estimator.hyperparameters()
        for name, value in best["TunedHyperParameters"].items():
            assert hyperparameters[name] == value
        assert json.loads(hyperparameters["epochs"]) == 2
        assert "_tuning_objective_metric" not in hyperparameters
    # the best estimator trains again, a plain local job with the best trial's values
    best_estimator.fit(job_name="t-best-again")
    again = marks(tmp_path)["t-best-again"]
    assert again["how"] == "completed"
    assert again["lr"] == float(best["TunedHyperParameters"]["lr"])
    assert again["optimizer"] == json.loads(best["TunedHyperParameters"]["optimizer"])


def test_a_reached_target_objective_ends_the_search(home, tmp_path):
    from launchbay.tuner import TuningJobCompletionCriteriaConfig

    # loss <= (1 - 0.3)**2 + 1/2 < 1.0 for every lr in the range: the first trial reaches it
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=2), "loss", {"lr": ContinuousParameter(0.01, 1.0)},
        metric_definitions=METRICS, objective_type="Minimize", strategy="Random", max_jobs=6,
        max_parallel_jobs=1,
        completion_criteria_config=TuningJobCompletionCriteriaConfig(
            target_objective_metric_value=1.0
        ),
    )  # fmt: skip
    tuner.fit(job_name="t-target")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    assert description["TrainingJobStatusCounters"]["Completed"] == 1
    assert "TargetObjectiveMetricValue 1.0 reached" in description["LocalStopReason"]
    assert len(marks(tmp_path)) == 1


def test_max_runtime_stops_the_tuning_job_and_its_trials(home, tmp_path):
    tuner = HyperparameterTuner(
        estimator(tmp_path, epochs=100000, pause=0.2), "loss",
        {"lr": ContinuousParameter(0.01, 1.0)}, metric_definitions=METRICS,
        objective_type="Minimize", strategy="Random", max_jobs=4, max_parallel_jobs=2,
        max_runtime_in_seconds=3,
    )  # fmt: skip
    tuner.fit(job_name="t-runtime")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Stopped"
    assert "MaxRuntimeInSeconds (3 s) reached" in description["LocalStopReason"]
    assert all(r["how"] == "stopped" for r in marks(tmp_path).values())
    assert job_processes(home) == []


def test_a_killed_client_leaves_no_trial_running_and_the_record_reads_stopped(home, tmp_path):
    with tuning_driver(tmp_path, "t-killed", epochs=100000) as driver:
        driver.kill()  # SIGKILL: nothing of the client runs any more
        driver.communicate(timeout=30)
        deadline = time.monotonic() + 120
        while job_processes(home):  # each trial's watchdog stops its hosts
            assert time.monotonic() < deadline, job_processes(home)
            time.sleep(0.2)
    records = marks(tmp_path)
    assert len(records) == 2 and all(r["how"] == "stopped" for r in records.values()), records
    description = HyperparameterTuner.attach("t-killed").describe()
    assert description["HyperParameterTuningJobStatus"] == "Stopped"
    assert description["LocalStopReason"] == "the process that ran it is gone"
    assert description["TrainingJobStatusCounters"]["InProgress"] == 0
