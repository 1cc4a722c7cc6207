"""SDK v2's ``sagemaker.amazon.ntm``: :class:`NTM`."""

from launchbay.amazon._algorithms import NTM

__all__ = ["NTM"]
