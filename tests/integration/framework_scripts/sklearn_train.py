"""A scikit-learn script as the scikit-learn container runs it: a plain script, SM_* variables."""

import argparse
import json
import os

import joblib
import numpy as np
from sklearn.linear_model import LogisticRegression

parser = argparse.ArgumentParser()
parser.add_argument("--inverse-reg", type=float, default=1.0)
parser.add_argument("--max-iter", type=int, default=100)
parser.add_argument("--model-dir", default=os.environ["SM_MODEL_DIR"])
parser.add_argument("--train", default=os.environ["SM_CHANNEL_TRAIN"])
args = parser.parse_args()

data = np.loadtxt(os.path.join(args.train, "train.csv"), delimiter=",")
features, labels = data[:, 1:], data[:, 0]
model = LogisticRegression(C=args.inverse_reg, max_iter=args.max_iter).fit(features, labels)
accuracy = float(model.score(features, labels))
print(f"accuracy={accuracy:.4f}")
joblib.dump(model, os.path.join(args.model_dir, "model.joblib"))
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "report.json"), "w") as f:
    json.dump(
        {
            "host": os.environ["SM_CURRENT_HOST"],
            "hosts": json.loads(os.environ["SM_HOSTS"]),
            "accuracy": accuracy,
            "C": args.inverse_reg,
        },
        f,
    )
