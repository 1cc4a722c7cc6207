"""A TensorFlow 2.x script on the SMDDP library's TensorFlow API, as its guide writes it.

``sdp.init()``, the learning rate scaled by ``sdp.size()``, a ``tf.function`` step
whose ``tf.GradientTape`` is wrapped in ``sdp.DistributedGradientTape``, and
``sdp.broadcast_variables`` from rank 0 (before training and on the first batch).
Same model, data and plain SGD as smddp_torch.py; each rank trains on its own slice of
every global batch and reports its final variables (rank 0 its initial ones).
"""

import argparse

import numpy as np
import smdistributed.dataparallel.tensorflow as sdp
import tensorflow as tf
from smddp_data import FEATURES, HIDDEN, dataset, world_report, write_report

sdp.init()

gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[sdp.local_rank()], "GPU")

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--lr", type=float, default=0.1)
args, _ = parser.parse_known_args()

rank, world = sdp.rank(), sdp.size()
tf.random.set_seed(rank)  # different on every rank until the broadcast
variables = {
    "w1": tf.Variable(tf.random.normal((FEATURES, HIDDEN)), name="w1"),
    "b1": tf.Variable(tf.random.normal((HIDDEN,)), name="b1"),
    "w2": tf.Variable(tf.random.normal((HIDDEN, 1)), name="w2"),
    "b2": tf.Variable(tf.random.normal((1,)), name="b2"),
}
trainable = list(variables.values())
sdp.broadcast_variables(trainable, root_rank=0)
initial = {k: v.numpy().tolist() for k, v in variables.items()}

# The global batch is fixed here (the guide fixes the per-worker one and so scales
# the learning rate by sdp.size()): each worker takes its share, at the same rate.


def model(x):
    return tf.tanh(x @ variables["w1"] + variables["b1"]) @ variables["w2"] + variables["b2"]


@tf.function
def training_step(data, target, first_batch):
    with tf.GradientTape() as tape:
        loss_value = tf.reduce_mean(tf.square(model(data) - target))
    # Wrap tf.GradientTape with the library's DistributedGradientTape
    tape = sdp.DistributedGradientTape(tape)
    grads = tape.gradient(loss_value, trainable)
    for var, grad in zip(trainable, grads, strict=True):
        var.assign_sub(args.lr * grad)
    if first_batch:
        sdp.broadcast_variables(trainable, root_rank=0)
    return loss_value


x, y = dataset(args.batch_size * args.steps)
for step in range(args.steps):
    rows = np.arange(step * args.batch_size, (step + 1) * args.batch_size)[rank::world]
    loss = training_step(tf.constant(x[rows]), tf.constant(y[rows]), step == 0)
    mean_loss = sdp.oob_allreduce(loss)

total = sdp.allreduce(tf.constant(float(rank)), 0, 1, op=sdp.ReduceOp.SUM)
largest = sdp.allreduce(tf.constant([float(rank)]), 0, 1, op=sdp.ReduceOp.MAX)
token = sdp.broadcast(tf.constant([rank + 100.0]), root_rank=1)
report = world_report(rank, world, sdp.local_rank(), float(total.numpy()))
report["local_size"] = sdp.local_size()
report["max"] = float(largest.numpy()[0])
report["broadcast"] = float(token.numpy()[0])
report["mean_loss"] = float(mean_loss.numpy())
report["params"] = {k: v.numpy().tolist() for k, v in variables.items()}
if rank == 0:
    report["initial"] = initial
write_report(rank, report)
sdp.barrier()
sdp.shutdown()
