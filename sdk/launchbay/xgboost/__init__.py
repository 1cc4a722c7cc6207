"""The XGBoost estimator in framework mode (``from launchbay.xgboost import XGBoost``), as in SDK v2."""

from __future__ import annotations

from launchbay.xgboost.estimator import XGBoost

__all__ = ["XGBoost"]
