"""Dump the TF_CONFIG this host sees (no TensorFlow needed)."""

import json
import os

host = os.environ["SM_CURRENT_HOST"]
seen = {
    "host": host,
    "tf_config": json.loads(os.environ.get("TF_CONFIG", "null")),
    "master_port": os.environ.get("LAUNCHBAY_MASTER_PORT"),
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"tf-{host}.json"), "w") as f:
    json.dump(seen, f)
print("TF_CONFIG", json.dumps(seen["tf_config"]))
