"""List every channel's files (relative path -> content) into output data; save a model file."""

import json
import os

host = os.environ["SM_CURRENT_HOST"]
seen = {}
for channel in json.loads(os.environ["SM_CHANNELS"]):
    root = os.environ[f"SM_CHANNEL_{channel.upper()}"]
    files = {}
    for dirpath, _dirs, names in os.walk(root, followlinks=True):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                files[os.path.relpath(path, root)] = f.read()
    seen[channel] = files
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"channels-{host}.json"), "w") as f:
    json.dump(seen, f)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"weights-{host}.txt"), "w") as f:
    f.write(host)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "shared.txt"), "w") as f:
    f.write(host)
print(f"hello from {host}")
