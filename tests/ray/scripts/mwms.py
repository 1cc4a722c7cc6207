"""TF MultiWorkerMirroredStrategy on the TF_CONFIG launchbay's runtime gives each host."""

import json
import os

import tensorflow as tf

config = json.loads(os.environ["TF_CONFIG"])
strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = config["task"]["index"]


@tf.function
def step():
    context = tf.distribute.get_replica_context()
    return context.all_reduce("sum", tf.constant(float(index + 1)))


total = float(strategy.experimental_local_results(strategy.run(step))[0].numpy())
host = os.environ["SM_CURRENT_HOST"]
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"mwms-{host}.json"), "w") as f:
    json.dump({"host": host, "sum": total, "tf_config": config}, f)
