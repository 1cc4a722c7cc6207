"""The GPU PyTorch image built without the CUDA base (issue 36 item 4).

No image registry is reachable here, so ``nvidia/cuda`` cannot be pulled. The image is built
FROM the same Debian base as the CPU images (``launchbay images base``), with torch's CUDA
build and its CUDA runtime libraries as ``nvidia-*`` wheels from the wheelhouse
``.ci/gpu-wheelhouse.sh`` downloads (from this machine's /opt indexes), and
``INSTALL_EFA=0`` (the EFA installer cannot be downloaded either). The driver comes from the
host at run time (the NVIDIA container runtime); this machine has none, so torch reports
CUDA support built in but no device, and the job below runs on the CPU.

The ``pytorch_gpu_image`` fixture builds it with the same inputs as ``.ci/run``, so the
context hash matches and CI's image is reused (a cold build: docs/images.md).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from factories import OMIT, estimator
from job_outputs import archive_members, containers_left, file_uri
from launchbay import images

pytestmark = [pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[2]
GPU_TORCH_VERSION = "2.14.1"
GPU_BUILD_ARGS = {"INSTALL_EFA": "0"}

JOB_SCRIPT = """\
import json, os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(total)
if dist.get_rank() == 0:
    report = {
        "sum": total.item(),
        "world": dist.get_world_size(),
        "cuda": torch.version.cuda,
        "cuda_built": torch.backends.cuda.is_built(),
        "cuda_available": torch.cuda.is_available(),
        "hosts": json.loads(os.environ["SM_HOSTS"]),
        "num_gpus": int(os.environ["SM_NUM_GPUS"]),
        "channel": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])),
    }
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "report.json"), "w") as f:
        json.dump(report, f)
dist.destroy_process_group()
"""


def gpu_wheelhouse() -> str:
    """``.ci/gpu-wheelhouse.sh``: torch's CUDA build and its nvidia-* wheels, as .ci/run."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(ROOT / ".ci" / "gpu-wheelhouse.sh"), GPU_TORCH_VERSION],
        env=env,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.fail(f".ci/gpu-wheelhouse.sh failed:\n{result.stderr[-4000:]}", pytrace=False)
    return result.stdout.strip().splitlines()[-1]


def build_gpu_image(docker_client: Any, base_image: str, **kwargs: Any) -> str:
    return images.build_image(
        "pytorch",
        GPU_TORCH_VERSION,
        "gpu",
        base_image=base_image,
        wheelhouse=gpu_wheelhouse(),
        build_args=GPU_BUILD_ARGS,
        reuse=True,
        client=docker_client,
        **kwargs,
    )


@pytest.fixture(scope="module")
def pytorch_gpu_image(docker_client: Any, base_image: str) -> str:
    """``launchbay/pytorch-training:2.14.1-gpu-py311`` FROM the Debian base, reused by hash."""
    try:
        return build_gpu_image(docker_client, base_image, stream=sys.stderr)
    except images.ImageBuildError as exc:
        pytest.fail(f"Building the GPU PyTorch image failed:\n{exc}", pytrace=False)
    raise AssertionError("unreachable")  # pragma: no cover


def test_gpu_image_holds_torchs_cuda_build_without_a_cuda_base(
    docker_client, pytorch_gpu_image, base_image
):
    code = (
        "import json, torch, mpi4py, boto3; print(json.dumps({"
        "'version': torch.__version__, 'cuda': torch.version.cuda, "
        "'built': torch.backends.cuda.is_built(), 'available': torch.cuda.is_available(), "
        "'cudnn': torch.backends.cudnn.version(), 'nccl': torch.cuda.nccl.version()}))"
    )
    output = docker_client.containers.run(
        pytorch_gpu_image,
        [
            "bash",
            "-c",
            f'set -e; python -c "{code}"; '
            # CUDA's runtime libraries come as wheels, not from a CUDA base or EFA.
            "ls /opt/venv/lib/python3.11/site-packages/nvidia/cu*/lib/libcudart.so*; "
            "test ! -e /usr/local/cuda; test ! -e /opt/amazon/efa; command -v train",
        ],
        remove=True,
    ).decode()
    report = json.loads(output.splitlines()[0])
    assert report["version"].startswith(GPU_TORCH_VERSION), report
    assert report["cuda"] and report["built"] is True, report
    assert report["available"] is False  # no driver here: the host gives it at run time
    assert report["cudnn"] and report["nccl"], report
    assert "libcudart.so" in output and "/opt/venv/bin/train" in output

    config = docker_client.api.inspect_image(pytorch_gpu_image)["Config"]
    assert "NVIDIA_VISIBLE_DEVICES=all" in config["Env"]
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in config["Env"]
    assert "LAUNCHBAY_PROCESSOR=gpu" in config["Env"]
    labels = config["Labels"]
    assert labels["ai.launchbay.processor"] == "gpu"
    assert labels["ai.launchbay.framework-version"] == GPU_TORCH_VERSION
    assert labels["ai.launchbay.base-image"] == base_image


def test_cpu_images_ask_for_no_gpu(docker_client, pytorch_image):
    # The same Dockerfile: only --processor gpu passes GPU_DEVICES=all.
    env = docker_client.api.inspect_image(pytorch_image)["Config"]["Env"]
    assert "NVIDIA_VISIBLE_DEVICES=" in env and "LAUNCHBAY_PROCESSOR=cpu" in env


def test_a_second_build_of_the_gpu_image_builds_nothing(
    docker_client, pytorch_gpu_image, base_image
):
    before = docker_client.images.get(pytorch_gpu_image).id
    shown = io.StringIO()
    assert build_gpu_image(docker_client, base_image, stream=shown) == pytorch_gpu_image
    assert "Building" not in shown.getvalue(), shown.getvalue()
    assert docker_client.images.get(pytorch_gpu_image).id == before


def test_a_torchrun_job_runs_on_cpu_in_the_gpu_image(
    home, tmp_path, docker_client, pytorch_gpu_image
):

    source = tmp_path / "src"
    source.mkdir()
    (source / "gpu_image_job.py").write_text(JOB_SCRIPT)
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    out = tmp_path / "out"
    est = estimator(
        "gpu_image_job.py",
        source,
        instance_type="local",
        framework_version=OMIT,
        py_version=OMIT,
        image_uri=pytorch_gpu_image,
        distribution={"torch_distributed": {"enabled": True, "processes_per_host": 2}},
        output_path=file_uri(out),
    )
    est.fit({"train": file_uri(data)}, logs=False)
    job = est.latest_training_job
    assert job.describe()["TrainingJobStatus"] == "Completed"
    model = archive_members(out / job.name / "output" / "model.tar.gz")
    report = json.loads(model["report.json"])
    assert report["world"] == 2 and report["sum"] == 3.0  # torchrun, 2 processes, gloo
    assert report["hosts"] == ["algo-1"] and report["num_gpus"] == 0
    assert report["cuda"] and report["cuda_built"] is True
    assert report["cuda_available"] is False
    assert report["channel"] == ["rows.csv"]
    assert not containers_left(docker_client, name=job.name)
