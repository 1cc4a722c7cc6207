"""What a local tuning job writes under ``$LAUNCHBAY_HOME`` (issue 31, items 3 and 10).

* Item 3: ``tuning/<name>/tuning.json`` holds every ``environment=`` value of the
  training job definition, and ``tuning/<name>/code/`` the user's code; they were
  0644 files in 0755 folders. Every file launchbay writes under ``$LAUNCHBAY_HOME``
  (jobs, tuning, caches, locks) is now its owner's alone.
* Item 10: on a Python whose tarfile has no ``data`` filter (Debian 12's 3.11.2), a
  local tuning job died at its start with a raw ``TypeError`` from keeping its code.

Real tuning jobs with ``local_process`` trials (``tuning_scripts/trial.py``).
"""

from __future__ import annotations

import os
import stat
import sys
import tarfile
from pathlib import Path

import pytest

from job_outputs import file_uri
from launchbay.pytorch import PyTorch
from launchbay.tuner import CategoricalParameter, HyperparameterTuner

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")

SCRIPTS = Path(__file__).parent / "tuning_scripts"
NO_FILTER = Path(__file__).resolve().parents[1] / "no_data_filter"
METRICS = [{"Name": "loss", "Regex": r"loss=([0-9.eE+-]+)"}]
SECRET = "tuning-s3cr3t-6d1a"


def _tuner(tmp_path: Path, **estimator_options) -> HyperparameterTuner:
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    estimator = PyTorch(
        entry_point="trial.py", source_dir=str(SCRIPTS), role=None,
        instance_type="local_process", instance_count=1, framework_version="2.8.0",
        py_version="py312", hyperparameters={"marks": str(marks), "epochs": 1},
        output_path=file_uri(tmp_path / "out"), metric_definitions=METRICS,
        **estimator_options,
    )  # fmt: skip
    return HyperparameterTuner(
        estimator, "loss", {"optimizer": CategoricalParameter(["sgd"])},
        metric_definitions=METRICS, strategy="Grid", max_parallel_jobs=1,
    )  # fmt: skip


def _reachable_by_others(home: Path, path: Path) -> bool:
    """Whether another user could reach ``path``: every folder from ``home`` down lets them in."""
    current = home
    for part in path.relative_to(home).parts[:-1]:
        current = current / part
        if not os.stat(current).st_mode & 0o011:
            return False
    return True


def test_every_file_launchbay_writes_under_home_is_its_owners_alone(home, tmp_path):
    """Item 3 (and the rank environments' rule, extended to all of $LAUNCHBAY_HOME)."""
    tuner = _tuner(tmp_path, environment={"MY_TOKEN": SECRET})
    tuner.fit(job_name="t-private-files")
    assert tuner.describe()["HyperParameterTuningJobStatus"] == "Completed"
    tuning = home / "tuning" / "t-private-files"
    record = tuning / "tuning.json"
    assert SECRET in record.read_text()
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tuning).st_mode) == 0o700
    kept = list((tuning / "code").rglob("*"))
    assert any(p.name == "trial.py" for p in kept), kept
    for path in [tuning / "code", *kept]:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        if path.is_dir():
            assert mode == 0o700, (path, oct(mode))
        elif not path.is_symlink():
            assert mode in (0o600, 0o700), (path, oct(mode))
    # launchbay's own folders: jobs, tuning, caches, staged code, locks, names ...
    for top in home.iterdir():
        if top.name != "output":  # what jobs publish, as any file:// output path
            assert stat.S_IMODE(os.stat(top).st_mode) == 0o700, top
    for job in (home / "jobs").iterdir():
        if not job.name.startswith("."):
            assert stat.S_IMODE(os.stat(job).st_mode) == 0o700, job
    # Nothing launchbay wrote there can be read by another user.
    exposed = []
    for directory, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(directory) / name
            if path.relative_to(home).parts[0] == "output" or path.is_symlink():
                continue
            if os.lstat(path).st_mode & 0o044 and _reachable_by_others(home, path):
                exposed.append(str(path.relative_to(home)))
    assert exposed == [], exposed
    # the secret is only in files only their owner reads
    for directory, _dirs, files in os.walk(home):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink() and SECRET.encode() in path.read_bytes():
                assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_a_tuning_job_runs_and_keeps_its_code_where_tarfile_has_no_data_filter(
    home, tmp_path, monkeypatch
):
    """Item 10: this process and every host's runtime see a tarfile without filters."""
    sys.path.insert(0, str(NO_FILTER))
    try:
        import sitecustomize as no_filter  # tests/no_data_filter: strips the filters
    finally:
        sys.path.remove(str(NO_FILTER))
    monkeypatch.setattr(tarfile.TarFile, "extractall", tarfile.TarFile.extractall)
    monkeypatch.setattr(tarfile.TarFile, "extract", tarfile.TarFile.extract)
    for name in ("data_filter", "tar_filter", "fully_trusted_filter", "FilterError"):
        if hasattr(tarfile, name):
            monkeypatch.setattr(tarfile, name, getattr(tarfile, name))
    no_filter.strip()
    assert not hasattr(tarfile, "data_filter")
    with pytest.raises(TypeError):
        tarfile.TarFile.extractall(None, ".", filter="data")  # type: ignore[call-arg, arg-type]
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(NO_FILTER), os.environ.get("PYTHONPATH", "")])
    )
    tuner = _tuner(tmp_path)
    tuner.fit(job_name="t-no-data-filter")
    description = tuner.describe()
    assert description["HyperParameterTuningJobStatus"] == "Completed", description
    kept = home / "tuning" / "t-no-data-filter" / "code" / "0"
    assert (kept / "trial.py").read_text() == (SCRIPTS / "trial.py").read_text()
    attached = HyperparameterTuner.attach("t-no-data-filter").best_estimator()
    assert attached.source_dir == str(kept)
