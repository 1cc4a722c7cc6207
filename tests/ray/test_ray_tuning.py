"""Tuning Ray estimators on the test cluster (tests/ray/conftest.py): trials are client-driven
(their control loop runs here) but their hosts run on the cluster's nodes, so this machine's
capacity never limits how many run at once.
"""

from __future__ import annotations

import os

import pytest
from test_ray_backend import pytorch

from launchbay.tuner import ContinuousParameter, HyperparameterTuner

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

#: One host of one CPU per trial: the cluster's two 2-CPU nodes run 4 at once.
PARALLEL = 4


def test_ray_trials_run_in_parallel_beyond_this_machines_capacity(ray_home, tmp_path, monkeypatch):
    # This machine runs as many ranks as it has cores (2 on CI): a cap by this machine's
    # capacity would run 2 trials at once, and none would ever see 4 together.
    cores = os.cpu_count() or 1
    assert PARALLEL > min(cores, 2)
    monkeypatch.setenv("LAUNCHBAY_MAX_LOCAL_RANKS", str(min(cores, 2)))
    together = tmp_path / "together"
    together.mkdir()
    estimator = pytorch(
        "tune_together.py",
        instance_count=1,
        output_path=f"file://{tmp_path}/out",
        environment={"TOGETHER_DIR": str(together), "TOGETHER_WANTED": str(PARALLEL)},
    )
    tuner = HyperparameterTuner(
        estimator,
        "loss",
        {"lr": ContinuousParameter(0.01, 0.1)},
        metric_definitions=[{"Name": "loss", "Regex": r"loss: ([0-9.]+)"}],
        strategy="Random",
        objective_type="Minimize",
        max_jobs=PARALLEL,
        max_parallel_jobs=PARALLEL,
        random_seed=1,
    )
    tuner.fit(wait=True)
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed", description.get(
        "FailureReason"
    )
    assert description["LocalParallelTrainingJobs"] == PARALLEL
    trials = tuner.latest_tuning_job.training_jobs()
    assert len(trials) == PARALLEL
    assert {t["TrainingJobStatus"] for t in trials} == {"Completed"}
    # every trial reported its objective, which it does only once all 4 ran at once
    assert all(t["ObjectiveStatus"] == "Succeeded" for t in trials), trials
    assert len(os.listdir(together)) == PARALLEL
