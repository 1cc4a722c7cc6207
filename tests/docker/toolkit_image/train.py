"""A SageMaker training script baked into the image (SAGEMAKER_PROGRAM=train.py).

Writes what the toolkit told it to the model dir; ``--fail yes`` raises instead.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--fail", default="no")
args = parser.parse_args()
if args.fail == "yes":
    raise RuntimeError("toolkit script failed on purpose")
seen = {
    "epochs": args.epochs,
    "current_host": os.environ["SM_CURRENT_HOST"],
    "hosts": json.loads(os.environ["SM_HOSTS"]),
    "channels": json.loads(os.environ["SM_CHANNELS"]),
    "train_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])),
    "model_dir": os.environ["SM_MODEL_DIR"],
    "job_name": os.environ.get("TRAINING_JOB_NAME"),
}
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"seen-{seen['current_host']}.json"), "w") as f:
    json.dump(seen, f)
print("toolkit training done on", seen["current_host"])
