"""The PyTorch estimator (``from launchbay.pytorch import PyTorch``)."""

from __future__ import annotations

from launchbay.estimator import Framework

__all__ = ["PyTorch"]


class PyTorch(Framework):
    """Train a PyTorch script on the official PyTorch training image (or ``image_uri``).

    Arguments are SDK v2's: ``PyTorch(entry_point, framework_version, py_version,
    source_dir, hyperparameters, image_uri, distribution, **estimator_arguments)``.
    ``distribution`` takes every SDK v2 form: ``torch_distributed``, ``pytorchddp``,
    ``smdistributed`` (dataparallel / modelparallel) and ``mpi``.
    """

    _framework_name = "pytorch"
    _metrics_min_version = (1, 3)
