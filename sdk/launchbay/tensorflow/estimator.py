"""SDK v2's module path ``sagemaker.tensorflow.estimator``.

``from launchbay.tensorflow.estimator import TensorFlow`` gives the same class as
``from launchbay.tensorflow import TensorFlow`` (defined in the package, whose
import stays as light as it was).
"""

from __future__ import annotations

from launchbay.tensorflow import TensorFlow

__all__ = ["TensorFlow"]
