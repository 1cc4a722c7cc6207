"""Run ``fit()`` in a child process (the SIGINT test interrupts this process).

argv: <source_dir> <marker dir> <checkpoint uri> <output uri>
"""

import sys

from launchbay.pytorch import PyTorch

source_dir, marker, checkpoint_uri, output_uri = sys.argv[1:5]
estimator = PyTorch(
    entry_point="checkpoint_on_sigterm.py",
    source_dir=source_dir,
    role=None,
    instance_type="local_process",
    instance_count=2,
    framework_version="2.8.0",
    py_version="py312",
    distribution={"torch_distributed": {"enabled": True, "processes_per_host": 1}},
    hyperparameters={"marker": marker},
    checkpoint_s3_uri=checkpoint_uri,
    output_path=output_uri,
)
try:
    estimator.fit(job_name=sys.argv[5], logs=True)
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
