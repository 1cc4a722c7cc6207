"""Estimators back from a tuning job's definitions (``HyperparameterTuner.attach``).

The class of each comes from the class metadata SDK v2 and launchbay put in the
static hyperparameters (``sagemaker_estimator_module``/``sagemaker_estimator_class_name``):
SDK v2's framework classes map to launchbay's (:data:`V2_CLASSES`, both ways), so
either SDK attaches to the other's tuning jobs. The estimator's arguments come from
the definition read as a training job's description
(:func:`launchbay._attach.init_params_from_description`), so its training request
gives the definition back.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from launchbay.errors import ConfigurationError, JobError
from launchbay.estimator import EstimatorBase
from launchbay.tuning.plan import OBJECTIVE_HYPERPARAMETER

__all__ = [
    "V2_CLASSES",
    "ESTIMATOR_MODULE",
    "ESTIMATOR_CLASS_NAME",
    "estimator_from_definition",
    "local_trial_estimator",
]

logger = logging.getLogger("launchbay.tuning.attach")

ESTIMATOR_MODULE = "sagemaker_estimator_module"
ESTIMATOR_CLASS_NAME = "sagemaker_estimator_class_name"
SUBMIT_DIRECTORY = "sagemaker_submit_directory"
#: launchbay's estimator classes and the SDK v2 classes their tuning jobs name (both ways).
V2_CLASSES = {
    ("launchbay.pytorch", "PyTorch"): ("sagemaker.pytorch.estimator", "PyTorch"),
    ("launchbay.tensorflow", "TensorFlow"): ("sagemaker.tensorflow.estimator", "TensorFlow"),
    ("launchbay.estimator", "Estimator"): ("sagemaker.estimator", "Estimator"),
}
_FROM_V2 = {v2: ours for ours, v2 in V2_CLASSES.items()}
_FROM_V2.update(
    {
        ("sagemaker.pytorch", "PyTorch"): ("launchbay.pytorch", "PyTorch"),
        ("sagemaker.tensorflow", "TensorFlow"): ("launchbay.tensorflow", "TensorFlow"),
    }
)


def _estimator_class(estimator_cls: Any, definition: Mapping[str, Any]) -> type[EstimatorBase]:
    """The launchbay class for a definition: given, from its class metadata, or Estimator."""
    if estimator_cls is not None:
        if isinstance(estimator_cls, type) and issubclass(estimator_cls, EstimatorBase):
            return estimator_cls
        if not isinstance(estimator_cls, str) or "." not in estimator_cls:
            raise ConfigurationError.invalid(
                "estimator_cls", estimator_cls, "'module.Class' or a launchbay estimator class"
            )
        module, name = estimator_cls.rsplit(".", 1)
    else:
        static = definition.get("StaticHyperParameters") or {}
        try:
            module = json.loads(static[ESTIMATOR_MODULE])
            name = json.loads(static[ESTIMATOR_CLASS_NAME])
        except (KeyError, ValueError):
            module, name = "launchbay.estimator", "Estimator"
    module, name = _FROM_V2.get((module, name), (module, name))
    if not module.startswith("launchbay"):
        logger.warning(
            "Estimator class %s.%s has no launchbay counterpart: using Estimator.", module, name
        )
        module, name = "launchbay.estimator", "Estimator"
    found = getattr(importlib.import_module(module), name, None)
    if not (isinstance(found, type) and issubclass(found, EstimatorBase)):
        raise ConfigurationError.invalid(
            "estimator_cls", f"{module}.{name}", "a launchbay estimator class"
        )
    return found


def estimator_from_definition(
    definition: Mapping[str, Any],
    estimator_cls: Any,
    session: Any,
    region: str | None,
    tuning_name: str,
) -> EstimatorBase:
    """An estimator whose training request gives ``definition`` back (through ``_attach``)."""
    from launchbay._attach import init_params_from_description

    cls = _estimator_class(estimator_cls, definition)
    static = {
        k: v for k, v in (definition.get("StaticHyperParameters") or {}).items()
        if k != OBJECTIVE_HYPERPARAMETER
    }  # fmt: skip
    try:
        job_name = json.loads(static.get("sagemaker_job_name", "null")) or tuning_name
    except ValueError:
        job_name = tuning_name
    description = {
        "TrainingJobName": job_name,
        "HyperParameters": static,
        "ResourceConfig": dict(definition.get("HyperParameterTuningResourceConfig") or {}),
        **{k: v for k, v in definition.items() if k not in (
            "StaticHyperParameters", "HyperParameterTuningResourceConfig", "DefinitionName",
            "TuningObjective", "HyperParameterRanges",
        )},
    }  # fmt: skip
    description["AlgorithmSpecification"] = {
        k: v for k, v in definition["AlgorithmSpecification"].items() if k != "MetricDefinitions"
    }
    params = init_params_from_description(cls, description, region=region)
    try:
        return cls(sagemaker_session=session, **params)
    except ConfigurationError as exc:
        raise JobError(
            f"Cannot rebuild the estimator of tuning job {tuning_name!r}: {exc}"
        ) from exc


def local_trial_estimator(
    cls: type[EstimatorBase], trial_name: str, definition: Mapping[str, Any], session: Any
) -> EstimatorBase:
    """The estimator of local trial ``trial_name``, attached to it (``best_estimator()``).

    Its arguments come from the trial's own description (its hyperparameters are the
    trial's values and the static ones, less ``_tuning_objective_metric``), its
    ``source_dir`` from ``definition``'s code (the folder the local tuning job kept:
    an estimator takes a folder, not the trial's ``file://`` archive), and
    ``latest_training_job`` is the trial, so ``fit()`` trains again with those values.
    """
    from launchbay._attach import init_params_from_description
    from launchbay.backends.registry import backend_for_job
    from launchbay.job import TrainingJob

    backend = backend_for_job(trial_name, session)
    description = dict(backend.describe(trial_name))
    hyperparameters = dict(description.get("HyperParameters") or {})
    hyperparameters.pop(OBJECTIVE_HYPERPARAMETER, None)
    kept = (definition.get("StaticHyperParameters") or {}).get(SUBMIT_DIRECTORY)
    if kept and SUBMIT_DIRECTORY in hyperparameters:
        hyperparameters[SUBMIT_DIRECTORY] = kept
    description["HyperParameters"] = hyperparameters
    params = init_params_from_description(cls, description, region=None)
    try:
        estimator = cls(sagemaker_session=session, **params)
    except ConfigurationError as exc:
        raise JobError(
            f"Cannot rebuild the estimator of training job {trial_name!r}: {exc}"
        ) from exc
    estimator.latest_training_job = TrainingJob(trial_name, backend)
    estimator._current_job_name = trial_name
    return estimator
