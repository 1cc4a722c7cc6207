"""Run one local ``HyperparameterTuner.fit()`` in a child process (the Ctrl-C test).

argv[1]: JSON options: ``marks``, ``output``, ``checkpoint`` (file:// URIs or paths),
``job_name``, ``max_jobs``, ``max_parallel_jobs``, ``hyperparameters``.
Prints ``driver: KeyboardInterrupt`` and exits 42 on Ctrl-C, ``driver: <status>`` otherwise.
"""

import json
import os
import sys

from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner

options = json.loads(sys.argv[1])
estimator = PyTorch(
    entry_point="trial.py",
    source_dir=os.path.dirname(os.path.abspath(__file__)),
    role=None,
    instance_type="local_process",
    instance_count=1,
    framework_version="2.8.0",
    py_version="py312",
    hyperparameters={"marks": options["marks"], **options.get("hyperparameters", {})},
    output_path=options["output"],
    checkpoint_s3_uri=options.get("checkpoint"),
    metric_definitions=[{"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}],
)
tuner = HyperparameterTuner(
    estimator,
    "loss",
    {"lr": ContinuousParameter(0.01, 1.0)},
    objective_type="Minimize",
    strategy="Random",
    max_jobs=options.get("max_jobs", 4),
    max_parallel_jobs=options.get("max_parallel_jobs", 2),
)
try:
    tuner.fit(job_name=options["job_name"])
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
print(f"driver: {tuner.describe()['HyperParameterTuningJobStatus']}", flush=True)
