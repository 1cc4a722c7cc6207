"""The TensorFlow estimator (``from launchbay.tensorflow import TensorFlow``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.estimator import Framework

__all__ = ["TensorFlow"]


class TensorFlow(Framework):
    """Train a TensorFlow script on the official TensorFlow training image (or ``image_uri``).

    ``distribution`` takes ``mpi``, ``smdistributed``, ``parameter_server`` and
    ``multi_worker_mirrored_strategy``. ``model_dir`` is sent as a hyperparameter as in
    SDK v2: by default ``<output_path>/<job>/model`` (``/opt/ml/model`` under MPI);
    ``model_dir=False`` leaves it out.
    """

    _framework_name = "tensorflow"
    _metrics_min_version = (1, 15)

    def __init__(
        self,
        py_version: str | None = None,
        framework_version: str | None = None,
        model_dir: str | bool | None = None,
        image_uri: str | None = None,
        distribution: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if model_dir is not None and model_dir is not False and not isinstance(model_dir, str):
            raise ConfigurationError.invalid(
                "model_dir", model_dir, "an S3 URI or container path, or False to leave it out"
            )
        self.model_dir = model_dir
        super().__init__(
            framework_version=framework_version,
            py_version=py_version,
            image_uri=image_uri,
            distribution=distribution,
            **kwargs,
        )

    def _debugger_allowed(self) -> bool:
        ps = self.distribution_config.parameter_server
        return super()._debugger_allowed() and not (ps and ps.enabled)

    def _extra_hyperparameters(self, job_name: str, output_path: str) -> dict[str, Any]:
        if self.model_dir is False:
            return {}
        if self.model_dir:
            return {"model_dir": self.model_dir}
        mpi = self.distribution_config.mpi
        if mpi and mpi.enabled:
            return {"model_dir": "/opt/ml/model"}
        if output_path.startswith("file://"):
            return {"model_dir": "/opt/ml/model"}
        return {"model_dir": f"{output_path.rstrip('/')}/{job_name}/model"}
