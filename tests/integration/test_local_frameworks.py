"""The HuggingFace, SKLearn, XGBoost and MXNet estimators in ``local_process`` (issue 32).

Each job goes through ``fit()`` with synthetic data made here and leaves its model in
``model.tar.gz``: HuggingFace on 2 hosts (a tiny BERT built from a config, never
downloaded, trained with DDP under torchrun), XGBoost on 2 hosts (framework mode: the
script runs plainly on each host), SKLearn on 1 (it is single-instance, as in SDK v2).
MXNet's local job is refused before anything starts where ``import mxnet`` fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from factories import TINY_BERT, classification_csv, tiny_bert_tokens
from job_outputs import check_sklearn_job, check_tiny_bert_job, check_xgboost_job, file_uri
from launchbay import ConfigurationError
from launchbay.inputs import TrainingInput

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "framework_scripts"
SKLEARN_SETTINGS = {"inverse-reg": 0.5, "max-iter": 200}
XGBOOST_SETTINGS = {"num_round": 20, "max_depth": 3}


def _estimator(cls, entry_point: str, version: str, out: Path, **kwargs):
    """A ``cls`` estimator of a script here for a ``local_process`` job, output under ``out``."""
    return cls(entry_point, version, source_dir=str(SCRIPTS), instance_type="local_process",
               output_path=file_uri(out), **kwargs)  # fmt: skip


def test_sklearn_one_host_writes_its_model(home, tmp_path):
    from launchbay.sklearn import SKLearn

    out = tmp_path / "out"
    est = _estimator(SKLearn, "sklearn_train.py", "1.4-2", out, hyperparameters=SKLEARN_SETTINGS)
    est.fit({"train": classification_csv(tmp_path / "data")}, logs=False)
    check_sklearn_job(est, out)


def test_sklearn_refuses_two_instances():
    from launchbay.sklearn import SKLearn

    with pytest.raises(ConfigurationError, match="instance_count=2") as info:
        SKLearn("sklearn_train.py", "1.4-2", source_dir=str(SCRIPTS),
                instance_type="local_process", instance_count=2)  # fmt: skip
    assert info.value.argument == "instance_count"
    assert "Accepted: 1" in str(info.value)


def test_xgboost_two_hosts_each_train_their_share(home, tmp_path):
    from launchbay.xgboost import XGBoost

    out = tmp_path / "out"
    est = _estimator(XGBoost, "xgboost_train.py", "1.7-1", out, instance_count=2,
                     hyperparameters=XGBOOST_SETTINGS)  # fmt: skip
    est.fit({"train": TrainingInput(classification_csv(tmp_path / "data"))}, logs=False)
    check_xgboost_job(est, out, tmp_path / "data" / "train.csv")


def test_huggingface_two_hosts_tiny_bert(home, tmp_path, monkeypatch):
    from launchbay.huggingface import HuggingFace

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tiny_bert_tokens(tmp_path / "data")
    out = tmp_path / "out"
    est = HuggingFace(
        "py312",
        "hf_train.py",
        transformers_version="4.56.2",
        pytorch_version="2.8.0",
        source_dir=str(SCRIPTS),
        instance_type="local_process",
        output_path=file_uri(out),
        **TINY_BERT,
    )
    est.fit({"train": data}, logs=False)
    check_tiny_bert_job(est, out, tmp_path / "saved")  # the saved model loads back offline


def _mxnet_imports() -> bool:
    done = subprocess.run([sys.executable, "-c", "import mxnet"], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(_mxnet_imports(), reason="mxnet imports here: the local job would run")
def test_mxnet_local_process_is_refused_before_anything_starts(home, tmp_path):
    from launchbay.mxnet import MXNet

    est = MXNet(
        "mxnet_train.py",
        "1.9.0",
        "py38",
        source_dir=str(SCRIPTS),
        instance_type="local_process",
        instance_count=2,
        distribution={"parameter_server": {"enabled": True}},
        output_path=file_uri(tmp_path / "out"),
    )
    # The request is SDK v2's either way.
    request = est.create_training_job_request(file_uri(tmp_path), job_name="mxnet-local")
    assert request["HyperParameters"]["sagemaker_parameter_server_enabled"] == "true"
    with pytest.raises(ConfigurationError, match="numpy < 2") as info:
        est.fit(file_uri(tmp_path), logs=False)
    assert info.value.argument == "instance_type"
    assert "mxnet" in str(info.value)
    assert not (home / "jobs").exists() or not any((home / "jobs").iterdir())
