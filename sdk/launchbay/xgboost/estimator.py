"""The XGBoost estimator in framework mode: a script on SageMaker's XGBoost image.

As SDK v2's: ``XGBoost(entry_point, framework_version, source_dir, hyperparameters,
py_version="py3", image_uri, image_uri_region, **estimator_arguments)``;
``framework_version`` (such as ``"1.7-1"``) is required, ``py_version`` is ``"py3"``.
The image (``sagemaker-xgboost:<framework_version>``) is looked up in
``image_uri_region`` when given, else in the session's region. Framework mode runs
the script as a plain script on every host, as the XGBoost container does: a script
that trains across hosts reads ``SM_HOSTS``/``SM_CURRENT_HOST`` itself.
``distribution`` is refused (SDK v2 drops it).
"""

from __future__ import annotations

from launchbay.errors import ConfigurationError
from launchbay.sklearn.estimator import SingleScriptFramework

__all__ = ["XGBoost"]

#: XGBoost versions SageMaker does not run, and why (SDK v2's words, shortened).
UNSUPPORTED_VERSIONS = {
    "1.1": "XGBoost 1.1 cannot predict on LIBSVM input with fewer features than the training "
    "data (fixed in 1.2); use 1.2-1 or newer",
}


class XGBoost(SingleScriptFramework):
    """Train an XGBoost script in framework mode on the official image (or ``image_uri``)."""

    _framework_name = "xgboost"
    _positional = (
        "entry_point",
        "framework_version",
        "source_dir",
        "hyperparameters",
        "py_version",
        "image_uri",
        "image_uri_region",
    )

    def _check_framework_rules(self) -> None:
        if self.framework_version is None:  # SDK v2 needs it even with image_uri
            raise ConfigurationError(
                "framework_version is required for XGBoost: accepted a version such as "
                "'1.7-1' (the image's XGBoost version and its build).",
                argument="framework_version",
            )
        super()._check_framework_rules()
        self._check_py3(even_with_image=True)  # SDK v2 checks it with image_uri too
        base = self.framework_version.split("-")[0]
        if base in UNSUPPORTED_VERSIONS:
            raise ConfigurationError.invalid(
                "framework_version",
                self.framework_version,
                "a version other than 1.1, such as '1.7-1'",
                reason=UNSUPPORTED_VERSIONS[base],
            )
