"""The TensorFlow estimator (``from launchbay.tensorflow import TensorFlow``)."""

from __future__ import annotations

from typing import Any, Literal

from launchbay import arguments
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

    _owners = (arguments.BASE, arguments.FRAMEWORK, arguments.TENSORFLOW)
    _positional = ("py_version", "framework_version", "model_dir", "image_uri", "distribution")

    # Bound from arguments.TENSORFLOW (checked by _kinds.check_model_dir).
    model_dir: str | Literal[False] | None

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
