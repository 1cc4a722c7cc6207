"""HuggingFace, SKLearn, XGBoost and MXNet (issue 32): v2's signatures, refusals, attach, specs.

The requests themselves are compared with SDK v2 in tests/compat (framework_cases.py).
"""

from __future__ import annotations

import inspect

import pytest

from fresh_interpreter import loaded_after
from launchbay import ConfigurationError, DistributionError, arguments
from launchbay._attach import init_params_from_description
from launchbay.huggingface import HuggingFace
from launchbay.mxnet import MXNet
from launchbay.sklearn import SKLearn
from launchbay.xgboost import XGBoost

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
HF = dict(transformers_version="4.36.0", pytorch_version="2.1.0", role=ROLE,
          instance_type="ml.p4d.24xlarge", instance_count=2)  # fmt: skip


@pytest.fixture(autouse=True)
def _region(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def test_import_launchbay_loads_no_new_framework():
    frameworks = (
        "m.split('.')[:2] in (['launchbay', 'huggingface'], ['launchbay', 'sklearn'], "
        "['launchbay', 'xgboost'], ['launchbay', 'mxnet']) "
        "or m in ('transformers', 'sklearn', 'xgboost', 'mxnet')"
    )
    assert loaded_after("import launchbay, launchbay.estimator", frameworks) == []


def test_module_paths_are_v2s():
    from launchbay.huggingface.estimator import HuggingFace as HF2
    from launchbay.mxnet.estimator import MXNet as MX2
    from launchbay.sklearn.estimator import SKLearn as SK2
    from launchbay.xgboost.estimator import XGBoost as XGB2

    assert (HF2, SK2, XGB2, MX2) == (HuggingFace, SKLearn, XGBoost, MXNet)


@pytest.mark.parametrize(
    ("cls", "positional"),
    [
        (HuggingFace, ["py_version", "entry_point", "transformers_version", "tensorflow_version",
                       "pytorch_version", "source_dir", "hyperparameters", "image_uri",
                       "distribution", "compiler_config"]),
        (SKLearn, ["entry_point", "framework_version", "py_version", "source_dir",
                   "hyperparameters", "image_uri", "image_uri_region"]),
        (XGBoost, ["entry_point", "framework_version", "source_dir", "hyperparameters",
                   "py_version", "image_uri", "image_uri_region"]),
        (MXNet, ["entry_point", "framework_version", "py_version", "source_dir",
                 "hyperparameters", "image_uri", "distribution"]),
    ],
)  # fmt: skip
def test_positional_order_and_defaults_are_v2s(cls, positional):
    import sagemaker.huggingface
    import sagemaker.mxnet
    import sagemaker.sklearn
    import sagemaker.xgboost

    v2 = {"HuggingFace": sagemaker.huggingface.HuggingFace, "SKLearn": sagemaker.sklearn.SKLearn,
          "XGBoost": sagemaker.xgboost.XGBoost, "MXNet": sagemaker.mxnet.MXNet}[cls.__name__]  # fmt: skip
    ours = inspect.signature(cls).parameters
    theirs = [p for p in inspect.signature(v2).parameters if p != "kwargs"]
    assert list(ours)[: len(positional)] == positional == theirs
    assert sorted(ours) == sorted(a.name for a in arguments.declared(cls))
    for name in positional:
        default = inspect.signature(v2).parameters[name].default
        if default is not inspect.Parameter.empty:
            assert ours[name].default == default, name
    assert "framework_version" not in ours if cls is HuggingFace else "framework_version" in ours


def test_sklearn_is_single_instance_and_cpu(src):
    with pytest.raises(ConfigurationError) as info:
        SKLearn("train.py", "1.2-1", source_dir="src", role=ROLE, instance_type="ml.m5.xlarge",
                instance_count=2)  # fmt: skip
    assert info.value.argument == "instance_count" and "Accepted: 1" in str(info.value)
    with pytest.raises(ConfigurationError, match="CPU") as info:
        SKLearn("train.py", "1.2-1", source_dir="src", role=ROLE, instance_type="ml.p3.2xlarge")
    assert info.value.argument == "instance_type"
    with pytest.raises(ConfigurationError, match="py3"):
        SKLearn(
            "train.py", "1.2-1", "py2", source_dir="src", role=ROLE, instance_type="ml.m5.xlarge"
        )
    with pytest.raises(DistributionError, match="no distribution"):
        SKLearn("train.py", "1.2-1", source_dir="src", role=ROLE, instance_type="ml.m5.xlarge",
                distribution={"mpi": {"enabled": True}})  # fmt: skip
    assert SKLearn("train.py", "1.2-1", source_dir="src", role=ROLE,
                   instance_type="ml.m5.xlarge").instance_count == 1  # fmt: skip


def test_xgboost_rules(src):
    with pytest.raises(ConfigurationError, match="1.2") as info:
        XGBoost("train.py", "1.1-1", source_dir="src", role=ROLE, instance_type="ml.m5.xlarge",
                instance_count=1)  # fmt: skip
    assert info.value.argument == "framework_version"
    with pytest.raises(ConfigurationError) as info:
        XGBoost("train.py", None, source_dir="src", role=ROLE, image_uri="my:1",
                instance_type="ml.m5.xlarge", instance_count=1)  # fmt: skip
    assert info.value.argument == "framework_version"


def test_huggingface_rules(src):
    base = {k: v for k, v in HF.items() if not k.endswith("_version")}
    cases = [
        ({"pytorch_version": "2.1.0"}, "transformers_version"),
        ({"transformers_version": "4.36.0"}, "pytorch_version"),
        ({**HF, "tensorflow_version": "2.6.3"}, "tensorflow_version"),
        ({"transformers_version": "4.36", "pytorch_version": "2.1.0"}, "pytorch_version"),
    ]
    for given, argument in cases:
        with pytest.raises(ConfigurationError) as info:
            HuggingFace("py310", "train.py", source_dir="src", **{**base, **given})
        assert info.value.argument == argument, given
    with pytest.raises(ConfigurationError, match="Training Compiler") as info:
        HuggingFace("py310", "train.py", source_dir="src", compiler_config=object(), **HF)
    assert info.value.argument == "compiler_config"
    with pytest.raises(DistributionError, match="parameter_server"):
        HuggingFace("py310", "train.py", source_dir="src", **HF,
                    distribution={"parameter_server": {"enabled": True}})  # fmt: skip


def test_mxnet_distribution_rules(src):
    mx = dict(role=ROLE, instance_type="ml.c5.xlarge", instance_count=2, source_dir="src")
    with pytest.raises(DistributionError, match="'parameter_server', 'mpi'"):
        MXNet(
            "train.py", "1.9.0", "py38", **mx, distribution={"torch_distributed": {"enabled": True}}
        )
    with pytest.raises(ConfigurationError, match="1.3") as info:
        MXNet("train.py", "1.2.1", "py3", **mx, distribution={"mpi": {"enabled": True}})
    assert info.value.argument == "framework_version"


@pytest.mark.parametrize(
    ("cls", "args", "kwargs"),
    [
        (HuggingFace, ("py310", "train.py"), {**HF, "distribution": {"pytorchddp": {"enabled": True}}}),
        (HuggingFace, ("py38", "train.py"), {**HF, "pytorch_version": None,
                                             "transformers_version": "4.17.0",
                                             "tensorflow_version": "2.6.3"}),
        (SKLearn, ("train.py", "1.2-1"), {"role": ROLE, "instance_type": "ml.m5.xlarge"}),
        (XGBoost, ("train.py", "1.7-1"), {"role": ROLE, "instance_type": "ml.m5.xlarge",
                                          "instance_count": 2}),
        (MXNet, ("train.py", "1.9.0", "py38"), {"role": ROLE, "instance_type": "ml.p3.16xlarge",
                                                "instance_count": 2,
                                                "distribution": {"mpi": {"enabled": True}}}),
    ],
)  # fmt: skip
def test_attach_gives_back_the_same_request(src, cls, args, kwargs):
    estimator = cls(*args, source_dir="src", output_path="s3://bucket/out", **kwargs)
    request = estimator.create_training_job_request("s3://bucket/train", job_name="job-1")
    params = init_params_from_description(cls, request, region="us-west-2")
    assert "image_uri" not in params  # the versions came back from the official image's tag
    rebuilt = cls(**params)
    again = rebuilt.create_training_job_request("s3://bucket/train", job_name="job-1")
    assert again == request


def test_attach_names_the_right_class(src):
    request = SKLearn("train.py", "1.2-1", source_dir="src", role=ROLE, output_path="s3://bucket/o",
                      instance_type="ml.m5.xlarge").create_training_job_request(
        "s3://bucket/train", job_name="job-1")  # fmt: skip
    with pytest.raises(ConfigurationError, match="launchbay.sklearn.SKLearn.attach"):
        init_params_from_description(XGBoost, request, region="us-west-2")


def test_job_specs_name_the_new_frameworks(tmp_path, src):
    from launchbay import Estimator, jobspec

    assert jobspec.schema()["properties"]["framework"]["enum"] == [
        "pytorch", "tensorflow", "huggingface", "sklearn", "xgboost", "mxnet"
    ]  # fmt: skip
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "framework: huggingface\nentry_point: train.py\nsource_dir: "
        f"{src}\npy_version: py310\ntransformers_version: '4.36.0'\npytorch_version: '2.1.0'\n"
        f"role: {ROLE}\ninstance_type: ml.g5.xlarge\ninstance_count: 1\n"
    )
    estimator = Estimator.from_yaml(spec)
    assert type(estimator) is HuggingFace and estimator.framework_version == "4.36.0"
    again = tmp_path / "again.yaml"
    estimator.to_yaml(again)
    assert type(Estimator.from_yaml(again)) is HuggingFace
