"""Keywords SDK v2 silently drops are dropped by launchbay too, with a warning (issue 32, item 6).

SDK v2's estimators take ``**kwargs`` and drop what they do not know. For the closed
list ``launchbay.arguments.IGNORED_AS_IN_V2`` (keywords public notebooks pass this
way) launchbay's request with the keyword and without it must both equal SDK v2's
request with it, and launchbay must say, in a warning, that v2 ignores it too and
what was probably meant. Any other unknown keyword stays an error.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from launchbay import UnknownArgumentError
from launchbay.arguments import IGNORED_AS_IN_V2

from .cases import IMAGE, PT, TF_CPU
from .harness import Case, SourceTree, assert_same_request, ours_request

V2Requests = Callable[[Case], dict[str, Any]]

#: A value of the shape public notebooks pass for each keyword.
VALUES: dict[str, Any] = {
    "env": {"MY_SETTING": "1"},
    "job_name": "my-job",
    "wait": False,
    "logs": "None",
    "training_steps": 100,
    "evaluation_steps": 10,
    "model_dir": "s3://my-bucket/model",
    "region": "us-east-1",
    "num_classes": 10,
    "keep_alive_time_in_seconds": 1800,
    "transformers_version": "4.36.0",
}

#: Each estimator's arguments, and the listed keywords it declares itself (not dropped).
ESTIMATORS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "PyTorch": (PT, set()),
    "TensorFlow": (TF_CPU, {"model_dir"}),
    "Estimator": (
        {"image_uri": IMAGE, "instance_type": "ml.m5.xlarge", "instance_count": 1},
        set(),
    ),
}

#: The argument each warning must name.
MEANT = {
    "env": "environment=",
    "job_name": "fit(job_name=...)",
    "wait": "fit(wait=...)",
    "logs": "fit(logs=...)",
    "keep_alive_time_in_seconds": "keep_alive_period_in_seconds=",
    "region": "Session(region_name=...)",
    "num_classes": "hyperparameters=",
    "training_steps": "hyperparameters=",
    "evaluation_steps": "hyperparameters=",
    "model_dir": "SM_MODEL_DIR",
    "transformers_version": "HuggingFace",
}

CASES = [
    (estimator, keyword)
    for estimator, (_, declared) in ESTIMATORS.items()
    for keyword in IGNORED_AS_IN_V2
    if keyword not in declared
]


def _case(estimator: str, keyword: str | None) -> Case:
    kwargs = dict(ESTIMATORS[estimator][0])
    if keyword is not None:
        kwargs[keyword] = VALUES[keyword]
    suffix = keyword.replace("_", "-") if keyword else "none"
    return Case(f"ignored-{estimator.lower()}-{suffix}", estimator, kwargs)


def test_the_list_is_the_issues_and_each_has_a_value_and_a_hint() -> None:
    assert set(IGNORED_AS_IN_V2) == set(VALUES) == set(MEANT)


@pytest.mark.parametrize(("estimator", "keyword"), CASES, ids=[f"{e}-{k}" for e, k in CASES])
def test_request_with_the_keyword_is_v2s(
    estimator: str, keyword: str, v2_requests: V2Requests, source_tree: SourceTree
) -> None:
    given = _case(estimator, keyword)
    expected = v2_requests(given)  # SDK v2 accepts the keyword without a word

    with pytest.warns(UserWarning) as caught:
        with_keyword = ours_request(given, source_tree)
    messages = [str(w.message) for w in caught if f"ignores {keyword}=" in str(w.message)]
    assert len(messages) == 1, [str(w.message) for w in caught]
    assert "as SageMaker SDK v2 does" in messages[0]
    assert MEANT[keyword] in messages[0].split("You probably meant ", 1)[1]

    without = _case(estimator, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing to warn about without it
        plain = ours_request(Case(given.id, estimator, without.kwargs), source_tree)

    # v2's request with the keyword is launchbay's with it and without it: no trace of it
    assert_same_request(expected, with_keyword, given)
    assert_same_request(expected, plain, given)


def test_a_declared_keyword_is_not_dropped(source_tree: SourceTree, moto_endpoint: str) -> None:
    """TensorFlow takes model_dir: it is sent as the model_dir hyperparameter, no warning."""
    case = Case("ignored-tensorflow-model-dir-declared", "TensorFlow",
                {**TF_CPU, "model_dir": "s3://my-bucket/model"})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        request = ours_request(case, source_tree)
    assert request["HyperParameters"]["model_dir"] == '"s3://my-bucket/model"'


def test_any_other_unknown_keyword_is_still_an_error(source_tree: SourceTree) -> None:
    for typo, meant in (("enviroment", "environment"), ("job_nme", "base_job_name"),
                        ("keep_alive_period_in_second", "keep_alive_period_in_seconds")):  # fmt: skip
        case = Case(f"ignored-typo-{typo}", "PyTorch", {**PT, typo: 1})
        with pytest.raises(UnknownArgumentError, match=re.escape(f"Did you mean '{meant}'?")):
            ours_request(case, source_tree)
