"""SDK v2's ``sagemaker.parameter``: the hyperparameter range classes (see :mod:`launchbay.tuning.parameter`)."""

from __future__ import annotations

from launchbay.tuning.parameter import (
    CategoricalParameter,
    ContinuousParameter,
    IntegerParameter,
    ParameterRange,
)

__all__ = ["CategoricalParameter", "ContinuousParameter", "IntegerParameter", "ParameterRange"]
