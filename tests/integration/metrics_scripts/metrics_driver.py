"""Run one local ``Estimator.fit()`` or ``HyperparameterTuner.fit()`` of flood.py in a
process of its own (the Ctrl-C and max_run tests of tests/integration/test_local_metrics.py).

argv[1]: JSON options: ``mode`` ("fit" or "tune"), ``job_name``, ``output`` (a file://
URI), ``hyperparameters``, ``metric_definitions``, ``max_run`` (optional).
Prints ``driver: KeyboardInterrupt`` and exits 42 on Ctrl-C, else ``driver: <JSON>``:
the training job's or the tuning job's description (with its trials).
"""

import json
import os
import sys

from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner

options = json.loads(sys.argv[1])
estimator = PyTorch(
    entry_point="flood.py",
    source_dir=os.path.dirname(os.path.abspath(__file__)),
    role=None,
    instance_type="local_process",
    instance_count=1,
    framework_version="2.8.0",
    py_version="py312",
    hyperparameters=options.get("hyperparameters", {}),
    output_path=options["output"],
    metric_definitions=options["metric_definitions"],
    max_run=options.get("max_run", 24 * 60 * 60),
)
tuner = HyperparameterTuner(
    estimator, "loss", {"lr": ContinuousParameter(0.01, 1.0)},
    metric_definitions=options["metric_definitions"], objective_type="Minimize",
    strategy="Random", max_jobs=1, max_parallel_jobs=1,
)  # fmt: skip


def result() -> dict:
    if options["mode"] == "fit":
        return estimator.latest_training_job.describe()
    return dict(tuner.describe(), trials=tuner.latest_tuning_job.training_jobs())


try:
    if options["mode"] == "fit":
        estimator.fit(job_name=options["job_name"], logs=False, wait=True)
    else:
        tuner.fit(job_name=options["job_name"])
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
except Exception as exc:  # a failed or stopped job: its description says why
    print(f"driver: raised {type(exc).__name__}: {exc}", flush=True)
print("driver: " + json.dumps(result(), default=str), flush=True)
