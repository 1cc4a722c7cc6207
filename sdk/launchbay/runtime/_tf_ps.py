"""A TensorFlow parameter-server task, as the SageMaker TensorFlow toolkit starts one per host.

Run as ``python -m launchbay.runtime._tf_ps`` with ``TF_CONFIG`` describing the
cluster and this ``ps`` task. It imports TensorFlow (only this child process
does), starts ``tf.distribute.Server(cluster, job_name="ps", task_index=i)``
with GPUs hidden, and serves until the runtime stops it.
"""

from __future__ import annotations

import json
import os


def main() -> None:
    """Serve the ps task described by ``TF_CONFIG`` until killed."""
    import tensorflow as tf  # noqa: PLC0415 - only in this child, only with TensorFlow

    config = json.loads(os.environ["TF_CONFIG"])
    cluster = tf.train.ClusterSpec(config["cluster"])
    server = tf.distribute.Server(
        cluster,
        job_name="ps",
        task_index=int(config["task"]["index"]),
        config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}),
    )
    server.join()


if __name__ == "__main__":
    main()
