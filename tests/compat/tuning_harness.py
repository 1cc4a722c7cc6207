"""Build the same tuning job with sagemaker==2.257.7 and with launchbay; compare the requests.

A :class:`TuningCase` names its estimators (``{None: ...}`` for a tuner of one
estimator, ``{name: ...}`` for ``HyperparameterTuner.create``), the tuner's keyword
arguments, the ``fit`` inputs and ``include_cls_metadata``. Estimators are built
by the request harness (:func:`.harness.v2_estimator` / :func:`.harness.ours_estimator`);
ranges and settings objects from :data:`TUNING_CLASSES` of each SDK.

* :func:`v2_tuning_request`: SDK v2's ``fit(wait=False)`` with the session's
  ``create_hyper_parameter_tuning_job`` swapped for a recorder (as the request
  harness records ``create_training_job``);
* :func:`ours_tuning_request`: launchbay's ``create_tuning_job_request``;
* :func:`assert_same_tuning_request`: every ``TrainingJobDefinition`` is normalised
  as the request harness normalises a training request (the code tarball's S3 key,
  after :func:`.harness.check_code_locations` checked both), SDK v2's warm start
  parents are sorted (v2 lists a ``set``: its order changes with ``PYTHONHASHSEED``;
  launchbay sorts them), then the requests are compared key for key.

Deliberate departures are :data:`TUNING_IMPROVEMENTS`, applied to v2's request
(documented in docs/compatibility.md).
"""

from __future__ import annotations

import contextlib
import copy
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .harness import (
    ACCOUNT,
    Case,
    SourceTree,
    build,
    check_code_locations,
    differences,
    no_v2_telemetry,
    normalize,
    ours_estimator,
    ours_session,
    v2_estimator,
    v2_session,
)

TUNING_CLASSES = (
    "ContinuousParameter",
    "IntegerParameter",
    "CategoricalParameter",
    "WarmStartConfig",
    "WarmStartTypes",
    "StrategyConfig",
    "HyperbandStrategyConfig",
    "TuningJobCompletionCriteriaConfig",
)


def _drop_none_max_jobs(request: dict[str, Any]) -> dict[str, Any]:
    limits = request["HyperParameterTuningJobConfig"]["ResourceLimits"]
    assert limits["MaxNumberOfTrainingJobs"] is None, limits
    del limits["MaxNumberOfTrainingJobs"]
    return request


#: name -> (reason, patch of v2's recorded request)
TUNING_IMPROVEMENTS = {
    "grid-max-jobs-omitted": (
        "SDK v2 sends MaxNumberOfTrainingJobs=None for a Grid tuner without max_jobs, "
        "which botocore's parameter validation refuses before the request leaves; "
        "launchbay leaves the key out (SageMaker computes the grid's size).",
        _drop_none_max_jobs,
    ),
}


@dataclass(frozen=True)
class TuningCase:
    id: str
    estimators: Mapping[str | None, tuple[str, Mapping[str, Any]]]
    tuner: Mapping[str, Any]
    inputs: Any = None
    include_cls_metadata: Any = False
    region: str = "us-west-2"
    expect: Mapping[str, Any] = field(default_factory=dict)
    improvements: tuple[str, ...] = ()

    @property
    def job_name(self) -> str:
        """A valid tuning job name (32 characters at most) derived from the id."""
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", f"t-{self.id}")
        return re.sub(r"-{2,}", "-", name)[:32].rstrip("-")

    @property
    def multi(self) -> bool:
        return None not in self.estimators

    def estimator_case(self, name: str | None) -> Case:
        cls, kwargs = self.estimators[name]
        return Case(
            id=f"{self.id}-{name or 'single'}", estimator=cls, kwargs=kwargs, region=self.region
        )


def _v2_classes() -> dict[str, Any]:
    import sagemaker.parameter
    import sagemaker.tuner

    return {
        n: getattr(sagemaker.tuner, n, None) or getattr(sagemaker.parameter, n)
        for n in TUNING_CLASSES
    }


def _ours_classes() -> dict[str, Any]:
    import launchbay.tuner

    return {n: getattr(launchbay.tuner, n) for n in TUNING_CLASSES}


