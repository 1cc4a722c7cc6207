"""Write a checkpoint file into the checkpoint ``LocalPath`` the config names, and say which."""

import json
import os

with open("/opt/ml/input/config/checkpointconfig.json") as f:
    local_path = json.load(f)["LocalPath"]
host = os.environ["SM_CURRENT_HOST"]
with open(os.path.join(local_path, f"step-{host}.ckpt"), "w") as f:
    f.write(f"{host} wrote {local_path}")
