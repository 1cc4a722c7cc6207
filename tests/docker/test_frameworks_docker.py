"""HuggingFace, scikit-learn and XGBoost in local Docker mode (issue 32).

The images come from containers/packages/Dockerfile (the ``huggingface_image``,
``sklearn_image`` and ``xgboost_image`` session fixtures build each once, reused by context
hash afterwards). Each job goes through ``fit()`` with ``instance_type="local"`` and no
``image_uri``, so the estimator names its image itself, with synthetic data made here and
the scripts of the ``local_process`` tests (tests/integration/framework_scripts): a tiny
BERT built from a config (never downloaded, ``HF_HUB_OFFLINE=1``) on 2 hosts under
torchrun, XGBoost in framework mode on 2 hosts (the script runs plainly on each), and
scikit-learn on 1 (single instance, as in SDK v2). Each leaves its model in
``model.tar.gz`` and no container or network behind.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from job_outputs import archive_members, file_uri, networks_left, rank_reports
from launchbay import images

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "integration" / "framework_scripts"
PACKAGES_DOCKERFILE = ROOT / "containers" / "packages" / "Dockerfile"
PYTORCH_DOCKERFILE = ROOT / "containers" / "pytorch" / "Dockerfile"


def _classification_csv(directory: Path, rows: int = 200) -> str:
    """``train.csv``: label first, 4 features; the label is a linear rule of the features."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(rows, 4))
    labels = (features @ np.array([1.0, -2.0, 0.5, 1.5]) > 0).astype(float)
    directory.mkdir(parents=True, exist_ok=True)
    np.savetxt(directory / "train.csv", np.column_stack([labels, features]), delimiter=",")
    return file_uri(directory)


def _assert_nothing_left(docker_client: Any, job_name: str) -> None:
    containers = docker_client.containers.list(all=True, filters={"name": job_name})
    assert not containers, [c.name for c in containers]
    networks = networks_left(docker_client, lambda n: job_name in n)
    assert not networks, networks


# --------------------------------------------------------------------------- the Dockerfile


def _through_mpi4py(path: Path) -> list[str]:
    """The lines from ``ARG BASE_IMAGE`` through the mpi4py step (the layers to share)."""
    lines = path.read_text().splitlines()
    start = lines.index("ARG BASE_IMAGE=python:3.11-slim")
    end = next(i for i, line in enumerate(lines) if "import mpi4py, boto3" in line)
    return lines[start : end + 1]


def test_the_packages_dockerfile_shares_pytorchs_layers_through_mpi4py():
    # Line for line PyTorch's up to the framework: built FROM the same base with the same
    # wheelhouse and CA bundle, Docker's cache gives these images PyTorch's system and
    # mpi4py layers, so none of them compiles mpi4py again.
    assert _through_mpi4py(PACKAGES_DOCKERFILE) == _through_mpi4py(PYTORCH_DOCKERFILE)
    # ... and the image stage after the framework is PyTorch's too.
    marker = "# The image."
    packages_tail = PACKAGES_DOCKERFILE.read_text().split(marker, 1)[1]
    assert packages_tail == PYTORCH_DOCKERFILE.read_text().split(marker, 1)[1]


# --------------------------------------------------------------------------- the images


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("huggingface_image", {"torch": r"2\.13\.0\b", "transformers": r"5\.24\.0$"}),
        ("sklearn_image", {"sklearn": r"1\.9\.1$", "pandas": r"\d", "joblib": r"\d"}),
        ("xgboost_image", {"xgboost": r"3\.2\.0$", "sklearn": r"1\.9\.1$", "pandas": r"\d"}),
    ],
)
def test_each_image_holds_its_packages_and_train(request, docker_client, fixture, expected):
    image = request.getfixturevalue(fixture)
    code = (
        "import importlib, sys; "
        f"[print(m, importlib.import_module(m).__version__) for m in {sorted(expected)!r}]; "
        "print('py', '%d.%d' % sys.version_info[:2])"
    )
    output = docker_client.containers.run(
        image, ["bash", "-c", f'python -c "{code}" && command -v train'], remove=True
    ).decode()
    versions = dict(line.split(" ", 1) for line in output.splitlines() if " " in line)
    for module, pattern in expected.items():
        assert re.search(pattern, versions[module]), (module, output)
    assert versions["py"] == "3.11" and "/opt/venv/bin/train" in output
    labels = docker_client.api.inspect_image(image)["Config"]["Labels"]
    assert labels["ai.launchbay.framework"] == fixture.split("_")[0]
    assert labels["ai.launchbay.packages"].split()[0] in {
        "torch==2.13.0",
        "scikit-learn==1.9.1",
        "xgboost-cpu==3.2.0",
    }


