"""``LAUNCHBAY_INSTALL_REQUIREMENTS=1`` in ``local_process``: pip runs once per job (issue 22, item 4).

The hosts of a ``local_process`` job share one interpreter. The job here runs in a
throwaway venv (so the tiny package never lands in the test environment) that sees
the test environment's packages (launchbay, pip): tests/job_venv.py. Its
``requirements.txt`` names a local project whose in-tree build backend (no build
dependencies: nothing is downloaded) appends a line to a counter file each time pip
builds it and waits a moment, so two hosts installing at the same time would both
be counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest

import job_venv

BACKEND = textwrap.dedent(
    '''
    """A PEP 517 backend that counts its builds and writes the wheel by hand."""
    import base64, hashlib, os, time, zipfile

    NAME, VERSION = "lbtinypkg", "1.0"
    COUNTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builds.txt")

    def _record_line(path, data):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"{path},sha256={digest},{len(data)}"

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        with open(COUNTER, "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(2)  # hosts installing at the same time overlap here
        info = f"{NAME}-{VERSION}.dist-info"
        files = {
            f"{NAME}/__init__.py": b"VALUE = 42\\n",
            f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode(),
            f"{info}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
        }
        record = [_record_line(p, d) for p, d in files.items()] + [f"{info}/RECORD,,"]
        files[f"{info}/RECORD"] = ("\\n".join(record) + "\\n").encode()
        name = f"{NAME}-{VERSION}-py3-none-any.whl"
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as whl:
            for path, data in files.items():
                whl.writestr(path, data)
        return name
    '''
)

TRAIN = textwrap.dedent(
    """
    import json, os
    import lbtinypkg

    host = os.environ["SM_CURRENT_HOST"]
    with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{host}.json"), "w") as f:
        json.dump({"host": host, "value": lbtinypkg.VALUE, "file": lbtinypkg.__file__}, f)
    print("imported lbtinypkg", lbtinypkg.VALUE)
    """
)

DRIVER = textwrap.dedent(
    """
    import json, sys
    from launchbay.pytorch import PyTorch

    est = PyTorch(entry_point="train.py", source_dir=sys.argv[1], role=None,
                  instance_type="local_process", instance_count=2,
                  framework_version="2.8.0", py_version="py312",
                  environment={"LAUNCHBAY_INSTALL_REQUIREMENTS": "1"},
                  output_path="file://" + sys.argv[2])
    try:
        est.fit(logs=False)
    finally:
        job = est.latest_training_job
        print(json.dumps({"job": job.name if job else None,
                          "status": job.describe()["TrainingJobStatus"] if job else None}))
    """
)


@pytest.fixture
def job_python(tmp_path: Path) -> Path:
    """A fresh venv's python (without pip of its own) seeing this environment's packages."""
    return job_venv.make(tmp_path / "venv")


def _write_project(tmp_path: Path) -> tuple[Path, Path]:
    pkg = tmp_path / "lbtinypkg-src"
    pkg.mkdir()
    (pkg / "backend.py").write_text(BACKEND)
    (pkg / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    (src / "requirements.txt").write_text(f"--no-index\n{pkg}\n")
    return pkg, src


def _run_job(job_python: Path, tmp_path: Path, home: Path, src: Path) -> dict:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    env = dict(os.environ, LAUNCHBAY_HOME=str(home), PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")  # fmt: skip
    result = subprocess.run(
        [str(job_python), str(driver), str(src), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, result.stdout + result.stderr
    return {**json.loads(lines[-1]), "stderr": result.stderr, "stdout": result.stdout}


def test_two_hosts_install_requirements_once(job_python, tmp_path, home):
    pkg, src = _write_project(tmp_path)
    outcome = _run_job(job_python, tmp_path, home, src)
    logs_dir = home / "jobs" / outcome["job"] / "logs"
    logs = {p.stem: p.read_text() for p in sorted(logs_dir.glob("*.log"))}
    assert outcome["status"] == "Completed", (outcome, logs)
    # The backend ran once: one pip build for the job.
    assert len((pkg / "builds.txt").read_text().splitlines()) == 1, logs
    # pip's output appears once in the job's logs; the other host says who installed.
    everything = "\n".join(logs.values())
    assert everything.count("Successfully installed lbtinypkg-1.0") == 1, everything
    assert "Requirement already satisfied: lbtinypkg" not in everything
    assert sum("installed it into" in text for text in logs.values()) == 1, everything
    # Both hosts' scripts imported it, from the job's venv (not the test environment).
    with tarfile.open(tmp_path / "out" / outcome["job"] / "output" / "model.tar.gz") as tar:
        reports = {m.name: json.load(tar.extractfile(m)) for m in tar.getmembers() if m.isfile()}
    assert sorted(reports) == ["algo-1.json", "algo-2.json"]
    for report in reports.values():
        assert report["value"] == 42
        assert report["file"].startswith(str(tmp_path / "venv")), report


def test_a_failed_install_fails_every_host_with_the_same_reason(job_python, tmp_path, home):
    pkg, src = _write_project(tmp_path)
    (pkg / "backend.py").write_text(BACKEND.replace("time.sleep(2)", "time.sleep(2); 1 / 0"))
    outcome = _run_job(job_python, tmp_path, home, src)
    assert outcome["status"] == "Failed", outcome
    assert len((pkg / "builds.txt").read_text().splitlines()) == 1
    logs_dir = home / "jobs" / outcome["job"] / "logs"
    everything = "\n".join(p.read_text() for p in logs_dir.glob("*.log"))
    assert everything.count("ZeroDivisionError") >= 1
    assert "pip ran once for this job's hosts" in everything, everything
