"""launchbay.image_uris against the reference, sagemaker.image_uris (SDK v2.257.7).

Every supported (framework version or alias, py_version, processor) of both
frameworks is resolved by both SDKs over a handful of regions (commercial, China,
GovCloud, ISO) and must give the same URI, or both must refuse it for the same
argument. The SMP (modelparallel) and Trainium images are compared the same
way, through v2's estimator path ``get_training_image_uri``. Places where
launchbay deliberately differs from v2 are pinned in their own tests.

The case lists come from launchbay's own API, so collection never imports
sagemaker; the ``v2`` fixture imports it (and skips if it is missing).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from launchbay import image_uris
from launchbay.errors import ConfigurationError, ImageNotFoundError
from launchbay.image_uris import (
    processor_for,
    py_versions,
    resolve_version,
    supported_versions,
    training_image_uri,
    version_aliases,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

REGIONS = [
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "ap-northeast-1",
    "cn-north-1",
    "us-gov-west-1",
    "us-iso-east-1",
    "us-isof-south-1",
]
INSTANCE_FOR = {"cpu": "ml.m5.xlarge", "gpu": "ml.g4dn.xlarge"}
SMP_DISTRIBUTION = {
    "torch_distributed": {"enabled": True},
    "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 8}}},
}

# (launchbay framework, scope, v2 config name): launchbay keeps every version v2 lists.
FAMILIES = [
    ("pytorch", "training", "pytorch"),
    ("pytorch", "smp", "pytorch-smp"),
    ("pytorch", "neuron", "pytorch-neuron"),
    ("tensorflow", "training", "tensorflow"),
]


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _all_versions(framework: str, scope: str = "training") -> list[str]:
    return supported_versions(framework, scope) + list(version_aliases(framework, scope))


# --------------------------------------------------------------------------- reference


@pytest.fixture(scope="module")
def v2() -> Iterator[ModuleType]:
    """sagemaker.image_uris, with botocore's endpoint table loaded once instead of per call."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
        import sagemaker.utils
        from sagemaker import image_uris as v2_image_uris

        resolver = sagemaker.utils._botocore_resolver()
        mp.setattr(sagemaker.utils, "_botocore_resolver", lambda: resolver)
        yield v2_image_uris


def _v2_outcome(call: Callable[[], str]) -> tuple[str, str]:
    """("uri", uri) or ("error", the launchbay argument v2's ValueError is about)."""
    try:
        return ("uri", call())
    except ValueError as exc:
        message = str(exc)
    for needle, argument in [
        ("Unsupported region", "region"),
        ("Unsupported Python version", "py_version"),
        ("Unsupported processor", "instance_type"),
        ("P2 instances", "instance_type"),
        ("Unsupported framework", "instance_type"),
        ("SageMaker instance type", "instance_type"),
        (" version: ", "framework_version"),
    ]:
        if needle in message:
            return ("error", argument)
    raise AssertionError(f"unexpected v2 error: {message}")


def _ours_outcome(call: Callable[[], str]) -> tuple[str, str]:
    try:
        return ("uri", call())
    except ConfigurationError as exc:
        assert exc.argument is not None
        return ("error", exc.argument)


# --------------------------------------------------------------------------- framework images

TRAINING_CASES = [
    pytest.param(fw, version, py, processor, region, id=f"{fw}-{version}-{py}-{processor}-{region}")
    for fw in image_uris.FRAMEWORKS
    for version in _all_versions(fw)
    for py in py_versions(fw, version)
    for processor in ("cpu", "gpu")
    for region in REGIONS
]


@pytest.mark.parametrize(("framework", "version", "py", "processor", "region"), TRAINING_CASES)
def test_training_image_matches_v2(v2, framework, version, py, processor, region):
    instance_type = INSTANCE_FOR[processor]
    expected = _v2_outcome(
        lambda: v2.retrieve(
            framework,
            region,
            version=version,
            py_version=py,
            instance_type=instance_type,
            image_scope="training",
            distribution=None,
        )
    )
    got = _ours_outcome(
        lambda: training_image_uri(framework, version, py, instance_type, region, distribution=None)
    )
    assert got == expected
    if got[0] == "error":
        assert got[1] == "region"  # the only refusal among supported combinations


