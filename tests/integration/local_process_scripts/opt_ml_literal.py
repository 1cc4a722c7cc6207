"""Writes to literal ``/opt/ml`` paths, as scripts written for SageMaker do.

Every rank writes ``/opt/ml/model/<host>-<rank>.txt`` and
``/opt/ml/output/data/<host>-<rank>.txt`` and reads back where ``/opt/ml/model``
is (it must be its own host's model directory).
"""

import os

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
host = os.environ["SM_CURRENT_HOST"]
os.makedirs("/opt/ml/output/data", exist_ok=True)
for directory in ("/opt/ml/model", "/opt/ml/output/data"):
    with open(f"{directory}/{host}-{rank}.txt", "w") as f:
        f.write(str(os.path.samefile("/opt/ml/model", os.environ["SM_MODEL_DIR"])))
dist.barrier()
dist.destroy_process_group()
