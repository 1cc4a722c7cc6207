"""launchbay builds the same CreateTrainingJob request as sagemaker==2.257.7, key for key.

``test_v2_side`` runs every case through SDK v2 alone and checks the harness on
it, so the matrix and the comparison logic are proven even where launchbay's
estimator is missing. ``test_request_matches_sdk_v2`` is the comparison itself.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from .cases import CASES
from .harness import (
    ABSENT,
    IMPROVEMENTS,
    ROLE,
    Case,
    SourceTree,
    assert_same_request,
    code_uris,
    content_addressed,
    lookup,
    no_v2_telemetry,
    ours_request,
    ours_session,
    record_create_training_job,
    v2_session,
)

IDS = [case.id for case in CASES]
V2Requests = Callable[[Case], dict[str, Any]]


def test_matrix_is_large_and_unambiguous() -> None:
    assert len(CASES) >= 40
    assert len(set(IDS)) == len(IDS), "duplicate case ids"
    names = [case.job_name for case in CASES]
    assert len(set(names)) == len(names), "two cases share a job name"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_v2_side(case: Case, v2_requests: V2Requests) -> None:
    """SDK v2 accepts the case, does what the case is about, and the harness handles it."""
    request = v2_requests(case)

    json.dumps(request)  # a plain, JSON-serialisable dict
    assert request["TrainingJobName"] == case.job_name
    assert request["RoleArn"] == ROLE
    for path, expected in case.expect.items():
        actual = lookup(request, path)
        assert actual == expected, f"{path}: expected {expected!r}, SDK v2 sent {actual!r}"
        if expected is not ABSENT:
            assert type(actual) is type(expected), path

    # Every case with code stages it in S3 under v2's job-name key ...
    has_code = "entry_point" in case.kwargs
    assert bool(code_uris(request)) == has_code, code_uris(request)
    # ... and the comparison accepts the content-addressed key launchbay uses for it,
    digest = hashlib.sha256(case.id.encode()).hexdigest()
    assert_same_request(request, content_addressed(request, case.job_name, digest), case)
    # but nothing else: any other change to the request is reported.
    tampered = copy.deepcopy(request)
    tampered["ResourceConfig"]["VolumeSizeInGB"] += 1
    with pytest.raises(AssertionError, match="ResourceConfig.VolumeSizeInGB"):
        assert_same_request(request, content_addressed(tampered, case.job_name, digest), case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_request_matches_sdk_v2(
    case: Case, v2_requests: V2Requests, source_tree: SourceTree
) -> None:
    expected = v2_requests(case)
    ours = ours_request(case, source_tree)
    assert isinstance(ours, dict)
    json.dumps(ours)
    assert_same_request(expected, ours, case)


def _all_s3_objects() -> dict[str, list[str]]:
    import boto3

    s3 = boto3.client("s3", region_name="us-west-2")
    listing: dict[str, list[str]] = {}
    for bucket in s3.list_buckets()["Buckets"]:
        keys: list[str] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        listing[bucket["Name"]] = sorted(keys)
    return listing


def test_request_uploads_nothing(v2_requests: V2Requests, source_tree: SourceTree) -> None:
    """``create_training_job_request`` is a dry run: no object appears in S3."""
    case = next(c for c in CASES if c.id == "output-path-code-location-kms-log-level")
    v2_requests(case)  # creates the buckets SDK v2 writes to
    before = _all_s3_objects()
    ours_request(case, source_tree)
    assert _all_s3_objects() == before


# The one improvement that is not visible in the request: the caller's hyperparameters.


def _estimator_kwargs(tree: SourceTree) -> dict[str, Any]:
    return {
        "entry_point": "train.py",
        "source_dir": str(tree.src),
        "role": ROLE,
        "framework_version": "2.3.0",
        "py_version": "py311",
        "instance_type": "ml.g5.xlarge",
        "instance_count": 1,
    }


def test_v2_mutates_callers_hyperparameters(moto_endpoint: str, source_tree: SourceTree) -> None:
    """Why IMPROVEMENTS lists "hyperparameters-not-mutated": SDK v2 writes into the dict."""
    import sagemaker.pytorch

    assert "hyperparameters-not-mutated" in IMPROVEMENTS
    hyperparameters = {"epochs": 2, "lr": 0.1}
    session = v2_session("us-west-2")
    estimator = sagemaker.pytorch.PyTorch(
        sagemaker_session=session,
        hyperparameters=hyperparameters,
        **_estimator_kwargs(source_tree),
    )
    with record_create_training_job(session) as calls, no_v2_telemetry():
        estimator.fit(wait=False, job_name="compat-v2-mutates-hyperparameters")
    assert len(calls) == 1
    assert hyperparameters["sagemaker_program"] == "train.py"
    assert hyperparameters["sagemaker_job_name"] == "compat-v2-mutates-hyperparameters"
    assert set(hyperparameters) > {"epochs", "lr", "sagemaker_submit_directory"}


def test_hyperparameters_dict_is_not_mutated(moto_endpoint: str, source_tree: SourceTree) -> None:
    """launchbay never writes to the caller's hyperparameters dict (nor to values in it)."""
    from launchbay.pytorch import PyTorch

    hyperparameters: dict[str, Any] = {"epochs": 2, "lr": 0.1, "layers": [1, 2], "opt": {"a": 1}}
    snapshot = copy.deepcopy(hyperparameters)
    estimator = PyTorch(
        sagemaker_session=ours_session("us-west-2"),
        hyperparameters=hyperparameters,
        **_estimator_kwargs(source_tree),
    )
    first = estimator.create_training_job_request(job_name="compat-untouched-1")
    assert hyperparameters == snapshot
    estimator.fit(wait=False, job_name="compat-untouched-2")
    assert hyperparameters == snapshot
    second = estimator.create_training_job_request(job_name="compat-untouched-3")
    assert hyperparameters == snapshot
    # each request carries its own job's values; nothing leaks from an earlier one
    assert json.loads(first["HyperParameters"]["sagemaker_job_name"]) == "compat-untouched-1"
    assert json.loads(second["HyperParameters"]["sagemaker_job_name"]) == "compat-untouched-3"
    assert json.loads(second["HyperParameters"]["epochs"]) == 2


def test_v2_ignores_distributions_on_pytorch(source_tree: SourceTree, moto_endpoint: str) -> None:
    """Why IMPROVEMENTS lists "distributions-honoured-on-pytorch": v2 drops it silently."""
    from .harness import v2_request

    case = next(c for c in CASES if c.id == "legacy-pytorch-distributions")
    as_given = Case(case.id + "-as-given", case.estimator, case.kwargs)  # no improvement applied
    hyperparameters = v2_request(as_given, source_tree)["HyperParameters"]
    assert not [key for key in hyperparameters if key.startswith("sagemaker_mpi")]
