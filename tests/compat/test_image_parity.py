"""Every framework version SDK v2 accepts: image URIs and version rules at full parity.

For every combination of

* framework (``pytorch``, ``tensorflow``),
* framework version **or alias** listed in sagemaker==2.257.7's ``image_uri_config``
  training scope (plus a few it does not list),
* ``py_version``: each one that version lists, one it does not, and ``None``,
* an instance type from each family (CPU, the retired ml.p2, single and multi-GPU
  ml.p3, p3dn, p4d, p5, g4dn, g5, Trainium, Inferentia, Graviton),
* every region any of that framework's images is published in (plus one where none is),

the PyTorch/TensorFlow estimator is built with both SDKs and asked for the image its
request would carry (``AlgorithmSpecification.TrainingImage`` is
``training_image_uri()`` in both SDKs). The two URIs must be identical, or both SDKs
must refuse (at construction or at that call). A second sweep runs the same versions,
Python versions and instance types with every ``distribution`` form in one region, so
the version-dependent distribution rules are held to v2's on acceptance and refusal.

Enumerating from v2's own JSON (not from launchbay's generated table) keeps the test
independent of ``tools/gen_image_data.py``. For speed, v2's JSON and botocore's
endpoint file are read once (v2 re-reads them on every ``retrieve``), and the SageMaker
client each v2 estimator makes for its Studio app links is made once per region; v2's
logic runs unchanged.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import quiet

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
HOME_REGION = "us-west-2"
UNLISTED_REGION = "xx-nowhere-1"

#: One instance type per family that changes an image or a rule.
INSTANCE_TYPES = (
    "ml.m5.xlarge",
    "ml.c5.2xlarge",
    "ml.p2.xlarge",
    "ml.p3.2xlarge",
    "ml.p3.16xlarge",
    "ml.p3dn.24xlarge",
    "ml.p4d.24xlarge",
    "ml.p5.48xlarge",
    "ml.g4dn.12xlarge",
    "ml.g5.xlarge",
    "ml.trn1.32xlarge",
    "ml.inf1.xlarge",
    "ml.c6g.xlarge",
)

#: Versions no image has: both SDKs must refuse them.
UNLISTED_VERSIONS = {"pytorch": ("0.3", "1.15", "3.0.0"), "tensorflow": ("1.3", "2.15", "3.0")}

#: Every ``distribution`` form, per framework.
DISTRIBUTIONS: dict[str, tuple[dict[str, Any] | None, ...]] = {
    "pytorch": (
        None,
        {"smdistributed": {"dataparallel": {"enabled": True}}},
        {"pytorchddp": {"enabled": True}},
        {"torch_distributed": {"enabled": True}},
        {
            "torch_distributed": {"enabled": True},
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
        },
        {"mpi": {"enabled": True, "processes_per_host": 2}},
        {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
            "mpi": {"enabled": True},
        },
    ),
    "tensorflow": (
        None,
        {"smdistributed": {"dataparallel": {"enabled": True}}},
        {"mpi": {"enabled": True, "processes_per_host": 2, "custom_mpi_options": "-v"}},
        {"parameter_server": {"enabled": True}},
        {"multi_worker_mirrored_strategy": {"enabled": True}},
        {
            "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}},
            "mpi": {"enabled": True},
        },
    ),
}


def _v2_config(framework: str) -> dict[str, Any]:
    import sagemaker

    path = Path(sagemaker.__file__).parent / "image_uri_config" / f"{framework}.json"
    return json.loads(path.read_text())["training"]


def _reference(framework: str) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(versions and aliases, Python versions per version, every region) from v2's JSON."""
    config = _v2_config(framework)
    pythons: dict[str, list[str]] = {}
    regions: set[str] = set()
    for version, entry in config["versions"].items():
        images = [entry] if "repository" in entry else list(entry.values())
        pythons[version] = entry.get("py_versions") or list(entry)
        for image in images:
            regions.update(image["registries"])
    for alias, target in config["version_aliases"].items():
        pythons.setdefault(alias, pythons[target])
    names = sorted(pythons, key=lambda v: [int(p) for p in v.split(".")])
    return names, pythons, sorted(regions)


