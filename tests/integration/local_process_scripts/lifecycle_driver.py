"""Run one ``fit()`` in a child process, for the job-lifecycle tests.

argv[1]: a JSON object of options:

* ``source_dir``, ``entry_point``, ``output`` (a file:// URI): required;
* ``job_name`` or ``base_job_name``; ``instance_count`` (default 2);
* ``hyperparameters``, ``distribution``, ``checkpoint`` (a file:// URI);
* ``frozen_time``: every ``time.time()`` of this process returns that value, so
  two drivers generate their job names in the same millisecond.

Prints ``driver: job <name> <status>`` when ``fit()`` returns or raises, and exits
42 on KeyboardInterrupt (as the Ctrl-C test's driver does).
"""

import json
import sys
import time

options = json.loads(sys.argv[1])
if "frozen_time" in options:
    frozen = float(options["frozen_time"])
    time.time = lambda: frozen

from launchbay import JobFailedError  # noqa: E402
from launchbay.pytorch import PyTorch  # noqa: E402

estimator = PyTorch(
    entry_point=options["entry_point"],
    source_dir=options["source_dir"],
    role=None,
    instance_type="local_process",
    instance_count=options.get("instance_count", 2),
    framework_version="2.8.0",
    py_version="py312",
    distribution=options.get("distribution"),
    hyperparameters=options.get("hyperparameters"),
    checkpoint_s3_uri=options.get("checkpoint"),
    output_path=options["output"],
    base_job_name=options.get("base_job_name"),
)
try:
    estimator.fit(job_name=options.get("job_name"), logs=options.get("logs", True))
except KeyboardInterrupt:
    print("driver: KeyboardInterrupt", flush=True)
    sys.exit(42)
except JobFailedError as exc:
    print(f"driver: job {exc.job_name} {exc.status}", flush=True)
    sys.exit(1)
job = estimator.latest_training_job
print(f"driver: job {job.name} {job.describe()['TrainingJobStatus']}", flush=True)
