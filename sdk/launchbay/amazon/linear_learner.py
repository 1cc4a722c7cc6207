"""SDK v2's ``sagemaker.amazon.linear_learner``: :class:`LinearLearner`."""

from launchbay.amazon._algorithms import LinearLearner

__all__ = ["LinearLearner"]
