"""The local stand-ins (launchbay.runtime.standins) reach a script only in local jobs.

``LAUNCHBAY_STANDINS=1`` is set by the local backends alone; a runtime without it
(as on SageMaker) never puts ``smdistributed`` on the path, and a real library on
the path is always the one a script imports.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from launchbay.runtime import standins
from launchbay.runtime.launchers import mpi, select_launcher
from launchbay.runtime.settings import RuntimeSettings

from .test_launchers import LOCAL, make_ctx

PROBE = """
import json
import subprocess
try:
    import smdistributed
except ModuleNotFoundError as exc:
    print(json.dumps({"file": None, "error": str(exc)}))
else:
    print(json.dumps({"file": smdistributed.__file__,
                      "standin": getattr(smdistributed, "LAUNCHBAY_STANDIN", False)}))
"""

DP = {"sagemaker_distributed_dataparallel_enabled": True}

TF_API = """
import json
import subprocess

import numpy as np

import smdistributed.dataparallel.tensorflow as sdp
import tensorflow as tf

out = {}
try:
    sdp.rank()
except RuntimeError as exc:
    out["before_init"] = str(exc)
sdp.init()
try:
    sdp.init()
except RuntimeError as exc:
    out["twice"] = str(exc)
rank = sdp.rank()
out["rank"] = rank
value = tf.constant([1.0 + 1e-4 * (rank + 1)])
out["fp16"] = float(sdp.allreduce(value, 0, 1, compression=sdp.Compression.fp16, op=sdp.ReduceOp.SUM).numpy()[0])
out["none"] = float(sdp.allreduce(value, 0, 1, op=sdp.ReduceOp.SUM).numpy()[0])
out["min"] = float(sdp.allreduce(tf.constant(float(rank)), 0, 1, op=sdp.ReduceOp.MIN).numpy())
out["average"] = float(sdp.allreduce(tf.constant(float(rank)), 0, 1).numpy())

var = tf.Variable([0.0])
opt = sdp.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
opt.apply_gradients([(tf.constant([float(rank)]), var)])
out["keras"] = float(var.numpy()[0])

model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros")])
model.compile(optimizer=sdp.DistributedOptimizer(tf.keras.optimizers.SGD(0.1)), loss="mse")
model.fit(np.ones((1, 1)), np.full((1, 1), float(rank)), batch_size=1, epochs=1, verbose=0)
out["fit"] = float(model.get_weights()[0][0][0])

with tf.Graph().as_default():
    w = tf.compat.v1.get_variable("w", initializer=tf.constant([float(rank) + 1.0]))
    loss = tf.reduce_sum(w * float(rank))
    train = sdp.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1)).minimize(loss)
    hooks = [sdp.BroadcastGlobalVariablesHook(root_rank=0)]
    with tf.compat.v1.train.MonitoredTrainingSession(hooks=hooks) as sess:
        out["v1_start"] = float(sess.run(w)[0])
        sess.run(train)
        out["v1"] = float(sess.run(w)[0])
