"""The README's main job: a 2-host torch_distributed training job on this machine.

Runs ``train.py`` as two local "hosts" (algo-1, algo-2) of one process each in
``local_process`` mode: no Docker, no AWS. Prints where the model went.
"""

import os
import sys

import torch

from launchbay.pytorch import PyTorch

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    estimator = PyTorch(
        entry_point="train.py",
        source_dir=HERE,
        instance_type="local_process",
        instance_count=2,
        framework_version=version,
        py_version=f"py{sys.version_info.major}{sys.version_info.minor}",
        distribution={"torch_distributed": {"enabled": True}},
        hyperparameters={"epochs": 20, "lr": 0.1},
        base_job_name="quickstart",
    )
    estimator.fit()
    print(f"Model: {estimator.model_data}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
