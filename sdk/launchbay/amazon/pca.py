"""SDK v2's ``sagemaker.amazon.pca``: :class:`PCA`."""

from launchbay.amazon._algorithms import PCA

__all__ = ["PCA"]
