"""The public surface is small, pinned, lazy, and free of boto3 at import."""

from __future__ import annotations

import subprocess
import sys

import launchbay
from fresh_interpreter import loaded_after
from launchbay import errors

PUBLIC = [
    "CollectionConfig", "ConfigurationError", "DebuggerHookConfig", "DistributionError",
    "DockerError", "Estimator", "FileSystemInput", "Framework", "HyperparameterTuningJobAnalytics",
    "ImageNotFoundError", "InputError", "JobError",
    "JobFailedError", "LaunchbayError", "MissingDependencyError", "ProvisioningError", "PyTorch",
    "Session", "TensorFlow", "TrainingInput", "TrainingJobAnalytics", "TransferError",
    "UnknownArgumentError", "__version__", "get_execution_role",
]  # fmt: skip
UTILS = [
    "name_from_base", "sagemaker_short_timestamp", "sagemaker_timestamp", "unique_name_from_base",
]  # fmt: skip
S3 = ["S3Uploader", "S3Downloader", "s3_path_join", "parse_s3_url"]


def test_public_names_are_pinned():
    assert launchbay.__all__ == PUBLIC
    for name in PUBLIC:
        assert getattr(launchbay, name) is not None


def test_sdk_v2_helper_names_are_pinned():
    from launchbay import utils

    assert utils.__all__ == UTILS
    assert launchbay.get_execution_role.__module__ == "launchbay.session"


def test_sdk_v2_module_paths_and_names():
    from launchbay import analytics, s3
    from launchbay.pytorch import PyTorch
    from launchbay.pytorch.estimator import PyTorch as PyTorchFromEstimator
    from launchbay.session import TrainingInput
    from launchbay.tensorflow import TensorFlow
    from launchbay.tensorflow.estimator import TensorFlow as TensorFlowFromEstimator

    assert s3.__all__ == S3
    assert PyTorchFromEstimator is PyTorch and TensorFlowFromEstimator is TensorFlow
    assert TrainingInput is launchbay.TrainingInput
    assert launchbay.TrainingJobAnalytics is analytics.TrainingJobAnalytics
    assert launchbay.HyperparameterTuningJobAnalytics is analytics.HyperparameterTuningJobAnalytics


def test_error_tree():
    assert issubclass(errors.ConfigurationError, (errors.LaunchbayError, ValueError))
    for cls in (errors.DistributionError, errors.InputError, errors.ImageNotFoundError):
        assert issubclass(cls, errors.ConfigurationError)
    assert issubclass(errors.UnknownArgumentError, TypeError)
    assert issubclass(errors.JobFailedError, (errors.JobError, RuntimeError))
    assert issubclass(errors.TransferError, RuntimeError)
    assert issubclass(errors.ProvisioningError, (errors.LaunchbayError, RuntimeError))
    assert issubclass(errors.MissingDependencyError, ImportError)
    assert issubclass(errors.DockerError, (errors.LaunchbayError, RuntimeError))


def test_import_is_lazy_and_boto3_free():
    names = (
        "boto3", "botocore", "yaml", "docker", "torch", "pandas", "launchbay.analytics",
        "launchbay.s3", "launchbay.pytorch.estimator", "launchbay.tensorflow.estimator",
    )  # fmt: skip
    imports = (
        "import launchbay; from launchbay.pytorch import PyTorch; "
        "from launchbay.tensorflow import TensorFlow"
    )
    assert loaded_after(imports, f"m in {names!r}") == []


def test_import_launchbay_loads_none_of_the_new_frameworks():
    """``import launchbay`` (issue 32): the framework, algorithm and Debugger-rule modules and
    their libraries load when a notebook uses them, never at import."""
    names = (
        "launchbay.huggingface", "launchbay.sklearn", "launchbay.xgboost", "launchbay.mxnet",
        "launchbay.amazon", "launchbay._retrieve", "launchbay.debugger", "launchbay.local",
        "transformers", "sklearn", "xgboost", "mxnet", "smdebug_rulesconfig",
    )  # fmt: skip
    assert loaded_after("import launchbay", f"m in {names!r}") == []


def test_unknown_attribute():
    try:
        launchbay.Nope  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_cli_stub_prints_help():
    out = subprocess.run(
        [sys.executable, "-m", "launchbay.cli"], capture_output=True, text=True, check=True
    )
    assert "usage: launchbay" in out.stdout
