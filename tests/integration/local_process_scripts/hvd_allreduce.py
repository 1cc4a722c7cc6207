"""2-host MPI job with Horovod: average and sum ranks with ``hvd.allreduce``, train, save.

``--framework torch`` (horovod.torch) or ``tensorflow`` (horovod.tensorflow, with
``DistributedGradientTape`` and ``broadcast_variables`` as in TF script-mode jobs). Each
rank writes ``$SM_OUTPUT_DATA_DIR/rank-<N>.json``; rank 0 saves a model.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--framework", default="torch")
args, _ = parser.parse_known_args()


def torch_job():
    import horovod.torch as hvd
    import torch

    hvd.init()
    value = torch.tensor([float(hvd.rank() + 1), 10.0 * (hvd.rank() + 1)])
    average = hvd.allreduce(value, name="average")
    total = hvd.allreduce(value, name="sum", op=hvd.Sum)
    torch.manual_seed(hvd.rank())  # different on every rank until the broadcast
    model = torch.nn.Linear(4, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05), named_parameters=model.named_parameters()
    )
    for _ in range(5):
        x = torch.randn(8, 4)
        loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    weights = hvd.allgather(model.weight.detach().reshape(1, -1), name="weights")
    same = bool((weights - weights[0]).abs().max() == 0)
    if hvd.rank() == 0:
        torch.save(model.state_dict(), os.path.join(os.environ["SM_MODEL_DIR"], "model.pt"))
    return hvd, average.tolist(), total.tolist(), same


def tensorflow_job():
    import horovod.tensorflow as hvd
    import tensorflow as tf

    hvd.init()
    value = tf.constant([float(hvd.rank() + 1), 10.0 * (hvd.rank() + 1)])
    average = hvd.allreduce(value, name="average")
    total = hvd.allreduce(value, name="sum", op=hvd.Sum)
    tf.random.set_seed(hvd.rank())  # different on every rank until the broadcast
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.05)
    # Keras 3 variables wrap a tf.Variable (``.value``); Horovod 0.28's broadcast_variables
    # and DistributedGradientTape take tf.Variables (they call .assign() and .ref()).
    hvd.broadcast_variables([v.value for v in model.variables], root_rank=0)
    for _ in range(5):
        x = tf.random.normal((8, 4))
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - tf.reduce_sum(x, axis=1, keepdims=True)) ** 2)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, [v.value for v in model.trainable_variables])
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    kernel = tf.reshape(model.trainable_variables[0], (1, -1))
    weights = hvd.allgather(kernel, name="weights")
    same = bool(tf.reduce_max(tf.abs(weights - weights[0])) == 0)
    if hvd.rank() == 0:
        model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
    return hvd, average.numpy().tolist(), total.numpy().tolist(), same


hvd, average, total, same = torch_job() if args.framework == "torch" else tensorflow_job()
report = {
    "rank": hvd.rank(),
    "world": hvd.size(),
    "local_rank": hvd.local_rank(),
    "local_size": hvd.local_size(),
    "mpi": bool(hvd.mpi_enabled()),
    "host": os.environ["SM_CURRENT_HOST"],
    "average": average,
    "sum": total,
    "same_weights": same,
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{hvd.rank()}.json"), "w") as f:
    json.dump(report, f)
print(f"rank {hvd.rank()} of {hvd.size()}: average {average} sum {total}")
hvd.shutdown()
