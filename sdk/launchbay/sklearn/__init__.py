"""The scikit-learn estimator (``from launchbay.sklearn import SKLearn``), as in SDK v2."""

from __future__ import annotations

from launchbay.sklearn.estimator import SKLearn

__all__ = ["SKLearn"]
