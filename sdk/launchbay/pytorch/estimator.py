"""SDK v2's module path ``sagemaker.pytorch.estimator``.

``from launchbay.pytorch.estimator import PyTorch`` gives the same class as
``from launchbay.pytorch import PyTorch`` (defined in the package, whose import
stays as light as it was).
"""

from __future__ import annotations

from launchbay.pytorch import PyTorch

__all__ = ["PyTorch"]
