"""Keras-2-era TensorFlow scripts (TF 2.4-2.15) in ``local_process``, under TensorFlow 2.21.

TensorFlow >= 2.16 ships Keras 3, which such scripts break on (``set_session`` gone,
``opt.variables()`` not callable, Keras variables that Horovod 0.28 cannot take, no
SavedModel from ``model.save(directory)``). With the ``tf-keras`` package installed and
``environment={"TF_USE_LEGACY_KERAS": "1"}``, ``tf.keras`` is Keras 2 again and the script
(``local_process_scripts/keras2_horovod.py``) runs unchanged (docs/horovod.md). The same
script in the TensorFlow image: tests/docker/test_keras2_docker.py.
"""

from __future__ import annotations

import importlib.util

import pytest

from job_outputs import archive_members, file_uri
from keras2_job import check_keras2_job, keras2_estimator
from launchbay.errors import JobFailedError

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def test_keras2_horovod_script_runs_with_tf_keras_2x2(home, tmp_path):
    if importlib.util.find_spec("tf_keras") is None:
        pytest.fail(
            "tf-keras is not installed in this Python: pip install --no-deps tf-keras==2.21.0 "
            "(.ci/run does; docs/horovod.md, 'Keras 2 scripts')",
            pytrace=False,
        )
    out = tmp_path / "out"
    est = keras2_estimator(output_path=file_uri(out))
    est.fit(logs=False)
    prefix = out / est.latest_training_job.name / "output"
    check_keras2_job(
        archive_members(prefix / "model.tar.gz"), archive_members(prefix / "output.tar.gz")
    )


def test_keras2_script_fails_under_keras3_without_the_legacy_flag(home, tmp_path):
    # Why TF_USE_LEGACY_KERAS is needed: without it tf.keras is Keras 3, and the script's
    # first Keras 2 call fails (the session setter is gone).
    est = keras2_estimator(
        environment={"TF_CPP_MIN_LOG_LEVEL": "2"}, output_path=file_uri(tmp_path / "out")
    )
    with pytest.raises(JobFailedError) as failed:
        est.fit(logs=False)
    reason = str(failed.value)
    assert "AttributeError" in reason and "set_session" in reason, reason
