"""A TF MultiWorkerMirroredStrategy script that builds its own TF_CONFIG: every worker at
``algo-N:7777``, as SageMaker examples written before the toolkit did it. Each worker's
gRPC server binds port 7777 on its own host. The all-reduced sum goes to
``$SM_MODEL_DIR/<host>.txt``.
"""

import json
import os

hosts = json.loads(os.environ["SM_HOSTS"])
current = os.environ["SM_CURRENT_HOST"]
os.environ["TF_CONFIG"] = json.dumps(
    {
        "cluster": {"worker": [f"{h}:7777" for h in hosts]},
        "task": {"type": "worker", "index": hosts.index(current)},
    }
)
import tensorflow as tf  # noqa: E402 - TF reads TF_CONFIG when the strategy is made

strategy = tf.distribute.MultiWorkerMirroredStrategy()


@tf.function
def step():
    context = tf.distribute.get_replica_context()
    return context.all_reduce("sum", tf.constant(float(hosts.index(current) + 1)))


total = strategy.experimental_local_results(strategy.run(step))[0].numpy()
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{current}.txt"), "w") as f:
    f.write(str(total))
