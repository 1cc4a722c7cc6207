"""``launchbay.image_uris.retrieve`` against ``sagemaker.image_uris.retrieve`` itself.

Enumerated from v2's own ``image_uri_config`` JSON files (not from launchbay's
generated data), for every framework, built-in algorithm and tool v2 lists:

* **regions**: every version and alias (plus none, and one that is not listed) x
  every region any image of that framework is published in (plus one where none
  is), in the first scope, with the first processor and Python version;
* **scopes**: in one region, every scope (plus none and an unknown one) x every
  version x an instance type of each processor family x every Python version
  listed (plus none and one that is not), with HuggingFace's base framework
  versions;
* a handful of arguments that change the tag: ``container_version``,
  ``distribution``, ``accelerator_type``, ``sdk_version``, ``inference_tool``,
  ``serverless_inference_config``, ``training_compiler_config``.

For each combination both SDKs must give the same URI, or both must refuse
(v2 raises ``ValueError``, ``KeyError`` and the like; launchbay raises
``ImageNotFoundError``, a ``ValueError``). v2's JSON and botocore's endpoint data
are read once (v2 re-reads them per call); v2's logic runs unchanged.
"""

from __future__ import annotations

import collections
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from launchbay.errors import ImageNotFoundError

from .harness import quiet

HOME = "us-west-2"
UNLISTED_REGION = "xx-nowhere-1"
UNLISTED_VERSION = "0.0.0-unlisted"
#: One instance type per processor a config can name, plus the families with rules.
#: (v2's processors are cpu, gpu, inf, inf2, trn and neuronx; p2, p4d and Graviton have rules.)
INSTANCE_TYPES = (
    None,
    "ml.m5.xlarge",
    "ml.p2.xlarge",
    "ml.p4d.24xlarge",
    "ml.g5.xlarge",
    "ml.inf1.xlarge",
    "ml.inf2.xlarge",
    "ml.trn1.2xlarge",
    "ml.c6g.xlarge",
    "local_gpu",
    "not-an-instance",
)


def _v2_folder() -> Path:
    import sagemaker

    return Path(sagemaker.__file__).parent / "image_uri_config"


def _configs() -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(_v2_folder().glob("*.json"))}


