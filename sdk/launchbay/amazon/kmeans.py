"""SDK v2's ``sagemaker.amazon.kmeans``: :class:`KMeans`."""

from launchbay.amazon._algorithms import KMeans

__all__ = ["KMeans"]
