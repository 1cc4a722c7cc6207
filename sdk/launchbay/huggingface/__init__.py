"""The HuggingFace estimator (``from launchbay.huggingface import HuggingFace``), as in SDK v2."""

from __future__ import annotations

from launchbay.huggingface.estimator import HuggingFace

__all__ = ["HuggingFace"]
