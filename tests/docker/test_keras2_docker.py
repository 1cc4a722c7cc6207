"""A Keras-2-era TensorFlow script in local Docker mode: the TensorFlow image carries tf-keras.

The job of tests/integration/test_keras2_scripts.py (tests/keras2_job.py: Horovod's TF 2
recipe with ``opt.variables()``, ``tf.compat.v1.keras.backend.set_session``, a SavedModel
from ``model.save(directory)``), 2 hosts x 2 processes over MPI in two containers, with
``environment={"TF_USE_LEGACY_KERAS": "1"}``: ``tf.keras`` is the image's tf-keras (Keras 2).
"""

from __future__ import annotations

import pytest

from job_outputs import archive_members, containers_left, file_uri
from keras2_job import check_keras2_job, keras2_estimator

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def test_keras2_horovod_script_runs_with_tf_keras_in_two_containers(
    home, tmp_path, tensorflow_image, docker_client
):
    out = tmp_path / "out"
    est = keras2_estimator(
        image_uri=tensorflow_image, instance_type="local", output_path=file_uri(out)
    )
    est.fit(logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    check_keras2_job(
        archive_members(prefix / "model.tar.gz"), archive_members(prefix / "output.tar.gz")
    )
    leftovers = containers_left(docker_client, name=job.name)
    assert not leftovers, leftovers
