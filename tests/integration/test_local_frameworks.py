"""The HuggingFace, SKLearn, XGBoost and MXNet estimators in ``local_process`` (issue 32).

Each job goes through ``fit()`` with synthetic data made here and leaves its model in
``model.tar.gz``: HuggingFace on 2 hosts (a tiny BERT built from a config, never
downloaded, trained with DDP under torchrun), XGBoost on 2 hosts (framework mode: the
script runs plainly on each host), SKLearn on 1 (it is single-instance, as in SDK v2).
MXNet's local job is refused before anything starts where ``import mxnet`` fails.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from job_outputs import archive_members, file_uri, rank_reports
from launchbay import ConfigurationError
from launchbay.inputs import TrainingInput

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "framework_scripts"


def _classification_csv(directory: Path, rows: int = 200) -> str:
    """``train.csv``: label first, 4 features; the label is a linear rule of the features."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 4))
    labels = (features @ np.array([1.0, -2.0, 0.5, 1.5]) > 0).astype(float)
    directory.mkdir(parents=True, exist_ok=True)
    np.savetxt(directory / "train.csv", np.column_stack([labels, features]), delimiter=",")
    return file_uri(directory)


def test_sklearn_one_host_writes_its_model(home, tmp_path):
    import joblib

    from launchbay.sklearn import SKLearn

    train = _classification_csv(tmp_path / "data")
    out = tmp_path / "out"
    est = SKLearn(
        "sklearn_train.py",
        "1.4-2",
        source_dir=str(SCRIPTS),
        instance_type="local_process",
        hyperparameters={"inverse-reg": 0.5, "max-iter": 200},
        output_path=file_uri(out),
    )
    est.fit({"train": train}, logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    assert est.model_data == file_uri(prefix / "model.tar.gz")
    model = joblib.load(io.BytesIO(archive_members(prefix / "model.tar.gz")["model.joblib"]))
    assert model.C == 0.5
    report = json.loads(archive_members(prefix / "output.tar.gz")["report.json"])
    assert report["hosts"] == ["algo-1"] and report["accuracy"] > 0.9
    assert job.describe()["TrainingJobStatus"] == "Completed"


def test_sklearn_refuses_two_instances():
    from launchbay.sklearn import SKLearn

    with pytest.raises(ConfigurationError, match="instance_count=2") as info:
        SKLearn("sklearn_train.py", "1.4-2", source_dir=str(SCRIPTS),
                instance_type="local_process", instance_count=2)  # fmt: skip
    assert info.value.argument == "instance_count"
    assert "Accepted: 1" in str(info.value)


def test_xgboost_two_hosts_each_train_their_share(home, tmp_path):
    import xgboost as xgb

    from launchbay.xgboost import XGBoost

    train = _classification_csv(tmp_path / "data")
    out = tmp_path / "out"
    est = XGBoost(
        "xgboost_train.py",
        "1.7-1",
        source_dir=str(SCRIPTS),
        instance_type="local_process",
        instance_count=2,
        hyperparameters={"num_round": 20, "max_depth": 3},
        output_path=file_uri(out),
    )
    est.fit({"train": TrainingInput(train)}, logs=False)
    prefix = out / est.latest_training_job.name / "output"
    model = archive_members(prefix / "model.tar.gz")
    assert sorted(model) == ["xgboost-model-algo-1.json", "xgboost-model-algo-2.json"]
    data = np.loadtxt(tmp_path / "data" / "train.csv", delimiter=",")
    for name, raw in model.items():
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        predicted = booster.predict(xgb.DMatrix(data[:, 1:])) > 0.5
        assert np.mean(predicted == data[:, 0]) > 0.8, name


def test_huggingface_two_hosts_tiny_bert(home, tmp_path, monkeypatch):
    import torch

    from launchbay.huggingface import HuggingFace

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "data"
    data.mkdir()
    generator = torch.Generator().manual_seed(0)
    torch.save(
        {
            "input_ids": torch.randint(0, 64, (16, 8), generator=generator),
            "labels": torch.randint(0, 2, (16,), generator=generator),
        },
        data / "tokens.pt",
    )
    out = tmp_path / "out"
    est = HuggingFace(
        "py312",
        "hf_train.py",
        transformers_version="4.56.2",
        pytorch_version="2.8.0",
        source_dir=str(SCRIPTS),
        instance_type="local_process",
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True}},
        environment={"HF_HUB_OFFLINE": "1"},
        hyperparameters={"epochs": 2},
        output_path=file_uri(out),
    )
    est.fit({"train": file_uri(data)}, logs=False)
    prefix = out / est.latest_training_job.name / "output"
    model = archive_members(prefix / "model.tar.gz")
    assert "config.json" in model and "model.safetensors" in model
    assert json.loads(model["config.json"])["hidden_size"] == 32
    reports = rank_reports(archive_members(prefix / "output.tar.gz"))
    assert sorted(reports) == [0, 1]
    assert {r["host"] for r in reports.values()} == {"algo-1", "algo-2"}
    assert all(r["world"] == 2 and r["sum"] == 3 and r["offline"] == "1" for r in reports.values())

    # The saved model loads back offline from the archive.
    from transformers import BertForSequenceClassification

    saved = tmp_path / "saved"
    saved.mkdir()
    for name, raw in model.items():
        (saved / name).write_bytes(raw)
    assert BertForSequenceClassification.from_pretrained(saved).config.num_labels == 2


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
