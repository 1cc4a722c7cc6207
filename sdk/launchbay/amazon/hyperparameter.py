"""SDK v2's ``sagemaker.amazon.hyperparameter``: :class:`Hyperparameter`."""

from launchbay.amazon.amazon_estimator import Hyperparameter

__all__ = ["Hyperparameter"]
