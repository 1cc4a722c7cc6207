"""The MXNet estimator (``from launchbay.mxnet import MXNet``), as in SDK v2."""

from __future__ import annotations

from launchbay.mxnet.estimator import MXNet

__all__ = ["MXNet"]
