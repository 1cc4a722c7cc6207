"""Build the same training job with sagemaker==2.257.7 and with launchbay; compare the requests.

A :class:`Case` is neutral data: the estimator class *name*, constructor
kwargs, the ``fit`` inputs and the region. Objects that each SDK has its own
class for are written as ``(class_name, kwargs)`` tuples and built with that
SDK's classes (see :data:`NEUTRAL_CLASSES`); strings may hold the placeholders
``<src>`` and ``<lib>`` for the test's source dir and dependency dir.

* :func:`v2_request` builds the SDK v2 estimator on a ``sagemaker.Session``
  whose boto session points at the moto server, swaps the SageMaker client's
  ``create_training_job`` for a recorder, calls ``fit(wait=False)`` and returns
  the recorded kwargs.
* :func:`ours_request` builds the launchbay estimator with the same kwargs and
  returns ``create_training_job_request(inputs, job_name=...)``.
* :func:`assert_same_request` checks the code-tarball locations, normalises
  both requests (:func:`normalize`) and compares them key for key.
* A case may name entries of :data:`IMPROVEMENTS` (deliberate departures from
  v2, documented in docs/compatibility.md); :func:`v2_request` applies them to
  v2's side, so the expectation stays "what v2 sends" plus the listed fix.

Normalisation rules (the only differences allowed without an IMPROVEMENTS entry):

1. ``HyperParameters["sagemaker_submit_directory"]`` when it is an S3 URI, and
2. the ``S3Uri`` of the ``code`` channel (network isolation),

are replaced by :data:`SOURCE_PLACEHOLDER` (JSON-encoded where the value was),
after :func:`check_code_locations` asserted that both requests carry the same
set of these, in the same bucket, that SDK v2's key is
``{prefix}{job_name}/source/sourcedir.tar.gz`` and launchbay's is the
content-addressed ``{prefix}source/{sha256}/sourcedir.tar.gz`` with the same
``{prefix}`` (empty, or the ``code_location`` key prefix followed by ``/``).

3. ``DebugHookConfig.CollectionConfigurations`` is sorted (by its JSON text) in
   both requests: SDK v2 collects them in a ``set`` of objects hashed by name, so
   its order changes with ``PYTHONHASHSEED`` from one interpreter to the next; the
   service treats the list as a set. Content (including v2's de-duplication of
   identical configs) must still match.
4. The name of SageMaker Profiler's processing rule in ``ProfilerRuleConfigurations``
   (``DetailedProfilerProcessingJobConfig-<timestamp>``, the clock's time when each SDK
   built the request) becomes ``DetailedProfilerProcessingJobConfig-<timestamp>``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"  # moto's default account id
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
SOURCE_PLACEHOLDER = "<sourcedir.tar.gz>"
ESTIMATORS = ("PyTorch", "TensorFlow", "Estimator", "HuggingFace", "SKLearn", "XGBoost", "MXNet")
# Debugger rules and profiler: classes, and factories named "Class.method" or
# "rule_configs.<name>" (a kwarg "*" holds positional arguments, as ActionList takes).
_DEBUGGER_NAMES = (
    "Rule",
    "ProfilerRule",
    "rule_configs",
    "ProfilerConfig",
    "FrameworkProfile",
    "Profiler",
    "DetailedProfilingConfig",
    "DataloaderProfilingConfig",
    "PythonProfilingConfig",
)
NEUTRAL_CLASSES = (
    "TrainingInput",
    "FileSystemInput",
    "DebuggerHookConfig",
    "CollectionConfig",
    "TensorBoardOutputConfig",
    "InstanceGroup",
    *_DEBUGGER_NAMES,
)

# v1 argument name -> v2 name; launchbay must warn (a DeprecationWarning naming both).
# ``script_mode`` has no successor: accepted, ignored and warned about.
LEGACY_NAMES: dict[str, str | None] = {
    "train_instance_count": "instance_count",
    "train_instance_type": "instance_type",
    "train_max_run": "max_run",
    "train_volume_size": "volume_size",
    "train_volume_kms_key": "volume_kms_key",
    "train_use_spot_instances": "use_spot_instances",
    "train_max_wait": "max_wait",
    "image_name": "image_uri",
    "distributions": "distribution",
    "script_mode": None,
}


@dataclass(frozen=True)
class SourceTree:
    """Paths substituted for the ``<src>`` and ``<lib>`` placeholders."""

    src: Path
    lib: Path


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()
"""Value for :attr:`Case.expect`: the key must not be in the request."""


@dataclass(frozen=True)
class Case:
    """One training job described without reference to either SDK.

    ``expect`` maps dotted paths in the SDK v2 request (list items by index, e.g.
    ``"InputDataConfig.0.ChannelName"``) to the value v2 must produce; it proves that
    the case exercises what its id says (v2 did not silently drop the argument).
    """

    id: str
    estimator: str
    kwargs: Mapping[str, Any]
    inputs: Any = None
    region: str = "us-west-2"
    expect: Mapping[str, Any] = field(default_factory=dict)
    improvements: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"{self.id}: estimator must be one of {ESTIMATORS}")
        unknown = [name for name in self.improvements if name not in IMPROVEMENTS]
        if unknown:
            raise ValueError(f"{self.id}: improvements {unknown} are not in IMPROVEMENTS")

    @property
    def job_name(self) -> str:
        """A valid, unique SageMaker job name derived from the id."""
        name = re.sub(r"[^a-zA-Z0-9-]+", "-", f"compat-{self.id}").strip("-")
        return re.sub(r"-{2,}", "-", name)[:63].rstrip("-")

    @property
    def legacy_names(self) -> list[str]:
        return [name for name in self.kwargs if name in LEGACY_NAMES]


# --------------------------------------------------------------------------------------------
# Improvements: deliberate differences from SDK v2 (documented in docs/compatibility.md)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Improvement:
    """A v2 behaviour launchbay deliberately does not reproduce.

    ``v2_kwargs`` rewrites the case's kwargs before SDK v2 sees them, so that v2
    builds the request launchbay is expected to build; ``v2_request`` patches v2's
    recorded request instead. Both ``None``: the difference is not visible in the
    request and has its own test.
    """

    reason: str
    v2_kwargs: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    v2_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None


def _rename_distributions(kwargs: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(kwargs)
    kwargs["distribution"] = kwargs.pop("distributions")
    return kwargs


IMPROVEMENTS: dict[str, Improvement] = {
    "hyperparameters-not-mutated": Improvement(
        reason=(
            "SDK v2 framework estimators keep a reference to the caller's hyperparameters "
            "dict and write sagemaker_program, sagemaker_submit_directory, "
            "sagemaker_container_log_level, sagemaker_job_name and sagemaker_region into it "
            "during fit(); reusing that dict for a second estimator leaks the first job's "
            "settings. launchbay copies it and never writes to the caller's dict. "
            "Not visible in the request: see test_hyperparameters_dict_is_not_mutated."
        ),
    ),
    "distributions-honoured-on-pytorch": Improvement(
        reason=(
            "SDK v2's PyTorch estimator silently ignores the v1 name `distributions` and "
            "launches a non-distributed job. launchbay treats it as `distribution` (with a "
            "DeprecationWarning), so the request equals v2's request for `distribution=`."
        ),
        v2_kwargs=_rename_distributions,
    ),
}


# --------------------------------------------------------------------------------------------
# Building each SDK's objects from the neutral description
# --------------------------------------------------------------------------------------------


def _v2_classes() -> dict[str, Any]:
    import sagemaker.debugger
    import sagemaker.estimator
    import sagemaker.huggingface
    import sagemaker.inputs
    import sagemaker.instance_group
    import sagemaker.mxnet
    import sagemaker.pytorch
    import sagemaker.sklearn
    import sagemaker.tensorflow
    import sagemaker.xgboost

    return {
        "PyTorch": sagemaker.pytorch.PyTorch,
        "TensorFlow": sagemaker.tensorflow.TensorFlow,
        "Estimator": sagemaker.estimator.Estimator,
        "HuggingFace": sagemaker.huggingface.HuggingFace,
        "SKLearn": sagemaker.sklearn.SKLearn,
        "XGBoost": sagemaker.xgboost.XGBoost,
        "MXNet": sagemaker.mxnet.MXNet,
        "TrainingInput": sagemaker.inputs.TrainingInput,
        "FileSystemInput": sagemaker.inputs.FileSystemInput,
        "DebuggerHookConfig": sagemaker.debugger.DebuggerHookConfig,
        "CollectionConfig": sagemaker.debugger.CollectionConfig,
        "TensorBoardOutputConfig": sagemaker.debugger.TensorBoardOutputConfig,
        "InstanceGroup": sagemaker.instance_group.InstanceGroup,
        **{name: getattr(sagemaker.debugger, name) for name in _DEBUGGER_NAMES},
    }


def _ours_classes(names: set[str]) -> dict[str, Any]:
    """launchbay's classes; only the ones a case uses are imported."""
    import importlib

    where = {
        "PyTorch": "launchbay.pytorch",
        "TensorFlow": "launchbay.tensorflow",
        "Estimator": "launchbay",
        "HuggingFace": "launchbay.huggingface",
        "SKLearn": "launchbay.sklearn",
        "XGBoost": "launchbay.xgboost",
        "MXNet": "launchbay.mxnet",
        "TrainingInput": "launchbay.inputs",
        "FileSystemInput": "launchbay.inputs",
        "DebuggerHookConfig": "launchbay.debugger",
        "CollectionConfig": "launchbay.debugger",
        "TensorBoardOutputConfig": "launchbay.debugger",
        # SDK v2 has it in sagemaker.instance_group; launchbay keeps it with the inputs.
        "InstanceGroup": "launchbay.inputs",
        **dict.fromkeys(_DEBUGGER_NAMES, "launchbay.debugger"),
    }
    return {name: getattr(importlib.import_module(where[name]), name) for name in names}


