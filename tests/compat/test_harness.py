"""The comparison harness itself: normalisation, code-location checks, case building."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from .cases import CASES
from .harness import (
    IMPROVEMENTS,
    LEGACY_NAMES,
    SOURCE_PLACEHOLDER,
    Case,
    SourceTree,
    assert_same_request,
    build,
    check_code_locations,
    class_names,
    code_uris,
    content_addressed,
    differences,
    normalize,
)

JOB = "compat-job"
SHA = "ab" * 32
V2_CODE = f"s3://code-bucket/code/prefix/{JOB}/source/sourcedir.tar.gz"
OUR_CODE = f"s3://code-bucket/code/prefix/source/{SHA}/sourcedir.tar.gz"


def _request(code: str | None, *, channel: bool = False) -> dict[str, Any]:
    request: dict[str, Any] = {
        "TrainingJobName": JOB,
        "HyperParameters": {"epochs": "3", "sagemaker_program": '"train.py"'},
        "ResourceConfig": {"InstanceCount": 1, "InstanceType": "ml.g5.xlarge"},
        "InputDataConfig": [
            {
                "ChannelName": "training",
                "DataSource": {"S3DataSource": {"S3Uri": "s3://data/train"}},
            }
        ],
        "DebugHookConfig": {
            "S3OutputPath": "s3://out/",
            "CollectionConfigurations": [
                {"CollectionName": "weights"},
                {"CollectionName": "losses", "CollectionParameters": {"save_interval": "10"}},
            ],
        },
    }
    if code and channel:
        request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(
            "/opt/ml/input/data/code/sourcedir.tar.gz"
        )
        request["InputDataConfig"].append(
            {"ChannelName": "code", "DataSource": {"S3DataSource": {"S3Uri": code}}}
        )
    elif code:
        request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(code)
    return request


def test_identical_requests_pass() -> None:
    assert_same_request(_request(V2_CODE), _request(OUR_CODE), Case("job", "PyTorch", {}))


def test_code_key_is_the_only_tolerated_difference() -> None:
    case = Case("job", "PyTorch", {})
    assert case.job_name == JOB
    assert_same_request(_request(V2_CODE), _request(OUR_CODE), case)
    assert_same_request(_request(V2_CODE, channel=True), _request(OUR_CODE, channel=True), case)


@pytest.mark.parametrize(
    ("ours", "message"),
    [
        (f"s3://other-bucket/code/prefix/source/{SHA}/sourcedir.tar.gz", "different buckets"),
        (f"s3://code-bucket/code/prefix/{JOB}/source/sourcedir.tar.gz", "not 'code/prefix/"),
        (f"s3://code-bucket/source/{SHA}/sourcedir.tar.gz", "not 'code/prefix/"),
        (f"s3://code-bucket/code/prefix/source/{SHA}/code.tar.gz", "not 'code/prefix/"),
        ("/opt/ml/code", "referenced from"),
    ],
)
def test_code_location_mismatches_are_reported(ours: str, message: str) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_code_locations(_request(V2_CODE), _request(ours), JOB)


def test_code_channel_must_match_too() -> None:
    with pytest.raises(AssertionError, match="referenced from"):
        check_code_locations(_request(V2_CODE, channel=True), _request(OUR_CODE), JOB)


def test_normalize_replaces_code_locations_only() -> None:
    normal = normalize(_request(V2_CODE, channel=True))
    assert normal["InputDataConfig"][1]["DataSource"]["S3DataSource"]["S3Uri"] == (
        SOURCE_PLACEHOLDER
    )
    assert normal["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == (
        "s3://data/train"
    )
    # the in-container path of the code channel is not an S3 key: kept as is
    assert json.loads(normal["HyperParameters"]["sagemaker_submit_directory"]) == (
        "/opt/ml/input/data/code/sourcedir.tar.gz"
    )
    encoded = normalize(_request(V2_CODE))["HyperParameters"]["sagemaker_submit_directory"]
    assert encoded == json.dumps(SOURCE_PLACEHOLDER)
    raw = _request(None)
    raw["HyperParameters"]["sagemaker_submit_directory"] = V2_CODE  # not JSON-encoded
    assert normalize(raw)["HyperParameters"]["sagemaker_submit_directory"] == SOURCE_PLACEHOLDER


def test_normalize_does_not_touch_its_input() -> None:
    request = _request(V2_CODE, channel=True)
    before = copy.deepcopy(request)
    normalize(request)
    assert request == before


def test_collection_order_is_ignored_but_content_is_not() -> None:
    v2 = _request(V2_CODE)
    reordered = _request(OUR_CODE)
    reordered["DebugHookConfig"]["CollectionConfigurations"].reverse()
    assert_same_request(v2, reordered, Case("job", "PyTorch", {}))
    duplicated = _request(OUR_CODE)
    duplicated["DebugHookConfig"]["CollectionConfigurations"].append({"CollectionName": "weights"})
    with pytest.raises(AssertionError, match="CollectionConfigurations"):
        assert_same_request(v2, duplicated, Case("job", "PyTorch", {}))


@pytest.mark.parametrize(
    ("expected", "actual", "fragment"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, "b: only in launchbay"),
        ({"a": 1, "b": 2}, {"a": 1}, "b: missing in launchbay"),
        ({"a": {"b": "1"}}, {"a": {"b": 1}}, "a.b: SDK v2 '1' != launchbay 1"),
        ({"a": True}, {"a": 1}, "a: SDK v2 True != launchbay 1"),
        ({"a": [1, 2]}, {"a": [2, 1]}, "a.0: SDK v2 1 != launchbay 2"),
        ({"a": [1]}, {"a": [1, 1]}, "a: SDK v2 [1] != launchbay [1, 1]"),
    ],
)
def test_differences_are_precise(expected: Any, actual: Any, fragment: str) -> None:
    assert fragment in "\n".join(differences(expected, actual))
    assert differences(expected, copy.deepcopy(expected)) == []


def test_build_substitutes_placeholders_and_shares_repeated_objects(tmp_path: Path) -> None:
    tree = SourceTree(src=tmp_path / "src", lib=tmp_path / "lib")

    class Thing:
        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

    group = ("InstanceGroup", {"instance_group_name": "gpu"})
    neutral = {
        "source_dir": "<src>",
        "dependencies": ["<lib>/mylib"],
        "instance_groups": [group],
        "distribution": {"instance_groups": [group]},
        "hyperparameters": {"layers": [1, 2]},
    }
    built = build(neutral, {"InstanceGroup": Thing}, tree)
    assert built["source_dir"] == str(tree.src)
    assert built["dependencies"] == [f"{tree.lib}/mylib"]
    assert built["instance_groups"][0] is built["distribution"]["instance_groups"][0]
    assert built["instance_groups"][0].kwargs == {"instance_group_name": "gpu"}
    built["hyperparameters"]["layers"].append(3)  # fresh containers: the case is unchanged
    assert neutral["hyperparameters"]["layers"] == [1, 2]
    assert class_names(neutral) == {"InstanceGroup"}


def test_cases_are_well_formed() -> None:
    pattern = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # SageMaker's job name rule
    for case in CASES:
        assert pattern.match(case.job_name), case.job_name
        for name in case.improvements:
            assert IMPROVEMENTS[name].v2_kwargs or IMPROVEMENTS[name].v2_request
    used = {name for case in CASES for name in case.improvements}
    # every improvement is exercised by a case, or (not visible in requests) by its own test
    for name, improvement in IMPROVEMENTS.items():
        assert improvement.reason
        assert name in used or not (improvement.v2_kwargs or improvement.v2_request), name
    legacy = {name for case in CASES for name in case.legacy_names}
    assert legacy == set(LEGACY_NAMES), set(LEGACY_NAMES) - legacy


def test_code_uris_finds_both_forms() -> None:
    assert code_uris(_request(V2_CODE)) == {"hyperparameter": V2_CODE}
    assert code_uris(_request(V2_CODE, channel=True)) == {"channel": V2_CODE}
    assert code_uris(_request(None)) == {}


def test_content_addressed_rewrites_the_key() -> None:
    rewritten = content_addressed(_request(V2_CODE, channel=True), JOB, SHA)
    assert code_uris(rewritten) == {"channel": OUR_CODE}
