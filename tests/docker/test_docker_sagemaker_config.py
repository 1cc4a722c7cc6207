"""SDK v2 local mode's ``~/.sagemaker/config.yaml`` shapes launchbay's local Docker jobs (issue 26).

``local.container_config.shm_size`` replaces the default 1 GB ``/dev/shm`` of every
container; the script measures it inside the container with ``os.statvfs``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from job_outputs import archive_members, file_uri
from launchbay.pytorch import PyTorch

pytestmark = [
    pytest.mark.docker,
    pytest.mark.filterwarnings("ignore:framework_version=:UserWarning"),
]

SHM_SCRIPT = """\
import json, os
st = os.statvfs("/dev/shm")
out = os.environ["SM_OUTPUT_DATA_DIR"]
with open(os.path.join(out, "shm.json"), "w") as f:
    json.dump({"bytes": st.f_blocks * st.f_frsize, "host": os.environ["SM_CURRENT_HOST"]}, f)
print("shm bytes", st.f_blocks * st.f_frsize)
"""


@pytest.fixture
def local_mode_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a ``~/.sagemaker/config.yaml`` stand-in and point launchbay at it."""

    def write(section: dict) -> Path:
        path = tmp_path / "dot-sagemaker" / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"local": section}))
        monkeypatch.setenv("LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG", str(path))
        return path

    return write


def _shm_of_job(pytorch_image: str, tmp_path: Path) -> dict:
    from launchbay.images import parse_image_name

    spec = parse_image_name(pytorch_image)
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "shm.py").write_text(SHM_SCRIPT)
    out = tmp_path / "out"
    est = PyTorch(
        entry_point="shm.py",
        source_dir=str(src),
        instance_type="local",
        instance_count=1,
        framework_version=spec.framework_version,
        py_version="py311",
        output_path=file_uri(out),
    )
    est.fit(logs=False)
    name = est.latest_training_job.name
    members = archive_members(out / name / "output" / "output.tar.gz")
    return json.loads(members["shm.json"])


def test_container_config_shm_size_inside_the_container(
    home, tmp_path, pytorch_image, local_mode_config
):
    local_mode_config({"container_config": {"shm_size": "3g"}, "local_code": True})
    report = _shm_of_job(pytorch_image, tmp_path)
    assert report["bytes"] == 3 * 1024**3, report


def test_without_the_file_shm_stays_1g(home, tmp_path, pytorch_image):
    assert not os.path.exists(os.environ["LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG"])
    report = _shm_of_job(pytorch_image, tmp_path)
    assert report["bytes"] == 1024**3, report
