"""The tuner as a facade: estimators offer their job through ``prepare_job()``, and the
plan's tuning backend (local for client-driven estimators, else SageMaker) runs it."""

from __future__ import annotations

import pytest

from launchbay.estimator import PreparedJob
from launchbay.pytorch import PyTorch
from launchbay.tuner import ContinuousParameter, HyperparameterTuner
from launchbay.tuning.backends import (
    TUNING_BACKENDS,
    LocalTuning,
    SageMakerTuning,
    TuningBackend,
    find_tuning_job,
    tuning_backend_for,
    tuning_backend_of,
)
from launchbay.tuning.local import LocalTuningJob
from launchbay.tuning.sagemaker import TuningJob

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def _estimator(**options):
    settings = dict(
        entry_point="train.py", source_dir="src", role=None, instance_type="local_process",
        instance_count=1, framework_version="2.8.0", py_version="py312",
    )  # fmt: skip
    settings.update(options)
    return PyTorch(**settings)


def test_an_estimator_offers_its_job_through_a_public_seam(src):
    estimator = _estimator()
    prepared = estimator.prepare_job(job_name="seam-1")
    assert isinstance(prepared, PreparedJob)
    assert prepared.plan.name == "seam-1" and prepared.plan.local
    assert dict(prepared.plan.request) == estimator.create_training_job_request(job_name="seam-1")
    assert prepared.session is None  # a local estimator made without a session keeps none
    assert callable(prepared.stage)


def test_the_plan_picks_its_tuning_backend(src):
    tuner = HyperparameterTuner(
        _estimator(), "loss", {"lr": ContinuousParameter(0.01, 0.1)},
        metric_definitions=[{"Name": "loss", "Regex": "loss=(.*)"}], strategy="Random",
    )  # fmt: skip
    backend = tuning_backend_for(tuner.tuning_plan(job_name="t-local"))
    assert isinstance(backend, LocalTuning) and isinstance(backend, TuningBackend)
    assert list(TUNING_BACKENDS) == ["local", "sagemaker"]
    assert isinstance(TUNING_BACKENDS["sagemaker"], SageMakerTuning)


def test_a_handle_names_the_backend_it_came_from():
    assert tuning_backend_of(LocalTuningJob("t-1")) is TUNING_BACKENDS["local"]
    assert tuning_backend_of(TuningJob(object(), "t-1")) is TUNING_BACKENDS["sagemaker"]
    assert tuning_backend_of(object()) is TUNING_BACKENDS["sagemaker"]  # SDK v2's default


def test_a_name_with_details_given_is_sagemakers_without_a_lookup_here(home):
    details = {"HyperParameterTuningJobName": "t-given"}
    session = type("S", (), {"boto_region_name": "us-west-2"})()
    found = find_tuning_job("t-given", session, details)
    assert isinstance(found.job, TuningJob) and found.region == "us-west-2"
    assert found.details == details and found.details is not details
    assert found.session is session
