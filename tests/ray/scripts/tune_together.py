"""A tuning trial that waits for its siblings (tests/ray/test_ray_tuning.py).

Each trial leaves a file in ``TOGETHER_DIR`` and waits (up to ``TOGETHER_TIMEOUT``
seconds) until ``TOGETHER_WANTED`` trials have: it reports its objective only
once that many trials ran at the same time, so a tuning job whose trials all
report one ran them in parallel.
"""

import os
import time
import uuid

folder = os.environ["TOGETHER_DIR"]
wanted = int(os.environ["TOGETHER_WANTED"])
deadline = time.monotonic() + float(os.environ.get("TOGETHER_TIMEOUT", "240"))
with open(os.path.join(folder, uuid.uuid4().hex), "w") as f:
    f.write(os.environ.get("SM_CURRENT_HOST", ""))
while len(os.listdir(folder)) < wanted and time.monotonic() < deadline:
    time.sleep(0.2)
together = len(os.listdir(folder))
print(f"together: {together}", flush=True)
if together >= wanted:
    print(f"loss: {float(os.environ['SM_HP_LR']):.6f}", flush=True)
