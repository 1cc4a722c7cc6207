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

from factories import estimator
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


KERAS_PROBE = """\
import os

import tensorflow as tf

print("legacy=" + str(os.environ.get("TF_USE_LEGACY_KERAS")), flush=True)
keras2 = tf.keras.layers.Dense.__module__.startswith("tf_keras")
print("keras=" + ("2" if keras2 else "3"), flush=True)
"""


def _probe(home, tmp_path, framework_version, environment=None):
    """Run the probe as a 1-host local_process TensorFlow job; its printed ``legacy`` and ``keras``."""
    from launchbay.tensorflow import TensorFlow

    src = tmp_path / "probe"
    src.mkdir(exist_ok=True)
    (src / "probe.py").write_text(KERAS_PROBE)
    est = estimator(
        "probe.py",
        src,
        framework=TensorFlow,
        framework_version=framework_version,
        py_version="py310",
        environment={"TF_CPP_MIN_LOG_LEVEL": "2", **(environment or {})},
        output_path=file_uri(tmp_path / "out"),
    )
    est.fit(logs=False)
    log = (home / "jobs" / est.latest_training_job.name / "logs" / "algo-1.log").read_text()
    found = dict(
        line.split("=", 1) for line in log.splitlines() if line.startswith(("legacy=", "keras="))
    )
    return found["legacy"], found["keras"]


def test_a_keras2_era_framework_version_gets_keras2_where_tf_keras_is_installed(home, tmp_path):
    assert importlib.util.find_spec("tf_keras") is not None, "tf-keras: .ci/run installs it"
    assert _probe(home, tmp_path, "2.13") == ("1", "2")
    # The user's own setting wins, and a Keras 3 era version is left alone.
    assert _probe(home, tmp_path, "2.13", {"TF_USE_LEGACY_KERAS": "0"}) == ("0", "3")
    assert _probe(home, tmp_path, "2.19") == ("None", "3")


def test_without_tf_keras_a_keras2_era_job_warns_with_the_install_line(home, tmp_path):
    # The client Python cannot find tf_keras (a meta path finder hides it): the job still runs,
    # on Keras 3, and fit() warned how to get Keras 2.
    import subprocess
    import sys

    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tf_keras' or name.startswith('tf_keras.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    src = tmp_path / "probe"
    src.mkdir()
    (src / "probe.py").write_text("print('ran', flush=True)\n")
    client = (
        "import warnings\n"
        "from launchbay.tensorflow import TensorFlow\n"
        f"est = TensorFlow(entry_point='probe.py', source_dir={str(src)!r}, role=None,\n"
        "    instance_type='local_process', instance_count=1, framework_version='2.13',\n"
        f"    py_version='py310', output_path={file_uri(tmp_path / 'out')!r})\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    est.fit(logs=False)\n"
        "print('|'.join(str(w.message) for w in seen if 'tf-keras' in str(w.message)))\n"
        "print(est.latest_training_job.describe()['TrainingJobStatus'])\n"
    )
    import os

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", client], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    message, status = out.stdout.strip().splitlines()[-2:]
    assert status == "Completed"
    assert 'pip install --no-deps "tf-keras~=2.' in message and "2.13" in message, message