@pytest.mark.parametrize(
    ("framework", "version"),
    [(fw, v) for fw in image_uris.FRAMEWORKS for v in _all_versions(fw)],
)
def test_py_version_none_picks_the_only_one(v2, framework, version):
    """None picks a version's only Python; with several, both SDKs refuse and name py_version."""
    expected = _v2_outcome(
        lambda: v2.retrieve(
            framework,
            "us-west-2",
            version=version,
            instance_type="ml.p4d.24xlarge",
            image_scope="training",
        )
    )
    got = _ours_outcome(
        lambda: training_image_uri(framework, version, None, "ml.p4d.24xlarge", "us-west-2")
    )
    assert got == expected
    assert (got[0] == "uri") == (len(py_versions(framework, version)) == 1)


@pytest.mark.parametrize("instance_type", ["ml.p2.xlarge", "ml.p2.16xlarge"])
@pytest.mark.parametrize("framework", image_uris.FRAMEWORKS)
def test_p2_is_refused_like_v2(v2, framework, instance_type):
    """ml.p2 is retired from PyTorch 1.13 and TensorFlow 2.12 on, and still taken before."""
    first_retired = {"pytorch": "1.13", "tensorflow": "2.12"}[framework]
    for version in _all_versions(framework):
        py = py_versions(framework, version)[0]
        args = (version, py, instance_type)
        expected = _v2_outcome(
            lambda args=args: v2.retrieve(framework, "us-east-1", *args, image_scope="training")
        )
        got = _ours_outcome(lambda args=args: training_image_uri(framework, *args, "us-east-1"))
        assert got == expected, version
        assert (got[0] == "error") == (_vtuple(version) >= _vtuple(first_retired)), version
    with pytest.raises(ImageNotFoundError, match="instance_type='ml.p2") as info:
        training_image_uri(
            framework,
            first_retired,
            py_versions(framework, first_retired)[0],
            instance_type,
            "us-east-1",
        )
    assert "ml.p2" in str(info.value) and first_retired in str(info.value)


# --------------------------------------------------------------------------- SMP (modelparallel)

SMP_REGIONS = [
    "us-west-2",
    "us-east-1",
    "eu-west-1",
    "ap-northeast-1",
    "cn-north-1",
    "us-gov-west-1",
]
SMP_CASES = [
    pytest.param(version, instance_type, region, id=f"{version}-{instance_type}-{region}")
    for version in _all_versions("pytorch", "smp")
    for instance_type in ("ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge")
    for region in SMP_REGIONS
]


@pytest.mark.parametrize(("version", "instance_type", "region"), SMP_CASES)
def test_smp_image_matches_v2_estimator(v2, version, instance_type, region):
    (py,) = py_versions("pytorch", version, "smp")
    expected = _v2_outcome(
        lambda: v2.get_training_image_uri(
            region,
            "pytorch",
            framework_version=version,
            py_version=py,
            distribution=SMP_DISTRIBUTION,
            instance_type=instance_type,
        )
    )
    got = _ours_outcome(
        lambda: training_image_uri("pytorch", version, py, instance_type, region, SMP_DISTRIBUTION)
    )
    assert got == expected
    if got[0] == "uri":
        assert "/smdistributed-modelparallel:" in got[1]


@pytest.mark.parametrize("version", _all_versions("pytorch", "smp"))
def test_smp_needs_a_gpu(v2, version):
    (py,) = py_versions("pytorch", version, "smp")
    expected = _v2_outcome(
        lambda: v2.get_training_image_uri(
            "us-west-2",
            "pytorch",
            version,
            py,
            distribution=SMP_DISTRIBUTION,
            instance_type="ml.m5.xlarge",
        )
    )
    assert expected == ("error", "instance_type")
    with pytest.raises(ImageNotFoundError) as info:
        training_image_uri("pytorch", version, py, "ml.m5.xlarge", "us-west-2", SMP_DISTRIBUTION)
    assert info.value.argument == "instance_type"
    assert "'ml.m5.xlarge'" in str(info.value) and "GPU" in str(info.value)


