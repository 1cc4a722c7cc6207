"""An MXNet script (runs where ``import mxnet`` works): a tiny Gluon model saved to SM_MODEL_DIR."""

import os

import mxnet as mx

net = mx.gluon.nn.Dense(1)
net.initialize()
net(mx.nd.ones((2, 4)))
net.save_parameters(os.path.join(os.environ["SM_MODEL_DIR"], "model.params"))
