"""launchbay's CreateHyperParameterTuningJob request equals sagemaker==2.257.7's, key for key.

``test_v2_side`` proves each case does what its id says in SDK v2 (``expect``);
``test_tuning_request_matches_sdk_v2`` is the comparison. The refusals: arguments
both SDKs refuse, and arguments SDK v2 sends but SageMaker refuses, which launchbay
refuses before anything is sent (docs/compatibility.md).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from .harness import ABSENT, SourceTree, lookup
from .tuning_cases import CASES, EPOCHS, LR, METRICS, OPTIMIZER, PT, PT_HPS, TUNER
from .tuning_harness import (
    TuningCase,
    assert_same_tuning_request,
    build_tuning,
    ours_tuner,
    ours_tuning_request,
    v2_tuner,
    v2_tuning_request,
)

IDS = [case.id for case in CASES]
_CACHE: dict[str, dict[str, Any]] = {}


@pytest.fixture
def v2_tuning(moto_endpoint: str, source_tree: SourceTree) -> Any:
    def get(case: TuningCase) -> dict[str, Any]:
        if case.id not in _CACHE:
            _CACHE[case.id] = v2_tuning_request(case, source_tree)
        return json.loads(json.dumps(_CACHE[case.id]))

    return get


def test_matrix_covers_what_issue_23_asks() -> None:
    assert len(CASES) >= 10
    assert len(set(IDS)) == len(IDS)
    strategies = {case.tuner.get("strategy", "Bayesian") for case in CASES}
    assert strategies == {"Bayesian", "Random", "Hyperband", "Grid"}
    assert any(case.multi and len(case.estimators) == 2 for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_v2_side(case: TuningCase, v2_tuning: Any) -> None:
    request = v2_tuning(case)
    assert request["HyperParameterTuningJobName"] == case.job_name
    for path, expected in case.expect.items():
        actual = lookup(request, path)
        assert actual == expected, f"{path}: expected {expected!r}, SDK v2 sent {actual!r}"
        if expected is not ABSENT:
            assert type(actual) is type(expected), path


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tuning_request_matches_sdk_v2(
    case: TuningCase, v2_tuning: Any, source_tree: SourceTree
) -> None:
    expected = v2_tuning(case)
    ours = ours_tuning_request(case, source_tree)
    json.dumps(ours)
    assert_same_tuning_request(expected, ours, case)


def test_dry_run_is_repeatable(source_tree: SourceTree) -> None:
    case = CASES[0]
    assert ours_tuning_request(case, source_tree) == ours_tuning_request(case, source_tree)


# -- refusals --------------------------------------------------------------------------------

_NO_RANGES = {**TUNER, "hyperparameter_ranges": {}}
BOTH_REFUSE = [
    ("no-ranges-without-autotune", _NO_RANGES, "hyperparameter_ranges"),
    ("keep-static-without-autotune", {**TUNER, "hyperparameters_to_keep_static": ["epochs"]},
     "hyperparameters_to_keep_static"),
    ("keep-static-duplicates", {**TUNER, "hyperparameter_ranges": None, "autotune": True,
                                "hyperparameters_to_keep_static": ["epochs", "epochs"]},
     "hyperparameters_to_keep_static"),
    ("warm-start-without-parents", {**TUNER, "warm_start_config": (
        "WarmStartConfig", {"warm_start_type": ("WarmStartTypes", "TRANSFER_LEARNING"), "parents": []})},
     "parents"),
]  # fmt: skip


@pytest.mark.parametrize(
    "tuner", [t for _, t, _ in BOTH_REFUSE], ids=[i for i, _, _ in BOTH_REFUSE]
)
def test_both_sdks_refuse(
    tuner: dict[str, Any], source_tree: SourceTree, moto_endpoint: str
) -> None:
    from launchbay.errors import ConfigurationError

    argument = next(a for i, t, a in BOTH_REFUSE if t is tuner)
    case = TuningCase(id="refused", estimators={None: ("PyTorch", PT_HPS)}, tuner=tuner)
    from .harness import v2_session

    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v2_tuner(case, source_tree, v2_session(case.region))
    with pytest.raises(ConfigurationError, match=argument) as caught:
        ours_tuner(case, source_tree)
    assert "Accepted:" in str(caught.value)


def test_both_refuse_create_with_mismatched_keys(
    source_tree: SourceTree, moto_endpoint: str
) -> None:
    from launchbay.errors import ConfigurationError

    tuner = {
        "objective_metric_name_dict": {"a": "validation:accuracy"},
        "hyperparameter_ranges_dict": {"a": {"lr": LR}, "b": {"lr": LR}},
    }
    case = TuningCase(
        id="refused", estimators={"a": ("PyTorch", PT), "b": ("PyTorch", PT)}, tuner=tuner
    )
    from .harness import v2_session

    with pytest.raises(ValueError, match="objective_metric_name_dict"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v2_tuner(case, source_tree, v2_session(case.region))
    with pytest.raises(
        ConfigurationError,
        match="objective_metric_name_dict.*Accepted: a dict with exactly the keys",
    ):
        ours_tuner(case, source_tree)


#: SDK v2 sends these; SageMaker (or botocore) refuses them. launchbay refuses them first.
SAGEMAKER_REFUSES = [
    ("grid-with-continuous-range", {**TUNER, "strategy": "Grid"}, {}, "Grid"),
    ("hyperband-with-early-stopping", {**TUNER, "strategy": "Hyperband", "early_stopping_type": "Auto"},
     {}, "early_stopping_type"),
    ("strategy-config-without-hyperband", {**TUNER, "strategy_config": (
        "StrategyConfig", {"hyperband_strategy_config": ("HyperbandStrategyConfig",
                                                         {"max_resource": 9, "min_resource": 1})})},
     {}, "strategy_config"),
    ("unknown-strategy", {**TUNER, "strategy": "bayesian"}, {}, "strategy"),
    ("unknown-objective-type", {**TUNER, "objective_type": "Max"}, {}, "objective_type"),
    ("logarithmic-from-zero", {**TUNER, "hyperparameter_ranges": {"lr": (
        "ContinuousParameter", {"min_value": 0, "max_value": 1, "scaling_type": "Logarithmic"})}},
     {}, "min_value"),
    ("tuning-job-name-too-long", TUNER, {"job_name": "a" * 33}, "job_name"),
    ("instance-groups", TUNER, {"groups": True}, "instance_groups"),
]  # fmt: skip


@pytest.mark.parametrize(
    "tuner,fit,argument", [t[1:] for t in SAGEMAKER_REFUSES], ids=[t[0] for t in SAGEMAKER_REFUSES]
)
def test_launchbay_refuses_what_sagemaker_refuses(
    tuner: dict[str, Any], fit: dict[str, Any], argument: str, source_tree: SourceTree,
    moto_endpoint: str,
) -> None:  # fmt: skip
    from launchbay.errors import ConfigurationError

    estimator: dict[str, Any] = dict(PT_HPS)
    if fit.get("groups"):
        estimator = {
            k: v for k, v in PT_HPS.items() if k not in ("instance_type", "instance_count")
        }
        estimator["instance_groups"] = [
            (
                "InstanceGroup",
                {"instance_group_name": "g", "instance_type": "ml.g5.xlarge", "instance_count": 1},
            )
        ]
    case = TuningCase(id="refused", estimators={None: ("PyTorch", estimator)}, tuner=tuner)
    with pytest.raises(ConfigurationError, match=argument) as caught:
        tuning = ours_tuner(case, source_tree)
        tuning.create_tuning_job_request(job_name=fit.get("job_name", "t-refused"))
    assert "Accepted:" in str(caught.value)


def test_ranges_in_the_request_are_v2s(moto_endpoint: str) -> None:
    """The range classes alone: the same request dicts in both SDKs."""
    import sagemaker.parameter

    from launchbay import parameter

    for neutral in (LR, EPOCHS, OPTIMIZER):
        name, kwargs = neutral
        theirs = getattr(sagemaker.parameter, name)(**kwargs)
        ours = build_tuning(neutral, {name: getattr(parameter, name)})
        assert ours.as_tuning_range("x") == theirs.as_tuning_range("x")
        if name == "CategoricalParameter":
            assert ours.as_json_range("x") == theirs.as_json_range("x")
    assert METRICS
