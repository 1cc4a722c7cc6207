"""The HuggingFace, scikit-learn and XGBoost images without an engine: their names as the
estimators give them, the build commands, the packages each installs, and the refusals.
The builds and jobs are in tests/docker/test_frameworks_docker.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launchbay import images
from launchbay.errors import ConfigurationError
from launchbay.images import context

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "integration" / "framework_scripts"

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def _local(framework: str, **kwargs):
    if framework == "huggingface":
        from launchbay.huggingface import HuggingFace

        return HuggingFace(
            kwargs.pop("py_version", "py311"), "hf_train.py", source_dir=str(SCRIPTS),
            role=None, transformers_version="5.24.0", **kwargs,
        )  # fmt: skip
    if framework == "sklearn":
        from launchbay.sklearn import SKLearn

        return SKLearn("sklearn_train.py", "1.2-1", source_dir=str(SCRIPTS), role=None, **kwargs)
    from launchbay.xgboost import XGBoost

    return XGBoost("xgboost_train.py", "1.7-1", source_dir=str(SCRIPTS), role=None, **kwargs)


@pytest.mark.parametrize(
    ("framework", "kwargs", "name", "command"),
    [
        (
            "huggingface",
            {"pytorch_version": "2.13.0", "instance_count": 2},
            "launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311",
            "launchbay images build huggingface --framework-version 5.24.0 --pytorch-version "
            "2.13.0 --processor cpu",
        ),
        (
            "sklearn",
            {},
            "launchbay/sklearn-training:1.2-1-cpu-py3",
            "launchbay images build sklearn --framework-version 1.2-1 --processor cpu "
            "--tag launchbay/sklearn-training:1.2-1-cpu-py3",
        ),
        (
            "xgboost",
            {"instance_count": 2},
            "launchbay/xgboost-training:1.7-1-cpu-py3",
            "launchbay images build xgboost --framework-version 1.7-1 --processor cpu "
            "--tag launchbay/xgboost-training:1.7-1-cpu-py3",
        ),
    ],
)
def test_local_image_names_and_their_build_commands(framework, kwargs, name, command):
    est = _local(framework, instance_type="local", **kwargs)
    assert est.training_image_uri() == name
    spec = images.parse_image_name(name)
    assert spec is not None and spec.framework == framework
    assert images.build_command(name) == command


def test_huggingface_local_gpu_and_tensorflow_names():
    est = _local(
        "huggingface", pytorch_version="2.13.0", instance_type="local_gpu", instance_count=1
    )
    assert est.training_image_uri() == (
        "launchbay/huggingface-training:5.24.0-pytorch2.13.0-gpu-py311"
    )
    tf = _local("huggingface", tensorflow_version="2.21.0", instance_type="local", instance_count=1)
    name = tf.training_image_uri()
    assert name == "launchbay/huggingface-training:5.24.0-tensorflow2.21.0-cpu-py311"
    with pytest.raises(ConfigurationError, match="PyTorch only"):
        context.framework_packages("huggingface", "5.24.0-tensorflow2.21.0")


def test_framework_packages():
    assert context.framework_packages("huggingface", "5.24.0-pytorch2.13.0") == (
        ["torch==2.13.0", "transformers==5.24.0", "numpy"],
        ["torch", "transformers"],
    )
    # Any SageMaker version installs the pinned packages.
    for version in ("0.23-1", "1.2-1", "1.4-2"):
        packages, modules = context.framework_packages("sklearn", version)
        assert packages == ["scikit-learn==1.9.1", "pandas", "joblib"] and "sklearn" in modules
    assert context.framework_packages("xgboost", "1.7-1")[0] == [
        "xgboost-cpu==3.2.0",
        "scikit-learn==1.9.1",
        "pandas",
    ]
    assert context.framework_packages("xgboost", "1.7-1", "gpu")[0][0] == "xgboost==3.2.0"


def test_build_args_carry_the_packages_and_can_be_overridden():
    base = "launchbay/python-base:3.11-bookworm"
    args = context.build_args_for("sklearn", "1.2-1", "cpu", "3.11", base, None, offline=False)
    assert args["FRAMEWORK"] == "sklearn" and args["FRAMEWORK_VERSION"] == "1.2-1"
    assert args["FRAMEWORK_PACKAGES"] == "scikit-learn==1.9.1 pandas joblib"
    assert args["FRAMEWORK_MODULES"] == "sklearn pandas joblib"
    mine = {"FRAMEWORK_PACKAGES": "scikit-learn==1.2.2 numpy<2 pandas"}
    args = context.build_args_for("sklearn", "1.2-1", "cpu", "3.11", base, mine, offline=False)
    assert args["FRAMEWORK_PACKAGES"] == mine["FRAMEWORK_PACKAGES"]
    assert context.dockerfile_for("xgboost") == ROOT / "containers" / "packages" / "Dockerfile"
    assert context.dockerfile_for("pytorch") == ROOT / "containers" / "pytorch" / "Dockerfile"


def test_pinned_packages_are_the_test_extras():
    text = (ROOT / "setup.cfg").read_text()
    for name, version in context.PINNED_PACKAGES.items():
        assert re.search(rf"^\s+{re.escape(name)}=={re.escape(version)}\s*$", text, re.M), name


def _no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the engine was asked before the arguments were checked")

    monkeypatch.setattr("launchbay.images.build.docker_client", refuse)


@pytest.mark.parametrize(
    ("call", "argument", "accepted"),
    [
        ({"framework": "sklearn", "processor": "gpu"}, "processor", "CPU only"),
        ({"framework": "huggingface", "framework_version": "5.24.0"}, "framework_version",
         "5.24.0-pytorch2.13.0"),
        ({"framework": "pytorch", "pytorch_version": "2.13.0"}, "pytorch_version", "huggingface"),
        ({"framework": "sklearn", "framework_version": "1.2-"}, "framework_version", "1.2-1"),
    ],
)  # fmt: skip
def test_build_refusals_before_the_engine(call, argument, accepted, monkeypatch):
    _no_engine(monkeypatch)
    call = {"framework_version": "1.2-1", **call}
    with pytest.raises(ConfigurationError) as info:
        images.build_image(call.pop("framework"), call.pop("framework_version"), **call)
    assert info.value.argument == argument
    assert accepted in str(info.value)


def test_cli_passes_the_pytorch_version(monkeypatch, capsys):
    from launchbay import cli

    seen = {}

    def build(framework, version, processor, **kwargs):
        seen.update(framework=framework, version=version, **kwargs)
        return "launchbay/huggingface-training:5.24.0-pytorch2.13.0-cpu-py311"

    monkeypatch.setattr(images, "build_image", build)
    code = cli.main(["images", "build", "huggingface", "--framework-version", "5.24.0",
                     "--pytorch-version", "2.13.0"])  # fmt: skip
    assert code == 0
    assert seen["framework"] == "huggingface" and seen["pytorch_version"] == "2.13.0"
    assert capsys.readouterr().out.strip().endswith("cpu-py311")
