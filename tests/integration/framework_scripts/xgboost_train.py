"""An XGBoost framework-mode script: each host trains on its share of the rows (from SM_HOSTS)."""

import argparse
import json
import os

import numpy as np
import xgboost as xgb

parser = argparse.ArgumentParser()
parser.add_argument("--num_round", type=int, default=10)
parser.add_argument("--max_depth", type=int, default=3)
args = parser.parse_args()

hosts = json.loads(os.environ["SM_HOSTS"])
host = os.environ["SM_CURRENT_HOST"]
index = hosts.index(host)
data = np.loadtxt(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "train.csv"), delimiter=",")
mine = data[index :: len(hosts)]
train = xgb.DMatrix(mine[:, 1:], label=mine[:, 0])
params = {"max_depth": args.max_depth, "objective": "binary:logistic", "nthread": 1}
booster = xgb.train(params, train, num_boost_round=args.num_round)
error = float(np.mean((booster.predict(train) > 0.5) != mine[:, 0]))
print(f"host={host} rows={len(mine)} train-error={error:.4f}")
booster.save_model(os.path.join(os.environ["SM_MODEL_DIR"], f"xgboost-model-{host}.json"))
