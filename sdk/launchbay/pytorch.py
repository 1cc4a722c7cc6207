"""The PyTorch estimator (``from launchbay.pytorch import PyTorch``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.estimator import Framework

__all__ = ["PyTorch"]


class PyTorch(Framework):
    """Train a PyTorch script on the official PyTorch training image (or ``image_uri``).

    ``distribution`` takes every SDK v2 form: ``torch_distributed``, ``pytorchddp``,
    ``smdistributed`` (dataparallel / modelparallel) and ``mpi``.
    """

    _framework_name = "pytorch"
    _metrics_min_version = (1, 3)

    def __init__(
        self,
        entry_point: str | None = None,
        framework_version: str | None = None,
        py_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        image_uri: str | None = None,
        distribution: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            entry_point=entry_point,
            framework_version=framework_version,
            py_version=py_version,
            source_dir=source_dir,
            hyperparameters=hyperparameters,
            image_uri=image_uri,
            distribution=distribution,
            **kwargs,
        )
