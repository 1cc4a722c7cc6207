"""SDK v2's ``sagemaker.amazon.object2vec``: :class:`Object2Vec`."""

from launchbay.amazon._algorithms import Object2Vec

__all__ = ["Object2Vec"]
