"""A client that runs a Ray job with fit() and is interrupted (test_ray_backend's Ctrl-C test).

    python ray_driver.py SOURCE_DIR JOB_NAME OUTPUT_URI

The cluster comes from RAY_ADDRESS. Exits 42 after fit() raised KeyboardInterrupt,
printing the job's status.
"""

import sys

from launchbay.pytorch import PyTorch

source_dir, name, output = sys.argv[1:4]
estimator = PyTorch(
    entry_point="sleep.py",
    source_dir=source_dir,
    role=None,
    instance_type="ray",
    instance_count=2,
    framework_version="2.8.0",
    py_version="py312",
    output_path=output,
)
try:
    estimator.fit(job_name=name, wait=True, logs=True)
except KeyboardInterrupt:
    status = estimator.latest_training_job.describe()["TrainingJobStatus"]
    print(f"interrupted; job status {status}", flush=True)
    sys.exit(42)
print("fit() returned without an interrupt", flush=True)
sys.exit(1)
