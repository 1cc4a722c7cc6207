"""Pulling ECR images (built-in algorithms) through the Docker engine, from a real registry.

A ``docker-registry`` (Debian's package, .ci/run installs it) listens on 127.0.0.1; a tiny
image made by ``docker import`` of busybox-static is pushed to it. ``LAUNCHBAY_ECR_ENDPOINT``
maps ECR names (``<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>``) to that
registry, and the ECR token comes from moto's ``GetAuthorizationToken`` (boto3), as it
would from ECR. Every image, container and the registry process are removed after.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

KMEANS_US_WEST_2 = "174872318107.dkr.ecr.us-west-2.amazonaws.com"

TRAIN = r"""#!/bin/sh
echo "fake algorithm: $(cat /opt/ml/input/config/hyperparameters.json)"
ls /opt/ml/input/data/train
cat /opt/ml/input/config/hyperparameters.json > /opt/ml/model/hyperparameters.json
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A docker-registry on 127.0.0.1:<free port>; yields ``127.0.0.1:<port>``."""
    binary = shutil.which("docker-registry")
    assert binary, "docker-registry is needed (.ci/run installs Debian's package)"
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        json.dumps({  # YAML is a superset of JSON
            "version": 0.1,
            "log": {"level": "error"},
            "storage": {"filesystem": {"rootdirectory": str(root / "data")}},
            "http": {"addr": f"127.0.0.1:{port}"},
        })
    )  # fmt: skip
    process = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"docker-registry did not start: {process.stderr.read() if process.stderr else ''}"
                    ) from None
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _busybox_tar(train: str) -> bytes:
    busybox = shutil.which("busybox")
    assert busybox, "busybox-static is needed (.ci/run installs it)"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(busybox, arcname="bin/busybox")
        for name in ("sh", "cat", "ls", "echo", "mkdir"):
            info = tarfile.TarInfo(f"bin/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        for directory in ("tmp", "proc", "sys", "dev", "etc", "opt/ml", "usr/bin"):
            info = tarfile.TarInfo(directory)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if directory == "tmp" else 0o755
            tar.addfile(info)
        data = train.encode()
        info = tarfile.TarInfo("usr/bin/train")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def pushed(registry: str, docker_client: Any) -> Iterator[Any]:
    """``pushed(path)``: push a busybox "algorithm" to ``registry/path``; removed after."""
    made: list[str] = []

    def push(path: str) -> str:
        local = f"launchbay-test/pull-src:{uuid.uuid4().hex[:8]}"
        subprocess.run(
            ["docker", "import", "--change", "ENV PATH=/usr/bin:/bin", "-", local],
            input=_busybox_tar(TRAIN), check=True, capture_output=True,
        )  # fmt: skip
        made.append(local)
        repository, _, tag = f"{registry}/{path}".rpartition(":")
        docker_client.api.tag(local, repository, tag=tag)
        made.append(f"{repository}:{tag}")
        for chunk in docker_client.api.push(repository, tag=tag, stream=True, decode=True):
            assert "error" not in chunk, chunk
        for name in made:  # nothing of it stays local: the test must pull it
            docker_client.api.remove_image(name, force=True)
        made.clear()
        return path

    yield push
    for name in made:
        try:
            docker_client.api.remove_image(name, force=True)
        except Exception:  # noqa: BLE001  already gone
            pass


@pytest.fixture
def ecr_endpoint(registry: str, aws: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LAUNCHBAY_ECR_ENDPOINT", registry)
    return registry


def _remove(docker_client: Any, name: str) -> None:
    try:
        docker_client.api.remove_image(name, force=True)
    except Exception:  # noqa: BLE001  not there
        pass


def test_pull_image_logs_in_to_ecr_and_names_the_image_as_asked(
    pushed: Any, ecr_endpoint: str, docker_client: Any
) -> None:
    from launchbay import images

    path = pushed(f"launchbay-test/algo-{uuid.uuid4().hex[:6]}:1")
    name = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{path}"
    out = io.StringIO()
    try:
        assert images.pull_image(name, stream=out) == name  # not a terminal: plain lines
        assert docker_client.images.get(name).tags == [name]  # the mirror's name is gone
        shown = out.getvalue()
        assert f"Pulling {name} from {ecr_endpoint}" in shown and "ECR login through boto3" in shown
        assert f"Pulled {name}" in shown
    finally:
        _remove(docker_client, name)


def test_pull_failure_says_how_to_pull_by_hand(ecr_endpoint: str) -> None:
    from launchbay import images

    name = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/launchbay-test/absent:7"
    with pytest.raises(images.ImagePullError) as caught:
        images.pull_image(name, progress=False, stream=io.StringIO())
    message = str(caught.value)
    assert "aws ecr get-login-password --region eu-west-1 | docker login --username AWS " \
        "--password-stdin 123456789012.dkr.ecr.eu-west-1.amazonaws.com" in message  # fmt: skip
    assert f"docker pull {name}" in message


def test_launchbay_images_pull_command(pushed: Any, ecr_endpoint: str, docker_client: Any) -> None:
    from launchbay import cli

    path = pushed(f"launchbay-test/cli-{uuid.uuid4().hex[:6]}:2")
    name = f"123456789012.dkr.ecr.us-west-2.amazonaws.com/{path}"
    try:
        assert cli.main(["images", "pull", name]) == 0
        docker_client.images.get(name)
    finally:
        _remove(docker_client, name)


def test_fit_in_docker_mode_pulls_the_missing_algorithm_image(
    pushed: Any, ecr_endpoint: str, docker_client: Any, home: Path, tmp_path: Path
) -> None:
    """KMeans(instance_type="local").fit(record_set): the kmeans image is pulled, then run."""
    import numpy as np

    import launchbay

    pushed("kmeans:1")
    image = f"{KMEANS_US_WEST_2}/kmeans:1"  # image_uris.retrieve("kmeans", "us-west-2")
    _remove(docker_client, image)
    try:
        estimator = launchbay.KMeans(
            instance_count=1, instance_type="local", k=3,
            sagemaker_session=launchbay.Session(region_name="us-west-2"),
            output_path=f"file://{tmp_path}/out",
        )  # fmt: skip
        records = estimator.record_set(np.arange(40, dtype="float32").reshape(10, 4))
        assert records.s3_data.startswith("file://") and records.s3_data_type == "S3Prefix"
        job = estimator.fit(records, mini_batch_size=5)
        assert job.describe()["TrainingJobStatus"] == "Completed"
        assert docker_client.images.get(image)
        hyperparameters = estimator.create_training_job_request(records, mini_batch_size=5)[
            "HyperParameters"
        ]
        assert hyperparameters == {"force_dense": "True", "k": "3", "feature_dim": "4",
                                   "mini_batch_size": "5"}  # fmt: skip
    finally:
        _remove(docker_client, image)