def _base_name(name: str) -> str:
    """``Rule`` for ``Rule.sagemaker``, ``rule_configs`` for ``rule_configs.overfit``."""
    return name.split(".", 1)[0]


def _factory(classes: Mapping[str, Any], name: str) -> Any:
    """The class, or the factory a dotted name reaches from one (``Rule.sagemaker``)."""
    head, *rest = name.split(".")
    found = classes[head]
    for part in rest:
        found = getattr(found, part)
    return found


def _is_neutral_object(value: Any) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and _base_name(value[0]) in NEUTRAL_CLASSES
        and isinstance(value[1], Mapping)
    )


def class_names(value: Any) -> set[str]:
    """Every neutral class name used inside ``value``."""
    if _is_neutral_object(value):
        return {_base_name(value[0])} | class_names(dict(value[1]))
    if isinstance(value, Mapping):
        return set().union(*(class_names(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple):
        return set().union(*(class_names(v) for v in value)) if value else set()
    return set()


def build(
    value: Any, classes: Mapping[str, Any], tree: SourceTree, memo: dict[int, Any] | None = None
) -> Any:
    """Turn a neutral description into real objects; always returns fresh containers.

    The same neutral tuple (by identity) used twice becomes the same object, as SDK v2
    needs for ``instance_groups`` listed both on the estimator and in ``distribution``.
    """
    memo = {} if memo is None else memo
    if _is_neutral_object(value):
        if id(value) not in memo:
            name, kwargs = value
            args = [build(v, classes, tree, memo) for v in kwargs.get("*", [])]
            memo[id(value)] = _factory(classes, name)(
                *args,
                **{k: build(v, classes, tree, memo) for k, v in kwargs.items() if k != "*"},
            )
        return memo[id(value)]
    if isinstance(value, Mapping):
        return {k: build(v, classes, tree, memo) for k, v in value.items()}
    if isinstance(value, list):
        return [build(v, classes, tree, memo) for v in value]
    if isinstance(value, str):
        return value.replace("<src>", str(tree.src)).replace("<lib>", str(tree.lib))
    return copy.deepcopy(value)


def _with_role(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": ROLE, **kwargs}


# --------------------------------------------------------------------------------------------
# SDK v2 side
# --------------------------------------------------------------------------------------------


_BOTO_SESSIONS: dict[str, Any] = {}


def _moto_boto_session(region: str) -> Any:
    """A boto3 session whose every client reaches the moto server (one per region).

    botocore routes clients through ``AWS_ENDPOINT_URL`` unless a caller passes an
    explicit ``endpoint_url``; SDK v2 does that for STS (the regional
    ``https://sts.{region}.amazonaws.com``), so such real-AWS endpoints are dropped here.
    Sessions are reused because each fresh one re-parses botocore's service models.
    """
    if region in _BOTO_SESSIONS:
        return _BOTO_SESSIONS[region]
    import boto3

    class MotoBotoSession(boto3.Session):
        def client(self, *args: Any, **kwargs: Any) -> Any:
            endpoint = kwargs.get("endpoint_url")
            if isinstance(endpoint, str) and ".amazonaws.com" in endpoint:
                kwargs.pop("endpoint_url")
            return super().client(*args, **kwargs)

    _BOTO_SESSIONS[region] = MotoBotoSession(region_name=region)
    return _BOTO_SESSIONS[region]


def v2_session(region: str) -> Any:
    """A ``sagemaker.Session`` on a boto3 session that reaches moto (AWS_ENDPOINT_URL).

    SDK v2 merges defaults from /etc/xdg/sagemaker/config.yaml and
    ~/.config/sagemaker/config.yaml (or SAGEMAKER_ADMIN_CONFIG_OVERRIDE /
    SAGEMAKER_USER_CONFIG_OVERRIDE) into every request; the compat fixtures point both
    variables at an empty file, and the session must have loaded nothing. (Passing a
    config instead would make v2 re-validate it against its JSON schema on every lookup,
    about 0.15 s each, twenty-odd per job.)
    """
    import sagemaker

    session = sagemaker.Session(boto_session=_moto_boto_session(region))
    assert not session.sagemaker_config, (
        f"SDK v2 loaded defaults from a config file: {session.sagemaker_config}"
    )
    return session


@contextlib.contextmanager
def no_v2_telemetry() -> Iterator[None]:
    """Keep SDK v2's ``fit`` from sending its telemetry GET to a real S3 endpoint."""
    from sagemaker.telemetry import telemetry_logging

    original = telemetry_logging._send_telemetry_request
    telemetry_logging._send_telemetry_request = lambda *args, **kwargs: None
    try:
        yield
    finally:
        telemetry_logging._send_telemetry_request = original


def ensure_bucket(name: str, region: str) -> None:
    """Create ``name`` on the moto server unless it exists (SDK v2 uploads code there)."""
    import boto3

    s3 = boto3.client("s3", region_name=region)
    try:
        if region == "us-east-1":
            s3.create_bucket(Bucket=name)
        else:
            s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass


def _bucket_of(uri: Any) -> str | None:
    if isinstance(uri, str) and uri.startswith("s3://"):
        return uri[len("s3://") :].split("/", 1)[0]
    return None


@contextlib.contextmanager
def record_create_training_job(session: Any) -> Iterator[list[dict[str, Any]]]:
    """Replace the session's ``sagemaker_client.create_training_job`` with a recorder."""
    client = session.sagemaker_client
    calls: list[dict[str, Any]] = []

    def recorder(**request: Any) -> dict[str, Any]:
        calls.append(copy.deepcopy(request))
        name = request.get("TrainingJobName", "job")
        region = session.boto_region_name
        return {"TrainingJobArn": f"arn:aws:sagemaker:{region}:{ACCOUNT}:training-job/{name}"}

    client.create_training_job = recorder
    try:
        yield calls
    finally:
        del client.create_training_job


def v2_estimator(case: Case, tree: SourceTree, session: Any | None = None) -> Any:
    """The SDK v2 estimator for ``case`` (improvements' kwargs rewrites applied)."""
    classes = _v2_classes()
    kwargs = dict(case.kwargs)
    for name in case.improvements:
        rewrite = IMPROVEMENTS[name].v2_kwargs
        if rewrite is not None:
            kwargs = rewrite(kwargs)
    kwargs = build(_with_role(kwargs), classes, tree)
    for key in ("output_path", "code_location"):
        bucket = _bucket_of(kwargs.get(key))
        if bucket:
            ensure_bucket(bucket, case.region)
    session = session if session is not None else v2_session(case.region)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return classes[case.estimator](sagemaker_session=session, **kwargs)


def v2_request(case: Case, tree: SourceTree) -> dict[str, Any]:
    """The CreateTrainingJob kwargs SDK v2's ``fit(inputs, wait=False)`` sends for ``case``."""
    session = v2_session(case.region)
    estimator = v2_estimator(case, tree, session)
    inputs = build(case.inputs, _v2_classes(), tree)
    with record_create_training_job(session) as calls, no_v2_telemetry():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            estimator.fit(inputs, wait=False, job_name=case.job_name)
    assert len(calls) == 1, f"SDK v2 called create_training_job {len(calls)} times"
    request = calls[0]
    for name in case.improvements:
        patch = IMPROVEMENTS[name].v2_request
        if patch is not None:
            request = patch(request)
    return request


# --------------------------------------------------------------------------------------------
# launchbay side
# --------------------------------------------------------------------------------------------


def ours_session(region: str) -> Any:
    import launchbay

    return launchbay.Session(region_name=region)


def ours_estimator(case: Case, tree: SourceTree, session: Any | None = None) -> Any:
    """The launchbay estimator for ``case``; legacy names must raise a DeprecationWarning
    that names the new argument."""
    import pytest

    classes = _ours_classes({case.estimator} | class_names(case.kwargs))
    kwargs = build(_with_role(case.kwargs), classes, tree)
    session = session if session is not None else ours_session(case.region)
    legacy = case.legacy_names
    if not legacy:
        return classes[case.estimator](sagemaker_session=session, **kwargs)
    with pytest.warns(DeprecationWarning) as caught:
        estimator = classes[case.estimator](sagemaker_session=session, **kwargs)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    for old in legacy:
        new = LEGACY_NAMES[old]
        assert any(old in m and (new is None or new in m) for m in messages), (
            f"no DeprecationWarning naming {old!r}"
            + (f" and {new!r}" if new else "")
            + f"; got {messages}"
        )
    return estimator


def ours_request(case: Case, tree: SourceTree) -> dict[str, Any]:
    """The request launchbay's ``fit(inputs)`` would send for ``case`` (nothing uploaded)."""
    estimator = ours_estimator(case, tree)
    inputs = build(case.inputs, _ours_classes(class_names(case.inputs)), tree)
    return estimator.create_training_job_request(inputs=inputs, job_name=case.job_name)


# --------------------------------------------------------------------------------------------
# Normalisation and comparison
# --------------------------------------------------------------------------------------------


def _decode(value: Any) -> tuple[Any, bool]:
    """(decoded value, whether it was JSON-encoded)."""
    if isinstance(value, str):
        try:
            return json.loads(value), True
        except ValueError:
            return value, False
    return value, False


def code_uris(request: Mapping[str, Any]) -> dict[str, str]:
    """Where the request points at the code tarball: ``{"hyperparameter"|"channel": uri}``."""
    found: dict[str, str] = {}
    value, _ = _decode(request.get("HyperParameters", {}).get("sagemaker_submit_directory"))
    if isinstance(value, str) and value.startswith("s3://"):
        found["hyperparameter"] = value
    for channel in request.get("InputDataConfig", []):
        if channel.get("ChannelName") == "code":
            uri = channel.get("DataSource", {}).get("S3DataSource", {}).get("S3Uri")
            if isinstance(uri, str):
                found["channel"] = uri
    return found


_DETAILED_PROFILER = re.compile(
    r"^DetailedProfilerProcessingJobConfig-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}$"
)


def normalize(request: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``request`` with the code tarball's S3 location replaced by a placeholder."""
    out = copy.deepcopy(dict(request))
    hyper = out.get("HyperParameters", {})
    value, encoded = _decode(hyper.get("sagemaker_submit_directory"))
    if isinstance(value, str) and value.startswith("s3://"):
        hyper["sagemaker_submit_directory"] = (
            json.dumps(SOURCE_PLACEHOLDER) if encoded else SOURCE_PLACEHOLDER
        )
    for channel in out.get("InputDataConfig", []):
        if channel.get("ChannelName") == "code":
            source = channel.get("DataSource", {}).get("S3DataSource", {})
            if "S3Uri" in source:
                source["S3Uri"] = SOURCE_PLACEHOLDER
    for rule in out.get("ProfilerRuleConfigurations") or []:
        if _DETAILED_PROFILER.match(rule.get("RuleConfigurationName", "")):
            rule["RuleConfigurationName"] = "DetailedProfilerProcessingJobConfig-<timestamp>"
    collections = out.get("DebugHookConfig", {}).get("CollectionConfigurations")
    if isinstance(collections, list):
        collections.sort(key=lambda item: json.dumps(item, sort_keys=True))
    return out


def content_addressed(request: Mapping[str, Any], job_name: str, digest: str) -> dict[str, Any]:
    """SDK v2's ``request`` with its code keys rewritten the way launchbay stages code.

    ``{prefix}{job_name}/source/sourcedir.tar.gz`` becomes
    ``{prefix}source/{digest}/sourcedir.tar.gz``: what launchbay is expected to send
    for the same job. Used to test the harness without launchbay.
    """
    old_tail = f"{job_name}/source/sourcedir.tar.gz"
    new_tail = f"source/{digest}/sourcedir.tar.gz"

    def rewrite(uri: str) -> str:
        assert uri.endswith("/" + old_tail), uri
        return uri[: -len(old_tail)] + new_tail

    out = copy.deepcopy(dict(request))
    hyper = out.get("HyperParameters", {})
    value, encoded = _decode(hyper.get("sagemaker_submit_directory"))
    if isinstance(value, str) and value.startswith("s3://"):
        value = rewrite(value)
        hyper["sagemaker_submit_directory"] = json.dumps(value) if encoded else value
    for channel in out.get("InputDataConfig", []):
        if channel.get("ChannelName") == "code":
            source = channel["DataSource"]["S3DataSource"]
            source["S3Uri"] = rewrite(source["S3Uri"])
    return out


_S3 = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<key>.+)$")


def check_code_locations(
    v2: Mapping[str, Any], ours: Mapping[str, Any], job_name: str
) -> dict[str, str]:
    """Assert both requests stage the code the same way except for the content-addressed key.

    Returns the key prefix per location kind (for tests that want to look further).
    """
    v2_uris, our_uris = code_uris(v2), code_uris(ours)
    assert set(v2_uris) == set(our_uris), (
        f"code tarball referenced from {sorted(v2_uris)} in SDK v2 but {sorted(our_uris)} "
        f"in launchbay: {v2_uris} vs {our_uris}"
    )
    v2_key = re.compile(rf"^(?P<prefix>(?:.+/)?){re.escape(job_name)}/source/sourcedir\.tar\.gz$")
    prefixes: dict[str, str] = {}
    for kind, v2_uri in v2_uris.items():
        ours_uri = our_uris[kind]
        v2_match, our_match = _S3.match(v2_uri), _S3.match(ours_uri)
        assert v2_match, f"SDK v2 {kind} code location is not an S3 URI: {v2_uri}"
        assert our_match, f"launchbay {kind} code location is not an S3 URI: {ours_uri}"
        assert v2_match["bucket"] == our_match["bucket"], (
            f"code tarball in different buckets: v2 {v2_uri} vs launchbay {ours_uri}"
        )
        key = v2_key.match(v2_match["key"])
        assert key, f"unexpected SDK v2 code key {v2_match['key']!r}"
        prefix = key["prefix"]
        expected = re.compile(rf"^{re.escape(prefix)}source/[0-9a-f]{{64}}/sourcedir\.tar\.gz$")
        assert expected.match(our_match["key"]), (
            f"launchbay code key {our_match['key']!r} is not "
            f"'{prefix}source/<sha256>/sourcedir.tar.gz' (SDK v2: {v2_match['key']!r})"
        )
        prefixes[kind] = prefix
    return prefixes


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Readable list of every path where ``actual`` differs from ``expected``."""
    here = path or "<request>"
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{sub}: missing in launchbay (SDK v2: {expected[key]!r})")
            elif key not in expected:
                out.append(f"{sub}: only in launchbay ({actual[key]!r})")
            else:
                out.extend(differences(expected[key], actual[key], sub))
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{here}: SDK v2 {expected!r} != launchbay {actual!r}"]
        out = []
        for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(differences(e, a, f"{path}.{index}" if path else str(index)))
        return out
    if type(expected) is not type(actual) or expected != actual:
        return [f"{here}: SDK v2 {expected!r} != launchbay {actual!r}"]
    return []


def assert_same_request(v2: Mapping[str, Any], ours: Mapping[str, Any], case: Case) -> None:
    """The whole comparison: code locations, then every other key must be equal."""
    check_code_locations(v2, ours, case.job_name)
    diffs = differences(normalize(v2), normalize(ours))
    assert not diffs, f"{case.id}: launchbay's request differs from SDK v2's:\n  " + "\n  ".join(
        diffs
    )


def lookup(request: Mapping[str, Any], dotted: str) -> Any:
    """Value at a dotted path (list items by index), or ABSENT."""
    node: Any = request
    for part in dotted.split("."):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return ABSENT
    return node


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No log records and no warnings while both SDKs are asked (thousands of calls)."""
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)