def build_tuning(value: Any, classes: Mapping[str, Any]) -> Any:
    """Neutral tuning objects -> one SDK's objects (``("WarmStartTypes", "NAME")`` is an enum member)."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] in TUNING_CLASSES:
        name, args = value
        if name == "WarmStartTypes":
            return getattr(classes[name], args)
        return classes[name](**{k: build_tuning(v, classes) for k, v in args.items()})
    if isinstance(value, Mapping):
        return {k: build_tuning(v, classes) for k, v in value.items()}
    if isinstance(value, list):
        return [build_tuning(v, classes) for v in value]
    return copy.deepcopy(value)


@contextlib.contextmanager
def record_create_tuning_job(session: Any) -> Iterator[list[dict[str, Any]]]:
    """Replace the session's ``sagemaker_client.create_hyper_parameter_tuning_job`` with a recorder."""
    client = session.sagemaker_client
    calls: list[dict[str, Any]] = []

    def recorder(**request: Any) -> dict[str, Any]:
        calls.append(copy.deepcopy(request))
        name = request.get("HyperParameterTuningJobName", "job")
        region = session.boto_region_name
        return {
            "HyperParameterTuningJobArn": f"arn:aws:sagemaker:{region}:{ACCOUNT}:hyper-parameter-tuning-job/{name}"
        }

    client.create_hyper_parameter_tuning_job = recorder
    try:
        yield calls
    finally:
        del client.create_hyper_parameter_tuning_job


def _inputs(case: TuningCase, classes: Mapping[str, Any], tree: SourceTree) -> Any:
    return build(case.inputs, classes, tree)


def v2_tuner(case: TuningCase, tree: SourceTree, session: Any) -> Any:
    import sagemaker.tuner

    classes = _v2_classes()
    kwargs = build_tuning(dict(case.tuner), classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimators = {
            n: v2_estimator(case.estimator_case(n), tree, session) for n in case.estimators
        }
        if case.multi:
            return sagemaker.tuner.HyperparameterTuner.create(estimator_dict=estimators, **kwargs)
        return sagemaker.tuner.HyperparameterTuner(estimator=estimators[None], **kwargs)


def ours_tuner(case: TuningCase, tree: SourceTree, session: Any | None = None) -> Any:
    from launchbay.tuner import HyperparameterTuner

    classes = _ours_classes()
    kwargs = build_tuning(dict(case.tuner), classes)
    session = session if session is not None else ours_session(case.region)
    estimators = {n: ours_estimator(case.estimator_case(n), tree, session) for n in case.estimators}
    if case.multi:
        return HyperparameterTuner.create(estimator_dict=estimators, **kwargs)
    return HyperparameterTuner(estimator=estimators[None], **kwargs)


def v2_tuning_request(case: TuningCase, tree: SourceTree) -> dict[str, Any]:
    """The CreateHyperParameterTuningJob kwargs SDK v2's ``fit(wait=False)`` sends."""
    session = v2_session(case.region)
    tuner = v2_tuner(case, tree, session)
    inputs = _inputs(case, {}, tree)
    with record_create_tuning_job(session) as calls, no_v2_telemetry():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tuner.fit(
                inputs, job_name=case.job_name, include_cls_metadata=case.include_cls_metadata,
                wait=False,
            )  # fmt: skip
    assert len(calls) == 1, f"SDK v2 called create_hyper_parameter_tuning_job {len(calls)} times"
    request = calls[0]
    for name in case.improvements:
        request = TUNING_IMPROVEMENTS[name][1](request)
    return request


def ours_tuning_request(case: TuningCase, tree: SourceTree) -> dict[str, Any]:
    tuner = ours_tuner(case, tree)
    inputs = _inputs(case, {}, tree)
    return tuner.create_tuning_job_request(
        inputs, job_name=case.job_name, include_cls_metadata=case.include_cls_metadata
    )


def _definitions(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    if "TrainingJobDefinition" in request:
        return [request["TrainingJobDefinition"]]
    return list(request.get("TrainingJobDefinitions") or [])


def _as_training(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a definition that the request harness normalises, as a training request."""
    out: dict[str, Any] = {"HyperParameters": definition.get("StaticHyperParameters") or {}}
    if "InputDataConfig" in definition:
        out["InputDataConfig"] = definition["InputDataConfig"]
    return out


def normalize_tuning(request: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(request))
    for definition in _definitions(out):
        normal = normalize(_as_training(definition))
        definition["StaticHyperParameters"] = normal["HyperParameters"]
        if "InputDataConfig" in normal:
            definition["InputDataConfig"] = normal["InputDataConfig"]
    warm = out.get("WarmStartConfig")
    if warm:
        warm["ParentHyperParameterTuningJobs"].sort(key=lambda p: p["HyperParameterTuningJobName"])
    return out


def assert_same_tuning_request(
    v2: Mapping[str, Any], ours: Mapping[str, Any], case: TuningCase
) -> None:
    v2_defs, our_defs = _definitions(v2), _definitions(ours)
    assert len(v2_defs) == len(our_defs), (len(v2_defs), len(our_defs))
    for v2_def, our_def in zip(v2_defs, our_defs, strict=True):
        check_code_locations(_as_training(v2_def), _as_training(our_def), case.job_name)
    diffs = differences(normalize_tuning(v2), normalize_tuning(ours))
    assert not diffs, (
        f"{case.id}: launchbay's tuning request differs from SDK v2's:\n  " + "\n  ".join(diffs)
    )