@pytest.mark.parametrize("instance_type", ["ml.trn1.32xlarge", "local"])
def test_smp_refuses_trainium_and_cpu_like_v2(v2, instance_type):
    expected = _v2_outcome(
        lambda: v2.get_training_image_uri(
            "us-west-2",
            "pytorch",
            "2.4.1",
            "py311",
            distribution=SMP_DISTRIBUTION,
            instance_type=instance_type,
        )
    )
    assert expected == ("error", "instance_type")
    error = _ours_outcome(
        lambda: training_image_uri(
            "pytorch", "2.4.1", "py311", instance_type, "us-west-2", SMP_DISTRIBUTION
        )
    )
    assert error == expected


@pytest.mark.parametrize(
    "distribution",
    [
        None,
        {},
        {"mpi": {"enabled": True}},
        {"torch_distributed": {"enabled": True}},
        {"smdistributed": {"modelparallel": {"enabled": True}}},  # SMP v1 path: plain image
        {"smdistributed": {"dataparallel": {"enabled": True}}},
        {
            "torch_distributed": {"enabled": True},
            "smdistributed": {"dataparallel": {"enabled": True}},
        },
        {
            "torch_distributed": {"enabled": True},
            "smdistributed": {"modelparallel": {"enabled": False}},
        },
        {"torch_distributed": {"enabled": True}, "smdistributed": {"modelparallel": {}}},
        {
            "torch_distributed": {"enabled": False},
            "smdistributed": {"modelparallel": {"enabled": True}},
        },
        SMP_DISTRIBUTION,
    ],
)
def test_distribution_selects_image_like_v2(v2, distribution):
    # 2.2.0 is both a pytorch-training version and an SMP alias, with py310 in both.
    expected = v2.get_training_image_uri(
        "us-east-1",
        "pytorch",
        "2.2.0",
        "py310",
        distribution=distribution,
        instance_type="ml.p4d.24xlarge",
    )
    got = training_image_uri(
        "pytorch", "2.2.0", "py310", "ml.p4d.24xlarge", "us-east-1", distribution
    )
    assert got == expected


# --------------------------------------------------------------------------- Trainium (neuron)

NEURON_CASES = [
    pytest.param(version, py, instance_type, region, id=f"{version}-{py}-{instance_type}-{region}")
    for version in _all_versions("pytorch", "neuron")
    for py in [*py_versions("pytorch", version, "neuron"), None]
    for instance_type in ("ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge")
    for region in REGIONS
]


@pytest.mark.parametrize(("version", "py", "instance_type", "region"), NEURON_CASES)
def test_trainium_image_matches_v2(v2, version, py, instance_type, region):
    expected = _v2_outcome(
        lambda: v2.retrieve("pytorch", region, version, py, instance_type, image_scope="training")
    )
    got = _ours_outcome(lambda: training_image_uri("pytorch", version, py, instance_type, region))
    assert got == expected
    if got[0] == "uri":
        assert "/pytorch-training-neuron:" in got[1]


# --------------------------------------------------------------------------- completeness


@pytest.mark.parametrize(("framework", "scope", "config_name"), FAMILIES)
def test_versions_and_aliases_are_all_of_v2s(v2, framework, scope, config_name):
    config = v2.config_for_framework(config_name)["training"]
    assert supported_versions(framework, scope) == sorted(config["versions"], key=_vtuple)
    assert version_aliases(framework, scope) == config["version_aliases"]
    for version in _all_versions(framework, scope):
        entry = config["versions"][config["version_aliases"].get(version, version)]  # alias wins
        # The oldest TensorFlow versions have one image per Python version instead of a list.
        expected = entry.get("py_versions") or list(entry)
        assert py_versions(framework, version, scope) == expected