def test_a_second_build_reuses_the_image(docker_client, sklearn_image, base_image, wheelhouse):
    # The session's fixture built (or reused) the image from the same inputs: the same
    # context hash, so this build is a reuse and the image is the very same one.
    before = docker_client.images.get(sklearn_image).id
    tag = images.build_image(
        "sklearn",
        "1.2-1",
        base_image=base_image,
        wheelhouse=wheelhouse,
        tag=sklearn_image,
        reuse=True,
        client=docker_client,
        stream=sys.stderr,
    )
    assert tag == sklearn_image
    assert docker_client.images.get(sklearn_image).id == before


# --------------------------------------------------------------------------- jobs


def test_sklearn_one_host_in_a_container(home, tmp_path, docker_client, sklearn_image):
    import joblib

    from launchbay.sklearn import SKLearn

    train = _classification_csv(tmp_path / "data")
    out = tmp_path / "out"
    est = SKLearn(
        "sklearn_train.py",
        "1.2-1",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local",
        hyperparameters={"inverse-reg": 0.5, "max-iter": 200},
        output_path=file_uri(out),
    )
    assert est.training_image_uri() == sklearn_image
    est.fit({"train": train}, logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    assert est.model_data == file_uri(prefix / "model.tar.gz")
    model = joblib.load(io.BytesIO(archive_members(prefix / "model.tar.gz")["model.joblib"]))
    assert model.C == 0.5
    report = json.loads(archive_members(prefix / "output.tar.gz")["report.json"])
    assert report["hosts"] == ["algo-1"] and report["host"] == "algo-1"
    assert report["accuracy"] > 0.9
    assert job.describe()["TrainingJobStatus"] == "Completed"
    _assert_nothing_left(docker_client, job.name)


def test_xgboost_two_hosts_in_two_containers(home, tmp_path, docker_client, xgboost_image):
    import xgboost as xgb

    from launchbay.xgboost import XGBoost

    train = _classification_csv(tmp_path / "data")
    out = tmp_path / "out"
    est = XGBoost(
        "xgboost_train.py",
        "1.7-1",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local",
        instance_count=2,
        hyperparameters={"num_round": 20, "max_depth": 3},
        output_path=file_uri(out),
    )
    assert est.training_image_uri() == xgboost_image
    est.fit({"train": train}, logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    model = archive_members(prefix / "model.tar.gz")
    assert sorted(model) == ["xgboost-model-algo-1.json", "xgboost-model-algo-2.json"]
    data = np.loadtxt(tmp_path / "data" / "train.csv", delimiter=",")
    for name, raw in model.items():
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
        predicted = booster.predict(xgb.DMatrix(data[:, 1:])) > 0.5
        assert np.mean(predicted == data[:, 0]) > 0.8, name
    _assert_nothing_left(docker_client, job.name)


def test_huggingface_two_hosts_tiny_bert_in_two_containers(
    home, tmp_path, docker_client, huggingface_image
):
    import torch

    from launchbay.huggingface import HuggingFace

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
        "py311",
        "hf_train.py",
        transformers_version="5.24.0",
        pytorch_version="2.13.0",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local",
        instance_count=2,
        distribution={"torch_distributed": {"enabled": True}},
        environment={"HF_HUB_OFFLINE": "1"},
        hyperparameters={"epochs": 2},
        output_path=file_uri(out),
    )
    assert est.training_image_uri() == huggingface_image
    est.fit({"train": file_uri(data)}, logs=False)
    job = est.latest_training_job
    prefix = out / job.name / "output"
    model = archive_members(prefix / "model.tar.gz")
    assert "config.json" in model and "model.safetensors" in model
    assert json.loads(model["config.json"])["hidden_size"] == 32
    reports = rank_reports(archive_members(prefix / "output.tar.gz"))
    assert sorted(reports) == [0, 1]
    assert {r["host"] for r in reports.values()} == {"algo-1", "algo-2"}
    assert all(r["world"] == 2 and r["sum"] == 3 and r["offline"] == "1" for r in reports.values())
    _assert_nothing_left(docker_client, job.name)

    # The model saved in the container loads back here, offline, from the archive.
    from transformers import BertForSequenceClassification

    saved = tmp_path / "saved"
    saved.mkdir()
    for name, raw in model.items():
        (saved / name).write_bytes(raw)
    assert BertForSequenceClassification.from_pretrained(saved).config.num_labels == 2


def test_a_missing_image_names_its_build_command(home, tmp_path, docker_client):
    from launchbay.errors import ImageNotFoundError
    from launchbay.xgboost import XGBoost

    est = XGBoost(
        "xgboost_train.py",
        "1.3-1",  # no image of this version is built here
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local",
        instance_count=1,
        output_path=file_uri(tmp_path / "out"),
    )
    with pytest.raises(ImageNotFoundError) as info:
        est.fit({"train": _classification_csv(tmp_path / "data")}, logs=False)
    assert (
        "launchbay images build xgboost --framework-version 1.3-1 --processor cpu "
        "--tag launchbay/xgboost-training:1.3-1-cpu-py3" in str(info.value)
    )