print(json.dumps(out))
sdp.shutdown()
"""


def probe(results) -> dict:
    (line,) = results["algo-1"].json_lines()
    return line


def test_without_the_local_flag_the_runtime_adds_nothing(local_job) -> None:
    results = local_job({"train.py": PROBE}).run()
    assert probe(results) == {"file": None, "error": "No module named 'smdistributed'"}


def test_in_a_local_job_the_standin_is_imported(local_job) -> None:
    results = local_job({"train.py": PROBE}, env={"LAUNCHBAY_STANDINS": "1"}).run()
    seen = probe(results)
    assert seen["standin"] is True
    assert seen["file"] == str(Path(standins.DIRECTORY) / "smdistributed" / "__init__.py")


def test_a_real_library_on_the_path_wins_over_the_standin(local_job, tmp_path: Path) -> None:
    fake = tmp_path / "site" / "smdistributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    env = {"LAUNCHBAY_STANDINS": "1", "PYTHONPATH": str(tmp_path / "site")}
    seen = probe(local_job({"train.py": PROBE}, env=env).run())
    assert seen == {"file": str(fake / "__init__.py"), "standin": False}


def test_non_python_entry_points_get_it_through_pythonpath(local_job, tmp_path: Path) -> None:
    files = {"probe.py": PROBE, "run.sh": f"#!/bin/sh\nexec {sys.executable} probe.py\n"}
    seen = probe(local_job(files, program="run.sh", env={"LAUNCHBAY_STANDINS": "1"}).run())
    assert seen["standin"] is True
    fake = tmp_path / "site" / "smdistributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = {"LAUNCHBAY_STANDINS": "1", "PYTHONPATH": str(tmp_path / "site")}
    seen = probe(local_job(files, program="run.sh", env=env).run())
    assert seen == {"file": str(fake / "__init__.py"), "standin": False}


@pytest.mark.parametrize(
    ("settings", "gpus", "smddprun", "expected"),
    [
        (RuntimeSettings(), 8, False, "torch_distributed"),  # SageMaker, no library: as before
        (RuntimeSettings(), 8, True, "smdistributed"),  # SageMaker GPU image: the real one
        (RuntimeSettings(standins=True), 0, False, "smddp_local"),  # local Docker, CPU
        (RuntimeSettings(standins=True), 8, True, "smdistributed"),  # a real image, locally
        (dataclasses.replace(LOCAL, standins=True), 0, False, "smddp_local"),
        (LOCAL, 0, False, "torch_distributed"),
    ],
)
def test_dataparallel_uses_the_standin_launcher_only_in_local_jobs_without_smddprun(
    tmp_path: Path, settings: RuntimeSettings, gpus: int, smddprun: bool, expected: str
) -> None:
    env = make_ctx(tmp_path, DP, gpus=gpus).env
    env = dataclasses.replace(env, is_smddprun_installed=smddprun)
    assert select_launcher(env, settings) == expected


def test_the_local_plan_is_one_mpirun_with_the_dataparallel_options(tmp_path: Path) -> None:
    hps = {
        **DP,
        "sagemaker_mpi_num_of_processes_per_host": 2,
        "sagemaker_distributed_dataparallel_custom_mpi_options": "-x FOO=1",
    }
    settings = dataclasses.replace(LOCAL, standins=True)
    plan = mpi.build_smddp_local(make_ctx(tmp_path, hps, settings=settings))
    assert plan.launcher == "smdistributed" and plan.world_size == 4
    (mpirun,) = plan.main_processes
    assert mpirun.argv[:3] == ["mpirun", "-np", "4"]
    assert "-x FOO=1" in " ".join(mpirun.argv)
    assert mpirun.env["LAUNCHBAY_SMDDP"] == "1"
    assert mpirun.env["GLOO_SOCKET_IFNAME"] == "lo"
    assert json.loads(mpirun.env["LAUNCHBAY_MPI_LOCAL"])["ppn"] == 2


def test_tensorflow_api_across_two_hosts_by_two(local_job) -> None:
    """The rest of the TF API on real ranks: compression, ops, both optimizers, the hook."""
    job = local_job(
        {"train.py": TF_API},
        hosts=2,
        hyperparameters={**DP, "sagemaker_mpi_num_of_processes_per_host": 2},
        env={"LAUNCHBAY_STANDINS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    results = job.run(timeout=240)
    seen = [line for r in results.values() for line in r.json_lines()]
    assert sorted(s["rank"] for s in seen) == [0, 1, 2, 3], results
    for line in seen:
        assert "call smdistributed.dataparallel.tensorflow.init() first" in line["before_init"]
        assert "init() called more than once" in line["twice"]
        assert line["fp16"] == 4.0  # 1.0001 ... 1.0004 are 1.0 in float16
        assert line["none"] == pytest.approx(4.001, abs=1e-6)
        assert line["min"] == 0.0 and line["average"] == 1.5
        assert line["keras"] == pytest.approx(-0.15)  # 0 - lr * mean of the ranks' gradients
        assert line["fit"] == pytest.approx(0.3)  # 0 - lr * mean of 2 * (0 - rank)
        assert line["v1_start"] == 1.0  # rank 0's value, broadcast by the hook
        assert line["v1"] == pytest.approx(0.85)


def test_the_package_imports_no_framework_until_a_script_asks_for_one() -> None:
    code = (
        "import sys; sys.path.append(sys.argv[1]); "
        "import smdistributed.dataparallel as dp; "
        "print(dp.size(), dp.rank(), 'torch' in sys.modules, 'tensorflow' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, standins.DIRECTORY], capture_output=True, text=True
    )
    assert result.stdout.split() == ["1", "0", "False", "False"], result.stderr
