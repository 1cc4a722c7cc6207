"""Unknown keywords name the argument a SageMaker SDK v2 user meant (issue 22, item 5).

``env=`` is the case from an AWS example: SDK v2 swallows it (its estimators take
``**kwargs``), and difflib finds nothing close to it among the argument names. Since
issue 32 (item 6) ``env=`` itself is dropped with a warning, as v2 drops it
(tests/compat/test_ignored_keywords.py); the table still names ``environment`` for
``envs``, ``env_vars`` and the other spellings, which stay errors.
"""

from __future__ import annotations

import pytest

from factories import OMIT, sagemaker_arguments
from launchbay import Estimator, UnknownArgumentError, arguments
from launchbay.errors import MEANT_ARGUMENTS, suggestion
from launchbay.pytorch import PyTorch
from launchbay.tensorflow import TensorFlow

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
COMMON = sagemaker_arguments(role=ROLE, framework_version=OMIT, py_version=OMIT)


def test_env_is_dropped_as_v2_drops_it_and_envs_suggests_environment(src):
    # env= is on the closed list of keywords SDK v2 drops (issue 32, item 6): dropped
    # with a warning naming environment=; a near miss off that list stays an error.
    with pytest.warns(UserWarning, match=r"ignores env=.*You probably meant environment="):
        est = PyTorch(**COMMON, framework_version="2.3", py_version="py311", env={"A": "1"})
    assert est.environment is None
    with pytest.raises(UnknownArgumentError) as info:
        PyTorch(**COMMON, framework_version="2.3", py_version="py311", envs={"A": "1"})
    message = str(info.value)
    assert "unexpected keyword argument 'envs'." in message
    assert "Did you mean 'environment'?" in message
    assert info.value.argument == "envs"


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("hyper_parameters", "hyperparameters"),
        ("hparams", "hyperparameters"),
        ("src", "source_dir"),
        ("instance_size", "instance_type"),
        ("num_instances", "instance_count"),
        ("image", "image_uri"),
        ("role_arn", "role"),
        ("session", "sagemaker_session"),
        ("python_version", "py_version"),
        ("environment_variables", "environment"),
    ],
)
def test_known_mistakes_suggest_the_argument(src, name, meant):
    with pytest.raises(UnknownArgumentError, match=f"Did you mean '{meant}'\\?"):
        TensorFlow(**COMMON, framework_version="2.14", py_version="py310", **{name: 1})


def test_every_meant_argument_exists_and_no_v1_name_is_shadowed():
    names = {a.name for a in arguments.ARGUMENTS}
    assert set(MEANT_ARGUMENTS.values()) <= names
    assert not set(MEANT_ARGUMENTS) & (names | set(arguments.v1_names()))


def test_the_table_only_suggests_an_argument_the_class_takes(src):
    # The generic Estimator has no py_version: 'python_version' gets no wrong hint.
    with pytest.raises(UnknownArgumentError) as info:
        Estimator(**COMMON, image_uri="img:1", python_version="py311")
    assert "Did you mean" not in str(info.value)
    assert suggestion("python_version", ["image_uri", "role"]) is None


def test_typos_still_get_difflib_and_fit_arguments_say_where(src):
    assert suggestion("enviroment", ["environment", "entry_point"]) == "environment"
    with pytest.raises(UnknownArgumentError, match="'inputs' is an argument of fit"):
        PyTorch(**COMMON, framework_version="2.3", py_version="py311", inputs="s3://b/k")
    with pytest.raises(UnknownArgumentError, match="requirements.txt in source_dir"):
        PyTorch(**COMMON, framework_version="2.3", py_version="py311", requirements="r.txt")
