"""The argument declaration (launchbay.arguments) is the one place an argument lives.

Each test derives what it checks from ``ARGUMENTS``: the constructor, the
signatures, the job-spec schema and its file, to_yaml/from_yaml, the request and
attach. The last test adds an argument in that one place and sees it work
everywhere.
"""

from __future__ import annotations

import inspect
import json
import types
import typing
import warnings
from collections.abc import Mapping
from pathlib import Path

import pytest

from factories import sagemaker_arguments
from launchbay import ConfigurationError, Estimator, UnknownArgumentError, arguments, jobspec
from launchbay._attach import init_params_from_description
from launchbay.arguments import MISSING, Argument, Bool
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
REGION = "us-west-2"
ROOT = Path(__file__).resolve().parents[2]


def _base(cls: type) -> dict:
    versions = {"framework_version": "2.16"} if cls is not PyTorch else {}
    return sagemaker_arguments(framework=cls, output_path="s3://bucket/out", **versions)


def _class(argument: Argument) -> type:
    return TensorFlow if argument.owner == arguments.TENSORFLOW else PyTorch


#: The arguments PyTorch and TensorFlow take (the other frameworks' own arguments are
#: tested with their classes in test_framework_estimators.py).
OWNERS = (arguments.BASE, arguments.FRAMEWORK, arguments.TENSORFLOW)
EXAMPLES = [a for a in arguments.ARGUMENTS if a.example is not MISSING and a.owner in OWNERS]


