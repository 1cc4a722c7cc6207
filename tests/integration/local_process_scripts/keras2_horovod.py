"""A Keras-2-era TensorFlow 2 script, as TF 2.4-2.15 jobs on SageMaker wrote it (Horovod's
``tensorflow2`` examples, SageMaker's TF 2 script-mode Horovod examples). Under Keras 3
(TensorFlow >= 2.16) it fails; with ``tf-keras`` installed and ``TF_USE_LEGACY_KERAS=1`` it
runs unchanged (docs/horovod.md). What Keras 3 breaks here:

* ``tf.compat.v1.keras.backend.set_session``: gone;
* ``opt.variables()``: a list in Keras 3, not callable;
* Horovod 0.28's ``broadcast_variables`` and ``DistributedGradientTape`` on Keras variables:
  Keras 3's are not ``tf.Variable`` (no ``.ref()``);
* ``model.save(<directory>)``: Keras 3 writes only ``.keras``/``.h5`` files, not the
  SavedModel directory (``model_dir/1``) TensorFlow Serving loads;
* Horovod's Keras API (``horovod.tensorflow.keras``: ``DistributedOptimizer`` around a
  ``tf.keras.optimizers.legacy`` optimizer, ``model.compile(...,
  experimental_run_tf_function=False)``, its callbacks). Its callbacks need one added line
  under TF >= 2.16 even with tf-keras (below).

Each rank writes ``$SM_OUTPUT_DATA_DIR/rank-<N>.json``; rank 0 saves the model.
"""

import argparse
import json
import os

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

hvd.init()

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.001)
parser.add_argument("--model_dir", type=str)  # the TensorFlow estimator's hyperparameter
parser.add_argument("--sm-model-dir", type=str, default=os.environ.get("SM_MODEL_DIR"))
args, _ = parser.parse_known_args()

# Keras 2 / TF1 habit: one GPU per process through the session's config (none here).
config = tf.compat.v1.ConfigProto()
config.gpu_options.allow_growth = True
if tf.config.list_physical_devices("GPU"):
    config.gpu_options.visible_device_list = str(hvd.local_rank())
tf.compat.v1.keras.backend.set_session(tf.compat.v1.Session(config=config))

rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 8)).astype(np.float32)
y = np.argmax(x @ rng.standard_normal((8, 3)), axis=1).astype(np.int64)
dataset = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .shard(hvd.size(), hvd.rank())
    .shuffle(256, seed=hvd.rank())
    .batch(args.batch_size)
)

tf.random.set_seed(hvd.rank())  # different on every rank until the broadcast
model = tf.keras.Sequential(
    [tf.keras.layers.Dense(32, activation="relu", input_shape=(8,)), tf.keras.layers.Dense(3)]
)
loss = tf.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = tf.optimizers.Adam(args.lr * hvd.size())


@tf.function
def training_step(inputs, labels, first_batch):
    with tf.GradientTape() as tape:
        loss_value = loss(labels, model(inputs, training=True))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss_value, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    # Horovod: broadcast the initial variables from rank 0, once the first step made them
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)
    return loss_value


history = []
for epoch in range(args.epochs):
    losses = [
        training_step(inputs, labels, epoch == 0 and batch == 0)
        for batch, (inputs, labels) in enumerate(dataset)
    ]
    history.append(float(hvd.allreduce(tf.reduce_mean(losses), name="epoch_loss").numpy()))
    if hvd.rank() == 0:
        print(f"epoch={epoch} loss={history[-1]:.4f}")


def same_on_every_rank(variable, name):
    gathered = hvd.allgather(tf.reshape(variable, (1, -1)), name=name)
    return bool(tf.reduce_max(tf.abs(gathered - gathered[0])) == 0)


# The same model with Horovod's Keras API, as Horovod's tensorflow2_keras example writes it:
# DistributedOptimizer, model.fit and Horovod's callbacks.
import horovod.tensorflow.keras as hvd_keras  # noqa: E402

# The one line added for TF >= 2.16: Horovod 0.28 takes the standalone keras package's
# backend (Keras 3, TensorFlow's dependency) for its callbacks; hand it tf.keras's (Keras 2).
hvd_keras.K = hvd_keras.callbacks.K = tf.keras.backend

fit_model = tf.keras.Sequential(
    [tf.keras.layers.Dense(32, activation="relu", input_shape=(8,)), tf.keras.layers.Dense(3)]
)
fit_model.compile(
    optimizer=hvd_keras.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.02 * hvd.size())),
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
    experimental_run_tf_function=False,
)
fitted = fit_model.fit(
    dataset,
    epochs=args.epochs,
    verbose=0,
    callbacks=[
        hvd_keras.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd_keras.callbacks.MetricAverageCallback(),
        hvd_keras.callbacks.LearningRateWarmupCallback(
            initial_lr=0.02 * hvd.size(), warmup_epochs=1, verbose=0
        ),
    ],
)
if hvd.rank() == 0:
    print(f"model.fit: loss {fitted.history['loss'][0]:.4f} -> {fitted.history['loss'][-1]:.4f}")

report = {
    "rank": hvd.rank(),
    "world": hvd.size(),
    "host": os.environ["SM_CURRENT_HOST"],
    "keras": tf.keras.__name__.split(".")[0],  # "tf_keras" (Keras 2) or "keras" (Keras 3)
    "loss": history,
    "same_weights": same_on_every_rank(model.trainable_variables[0], "tape_weights"),
    # averaged over the ranks by MetricAverageCallback: the same on every rank
    "fit_loss": [float(v) for v in fitted.history["loss"]],
    "fit_same_weights": same_on_every_rank(fit_model.trainable_variables[0], "fit_weights"),
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{hvd.rank()}.json"), "w") as f:
    json.dump(report, f)
if hvd.rank() == 0:
    # Keras 2: a directory is a SavedModel, the layout TensorFlow Serving loads (model/1/)
    model.save(os.path.join(args.sm_model_dir, "1"))
hvd.shutdown()
