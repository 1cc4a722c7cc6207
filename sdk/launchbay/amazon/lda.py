"""SDK v2's ``sagemaker.amazon.lda``: :class:`LDA`."""

from launchbay.amazon._algorithms import LDA

__all__ = ["LDA"]
