"""The HuggingFace estimator: transformers on the PyTorch or TensorFlow HuggingFace images.

As SDK v2's: ``HuggingFace(py_version, entry_point, transformers_version,
tensorflow_version, pytorch_version, source_dir, hyperparameters, image_uri,
distribution, compiler_config, **estimator_arguments)``. ``transformers_version``
is the estimator's ``framework_version``; one of ``pytorch_version`` /
``tensorflow_version`` picks the image (``huggingface-pytorch-training`` or
``huggingface-tensorflow-training``), both written with the same number of version
parts. SageMaker time-series metrics are on unless turned off.

``distribution`` takes ``pytorchddp`` and ``torch_distributed`` (sent as SDK v2's
HuggingFace estimator sends them: ``sagemaker_pytorch_ddp_enabled`` or
``sagemaker_torch_distributed_enabled`` with ``sagemaker_instance_type``),
``smdistributed`` and ``mpi``. SageMaker Training Compiler (``compiler_config``)
is out of scope: only ``None`` is accepted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from launchbay import _resolve, arguments, image_uris
from launchbay.distribution import Distribution, check_strategies, parse_distribution
from launchbay.errors import ConfigurationError
from launchbay.estimator import Framework
from launchbay.runtime.names import HP, LOCAL_GPU

__all__ = ["HuggingFace"]


class HuggingFace(Framework):
    """Train a transformers script on the official HuggingFace training image (or ``image_uri``)."""

    _framework_name = "huggingface"
    _owners = (arguments.BASE, arguments.FRAMEWORK, arguments.HUGGINGFACE)
    # transformers_version takes framework_version's place (the property below).
    _excluded = ("framework_version",)
    _positional = (
        "py_version",
        "entry_point",
        "transformers_version",
        "tensorflow_version",
        "pytorch_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
        "compiler_config",
    )

    # Bound from arguments.HUGGINGFACE.
    transformers_version: str | None
    pytorch_version: str | None
    tensorflow_version: str | None
    compiler_config: None

    @property
    def framework_version(self) -> str | None:
        """The transformers version (SDK v2 keeps it as ``framework_version``)."""
        return self.transformers_version

    @framework_version.setter
    def framework_version(self, value: str | None) -> None:
        self.transformers_version = value

    @property
    def base_framework_name(self) -> str:
        """``"tensorflow"`` with ``tensorflow_version``, else ``"pytorch"``."""
        return "tensorflow" if self.tensorflow_version is not None else "pytorch"

    @property
    def base_framework_version(self) -> str | None:
        """The PyTorch or TensorFlow version of the image."""
        return (
            self.tensorflow_version if self.tensorflow_version is not None else self.pytorch_version
        )

    def _check_framework_rules(self) -> None:
        """SDK v2's: a transformers version and exactly one base version, of the same length."""
        if self.entry_point is None:
            raise ConfigurationError(
                "entry_point is required for HuggingFace: accepted the path of the training "
                "script, e.g. entry_point='train.py' with source_dir='src'.",
                argument="entry_point",
            )
        if self.image_uri is not None:
            return
        if self.transformers_version is None:
            raise ConfigurationError(
                "transformers_version is required when image_uri is not given: accepted a "
                "transformers version such as '4.36.0' (or pass image_uri).",
                argument="transformers_version",
            )
        if self.tensorflow_version is not None and self.pytorch_version is not None:
            raise ConfigurationError(
                f"tensorflow_version={self.tensorflow_version!r} and pytorch_version="
                f"{self.pytorch_version!r} are both given: accepted one of them, the framework "
                "of the HuggingFace image.",
                argument="tensorflow_version",
                value=self.tensorflow_version,
            )
        if self.tensorflow_version is None and self.pytorch_version is None:
            raise ConfigurationError(
                "pytorch_version or tensorflow_version is required when image_uri is not given: "
                "accepted a version such as pytorch_version='2.1.0'.",
                argument="pytorch_version",
            )
        base = "tensorflow_version" if self.tensorflow_version is not None else "pytorch_version"
        base_version = str(self.base_framework_version)
        if len(base_version.split(".")) != len(self.transformers_version.split(".")):
            raise ConfigurationError(
                f"Invalid {base}={base_version!r} with transformers_version="
                f"{self.transformers_version!r}: accepted both full versions (such as '2.1.0' "
                "and '4.36.0') or both short ones ('2.1' and '4.36').",
                argument=base,
                value=base_version,
            )
        if self.py_version is None:
            raise ConfigurationError(
                "py_version is required when image_uri is not given: accepted a Python version "
                "tag of the image such as 'py310'.",
                argument="py_version",
            )

    def _parse_distribution(self) -> Distribution:
        raw = self._distribution_arg
        check_strategies(raw, self._framework_name)
        if not raw:
            return Distribution(
                instance_type=self.instance_type, framework=self.base_framework_name
            )
        # SDK v2 checks smdistributed and torch_distributed against the base framework's
        # images, and pytorchddp not at all (the HuggingFace image has its own launcher).
        return parse_distribution(
            raw,
            framework=self.base_framework_name,
            framework_version=self.base_framework_version,
            py_version=self.py_version,
            image_uri=self.image_uri or ("huggingface" if "pytorchddp" in raw else None),
            instance_type=self.instance_type,
            entry_point=self.entry_point,
            instance_groups=self.instance_groups,
        )

    def _distribution_hyperparameters(self) -> dict[str, Any]:
        """SDK v2's HuggingFace keys: pytorchddp, else torch_distributed, else the generic ones."""
        raw = self._distribution_arg or {}
        config = self.distribution_config
        if "pytorchddp" in raw or "torch_distributed" in raw:
            key = "pytorchddp" if "pytorchddp" in raw else "torch_distributed"
            if raw[key].get("enabled", False):
                flag = (
                    HP.PYTORCH_DDP_ENABLED if key == "pytorchddp" else HP.TORCH_DISTRIBUTED_ENABLED
                )
                hps: dict[str, Any] = {flag: True}
                if self.instance_type is not None:
                    hps[HP.INSTANCE_TYPE] = self.instance_type
                section = config.dataparallel if key == "pytorchddp" else config.torch_distributed
                per_host = getattr(section, "processes_per_host", None)
                if per_host:  # launchbay's extension (docs/compatibility.md)
                    hps[HP.MPI_PROCESSES_PER_HOST] = per_host
                return hps
            if key == "pytorchddp":  # a disabled pytorchddp: v2 sends the others' keys
                config = dataclasses.replace(config, dataparallel=None)
        return dataclasses.replace(
            config, framework=None, torch_distributed=None
        ).to_hyperparameters()

    def _sagemaker_metrics(self) -> bool | None:
        return True if self.enable_sagemaker_metrics is None else self.enable_sagemaker_metrics

    def _debugger_allowed(self) -> bool:
        return True  # SDK v2 keeps the default hook with checkpoints for HuggingFace

    def training_image_uri(self) -> str:
        if self.image_uri:
            return super().training_image_uri()
        if self.is_local:
            # launchbay's local image carries both versions, transformers' first
            # (images.huggingface_version): launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311
            processor = "gpu" if self.instance_type == LOCAL_GPU else "cpu"
            return (
                f"launchbay/{self._framework_name}-training:{self.transformers_version}-"
                f"{self.base_framework_name}{self.base_framework_version}-{processor}-"
                f"{self.py_version}"
            )
        return image_uris.get_training_image_uri(
            _resolve.region(self),
            self._framework_name,
            self.transformers_version,
            self.py_version,
            distribution=self._distribution_arg,
            tensorflow_version=self.tensorflow_version,
            pytorch_version=self.pytorch_version,
            instance_type=_resolve.instance_types(self)[0],
        )