@pytest.mark.parametrize(("framework", "scope", "config_name"), FAMILIES)
def test_every_region_of_every_version(v2, framework, scope, config_name):
    """Accounts and domains for every region v2 lists, including those no other test visits."""
    config = v2.config_for_framework(config_name)["training"]
    instance_type = {
        "training": "ml.p3.2xlarge",
        "smp": "ml.p4d.24xlarge",
        "neuron": "ml.trn1.2xlarge",
    }
    distribution = SMP_DISTRIBUTION if scope == "smp" else None
    for version in supported_versions(framework, scope):
        entry = config["versions"][config["version_aliases"].get(version, version)]  # alias wins
        images = {py: entry for py in entry["py_versions"]} if "repository" in entry else entry
        for py, image in images.items():
            for region in image["registries"]:
                expected = v2.get_training_image_uri(
                    region,
                    framework,
                    version,
                    py,
                    distribution=distribution,
                    instance_type=instance_type[scope],
                )
                got = training_image_uri(
                    framework, version, py, instance_type[scope], region, distribution
                )
                assert got == expected, (version, py, region)


def test_generated_data_is_current(v2):
    spec = importlib.util.spec_from_file_location(
        "gen_image_data", REPO_ROOT / "tools" / "gen_image_data.py"
    )
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    current = (REPO_ROOT / "sdk" / "launchbay" / "_image_data.py").read_text()
    assert generator.render(generator.build()) == current, "run tools/gen_image_data.py"


# --------------------------------------------------------------------------- processors


@pytest.mark.parametrize(
    ("instance_type", "processor"),
    [
        ("ml.m5.xlarge", "cpu"),
        ("ml.c5.18xlarge", "cpu"),
        ("ml.r5.large", "cpu"),
        ("ml.t3.medium", "cpu"),
        ("ml.c7i.large", "cpu"),
        ("ml.g4dn.xlarge", "gpu"),
        ("ml.g5.48xlarge", "gpu"),
        ("ml.g6e.xlarge", "gpu"),
        ("ml.p3.2xlarge", "gpu"),
        ("ml.p3dn.24xlarge", "gpu"),
        ("ml.p4d.24xlarge", "gpu"),
        ("ml.p4de.24xlarge", "gpu"),
        ("ml.p5.48xlarge", "gpu"),
        ("ml.p5e.48xlarge", "gpu"),
        ("ml_g5", "gpu"),
        ("ml.m5", "cpu"),
        ("ml.trn1.32xlarge", "trn"),
        ("ml.trn1n.32xlarge", "trn"),
        ("ml.trn2.48xlarge", "trn"),
        ("ml.inf2.xlarge", "inf"),
    ],
)
def test_processor_for_matches_v2(v2, instance_type, processor):
    assert processor_for(instance_type) == processor
    assert v2._processor(instance_type, ["cpu", "gpu", "trn", "inf"]) == processor


@pytest.mark.parametrize(
    ("instance_type", "processor"),
    [("local", "cpu"), ("local_process", "cpu"), ("local_gpu", "gpu")],
)
def test_processor_for_local_modes(instance_type, processor):
    assert processor_for(instance_type) == processor


@pytest.mark.parametrize(
    "instance_type",
    [
        "ml.m5.xlarge",
        "ml_m5",
        "ml.p4de.24xlarge",
        "ml.a-b.c_d",
        "ml.m5.x.large",
        "ml..xlarge",
        "ml.M5.xlarge",
        "m5.xlarge",
        "mlm5.xlarge",
        "ml.",
        "",
        "local",
        "ml.g5.xlarge-",
    ],
)
def test_instance_family_matches_v2(v2, instance_type):
    import sagemaker.utils

    assert image_uris.instance_family(instance_type) == sagemaker.utils.get_instance_type_family(
        instance_type
    )


@pytest.mark.parametrize(
    "instance_type", ["bogus", "m5.xlarge", "ml.M5.xlarge", "", None, "local_tpu", ["ml.m5"]]
)
def test_malformed_instance_type(instance_type):
    with pytest.raises(ConfigurationError) as info:
        processor_for(instance_type)
    assert info.value.argument == "instance_type"
    assert f"instance_type={instance_type!r}" in str(info.value)
    assert "ml.<family>.<size>" in str(info.value) and "local_gpu" in str(info.value)
    with pytest.raises(ConfigurationError, match="instance_type"):
        training_image_uri("pytorch", "2.3.0", "py311", instance_type, "us-east-1")


# --------------------------------------------------------------------------- deliberate differences


