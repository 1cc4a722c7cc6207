"""Run ``fit()`` of a 2-container local Docker job in a child process (the SIGINT test interrupts it).

argv: <image tag's framework version> <source_dir> <checkpoint uri> <output uri> <job name>
"""

import sys

from launchbay.pytorch import PyTorch

framework_version, source_dir, checkpoint_uri, output_uri, job_name = sys.argv[1:6]
estimator = PyTorch(
    entry_point="checkpoint_on_sigterm.py",
    source_dir=source_dir,
    role=None,
    instance_type="local",
    instance_count=2,
    framework_version=framework_version,
    py_version="py311",
    distribution={"torch_distributed": {"enabled": True, "processes_per_host": 1}},
    hyperparameters={"marker": "/opt/ml/model"},
    checkpoint_s3_uri=checkpoint_uri,
    output_path=output_uri,
)
try:
    estimator.fit(job_name=job_name, logs=True)
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
