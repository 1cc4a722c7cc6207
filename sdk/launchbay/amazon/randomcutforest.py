"""SDK v2's ``sagemaker.amazon.randomcutforest``: :class:`RandomCutForest`."""

from launchbay.amazon._algorithms import RandomCutForest

__all__ = ["RandomCutForest"]
