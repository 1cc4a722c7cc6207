"""Keras 2 for the Keras-2-era TensorFlow scripts that ``local_process`` hosts run.

TensorFlow 2.16 and later ship Keras 3, which scripts written for TensorFlow 2.4-2.15 break
on (SageMaker's own examples among them). A job that asks for such a TensorFlow
(``framework_version`` below 2.16) but runs on this machine's newer TensorFlow gets
``TF_USE_LEGACY_KERAS=1`` in its hosts when the ``tf-keras`` package is installed here, so
``tf.keras`` is Keras 2 again; without ``tf-keras`` it warns once with the install line.
The user's own ``TF_USE_LEGACY_KERAS`` (in this process's environment or in
``environment=``) always wins, and the request sent to SageMaker never changes: only the
hosts of this machine get the setting.

The framework version is read from the request's image name (the TensorFlow estimator
names ``launchbay/tensorflow-training:<version>-...`` for local jobs; a replayed SageMaker
job keeps SageMaker's ``.../tensorflow-training:<version>-...``), so a job started from a
stored request (``launchbay submit --no-wait``, ``launchbay replay``) gets the same rule.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import re
import warnings
from collections.abc import Mapping
from typing import Any

from launchbay._instances import version_tuple
from launchbay.images.names import parse_image_name

__all__ = ["LEGACY_KERAS", "KERAS3_FROM", "legacy_keras_environment"]

logger = logging.getLogger("launchbay.local")

#: The variable that makes TensorFlow >= 2.16's ``tf.keras`` the ``tf_keras`` package.
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
#: The first TensorFlow whose ``tf.keras`` is Keras 3.
KERAS3_FROM = (2, 16)
_TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel")


def _installed_tensorflow() -> str | None:
    for name in _TENSORFLOW_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


#: SageMaker's own TensorFlow training images (a replayed SageMaker job keeps its image):
#: ``<account>.dkr.ecr.<region>.amazonaws.com/tensorflow-training:2.13.0-cpu-py310``.
_SAGEMAKER_TF_IMAGE = re.compile(r"(?:^|/)tensorflow-training:(?P<version>\d+\.\d+(?:\.\d+)?)-")


def _tensorflow_version(image: str) -> str | None:
    """The TensorFlow version a training image names: launchbay's, or SageMaker's own."""
    spec = parse_image_name(image)
    if spec is not None:
        return spec.framework_version if spec.framework == "tensorflow" else None
    match = _SAGEMAKER_TF_IMAGE.search(image)
    return match.group("version") if match else None


def legacy_keras_environment(
    request: Mapping[str, Any], environment: Mapping[str, str]
) -> dict[str, str]:
    """``{"TF_USE_LEGACY_KERAS": "1"}`` where a Keras-2-era TensorFlow job needs it, else ``{}``.

    ``environment`` is what the hosts already get (this process's environment and the
    request's ``Environment``): a ``TF_USE_LEGACY_KERAS`` there is left as it is.
    """
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
    version = _tensorflow_version(image) if isinstance(image, str) else None
    if version is None or LEGACY_KERAS in environment:
        return {}
    asked = version_tuple(version)
    if not asked or asked[:2] >= KERAS3_FROM:
        return {}
    installed = _installed_tensorflow()
    if installed is None or version_tuple(installed)[:2] < KERAS3_FROM:
        return {}  # no TensorFlow here, or one whose tf.keras is Keras 2 already
    try:
        have_tf_keras = importlib.util.find_spec("tf_keras") is not None
    except (ImportError, ValueError):  # a broken or hidden installation counts as none
        have_tf_keras = False
    if not have_tf_keras:
        minor = ".".join(str(p) for p in version_tuple(installed)[:2])
        warnings.warn(
            f"framework_version={version!r} is a Keras 2 TensorFlow, but this "
            f"Python's TensorFlow {installed} has Keras 3 and no tf-keras: the script's "
            f"tf.keras is Keras 3. Install Keras 2 with: pip install --no-deps "
            f'"tf-keras~={minor}.0" (the hosts then get {LEGACY_KERAS}=1), or set '
            f"{LEGACY_KERAS} yourself.",
            UserWarning,
            stacklevel=2,
        )
        return {}
    logger.info(
        "TensorFlow %s asked, %s installed: the hosts run with %s=1 (tf.keras is Keras 2)",
        version,
        installed,
        LEGACY_KERAS,
    )
    return {LEGACY_KERAS: "1"}
