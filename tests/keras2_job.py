"""The Keras-2-era TensorFlow job of tests/integration/test_keras2_scripts.py and
tests/docker/test_keras2_docker.py: its estimator and the checks of what it left.

``local_process_scripts/keras2_horovod.py`` is written as TF 2.4-2.15 scripts were (Horovod's
TF 2 recipe with ``opt.variables()``, ``tf.compat.v1.keras.backend.set_session``, a
SavedModel from ``model.save(directory)``, then Horovod's Keras API with its callbacks); it
runs under TensorFlow >= 2.16 with tf-keras installed and ``TF_USE_LEGACY_KERAS=1``
(docs/horovod.md).
"""

from __future__ import annotations

from typing import Any

from factories import LOCAL_PROCESS_SCRIPTS, estimator
from job_outputs import HOROVOD_MPI, rank_reports
from launchbay.tensorflow import TensorFlow

TF_VERSION = "2.21.0"
LEGACY_KERAS = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def keras2_estimator(**overrides: Any) -> TensorFlow:
    """2 hosts x 2 processes over MPI (Horovod), ``local_process`` unless overridden."""
    options: dict[str, Any] = dict(
        framework=TensorFlow,
        instance_count=2,
        framework_version=TF_VERSION,
        py_version="py311",
        distribution=HOROVOD_MPI,
        hyperparameters={"epochs": 4},
        environment=LEGACY_KERAS,
    )
    return estimator("keras2_horovod.py", LOCAL_PROCESS_SCRIPTS, **(options | overrides))


def check_keras2_job(model_archive: dict[str, bytes], output_archive: dict[str, bytes]) -> None:
    """4 ranks on algo-1/algo-2 trained with Keras 2 (tf-keras), twice (a GradientTape loop,
    then ``model.fit`` with Horovod's Keras API), each lowering the loss and ending with the
    same weights on every rank; rank 0 saved a SavedModel directory (``1/saved_model.pb``)."""
    reports = rank_reports(output_archive)
    assert sorted(reports) == [0, 1, 2, 3], sorted(reports)
    for rank, report in reports.items():
        assert report["world"] == 4
        assert report["host"] == f"algo-{rank // 2 + 1}"
        assert report["keras"] == "tf_keras", report
        assert report["same_weights"] is True, rank
        assert report["loss"][-1] < report["loss"][0], report["loss"]
        # Horovod's Keras API: model.fit with DistributedOptimizer and Horovod's callbacks
        assert report["fit_same_weights"] is True, rank
        assert report["fit_loss"][-1] < report["fit_loss"][0], report["fit_loss"]
        assert report["fit_loss"] == reports[0]["fit_loss"], "MetricAverageCallback averages"
    assert "1/saved_model.pb" in model_archive, sorted(model_archive)
