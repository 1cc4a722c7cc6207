"""Compare requests built under SageMaker SDK defaults files: SDK v2 and launchbay, same files.

A :class:`ConfigCase` is a training job (estimator class name and kwargs, as in
:mod:`.harness`, but with no role added: the role may come from a file) plus the
admin and user files' content. :func:`install` writes them and points
``SAGEMAKER_ADMIN_CONFIG_OVERRIDE`` / ``SAGEMAKER_USER_CONFIG_OVERRIDE`` at them
(a mapping is written as ``config.yaml``; a string is used as the location as is,
e.g. an ``s3://`` URI). Both SDKs then read the same files themselves:
:func:`v2_config_request` builds a fresh ``sagemaker.Session`` (which loads them)
and records what ``fit(wait=False)`` sends; :func:`ours_config_request` builds the
launchbay estimator with a fresh ``launchbay.Session`` and returns
``create_training_job_request``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .harness import (
    Case,
    SourceTree,
    _moto_boto_session,
    _ours_classes,
    _v2_classes,
    build,
    class_names,
    ensure_bucket,
    no_v2_telemetry,
    record_create_training_job,
)

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
CONFIG_ROLE = f"arn:aws:iam::{ACCOUNT}:role/FromConfigFile"
KMS = f"arn:aws:kms:us-west-2:{ACCOUNT}:key/"


@dataclass(frozen=True)
class ConfigCase:
    """A job and the defaults files it is built under."""

    id: str
    kwargs: Mapping[str, Any]
    admin: Mapping[str, Any] | str | None = None
    user: Mapping[str, Any] | str | None = None
    estimator: str = "PyTorch"
    region: str = "us-west-2"
    #: Dotted paths of SDK v2's request and the value it must have (the case does what it says).
    expect: Mapping[str, Any] = field(default_factory=dict)
    #: A deliberate departure from v2 (docs/compatibility.md): applied to v2's request
    #: after ``expect`` was checked on it, before the comparison.
    improvement: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def case(self) -> Case:
        """A :class:`.harness.Case` for :func:`.harness.assert_same_request` (id and job name)."""
        return Case(id=f"config-{self.id}", estimator=self.estimator, kwargs=self.kwargs)


def _location(content: Mapping[str, Any] | str | None, where: Path, empty: Path) -> str:
    import yaml

    if content is None:
        return str(empty)
    if isinstance(content, str):
        return content
    where.mkdir(parents=True, exist_ok=True)
    (where / "config.yaml").write_text(yaml.safe_dump(dict(content), sort_keys=False))
    return str(where)


def install(case: ConfigCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Write the case's files; point both SDKs' override variables at them."""
    import launchbay._sagemaker_config as config

    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    admin = _location(case.admin, tmp_path / "admin", empty)
    user = _location(case.user, tmp_path / "user", empty)
    monkeypatch.setenv("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", admin)
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", user)
    config.clear_cache()
    return admin, user


def _bucket_of(kwargs: Mapping[str, Any], case: ConfigCase) -> list[str]:
    """Buckets the job uses (they exist in the organisation's account: made on moto)."""
    out = []
    for content in (case.admin, case.user):
        if isinstance(content, Mapping):
            session = content.get("SageMaker", {}).get("PythonSDK", {}).get("Modules", {})
            bucket = session.get("Session", {}).get("DefaultS3Bucket")
            if isinstance(bucket, str):
                out.append(bucket)
    for key in ("output_path", "code_location"):
        value = kwargs.get(key)
        if isinstance(value, str) and value.startswith("s3://"):
            out.append(value[5:].split("/", 1)[0])
    return out


def v2_config_request(case: ConfigCase, tree: SourceTree) -> dict[str, Any]:
    """What SDK v2 sends for the case, having read the defaults files itself."""
    import sagemaker

    classes = _v2_classes()
    kwargs = build(dict(case.kwargs), classes, tree)
    for bucket in _bucket_of(kwargs, case):
        ensure_bucket(bucket, case.region)
    session = sagemaker.Session(boto_session=_moto_boto_session(case.region))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        estimator = classes[case.estimator](sagemaker_session=session, **kwargs)
    with record_create_training_job(session) as calls, no_v2_telemetry():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            estimator.fit(None, wait=False, job_name=case.case.job_name)
    assert len(calls) == 1, f"SDK v2 called create_training_job {len(calls)} times"
    return calls[0]


def ours_config_estimator(case: ConfigCase, tree: SourceTree) -> Any:
    import launchbay

    classes = _ours_classes({case.estimator} | class_names(case.kwargs))
    kwargs = build(dict(case.kwargs), classes, tree)
    session = launchbay.Session(region_name=case.region)
    return classes[case.estimator](sagemaker_session=session, **kwargs)


def ours_config_request(case: ConfigCase, tree: SourceTree) -> dict[str, Any]:
    """What launchbay sends for the case, having read the same files."""
    estimator = ours_config_estimator(case, tree)
    return estimator.create_training_job_request(job_name=case.case.job_name)
