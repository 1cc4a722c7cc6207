"""A TensorFlow script-mode script that saves its model where ``--model_dir`` says."""

import argparse
import os

import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir", required=True)
args, _ = parser.parse_known_args()

module = tf.Module()
module.weight = tf.Variable([[1.0, 2.0]])
tf.saved_model.save(module, os.path.join(args.model_dir, "1"))
with open(os.path.join(args.model_dir, "model_dir.txt"), "w") as f:
    f.write(args.model_dir)