@pytest.fixture(autouse=True)
def _region(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _request(estimator) -> dict:
    return estimator.create_training_job_request("s3://bucket/train", job_name="job-1")


def test_every_argument_is_in_the_signature_of_its_classes():
    for cls in (Estimator, PyTorch, TensorFlow):
        names = list(inspect.signature(cls).parameters)
        assert names == [p for p in names if p != "self"]
        declared = [a.name for a in arguments.declared(cls)]
        assert sorted(names) == sorted(declared), cls
        for argument in arguments.declared(cls):
            assert inspect.signature(cls).parameters[argument.name].default == argument.default


def _annotations(cls: type) -> dict[str, str]:
    """The class-level annotations ``cls`` has, as written (the nearest class's wins)."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        found.update(inspect.get_annotations(klass))
    return found


def test_every_bound_argument_is_annotated_with_its_declared_type():
    """mypy and editors see each bound attribute; the annotation is the table's type (issue 21)."""
    for cls in (Estimator, PyTorch, TensorFlow):
        annotations = _annotations(cls)
        taken = arguments.declared(cls)
        for argument in taken:
            assert annotations.get(argument.attribute) == argument.type, (cls, argument)
        for argument in arguments.ARGUMENTS:
            if argument not in taken:  # no class annotates an argument it does not take
                assert argument.attribute not in annotations, (cls, argument)


def _conforms(value: object, hint: object) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is typing.Literal:
        return any(value is arg or (type(value) is type(arg) and value == arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(v, args[0]) for v in value)
    if origin in (dict, Mapping):
        return isinstance(value, origin) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, typing.cast(type, origin or hint))


@pytest.mark.parametrize("cls", [Estimator, PyTorch, TensorFlow])
def test_the_bound_values_have_their_declared_types(src, cls):
    """Built with defaults, then with every example: each stored value is of its annotated type."""
    hints = typing.get_type_hints(cls)
    kwargs = _base(PyTorch if cls is Estimator else cls)
    if cls is Estimator:
        kwargs = {**kwargs, "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1"}
        del kwargs["framework_version"], kwargs["py_version"]
    examples = {
        a.name: a.example
        for a in arguments.declared(cls)
        if a.example is not MISSING and a.name not in ("use_spot_instances",)
    }
    for given in (kwargs, {**kwargs, **examples}):
        estimator = cls(**given)
        for argument in arguments.declared(cls):
            value = getattr(estimator, argument.attribute)
            assert _conforms(value, hints[argument.attribute]), (argument, value)
    assert not _conforms(None, hints["input_mode"]) and _conforms(
        False, hints["debugger_hook_config"]
    )


def test_positional_arguments_follow_sdk_v2():
    assert list(inspect.signature(Estimator).parameters)[:4] == [
        "image_uri",
        "role",
        "instance_count",
        "instance_type",
    ]
    assert list(inspect.signature(PyTorch).parameters)[:7] == [
        "entry_point",
        "framework_version",
        "py_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
    ]
    assert list(inspect.signature(TensorFlow).parameters)[:3] == [
        "py_version",
        "framework_version",
        "model_dir",
    ]


def test_positional_values_bind_to_sdk_v2_names(src):
    est = Estimator("img:1", ROLE, 2, "ml.m5.xlarge")
    assert (est.image_uri, est.role, est.instance_count, est.instance_type) == (
        "img:1",
        ROLE,
        2,
        "ml.m5.xlarge",
    )
    with pytest.raises(TypeError, match="at most 4 positional arguments"):
        Estimator("img:1", ROLE, 2, "ml.m5.xlarge", 5)
    with pytest.raises(TypeError, match="multiple values for argument 'role'"):
        Estimator("img:1", ROLE, role=ROLE, instance_count=1, instance_type="ml.m5.xlarge")


def test_the_schema_file_is_the_rendering_of_the_declarations():
    path = ROOT / "sdk" / "launchbay" / "schemas" / "jobspec.schema.json"
    on_disk = json.loads(path.read_text(encoding="utf-8"))
    assert on_disk == jobspec.render_schema(on_disk), "run python tools/gen_jobspec_schema.py"
    properties = jobspec.schema()["properties"]
    for argument in arguments.ARGUMENTS:
        assert (argument.name in properties) == argument.in_spec, argument.name
        if argument.in_spec:
            assert properties[argument.name]["description"] == argument.doc


def test_every_v1_name_is_declared_and_warns(src):
    assert arguments.v1_names()  # the SDK v1 aliases are part of the declaration
    for old, new in arguments.v1_names().items():
        value = arguments.get(new).example
        if value is MISSING or old == "train_use_spot_instances":
            continue
        kwargs = _base(PyTorch)
        kwargs.pop(new, None)
        kwargs[old] = value
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est = PyTorch(**kwargs)
        assert any(f"'{old}' is deprecated" in str(w.message) for w in caught), old
        assert getattr(est, arguments.get(new).attribute) == value
        assert caught[0].filename == __file__  # the warning points at the caller's line


@pytest.mark.parametrize("argument", EXAMPLES, ids=[a.name for a in EXAMPLES])
def test_each_example_survives_the_request_yaml_and_attach(src, tmp_path, argument):
    cls = _class(argument)
    kwargs = {**_base(cls), argument.name: argument.example}
    est = cls(**kwargs)
    request = _request(est)
    if argument.request and not argument.resolved:
        value = argument.example
        if argument.to_request is not None:
            value = argument.to_request(est.__dict__[argument.attribute])
        assert arguments.lookup(request, argument.request) == value

    # to_yaml / from_yaml: the same request
    spec_path = tmp_path / "job.yaml"
    est.to_yaml(spec_path)
    again = cls.from_yaml(spec_path)
    assert _request(again) == request

    # attach: the description gives back the same request (tags are not described)
    description = {k: v for k, v in request.items() if k != "Tags"}
    params = init_params_from_description(cls, description, region=REGION)
    rebuilt = cls(**params)
    expected = {k: v for k, v in request.items() if k != "Tags"}
    assert _request(rebuilt) == expected


@pytest.mark.parametrize("argument", [a for a in arguments.ARGUMENTS if a.owner in OWNERS[:2]])
def test_a_wrong_type_names_the_argument_and_the_value(src, argument):
    if argument.name in ("sagemaker_session", "vpc_config", "distribution", "hyperparameters"):
        return  # objects checked by their own modules (tests/unit/test_vpc_config.py ...)
    value = object()
    with pytest.raises(ConfigurationError) as info:
        PyTorch(**{**_base(PyTorch), argument.name: value})
    message = str(info.value)
    assert argument.name in message.split(":")[0] or argument.name in message, message
    assert "ccepted" in message or "expected" in message, message


def test_unknown_names_are_refused_with_a_suggestion(src):
    with pytest.raises(UnknownArgumentError, match="Did you mean 'volume_size'"):
        PyTorch(**_base(PyTorch), volume_sise=5)


def test_one_declaration_adds_an_argument_everywhere(src, tmp_path, monkeypatch):
    """An SDK v2 argument launchbay leaves out today, added by one entry in ARGUMENTS."""
    added = Argument(
        "enable_infra_check",
        Bool(),
        "Run SageMaker's infrastructure check before the job.",
        default=False,
        request="InfraCheckConfig.EnableInfraCheck",
        to_request=lambda v: True if v else None,
        from_request=lambda v: True if v else MISSING,
    )
    monkeypatch.setattr(arguments, "ARGUMENTS", (*arguments.ARGUMENTS, added))

    est = PyTorch(**_base(PyTorch), enable_infra_check=True)  # the constructor takes it
    request = _request(est)
    assert request["InfraCheckConfig"] == {"EnableInfraCheck": True}  # the request carries it
    with pytest.raises(ConfigurationError, match="enable_infra_check='yes'"):  # it is checked
        PyTorch(**_base(PyTorch), enable_infra_check="yes")

    schema = jobspec.render_schema({"properties": {}})  # the spec schema has it
    assert schema["properties"]["enable_infra_check"]["type"] == "boolean"
    assert (
        arguments.to_spec(arguments.bound_values(est), str(tmp_path))["enable_infra_check"] is True
    )
    assert arguments.from_spec({"enable_infra_check": True}) == {"enable_infra_check": True}

    params = init_params_from_description(PyTorch, request, region=REGION)  # attach
    assert params["enable_infra_check"] is True
    assert _request(PyTorch(**params)) == {k: v for k, v in request.items() if k != "Tags"}
