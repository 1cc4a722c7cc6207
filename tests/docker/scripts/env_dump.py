"""Write the environment this host got to ``$SM_OUTPUT_DATA_DIR/env-<host>.json``."""

import json
import os

with open(
    os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"env-{os.environ['SM_CURRENT_HOST']}.json"), "w"
) as f:
    json.dump(dict(os.environ), f)
