"""The estimator side of local_process: no AWS needed, code on disk, framework version check."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from factories import OMIT
from factories import estimator as make_estimator


@pytest.fixture
def local_env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    # A broken AWS config would fail any boto3 call this test made.
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "missing"))
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "noop.py").write_text("print('noop')\n")
    return tmp_path


def estimator(src, **kw):
    options = dict(role=OMIT, framework_version="2.13", py_version="py311")
    return make_estimator("noop.py", src, **{**options, **kw})


def test_dry_run_needs_no_aws_and_points_at_local_code(local_env):
    request = estimator(local_env / "src").create_training_job_request(job_name="local-1")
    home = str(local_env / "home")
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    assert submit.startswith(f"file://{home}/source/") and submit.endswith("/sourcedir.tar.gz")
    assert request["OutputDataConfig"]["S3OutputPath"] == f"file://{home}/output/"
    assert request["AlgorithmSpecification"]["TrainingImage"] == (
        "launchbay/pytorch-training:2.13-cpu-py311"
    )
    assert request["RoleArn"].endswith(":role/launchbay-local")
    assert json.loads(request["HyperParameters"]["sagemaker_region"]) == "us-east-1"


def test_code_is_staged_once_on_disk(local_env):
    est = estimator(local_env / "src")
    est.fit(logs=False, job_name="local-a")
    submit = json.loads(est.create_training_job_request(job_name="x")["HyperParameters"][
        "sagemaker_submit_directory"
    ])  # fmt: skip
    path = submit.removeprefix("file://")
    first = os.stat(path).st_mtime_ns
    est.fit(logs=False, job_name="local-b")
    assert os.stat(path).st_mtime_ns == first
    assert est.latest_training_job.status == "Completed"


def test_framework_version_mismatch_warns(local_env):
    with pytest.warns(
        UserWarning, match=r"framework_version='2.0' but this Python has torch 2\.13"
    ):
        estimator(local_env / "src", framework_version="2.0").fit(logs=False, job_name="old-torch")


@pytest.mark.parametrize(("version", "py"), [("1.9", "py38"), ("1.4.0", "py3"), ("0.4", "py2")])
def test_old_sdk_v2_framework_versions_run_on_the_installed_torch_with_a_warning(
    local_env, version, py
):
    """SDK v2 notebooks' old versions are accepted; local_process runs what is installed."""
    with pytest.warns(
        UserWarning, match=rf"framework_version='{version}' but this Python has torch"
    ):
        est = estimator(local_env / "src", framework_version=version, py_version=py)
        est.fit(logs=False, job_name=f"old-{version.replace('.', '-')}")
    assert est.latest_training_job.status == "Completed"


def test_matching_framework_version_does_not_warn(local_env):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        estimator(local_env / "src").fit(logs=False, job_name="same-torch")


def test_fit_uses_the_job_spec_inputs_and_name(local_env):
    from launchbay import Estimator

    data = local_env / "data"
    data.mkdir()
    (data / "a.csv").write_text("1,2\n")
    spec = local_env / "job.yaml"
    spec.write_text(
        "framework: pytorch\n"
        "framework_version: '2.13'\n"
        "py_version: py311\n"
        "entry_point: noop.py\n"
        "source_dir: src\n"
        "instance_type: local_process\n"
        "job_name: from-spec\n"
        f"inputs:\n  train: file://{data}\n"
    )
    est = Estimator.from_yaml(spec)
    job = est.fit(logs=False)
    assert job.name == "from-spec"
    config = local_env / "home" / "jobs" / "from-spec" / "algo-1" / "input" / "config"
    assert list(json.loads((config / "inputdataconfig.json").read_text())) == ["train"]
