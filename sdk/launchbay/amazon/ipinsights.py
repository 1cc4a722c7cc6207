"""SDK v2's ``sagemaker.amazon.ipinsights``: :class:`IPInsights`."""

from launchbay.amazon._algorithms import IPInsights

__all__ = ["IPInsights"]
