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

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from factories import TINY_BERT, classification_csv, tiny_bert_tokens
from job_outputs import (
    check_sklearn_job,
    check_tiny_bert_job,
    check_xgboost_job,
    containers_left,
    file_uri,
    networks_left,
)
from launchbay import images

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "integration" / "framework_scripts"
PACKAGES_DOCKERFILE = ROOT / "containers" / "packages" / "Dockerfile"
PYTORCH_DOCKERFILE = ROOT / "containers" / "pytorch" / "Dockerfile"
SKLEARN_SETTINGS = {"inverse-reg": 0.5, "max-iter": 200}
XGBOOST_SETTINGS = {"num_round": 20, "max_depth": 3}


def _estimator(cls, entry_point: str, version: str, out: Path, **kwargs):
    """A ``cls`` estimator of a framework script for a local Docker job, output under ``out``."""
    return cls(entry_point, version, source_dir=str(SCRIPTS), role=None, instance_type="local",
               output_path=file_uri(out), **kwargs)  # fmt: skip


def _assert_nothing_left(docker_client: Any, job_name: str) -> None:
    containers = containers_left(docker_client, name=job_name)
    assert not containers, containers
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
    from launchbay.sklearn import SKLearn

    out = tmp_path / "out"
    est = _estimator(SKLearn, "sklearn_train.py", "1.2-1", out, hyperparameters=SKLEARN_SETTINGS)
    assert est.training_image_uri() == sklearn_image
    est.fit({"train": classification_csv(tmp_path / "data")}, logs=False)
    assert check_sklearn_job(est, out)["host"] == "algo-1"
    _assert_nothing_left(docker_client, est.latest_training_job.name)


def test_xgboost_two_hosts_in_two_containers(home, tmp_path, docker_client, xgboost_image):
    from launchbay.xgboost import XGBoost

    out = tmp_path / "out"
    est = _estimator(XGBoost, "xgboost_train.py", "1.7-1", out, instance_count=2,
                     hyperparameters=XGBOOST_SETTINGS)  # fmt: skip
    assert est.training_image_uri() == xgboost_image
    est.fit({"train": classification_csv(tmp_path / "data")}, logs=False)
    check_xgboost_job(est, out, tmp_path / "data" / "train.csv")
    _assert_nothing_left(docker_client, est.latest_training_job.name)


def test_huggingface_two_hosts_tiny_bert_in_two_containers(
    home, tmp_path, docker_client, huggingface_image
):
    from launchbay.huggingface import HuggingFace

    data = tiny_bert_tokens(tmp_path / "data")
    out = tmp_path / "out"
    est = HuggingFace(
        "py311",
        "hf_train.py",
        transformers_version="5.24.0",
        pytorch_version="2.13.0",
        source_dir=str(SCRIPTS),
        role=None,
        instance_type="local",
        output_path=file_uri(out),
        **TINY_BERT,
    )
    assert est.training_image_uri() == huggingface_image
    est.fit({"train": data}, logs=False)
    # The model saved in the container loads back here, offline, from the archive.
    check_tiny_bert_job(est, out, tmp_path / "saved")
    _assert_nothing_left(docker_client, est.latest_training_job.name)


def test_a_missing_image_names_its_build_command(home, tmp_path, docker_client):
    from launchbay.errors import ImageNotFoundError
    from launchbay.xgboost import XGBoost

    # no image of this version is built here
    est = _estimator(XGBoost, "xgboost_train.py", "1.3-1", tmp_path / "out", instance_count=1)
    with pytest.raises(ImageNotFoundError) as info:
        est.fit({"train": classification_csv(tmp_path / "data")}, logs=False)
    assert (
        "launchbay images build xgboost --framework-version 1.3-1 --processor cpu "
        "--tag launchbay/xgboost-training:1.3-1-cpu-py3" in str(info.value)
    )