def test_local_process_is_cpu_where_v2_says_gpu(v2):
    # v2 calls every local* type but "local" gpu; local_process runs on the host's CPU.
    assert v2._processor("local_process", ["cpu", "gpu"]) == "gpu"
    uri = training_image_uri("pytorch", "2.3.0", "py311", "local_process", "us-east-1")
    assert uri.endswith("/pytorch-training:2.3.0-cpu-py311")


@pytest.mark.parametrize("version", ["2.0.1", "2.3", "2.8.0"])
def test_trainium_with_new_pytorch_is_refused_where_v2_substitutes_1_11(v2, version):
    # v2's neuron config has a single version, so v2 ignores the one asked for (py38 or bust).
    substituted = v2.retrieve(
        "pytorch", "us-east-1", version, "py38", "ml.trn1.2xlarge", image_scope="training"
    )
    assert substituted.endswith("/pytorch-training-neuron:1.11.0-neuron-py38-sdk2.4.0-ubuntu20.04")
    py = py_versions("pytorch", version)[0]
    with pytest.raises(ImageNotFoundError) as info:
        training_image_uri("pytorch", version, py, "ml.trn1.2xlarge", "us-east-1")
    message = str(info.value)
    assert info.value.argument == "instance_type"
    assert "'ml.trn1.2xlarge'" in message and version in message and "1.11.0" in message
    assert "image_uri" in message


@pytest.mark.parametrize("instance_type", ["ml.c6g.xlarge", "ml.m6g.large", "ml.c7g.2xlarge"])
def test_graviton_is_refused_where_v2_returns_an_inference_image(v2, instance_type):
    inference = v2.retrieve(
        "pytorch", "us-east-1", "2.3.0", "py311", instance_type, image_scope="training"
    )
    assert "-inference-graviton:" in inference
    with pytest.raises(ImageNotFoundError) as info:
        training_image_uri("pytorch", "2.3.0", "py311", instance_type, "us-east-1")
    assert info.value.argument == "instance_type" and "Graviton" in str(info.value)


def test_tensorflow_ignores_smp_distribution():
    # v2 would look the TensorFlow version up among the pytorch-smp images.
    uri = training_image_uri(
        "tensorflow", "2.14", "py310", "ml.p4d.24xlarge", "us-east-1", SMP_DISTRIBUTION
    )
    assert uri == "763104351884.dkr.ecr.us-east-1.amazonaws.com/tensorflow-training:2.14-gpu-py310"


# --------------------------------------------------------------------------- errors and API


def _error(call: Callable[[], object]) -> ImageNotFoundError:
    with pytest.raises(ImageNotFoundError) as info:
        call()
    assert isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize("framework", image_uris.FRAMEWORKS)
def test_unknown_version_lists_versions_and_aliases(framework):
    error = _error(lambda: training_image_uri(framework, "1.99", None, "ml.m5.xlarge", "us-east-1"))
    message = str(error)
    assert (error.argument, error.value) == ("framework_version", "1.99")
    assert "framework_version='1.99'" in message and framework in message
    for version in _all_versions(framework):
        assert version in message


def test_unknown_version_on_trainium_names_framework_version():
    error = _error(
        lambda: training_image_uri("pytorch", "9.9", None, "ml.trn1.2xlarge", "us-east-1")
    )
    assert error.argument == "framework_version" and "1.11.0" in str(error)


def test_smp_unknown_version_lists_smp_versions():
    error = _error(
        lambda: training_image_uri(
            "pytorch", "2.6.0", "py312", "ml.p5.48xlarge", "us-east-1", SMP_DISTRIBUTION
        )
    )
    assert error.argument == "framework_version" and "'2.6.0'" in str(error)
    assert "SMP" in str(error) and "2.4.1 (= 2.7.0)" in str(error)


def test_wrong_py_version_lists_accepted():
    error = _error(
        lambda: training_image_uri("pytorch", "2.3", "py310", "ml.g5.xlarge", "us-east-1")
    )
    message = str(error)
    assert (error.argument, error.value) == ("py_version", "py310")
    assert "py_version='py310'" in message and "pytorch 2.3" in message
    assert message.endswith("Accepted: py311.")


