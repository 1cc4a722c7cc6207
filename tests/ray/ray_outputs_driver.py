"""A client that runs ``scripts/outputs.py`` on Ray (or local_process) with fit() and reports its peak memory.

    python ray_outputs_driver.py SCRIPTS JOB_NAME OUTPUT_URI INSTANCE_TYPE BIG_MB

The cluster comes from RAY_ADDRESS. Prints one JSON line: the job's status, its
failure reason and this process's VmHWM in KiB (its peak resident memory).
"""

import json
import os
import sys

from launchbay.pytorch import PyTorch

scripts, name, output, instance_type, big_mb = sys.argv[1:6]


def vmhwm() -> int:
    """This process's peak resident memory so far, in KiB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


if instance_type == "ray":
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, logging_level="WARNING")
connected = vmhwm()
estimator = PyTorch(
    entry_point="outputs.py",
    source_dir=scripts,
    role=None,
    instance_type=instance_type,
    instance_count=2,
    framework_version="2.8.0",
    py_version="py312",
    output_path=output,
    hyperparameters={"big-mb": int(big_mb)},
)
try:
    estimator.fit(job_name=name, wait=True, logs=False)
except Exception as exc:  # the status below says what happened
    print(f"fit() raised {type(exc).__name__}: {exc}", flush=True)
description = estimator.latest_training_job.describe()
with open("/proc/self/status", encoding="utf-8") as f:
    status = {line.split(":")[0]: line.split(":")[1].strip() for line in f if ":" in line}
peak = int(status["VmHWM"].split()[0])
print({k: status[k] for k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")}, flush=True)
print(
    json.dumps(
        {
            "status": description["TrainingJobStatus"],
            "failure": description.get("FailureReason"),
            "vmhwm_kib": peak,
            "connected_vmhwm_kib": connected,
        }
    ),
    flush=True,
)
