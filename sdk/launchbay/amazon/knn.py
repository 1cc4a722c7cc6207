"""SDK v2's ``sagemaker.amazon.knn``: :class:`KNN`."""

from launchbay.amazon._algorithms import KNN

__all__ = ["KNN"]