def _scope_tables(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each scope's table (``versions``, aliases, processors)."""
    if "scope" in config:
        return {scope: config for scope in config["scope"]}
    return {k: v for k, v in config.items() if isinstance(v, dict) and "versions" in v}


def _regions(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "registries" and isinstance(item, dict):
                found.update(item)
            else:
                found |= _regions(item)
    elif isinstance(value, list):
        for item in value:
            found |= _regions(item)
    return found


def _images(entry: Any) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """``(base framework version, image table)`` below one version's entry (HuggingFace
    keys its tables by ``pytorch<version>``/``tensorflow<version>``)."""
    if not isinstance(entry, dict):
        return
    bases = [
        (key, item)
        for key, item in entry.items()
        if isinstance(item, dict) and key.startswith(("pytorch", "tensorflow"))
    ]
    yield from bases or [(None, entry)]


def _pythons(entry: dict[str, Any]) -> list[str]:
    """The Python versions one image table lists (as a list, or as per-Python tables)."""
    found = list(entry.get("py_versions") or [])
    found += [k for k, v in entry.items() if isinstance(v, dict) and "registries" in v]
    return found


def _variants(table: dict[str, Any], version: str) -> list[tuple[str | None, str | None]]:
    """``(base framework version, py_version)`` pairs to try for one version, wrong ones too."""
    target = (table.get("version_aliases") or {}).get(version, version)
    entry = table["versions"].get(target, {})
    pairs: list[tuple[str | None, str | None]] = []
    bases = list(_images(entry)) or [(None, {})]
    aliases = list((entry.get("version_aliases") or {}) if isinstance(entry, dict) else [])
    for base, image in bases:
        for py in [*_pythons(image), None, "py27"]:
            pairs.append((base, py))
    for alias in aliases:
        pairs.append((alias, _pythons(bases[-1][1])[:1][0] if _pythons(bases[-1][1]) else None))
    if bases[0][0] is not None:
        pairs.append(("pytorch0.1", "py3"))
    return pairs


def _first_python(table: dict[str, Any]) -> str | None:
    for entry in table.get("versions", {}).values():
        for _, image in _images(entry):
            if _pythons(image):
                return _pythons(image)[0]
    return None


def _first_base(table: dict[str, Any]) -> str | None:
    for entry in table.get("versions", {}).values():
        for base, _ in _images(entry):
            return base
    return None


@pytest.fixture(scope="module")
def v2_retrieve() -> Iterator[Any]:
    from sagemaker import image_uris as v2_image_uris
    from sagemaker import utils as v2_utils

    patches = pytest.MonkeyPatch()
    patches.setattr(
        v2_image_uris, "config_for_framework", functools.cache(v2_image_uris.config_for_framework)
    )
    resolver = v2_utils._botocore_resolver()
    patches.setattr(v2_utils, "_botocore_resolver", lambda: resolver)
    yield v2_image_uris.retrieve
    patches.undo()


def _compare(v2_retrieve: Any, kwargs: dict[str, Any], tally: collections.Counter[str]) -> None:
    from launchbay.image_uris import retrieve

    with quiet():
        try:
            expected: str | None = v2_retrieve(**kwargs)
        except Exception:  # every v2 refusal: ValueError, KeyError, TypeError ...
            expected = None
        try:
            got: str | None = retrieve(**kwargs)
        except ImageNotFoundError:
            got = None
    assert got == expected, f"retrieve({kwargs}): launchbay {got!r}, SDK v2 {expected!r}"
    tally["same uri" if expected else "both refuse"] += 1


def test_every_framework_version_and_region_matches_v2(v2_retrieve: Any) -> None:
    tally: collections.Counter[str] = collections.Counter()
    for framework, config in _configs().items():
        tables = _scope_tables(config)
        regions = sorted(_regions(config)) + [UNLISTED_REGION]
        if not tables:  # not an image config (instance_gpu_info): both refuse it
            _compare(v2_retrieve, {"framework": framework, "region": HOME}, tally)
            continue
        scope, table = next(iter(tables.items()))
        versions = [
            *table["versions"],
            *(table.get("version_aliases") or {}),
            None,
            UNLISTED_VERSION,
        ]
        processors = table.get("processors") or ["cpu"]
        instance = {"cpu": "ml.m5.xlarge", "gpu": "ml.g5.xlarge", "inf": "ml.inf1.xlarge",
                    "trn": "ml.trn1.2xlarge", "neuron": "ml.inf1.xlarge"}.get(processors[0], f"ml.{processors[0]}.xlarge")  # fmt: skip
        for version in versions:
            for region in regions:
                kwargs = {
                    "framework": framework,
                    "region": region,
                    "version": version,
                    "py_version": _first_python(table),
                    "instance_type": instance,
                    "image_scope": scope,
                }
                if framework == "huggingface":
                    kwargs["base_framework_version"] = _first_base(table)
                _compare(v2_retrieve, kwargs, tally)
    assert tally["same uri"] > 10_000, tally


def test_every_scope_processor_and_python_in_one_region_matches_v2(v2_retrieve: Any) -> None:
    tally: collections.Counter[str] = collections.Counter()
    for framework, config in _configs().items():
        tables = _scope_tables(config)
        for scope in [*tables, None, "no-such-scope"]:
            table = tables.get(scope) or next(iter(tables.values()), {"versions": {}})
            versions = [*table["versions"], *(table.get("version_aliases") or {}), None]
            for version in versions:
                for base, py_version in _variants(table, version or ""):
                    for instance_type in INSTANCE_TYPES:
                        kwargs = {
                            "framework": framework,
                            "region": HOME,
                            "version": version,
                            "py_version": py_version,
                            "instance_type": instance_type,
                            "image_scope": scope,
                        }
                        if base is not None:
                            kwargs["base_framework_version"] = base
                        _compare(v2_retrieve, kwargs, tally)
    assert tally["same uri"] > 10_000, tally
    assert tally["both refuse"] > 10_000, tally


@pytest.mark.parametrize(
    "kwargs",
    [
        {"framework": "pytorch", "version": "1.6", "py_version": "py3", "instance_type": "ml.p4d.24xlarge", "image_scope": "training"},
        {"framework": "tensorflow", "version": "2.3", "py_version": "py37", "instance_type": "ml.p3.2xlarge", "image_scope": "training", "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}},
        {"framework": "mxnet", "version": "1.8", "py_version": "py37", "instance_type": "ml.p4d.24xlarge", "image_scope": "training"},
        {"framework": "pytorch", "version": "2.0", "py_version": "py310", "instance_type": "ml.g5.xlarge", "image_scope": "training", "container_version": "cu118"},
        {"framework": "huggingface", "version": "4.28", "py_version": "py310", "instance_type": "ml.g5.xlarge", "image_scope": "training", "base_framework_version": "pytorch2.0", "container_version": "cu118-ubuntu20.04"},
        {"framework": "pytorch", "version": "1.5", "py_version": "py3", "instance_type": "ml.m5.xlarge", "accelerator_type": "ml.eia2.medium"},
        {"framework": "pytorch", "version": "1.5", "instance_type": "ml.m5.xlarge", "accelerator_type": "ml.p3.2xlarge"},
        {"framework": "pytorch", "version": "1.13.1", "py_version": "py38", "instance_type": "ml.trn1.2xlarge", "image_scope": "training"},
        {"framework": "pytorch", "version": "1.13.1", "py_version": "py38", "instance_type": "ml.trn1.2xlarge", "image_scope": "training", "sdk_version": "sdk2.9.1"},
        {"framework": "pytorch", "version": "1.13.1", "py_version": "py38", "instance_type": "ml.inf2.xlarge", "image_scope": "inference", "inference_tool": "neuronx"},
        {"framework": "xgboost", "version": "1.5-1", "instance_type": "ml.c6g.xlarge"},
        {"framework": "sklearn", "version": "1.0-1", "image_scope": "inference_graviton"},
        {"framework": "xgboost", "version": "1.7-1", "image_scope": "inference", "serverless_inference_config": object()},
        {"framework": "pytorch", "version": "1.12.0", "py_version": "py38", "instance_type": "ml.p3.2xlarge", "image_scope": "training", "training_compiler_config": {"enabled": True}},
        {"framework": "huggingface", "version": "4.21.1", "py_version": "py38", "instance_type": "ml.p3.2xlarge", "image_scope": "training", "base_framework_version": "pytorch1.11.0", "training_compiler_config": {"enabled": True}},
        {"framework": "sagemaker-tritonserver", "version": "23.12", "instance_type": "ml.g5.xlarge", "image_scope": "inference"},
        {"framework": "huggingface", "version": "4.28.1", "py_version": "py38", "instance_type": "ml.inf2.xlarge", "image_scope": "inference", "base_framework_version": "pytorch1.13.1", "inference_tool": "neuronx"},
        {"framework": "spark", "version": "3.3", "instance_type": "ml.m5.xlarge", "image_scope": "processing", "container_version": "v1"},
        {"framework": "debugger", "version": "latest"},
        {"framework": "pytorch", "version": "2.5", "py_version": "py311", "instance_type": "ml.p5.48xlarge", "image_scope": "training", "container_version": "cu124"},
    ],
)  # fmt: skip
def test_arguments_that_change_the_tag_match_v2(v2_retrieve: Any, kwargs: dict[str, Any]) -> None:
    tally: collections.Counter[str] = collections.Counter()
    for region in (HOME, "cn-north-1", "us-gov-west-1", UNLISTED_REGION):
        _compare(v2_retrieve, {**kwargs, "region": region}, tally)


def test_jumpstart_is_refused_saying_it_is_out_of_scope() -> None:
    from launchbay.image_uris import retrieve

    with pytest.raises(ImageNotFoundError, match="JumpStart") as caught:
        retrieve("pytorch", HOME, model_id="huggingface-llm-falcon-7b", model_version="*")
    assert "model_id" in str(caught.value)


def test_get_training_image_uri_matches_v2(v2_retrieve: Any) -> None:
    from sagemaker.image_uris import get_training_image_uri as v2_training

    from launchbay.image_uris import get_training_image_uri

    cases = [
        {"framework": "pytorch", "framework_version": "2.3", "py_version": "py311", "instance_type": "ml.g5.xlarge"},
        {"framework": "pytorch", "framework_version": "2.3.0", "py_version": "py310", "instance_type": "ml.p5.48xlarge", "distribution": {"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True}}}},
        {"framework": "pytorch", "framework_version": "2.0.1", "py_version": "py310", "instance_type": "ml.p4d.24xlarge", "distribution": {"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {"enabled": True}}}},
        {"framework": "huggingface", "framework_version": "4.28", "py_version": "py310", "instance_type": "ml.g5.xlarge", "pytorch_version": "2.0"},
        {"framework": "huggingface", "framework_version": "4.17", "py_version": "py38", "instance_type": "ml.p3.2xlarge", "tensorflow_version": "2.6"},
        {"framework": "xgboost", "framework_version": "1.7-1", "instance_type": "ml.m5.xlarge"},
        {"framework": "sklearn", "framework_version": "1.2-1", "py_version": "py3", "instance_type": "ml.m5.xlarge"},
        {"framework": "mxnet", "framework_version": "1.9", "py_version": "py38", "instance_type": "ml.p3.2xlarge"},
        {"framework": "pytorch", "image_uri": "my/own:image"},
    ]  # fmt: skip
    for case in cases:
        for region in (HOME, "eu-central-1"):
            with quiet():
                try:
                    expected = v2_training(region=region, **case)
                except Exception:
                    expected = None
                try:
                    got = get_training_image_uri(region=region, **case)
                except ImageNotFoundError:
                    got = None
            assert got == expected, (case, region)
            assert expected is not None, case


def test_the_v1_get_image_uri_and_base_python_image_match_v2(v2_retrieve: Any) -> None:
    from sagemaker.amazon.amazon_estimator import get_image_uri as v2_get_image_uri
    from sagemaker.image_uris import get_base_python_image_uri as v2_base

    from launchbay.amazon.amazon_estimator import get_image_uri
    from launchbay.image_uris import get_base_python_image_uri

    with quiet():
        for region in (HOME, "ap-south-1", "cn-north-1"):
            for repo, version in (("xgboost", "1"), ("xgboost", "1.7-1"), ("linear-learner", "1"),
                                  ("kmeans", "1"), ("forecasting-deepar", "1")):  # fmt: skip
                assert get_image_uri(region, repo, version) == v2_get_image_uri(
                    region, repo, version
                )
            for py in ("310", "38"):
                assert get_base_python_image_uri(region, py) == v2_base(region, py)
    with pytest.warns(DeprecationWarning, match="get_image_uri"):
        get_image_uri(HOME, "xgboost")


def test_the_generated_image_config_is_current() -> None:
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location(
        "gen_uri_config", root / "tools" / "gen_uri_config.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    with quiet():
        text = generator.render(generator.build())
    assert text == generator.OUTPUT.read_text(), "run python tools/gen_uri_config.py"


def test_importing_image_uris_reads_no_image_config() -> None:
    import subprocess
    import sys

    code = (
        "import sys, launchbay.image_uris, launchbay._retrieve as r;"
        "print(r._data.cache_info().currsize, 'launchbay.amazon' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]
