"""The local stand-ins (launchbay.runtime.standins) reach a script only in local jobs.

``LAUNCHBAY_STANDINS=1`` is set by the local backends alone; a runtime without it
(as on SageMaker) never puts ``smdistributed`` on the path, and a real library on
the path is always the one a script imports.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from launchbay.runtime import standins
from launchbay.runtime.launchers import mpi, select_launcher
from launchbay.runtime.settings import RuntimeSettings

from .test_launchers import LOCAL, make_ctx

PROBE = """
import json
try:
    import smdistributed
except ModuleNotFoundError as exc:
    print(json.dumps({"file": None, "error": str(exc)}))
else:
    print(json.dumps({"file": smdistributed.__file__,
                      "standin": getattr(smdistributed, "LAUNCHBAY_STANDIN", False)}))
"""

DP = {"sagemaker_distributed_dataparallel_enabled": True}


def probe(results) -> dict:
    (line,) = results["algo-1"].json_lines()
    return line


def test_without_the_local_flag_the_runtime_adds_nothing(local_job) -> None:
    results = local_job({"train.py": PROBE}).run()
    assert probe(results) == {"file": None, "error": "No module named 'smdistributed'"}


def test_in_a_local_job_the_standin_is_imported(local_job) -> None:
    results = local_job({"train.py": PROBE}, env={"LAUNCHBAY_STANDINS": "1"}).run()
    seen = probe(results)
    assert seen["standin"] is True
    assert seen["file"] == str(Path(standins.DIRECTORY) / "smdistributed" / "__init__.py")


def test_a_real_library_on_the_path_wins_over_the_standin(local_job, tmp_path: Path) -> None:
    fake = tmp_path / "site" / "smdistributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("REAL = True\n")
    env = {"LAUNCHBAY_STANDINS": "1", "PYTHONPATH": str(tmp_path / "site")}
    seen = probe(local_job({"train.py": PROBE}, env=env).run())
    assert seen == {"file": str(fake / "__init__.py"), "standin": False}


def test_non_python_entry_points_get_it_through_pythonpath(local_job, tmp_path: Path) -> None:
    files = {"probe.py": PROBE, "run.sh": f"#!/bin/sh\nexec {sys.executable} probe.py\n"}
    seen = probe(local_job(files, program="run.sh", env={"LAUNCHBAY_STANDINS": "1"}).run())
    assert seen["standin"] is True
    fake = tmp_path / "site" / "smdistributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = {"LAUNCHBAY_STANDINS": "1", "PYTHONPATH": str(tmp_path / "site")}
    seen = probe(local_job(files, program="run.sh", env=env).run())
    assert seen == {"file": str(fake / "__init__.py"), "standin": False}


@pytest.mark.parametrize(
    ("settings", "gpus", "smddprun", "expected"),
    [
        (RuntimeSettings(), 8, False, "torch_distributed"),  # SageMaker, no library: as before
        (RuntimeSettings(), 8, True, "smdistributed"),  # SageMaker GPU image: the real one
        (RuntimeSettings(standins=True), 0, False, "smddp_local"),  # local Docker, CPU
        (RuntimeSettings(standins=True), 8, True, "smdistributed"),  # a real image, locally
        (dataclasses.replace(LOCAL, standins=True), 0, False, "smddp_local"),
        (LOCAL, 0, False, "torch_distributed"),
    ],
)
def test_dataparallel_uses_the_standin_launcher_only_in_local_jobs_without_smddprun(
    tmp_path: Path, settings: RuntimeSettings, gpus: int, smddprun: bool, expected: str
) -> None:
    env = make_ctx(tmp_path, DP, gpus=gpus).env
    env = dataclasses.replace(env, is_smddprun_installed=smddprun)
    assert select_launcher(env, settings) == expected


def test_the_local_plan_is_one_mpirun_with_the_dataparallel_options(tmp_path: Path) -> None:
    hps = {
        **DP,
        "sagemaker_mpi_num_of_processes_per_host": 2,
        "sagemaker_distributed_dataparallel_custom_mpi_options": "-x FOO=1",
    }
    settings = dataclasses.replace(LOCAL, standins=True)
    plan = mpi.build_smddp_local(make_ctx(tmp_path, hps, settings=settings))
    assert plan.launcher == "smdistributed" and plan.world_size == 4
    (mpirun,) = plan.main_processes
    assert mpirun.argv[:3] == ["mpirun", "-np", "4"]
    assert "-x FOO=1" in " ".join(mpirun.argv)
    assert mpirun.env["LAUNCHBAY_SMDDP"] == "1"
    assert mpirun.env["GLOO_SOCKET_IFNAME"] == "lo"
    assert json.loads(mpirun.env["LAUNCHBAY_MPI_LOCAL"])["ppn"] == 2
