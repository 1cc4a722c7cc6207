"""Local tuning with ``instance_type="local"``: each trial is a job of real containers.

The trial script (tests/integration/tuning_scripts/trial.py) prints ``loss=`` once per
epoch, ``(lr - 0.3)**2 + 1/epoch``: the objective of each trial is known from its ``lr``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from job_outputs import containers_left, file_uri
from launchbay.images import parse_image_name
from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

SCRIPTS = Path(__file__).parent.parent / "integration" / "tuning_scripts"
METRICS = [{"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}]


def test_a_tuning_job_runs_its_trials_as_containers(home, tmp_path, pytorch_image, docker_client):
    spec = parse_image_name(pytorch_image)
    assert spec is not None
    estimator = PyTorch(
        entry_point="trial.py", source_dir=str(SCRIPTS), role=None, instance_type="local",
        instance_count=1, framework_version=spec.framework_version, py_version="py311",
        hyperparameters={"epochs": 2}, output_path=file_uri(tmp_path / "out"),
        metric_definitions=METRICS,
    )  # fmt: skip
    tuner = HyperparameterTuner(
        estimator, "loss", {"lr": ContinuousParameter(0.01, 1.0)}, metric_definitions=METRICS,
        objective_type="Minimize", strategy="Random", max_jobs=3, max_parallel_jobs=2,
        random_seed=11,
    )  # fmt: skip
    tuner.fit(job_name="t-docker")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed"
    assert description["TrainingJobStatusCounters"]["Completed"] == 3
    summaries = tuner.latest_tuning_job.training_jobs()
    finals = {}
    for summary in summaries:
        lr = float(summary["TunedHyperParameters"]["lr"])
        value = summary["FinalHyperParameterTuningJobObjectiveMetric"]["Value"]
        assert value == pytest.approx((lr - 0.3) ** 2 + 1 / 2)  # the last of its two epochs
        finals[summary["TrainingJobName"]] = value
    assert tuner.best_training_job() == min(finals, key=finals.__getitem__)
    names = set(finals)
    left = [name for name in containers_left(docker_client) if name.startswith("t-docker")]
    assert left == [], left
    assert len(names) == 3
