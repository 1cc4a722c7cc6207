"""Shared by the smdistributed scripts and their tests: the data set and the rank reports.

The data is the same on every rank (numpy's seeded generator); each rank trains on
its own slice of every global batch, as DistributedSampler(shuffle=False) gives it.
"""

import json
import os

import numpy as np

FEATURES = 8
HIDDEN = 4


def dataset(samples):
    rng = np.random.default_rng(1234)
    x = rng.standard_normal((samples, FEATURES)).astype(np.float32)
    w = np.arange(1, FEATURES + 1, dtype=np.float32) / FEATURES
    y = (np.sin(x @ w) + 0.1 * rng.standard_normal(samples)).astype(np.float32)[:, None]
    return x, y


def write_report(rank, report):
    path = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json")
    with open(path, "w") as f:
        json.dump(report, f)


def world_report(rank, world, local_rank, total):
    """What check_ranks (tests/job_outputs.py) looks at."""
    return {
        "rank": rank,
        "world": world,
        "local_rank": local_rank,
        "host": os.environ["SM_CURRENT_HOST"],
        "hosts": json.loads(os.environ["SM_HOSTS"]),
        "sum": total,
    }
