"""The MXNet estimator: a script on the official MXNet training image (MXNet is retired upstream).

As SDK v2's: ``MXNet(entry_point, framework_version, py_version, source_dir,
hyperparameters, image_uri, distribution, **estimator_arguments)``. ``distribution``
takes ``parameter_server`` and ``mpi`` (MXNet 1.3 and newer), sent as SDK v2 sends
them: ``sagemaker_mpi_num_of_processes_per_host`` and
``sagemaker_mpi_custom_mpi_options`` only with ``processes_per_host``. SageMaker
time-series metrics are on from MXNet 1.6.

A ``local_process`` job runs this Python, which needs an importable ``mxnet``: the last
release (1.9.1) needs numpy < 2 (``np.bool``), so where it cannot be imported the job is
refused before anything starts, saying so. The request is SDK v2's either way.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from launchbay import _resolve, image_uris
from launchbay._instances import version_tuple
from launchbay.distribution import Distribution, check_strategies
from launchbay.errors import ConfigurationError
from launchbay.estimator import Framework
from launchbay.runtime.names import HP

__all__ = ["MXNet"]

#: The first MXNet version whose images run a ``distribution`` (script mode).
LOWEST_DISTRIBUTION_VERSION = (1, 3)
#: The newest MXNet version with Python 2 images.
LATEST_PY2_VERSION = "1.6.0"


class MXNet(Framework):
    """Train an MXNet script on the official MXNet training image (or ``image_uri``)."""

    _framework_name = "mxnet"
    _metrics_min_version = (1, 6)

    def _check_framework_rules(self) -> None:
        if self.entry_point is None:
            raise ConfigurationError(
                "entry_point is required for MXNet: accepted the path of the training script, "
                "e.g. entry_point='train.py' with source_dir='src'.",
                argument="entry_point",
            )
        if self.image_uri is None and (self.framework_version is None or self.py_version is None):
            missing = "framework_version" if self.framework_version is None else "py_version"
            config = image_uris.config_for_framework("mxnet")["training"]
            accepted = (
                f"one of {[*config['versions'], *config['version_aliases']]}"
                if missing == "framework_version"
                else "a Python version tag such as 'py38'"
            )
            raise ConfigurationError(
                f"{missing} is required when image_uri is not given: accepted {accepted} (or "
                "pass image_uri).",
                argument=missing,
            )
        if self.py_version == "py2":
            import logging

            logging.getLogger("launchbay.image_uris").warning(
                "py_version='py2' is deprecated: MXNet %s is the newest version with Python 2 "
                "images; pass py_version='py3' for a Python 3 image.",
                LATEST_PY2_VERSION,
            )

    def _parse_distribution(self) -> Distribution:
        raw = self._distribution_arg
        check_strategies(raw, "mxnet")
        if raw and self.framework_version:
            if version_tuple(self.framework_version) < LOWEST_DISTRIBUTION_VERSION:
                raise ConfigurationError.invalid(
                    "framework_version",
                    self.framework_version,
                    "MXNet 1.3 or newer with a distribution",
                    reason="distribution runs in script mode, which older MXNet images lack",
                )
        return super()._parse_distribution()

    def _distribution_hyperparameters(self) -> dict[str, Any]:
        """SDK v2's MXNet keys: custom MPI options are sent only with processes_per_host."""
        raw = self._distribution_arg or {}
        hps: dict[str, Any] = {}
        if "parameter_server" in raw:
            hps[HP.PARAMETER_SERVER_ENABLED] = raw["parameter_server"].get("enabled", False)
        if "mpi" in raw:
            mpi = raw["mpi"]
            hps[HP.MPI_ENABLED] = mpi.get("enabled", False)
            if mpi.get("processes_per_host"):
                hps[HP.MPI_PROCESSES_PER_HOST] = mpi["processes_per_host"]
                hps[HP.MPI_CUSTOM_OPTIONS] = mpi.get("custom_mpi_options", "")
        return hps

    def _debugger_allowed(self) -> bool:
        # SDK v2 turns the default hook off with checkpoints on several instances only.
        checkpoints = bool(self.checkpoint_s3_uri and self.checkpoint_local_path)
        return not (checkpoints and (self.instance_count or 1) > 1)

    def training_image_uri(self) -> str:
        if self.image_uri or self.is_local:
            return super().training_image_uri()
        return image_uris.get_training_image_uri(
            _resolve.region(self),
            "mxnet",
            self.framework_version,
            self.py_version,
            distribution=self._distribution_arg,
            instance_type=_resolve.instance_types(self)[0],
        )

    def _check_installed_framework(self) -> None:
        """A local_process job imports mxnet in this Python: refuse it where that fails."""
        problem = _mxnet_problem()
        if problem:
            raise ConfigurationError.invalid(
                "instance_type",
                self.instance_type,
                "a Python where `import mxnet` works (e.g. a virtual environment with "
                "mxnet==1.9.1 and numpy<1.24), instance_type='local' with an MXNet image_uri, "
                "or an ml.* instance type",
                reason=f"local_process runs the MXNet job in this Python ({sys.executable}), "
                f"where {problem}. MXNet is retired upstream: its last release, 1.9.1, needs "
                "numpy < 2",
            )
        super()._check_installed_framework()


def _mxnet_problem() -> str | None:
    """Why ``import mxnet`` fails in this Python (None when it works); run apart, it is heavy."""
    import importlib.util

    if importlib.util.find_spec("mxnet") is None:
        return "mxnet is not installed"
    done = subprocess.run(
        [sys.executable, "-c", "import mxnet"], capture_output=True, text=True, timeout=120
    )
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["an error"])[-1]
        return f"`import mxnet` fails: {last}"
    return None
