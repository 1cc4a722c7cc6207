"""Facts about regions and installed frameworks that the estimator's resolution reads (data only)."""

from __future__ import annotations

__all__ = [
    "DEBUGGER_UNSUPPORTED_REGIONS",
    "FRAMEWORK_DISTRIBUTIONS",
    "FRAMEWORK_ESTIMATORS",
    "LOCAL_MODULES",
    "PROFILER_UNSUPPORTED_REGIONS",
]

#: Regions without SageMaker Debugger (SDK v2's list): no default hook there.
DEBUGGER_UNSUPPORTED_REGIONS = (
    "us-iso-east-1",
    "us-isob-east-1",
    "ap-southeast-3",
    "ap-southeast-4",
    "eu-south-2",
    "me-central-1",
    "ap-south-2",
    "eu-central-2",
    "us-gov-east-1",
)
#: Regions without SageMaker Profiler (SDK v2: the same list).
PROFILER_UNSUPPORTED_REGIONS = DEBUGGER_UNSUPPORTED_REGIONS

#: Distributions that install each framework's module, most common first.
FRAMEWORK_DISTRIBUTIONS = {
    "torch": ("torch",),
    "tensorflow": (
        "tensorflow",
        "tensorflow-cpu",
        "tensorflow-gpu",
        "tensorflow-intel",
        "tensorflow-macos",
    ),
    "transformers": ("transformers",),
    "sklearn": ("scikit-learn",),
    "xgboost": ("xgboost", "xgboost-cpu"),
    "mxnet": ("mxnet", "mxnet-mkl", "mxnet-cu112", "mxnet-cu110", "mxnet-cu102"),
}
#: The framework estimators by the job spec's ``framework``: (module, class), imported when
#: a spec names one (``launchbay.estimator.FRAMEWORK_CLASSES``, the spec schema's enum).
FRAMEWORK_ESTIMATORS = {
    "pytorch": ("launchbay.pytorch", "PyTorch"),
    "tensorflow": ("launchbay.tensorflow", "TensorFlow"),
    "huggingface": ("launchbay.huggingface.estimator", "HuggingFace"),
    "sklearn": ("launchbay.sklearn.estimator", "SKLearn"),
    "xgboost": ("launchbay.xgboost.estimator", "XGBoost"),
    "mxnet": ("launchbay.mxnet.estimator", "MXNet"),
}
#: The module a local_process job of each framework imports (whose version is compared).
LOCAL_MODULES = {
    "pytorch": "torch",
    "tensorflow": "tensorflow",
    "huggingface": "transformers",
    "sklearn": "sklearn",
    "xgboost": "xgboost",
    "mxnet": "mxnet",
}