def test_unsupported_region_lists_regions():
    error = _error(
        lambda: training_image_uri("tensorflow", "2.19", "py312", "ml.m5.xlarge", "us-iso-east-1")
    )
    message = str(error)
    assert (error.argument, error.value) == ("region", "us-iso-east-1")
    assert "region='us-iso-east-1'" in message and "tensorflow 2.19" in message
    for region in ("us-east-1", "cn-north-1", "us-gov-west-1", "eu-west-1"):
        assert region in message
    assert "us-iso-east-1," not in message
    error = _error(
        lambda: training_image_uri("pytorch", "2.3.0", "py311", "ml.m5.xlarge", "xx-nowhere-1")
    )
    assert error.argument == "region" and "us-iso-east-1" in str(error)  # 2.3.0 has ISO images


@pytest.mark.parametrize(
    ("framework", "instance_type", "needle"),
    [
        ("tensorflow", "ml.trn1.2xlarge", "pytorch only"),
        ("pytorch", "ml.inf2.xlarge", "Inferentia"),
        ("tensorflow", "ml.inf1.xlarge", "Inferentia"),
    ],
)
def test_instance_type_without_image(v2, framework, instance_type, needle):
    version = supported_versions(framework)[-1]
    py = py_versions(framework, version)[0]
    # v2 refuses too (for pytorch on inf it trips over py_version first, the neuron image being py38)
    outcome = _v2_outcome(
        lambda: v2.retrieve(
            framework, "us-east-1", version, py, instance_type, image_scope="training"
        )
    )
    assert outcome[0] == "error"
    error = _error(lambda: training_image_uri(framework, version, py, instance_type, "us-east-1"))
    assert (error.argument, error.value) == ("instance_type", instance_type)
    assert needle in str(error) and "Accepted: CPU instance types" in str(error)


def test_unknown_framework():
    error = _error(lambda: training_image_uri("mxnet", "1.9", "py38", "ml.m5.xlarge", "us-east-1"))
    assert (error.argument, error.value) == ("framework", "mxnet")
    assert "pytorch, tensorflow" in str(error)
    with pytest.raises(ImageNotFoundError, match="framework='jax'"):
        supported_versions("jax")


def test_unknown_scope():
    with pytest.raises(ConfigurationError, match="scope='neuron'") as info:
        supported_versions("tensorflow", "neuron")
    assert info.value.argument == "scope" and "training" in str(info.value)


@pytest.mark.parametrize(
    ("framework", "given", "full"),
    [
        ("pytorch", "2.3", "2.3.0"),
        ("pytorch", "2.0", "2.0.1"),
        ("pytorch", "2.5", "2.5.1"),
        ("pytorch", "2.8.0", "2.8.0"),
        ("tensorflow", "2.14", "2.14.1"),
        ("tensorflow", "2.16.2", "2.16.2"),
    ],
)
def test_resolve_version(framework, given, full):
    assert resolve_version(framework, given) == full


def test_resolve_version_aliases_win_over_versions():
    # In v2's SMP table "2.3.1" is both an SMP release and an alias (PyTorch 2.3.1 -> SMP 2.5.0).
    assert resolve_version("pytorch", "2.3.1", "smp") == "2.5.0"
    assert py_versions("pytorch", "2.3.1", "smp") == ["py311"]


@pytest.mark.parametrize("given", ["2.3.5", "2", "", None, "2.3.0 "])
def test_resolve_version_unknown(given):
    error = _error(lambda: resolve_version("pytorch", given))
    assert (error.argument, error.value) == ("framework_version", given)


def test_supported_versions_sorted_and_copies():
    for framework in image_uris.FRAMEWORKS:
        for scope in image_uris.SCOPES[framework]:
            versions = supported_versions(framework, scope)
            assert versions == sorted(versions, key=_vtuple)
            versions.append("x")
            aliases = version_aliases(framework, scope)
            aliases["x"] = "y"
            assert "x" not in supported_versions(framework, scope)
            assert "x" not in version_aliases(framework, scope)
    assert supported_versions("pytorch")[0] == "0.4.0"
    assert supported_versions("tensorflow")[0] == "1.4.1"


def test_import_is_light():
    code = (
        "import sys, launchbay.image_uris; "
        "print(','.join(m for m in ('json', 'sagemaker', 'boto3', 'botocore') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "sdk")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == ""