def _wrong_python(pythons: list[str]) -> str:
    return next(p for p in ("py311", "py37", "py2") if p not in pythons)


@pytest.fixture(scope="module")
def sdks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both SDKs' estimator classes and a session per region (no AWS call is made)."""
    import boto3
    import botocore.session
    import sagemaker
    from sagemaker import image_uris as v2_image_uris
    from sagemaker import utils as v2_utils
    from sagemaker.interactive_apps import base_interactive_app
    from sagemaker.pytorch import PyTorch as V2PyTorch
    from sagemaker.tensorflow import TensorFlow as V2TensorFlow

    from launchbay import Session
    from launchbay.pytorch import PyTorch
    from launchbay.tensorflow import TensorFlow

    src = tmp_path_factory.mktemp("src")
    (src / "train.py").write_text("print('train')\n")
    empty = src / "empty.yaml"
    empty.write_text("")
    env = {
        "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": str(empty),
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(empty),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    patches = pytest.MonkeyPatch()
    patches.setattr(
        v2_image_uris, "config_for_framework", functools.cache(v2_image_uris.config_for_framework)
    )
    resolver = v2_utils._botocore_resolver()
    patches.setattr(v2_utils, "_botocore_resolver", lambda: resolver)
    # Each v2 estimator makes a SageMaker client for its Studio app links; reuse one per region.
    shared = boto3.Session()
    patches.setattr(
        base_interactive_app,
        "boto3",
        types.SimpleNamespace(client=functools.cache(lambda *a, **k: shared.client(*a, **k))),
    )
    loader = botocore.session.get_session().get_component("data_loader")
    regions = sorted(
        {r for fw in ("pytorch", "tensorflow") for r in _reference(fw)[2]} | {UNLISTED_REGION}
    )
    with quiet():
        v2_sessions = {}
        ours_sessions = {}
        for region in regions:
            botocore_session = botocore.session.get_session()
            botocore_session.register_component("data_loader", loader)  # models parsed once
            boto_session = boto3.Session(botocore_session=botocore_session, region_name=region)
            v2_sessions[region] = sagemaker.Session(
                boto_session=boto_session, default_bucket="bucket"
            )
            ours_sessions[region] = Session(boto_session=boto_session, default_bucket="bucket")
    yield {
        "src": src,
        "v2": {"pytorch": V2PyTorch, "tensorflow": V2TensorFlow, "sessions": v2_sessions},
        "ours": {"pytorch": PyTorch, "tensorflow": TensorFlow, "sessions": ours_sessions},
    }
    patches.undo()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _build(side: dict[str, Any], src: Path, framework: str, **kwargs: Any) -> Any:
    """The estimator, or the exception its constructor raised."""
    try:
        return side[framework](
            entry_point="train.py",
            source_dir=str(src),
            role=ROLE,
            instance_count=2,
            output_path="s3://bucket/output",
            sagemaker_session=side["sessions"][HOME_REGION],
            **kwargs,
        )
    except Exception as exc:  # noqa: BLE001 - either SDK's refusal is data here
        return exc


def _image(side: dict[str, Any], estimator: Any, region: str) -> str | None:
    """``training_image_uri()`` in ``region``; ``None`` where the SDK refuses the request."""
    if isinstance(estimator, Exception):
        return None
    estimator.sagemaker_session = side["sessions"][region]
    try:
        # v2 applies some distribution rules only when it builds the request's
        # hyperparameters (e.g. smdistributed on ml.p5.48xlarge), so both are asked.
        estimator.hyperparameters()
        return estimator.training_image_uri()
    except Exception:  # noqa: BLE001
        return None


def _allowed(
    framework: str, kwargs: dict[str, Any], want: str | None, got: str | None, v2_error: Any
) -> str:
    """The docs/compatibility.md entry that explains a difference, or ``""``.

    Each one is a place where v2 silently hands out a wrong image, or refuses a short
    version alias its own image lookup resolves; nothing else may differ.
    """
    from launchbay._instances import instance_family

    family = instance_family(kwargs["instance_type"])
    distribution = kwargs.get("distribution") or {}
    if got is None and want is not None:
        if family.startswith("trn") and "pytorch-training-neuron:1.11.0-" in want:
            version = kwargs["framework_version"]
            if version not in ("1.11", "1.11.0"):
                return "Trainium with a version that has no Trainium image"
        if family in ("c6g",):
            return "Graviton instance types for training"
    if want is None and got is not None and isinstance(v2_error, Exception):
        version = kwargs["framework_version"]
        if (
            version.count(".") == 1
            and f":{version}-" in got
            and (
                "torch_distributed" in distribution
                or "dataparallel" in str(distribution)
                or "pytorchddp" in distribution
            )
        ):
            if "framework_version" in str(v2_error) or "framework version" in str(v2_error):
                return "short versions for torch_distributed and smdistributed dataparallel"
    return ""


def _compare(
    sdks: dict[str, Any],
    framework: str,
    kwargs: dict[str, Any],
    regions: list[str],
    allowed: collections.Counter[str],
) -> Iterator[str]:
    """Mismatches of one estimator configuration over ``regions`` (one line per configuration).

    Documented differences are counted in ``allowed`` by their docs entry.
    """
    v2 = _build(sdks["v2"], sdks["src"], framework, **kwargs)
    ours = _build(sdks["ours"], sdks["src"], framework, **kwargs)
    differ = []
    for region in regions:
        want = _image(sdks["v2"], v2, region)
        got = _image(sdks["ours"], ours, region)
        if want != got:
            reason = _allowed(framework, kwargs, want, got, v2)
            if reason:
                allowed[reason] += 1
            else:
                differ.append((region, want, got))
    if differ:
        region, want, got = differ[0]
        why = ours if isinstance(ours, Exception) else v2 if isinstance(v2, Exception) else ""
        yield (
            f"{framework} {kwargs} in {len(differ)} regions, e.g. {region}: "
            f"v2 {want}, launchbay {got} {str(why)[:300]!r}"
        )


def _sweep(
    sdks: dict[str, Any], framework: str, distributions: bool
) -> tuple[int, list[str], collections.Counter[str]]:
    versions, pythons, regions = _reference(framework)
    versions = [*versions, *UNLISTED_VERSIONS[framework]]
    regions = [*regions, UNLISTED_REGION] if not distributions else [HOME_REGION]
    count, mismatches, allowed = 0, [], collections.Counter[str]()
    with quiet():
        for version in versions:
            listed = pythons.get(version, ["py3"])
            for py in [*listed, _wrong_python(listed), None]:
                for instance_type in INSTANCE_TYPES:
                    for distribution in DISTRIBUTIONS[framework] if distributions else (None,):
                        kwargs: dict[str, Any] = {
                            "framework_version": version,
                            "py_version": py,
                            "instance_type": instance_type,
                        }
                        if distribution is not None:
                            kwargs["distribution"] = distribution
                        mismatches.extend(_compare(sdks, framework, kwargs, regions, allowed))
                        count += len(regions)
    return count, mismatches, allowed


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_every_version_python_instance_family_and_region(
    sdks: dict[str, Any], framework: str
) -> None:
    count, mismatches, allowed = _sweep(sdks, framework, distributions=False)
    print(f"{framework}: {count} combinations compared with sagemaker==2.257.7; {dict(allowed)}")
    assert count > 20_000
    assert not mismatches, f"{len(mismatches)} of {count} differ:\n" + "\n".join(mismatches[:40])


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_every_version_with_every_distribution(sdks: dict[str, Any], framework: str) -> None:
    count, mismatches, allowed = _sweep(sdks, framework, distributions=True)
    print(f"{framework}: {count} distribution combinations compared; {dict(allowed)}")
    assert count > 2_000
    assert not mismatches, f"{len(mismatches)} of {count} differ:\n" + "\n".join(mismatches[:40])
