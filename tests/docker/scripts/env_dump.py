"""Write the environment this host got, and the CPUs it may run on (``_cpus``), to
``$SM_OUTPUT_DATA_DIR/env-<host>.json``."""

import json
import os

with open(
    os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{os.environ['SM_CURRENT_HOST']}.json"), "w"
) as f:
    json.dump({**os.environ, "_cpus": sorted(os.sched_getaffinity(0))}, f)
