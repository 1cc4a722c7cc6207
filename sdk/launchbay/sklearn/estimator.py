"""The scikit-learn estimator: a script on SageMaker's scikit-learn image, on one instance.

As SDK v2's: ``SKLearn(entry_point, framework_version, py_version="py3", source_dir,
hyperparameters, image_uri, image_uri_region, **estimator_arguments)``. The image
(``sagemaker-scikit-learn:<framework_version>-cpu-py3``) is looked up in
``image_uri_region`` when given, else in the session's region. scikit-learn does not
train across instances: ``instance_count`` is 1 (its default here), GPU instance types
and ``distribution`` are refused. The script runs as a plain script, as the
scikit-learn container's toolkit runs it.
"""

from __future__ import annotations

from typing import Any

from launchbay import _resolve, arguments, image_uris
from launchbay.distribution import Distribution, check_strategies
from launchbay.errors import ConfigurationError
from launchbay.estimator import Framework
from launchbay.runtime.names import LOCAL_GPU

__all__ = ["SKLearn"]


class SingleScriptFramework(Framework):
    """What SKLearn and XGBoost share: one official image looked up with ``retrieve``, py3 only,
    no distribution, and v2's plain Framework defaults (no metrics or model_dir of their own)."""

    _owners = (arguments.BASE, arguments.FRAMEWORK, arguments.IMAGE_REGION)
    _defaults: dict[str, Any] = {"py_version": "py3"}

    # Bound from arguments.IMAGE_REGION.
    image_uri_region: str | None

    def _check_framework_rules(self) -> None:
        """An entry point, a version (or image_uri), py3; CPU types only where the image is."""
        if self.entry_point is None:
            raise ConfigurationError(
                f"entry_point is required for {type(self).__name__}: accepted the path of the "
                "training script, e.g. entry_point='train.py' with source_dir='src'.",
                argument="entry_point",
            )
        if self.image_uri is None and self.framework_version is None:
            raise ConfigurationError(
                "framework_version is required when image_uri is not given: accepted one of "
                f"{known_versions(str(self._framework_name))} (or pass image_uri).",
                argument="framework_version",
            )
        self._check_py3()

    def _check_py3(self, *, even_with_image: bool = False) -> None:
        """py3, or (for SKLearn, as SDK v2) no py_version at all beside an image_uri."""
        allowed_none = self.image_uri is not None and not even_with_image
        if self.py_version != "py3" and not (self.py_version is None and allowed_none):
            raise ConfigurationError.invalid(
                "py_version",
                self.py_version,
                "'py3'",
                reason=f"The {self._framework_name} images are built for Python 3 only",
            )

    def _parse_distribution(self) -> Distribution:
        check_strategies(self._distribution_arg, str(self._framework_name))
        return Distribution(instance_type=self.instance_type, framework=self._framework_name)

    def _sagemaker_metrics(self) -> bool | None:
        return self.enable_sagemaker_metrics  # SDK v2 sends the field only when it is given

    def _debugger_allowed(self) -> bool:
        return True  # SDK v2 keeps the default hook with checkpoints for these frameworks

    def training_image_uri(self) -> str:
        if self.image_uri or self.is_local:
            return super().training_image_uri()
        return image_uris.retrieve(
            str(self._framework_name),
            self.image_uri_region or _resolve.region(self),
            version=self.framework_version,
            py_version=self.py_version,
            instance_type=_resolve.instance_types(self)[0],
            image_scope="training",
        )


def known_versions(framework: str) -> list[str]:
    """The training image versions (and aliases) SDK v2 knows for ``framework``."""
    config = image_uris.config_for_framework(framework)
    table = config.get("training", config)
    return [*table.get("versions", {}), *table.get("version_aliases", {})]


class SKLearn(SingleScriptFramework):
    """Train a scikit-learn script on one instance of the official image (or ``image_uri``)."""

    _framework_name = "sklearn"
    _defaults = {"py_version": "py3", "instance_count": 1}
    _positional = (
        "entry_point",
        "framework_version",
        "py_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "image_uri_region",
    )

    def _check_rules(self) -> None:
        # Single instance first: SDK v2 refuses more before anything else is looked at.
        if self.instance_groups is not None:
            raise ConfigurationError.invalid(
                "instance_groups",
                self.instance_groups,
                "instance_type with instance_count=1 (leave instance_groups out)",
                reason="scikit-learn does not train across instances",
            )
        if self.instance_count is not None and self.instance_count != 1:
            raise ConfigurationError.invalid(
                "instance_count",
                self.instance_count,
                "1 (or leave it out)",
                reason="scikit-learn does not train across instances; SDK v2 refuses it too",
            )
        super()._check_rules()

    def _check_framework_rules(self) -> None:
        super()._check_framework_rules()
        itype = self.instance_type
        if itype == LOCAL_GPU or (
            isinstance(itype, str)
            and itype.startswith("ml.")
            and image_uris.processor_for(itype) == "gpu"
        ):
            raise ConfigurationError.invalid(
                "instance_type",
                self.instance_type,
                "a CPU instance type such as 'ml.m5.xlarge', or 'local' / 'local_process'",
                reason="scikit-learn images train on CPU only",
            )
