"""After training: ``deploy()``, ``create_model()``, ``transformer()``, ``register()``.

Hosting is not launchbay's job; a notebook that trained with it must still not die at the
cell that deploys. So every estimator has SDK v2's four calls, and each one

* for a SageMaker job, when the SageMaker Python SDK v2 is installed, hands over to it:
  the v2 estimator attached to the same job (``<v2 class>.attach(job_name,
  sagemaker_session=sagemaker.Session(boto_session=<launchbay's>))``, the v2 class of the
  same name where v2 has one: ``sagemaker.pytorch.PyTorch``, ``sagemaker.LinearLearner``
  ..., else ``sagemaker.estimator.Estimator``), is called with the same arguments and its
  return value (a ``Predictor``, ``Model``, ``Transformer``, ``ModelPackage``) returned;
* otherwise (no SDK v2, or a local job) raises :class:`HostingNotAvailableError`, which
  says where the model is (``model_data``; the local path for a local job) and what to
  install or call instead.

docs/compatibility.md ("After training") says what is out of scope.
"""

from __future__ import annotations

import importlib
from typing import Any

from launchbay.errors import ConfigurationError, HostingNotAvailableError

__all__ = ["AfterTraining", "v2_class_path"]

#: launchbay class name -> SDK v2 class (module, name) that attaches to the same job.
_V2_CLASSES = {
    "PyTorch": ("sagemaker.pytorch", "PyTorch"),
    "TensorFlow": ("sagemaker.tensorflow", "TensorFlow"),
    "HuggingFace": ("sagemaker.huggingface", "HuggingFace"),
    "SKLearn": ("sagemaker.sklearn", "SKLearn"),
    "XGBoost": ("sagemaker.xgboost", "XGBoost"),
    "MXNet": ("sagemaker.mxnet", "MXNet"),
    **{
        name: ("sagemaker", name)
        for name in (
            "LinearLearner",
            "KMeans",
            "PCA",
            "FactorizationMachines",
            "NTM",
            "LDA",
            "RandomCutForest",
            "KNN",
            "IPInsights",
            "Object2Vec",
        )
    },  # fmt: skip
}
_GENERIC = ("sagemaker.estimator", "Estimator")


def v2_class_path(cls: type) -> tuple[str, str]:
    """The SDK v2 class that attaches to a job of launchbay's ``cls`` (the nearest in its MRO)."""
    for klass in cls.__mro__:
        if klass.__name__ in _V2_CLASSES and klass.__module__.startswith("launchbay."):
            return _V2_CLASSES[klass.__name__]
    return _GENERIC


class AfterTraining:
    """SDK v2's calls after training, handed over to SDK v2 (see the module docstring).

    Mixed into :class:`launchbay.estimator.EstimatorBase`; reads ``latest_training_job``,
    ``is_local``, ``model_data`` and ``session`` from it.
    """

    def deploy(self, *args: Any, **kwargs: Any) -> Any:
        """SDK v2's ``deploy()``: an endpoint for the latest job's model (handed over to SDK v2).

        Raises:
            HostingNotAvailableError: a local job, or no SageMaker SDK v2 installed; the
                message says where the model is.
        """
        return self._hand_over("deploy", args, kwargs)

    def create_model(self, *args: Any, **kwargs: Any) -> Any:
        """SDK v2's ``create_model()`` (handed over to SDK v2; see :meth:`deploy`)."""
        return self._hand_over("create_model", args, kwargs)

    def transformer(self, *args: Any, **kwargs: Any) -> Any:
        """SDK v2's ``transformer()``: batch transform (handed over to SDK v2; see :meth:`deploy`)."""
        return self._hand_over("transformer", args, kwargs)

    def register(self, *args: Any, **kwargs: Any) -> Any:
        """SDK v2's ``register()``: a model package (handed over to SDK v2; see :meth:`deploy`)."""
        return self._hand_over("register", args, kwargs)

    # -- the hand-over --------------------------------------------------------------------

    def _hand_over(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        estimator: Any = self  # an EstimatorBase
        job = estimator.latest_training_job
        if job is None:
            raise ConfigurationError.invalid(
                "latest_training_job",
                None,
                f"a job trained by fit() (or attach()) before {method}()",
            )
        name = job.name
        module, cls = v2_class_path(type(self))
        call = f"{type(self).__name__}.{method}()"
        if estimator.is_local:
            path = (estimator.model_data or "").removeprefix("file://")
            raise HostingNotAvailableError(
                f"{call} is not available for the local job {name!r}: launchbay trains models, "
                f"it does not host them. The model is at {path or '(no model artifact)'}. Serve "
                "it yourself (unpack model.tar.gz and load it with your framework), or train on "
                f"an ml.* instance type and call {method}() with the SageMaker SDK v2 installed "
                "(`pip install 'sagemaker>=2,<3'`), which launchbay hands the call over to."
            )
        try:
            v2_class = getattr(importlib.import_module(module), cls)
            sagemaker = importlib.import_module("sagemaker")
        except (ImportError, AttributeError):
            raise HostingNotAvailableError(
                f"{call} needs the SageMaker Python SDK v2, which launchbay hands it over to, "
                "and it is not installed. The model of job "
                f"{name!r} is at {estimator.model_data}. Install it (`pip install 'sagemaker>=2,<3'`) "
                f"and call {method}() again, or by hand: `{module}.{cls}.attach({name!r}, "
                f"sagemaker_session=sagemaker.Session()).{method}(...)`."
            ) from None
        handed = self.__dict__.get("_v2_estimator")
        if handed is None or handed[0] != name:
            v2_session = sagemaker.Session(boto_session=estimator.session.boto_session)
            handed = (name, v2_class.attach(name, sagemaker_session=v2_session))
            self.__dict__["_v2_estimator"] = handed
        return getattr(handed[1], method)(*args, **kwargs)
