"""Which launcher starts the ranks of a local smdistributed dataparallel job (issue 22, item 9).

In ``local_process`` mode a PyTorch script (the stand-in runs on ``torch.distributed``)
is started by torchrun, without MPI; a TensorFlow script (collectives on mpi4py) and a
non-Python entry point by ``mpirun``. Local Docker jobs keep ``mpirun`` over SSH. The
framework is read from the entry point's imports, following the code directory's modules.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from launchbay.runtime.code import EntryPoint, resolve_entry_point
from launchbay.runtime.launchers import build_plan, mpi, smddp
from launchbay.runtime.settings import RuntimeSettings

from .test_launchers import LOCAL, make_ctx

DP = {"sagemaker_distributed_dataparallel_enabled": True}
STANDINS = dataclasses.replace(LOCAL, standins=True)


def _code(tmp_path: Path, files: dict[str, str]) -> Path:
    """The code directory ``make_ctx`` points at (``<tmp>/algo-1/code``)."""
    code = tmp_path / "algo-1" / "code"
    for name, text in files.items():
        path = code / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return code


def _framework(tmp_path: Path, files: dict[str, str], program: str = "train.py") -> str | None:
    code = _code(tmp_path, files)
    return smddp.entry_framework(str(code), resolve_entry_point(str(code), program))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"train.py": "import smdistributed.dataparallel.torch.torch_smddp\n"}, "pytorch"),
        ({"train.py": "import smdistributed.dataparallel.torch.distributed as dist\n"}, "pytorch"),
        ({"train.py": "from smdistributed.dataparallel.torch.parallel import DDP\n"}, "pytorch"),
        ({"train.py": "import smdistributed.dataparallel.tensorflow as sdp\n"}, "tensorflow"),
        ({"train.py": "from smdistributed.dataparallel import tensorflow as sdp\n"}, "tensorflow"),
        ({"train.py": "import torch\nimport smdistributed.dataparallel as dp\n"}, "pytorch"),
        ({"train.py": "import tensorflow as tf\n"}, "tensorflow"),
        ({"train.py": "import smdistributed.dataparallel as dp\n"}, None),
        ({"train.py": "this is not python (\n"}, None),
        # Through a helper module of the code directory, and in a function body.
        (
            {
                "train.py": "import helper\n",
                "helper.py": "def f():\n    import smdistributed.dataparallel.tensorflow as sdp\n",
            },
            "tensorflow",
        ),
        (
            {
                "train.py": "from lib.net import Net\n",
                "lib/__init__.py": "",
                "lib/net.py": "from . import comm\n",
                "lib/comm.py": "import smdistributed.dataparallel.torch.torch_smddp\n",
            },
            "pytorch",
        ),
    ],
)
def test_the_framework_comes_from_the_entry_points_imports(tmp_path, files, expected):
    assert _framework(tmp_path, files) == expected


def test_a_source_dir_with_both_scripts_reads_the_entry_point_only(tmp_path):
    files = {
        "train_pytorch.py": "import smdistributed.dataparallel.torch.torch_smddp\n",
        "train_tf.py": "import smdistributed.dataparallel.tensorflow as sdp\n",
    }
    assert _framework(tmp_path, files, "train_pytorch.py") == "pytorch"
    assert _framework(tmp_path / "again", files, "train_tf.py") == "tensorflow"


def test_an_import_cycle_ends(tmp_path):
    files = {"train.py": "import a\n", "a.py": "import b\n", "b.py": "import a\nimport torch\n"}
    assert _framework(tmp_path, files) == "pytorch"


def _plan(
    tmp_path: Path,
    script: str,
    *,
    settings: RuntimeSettings = STANDINS,
    hosts: int = 2,
    entry: EntryPoint | None = None,
    hps: dict | None = None,
):
    code = _code(tmp_path, {"train.py": script})
    entry = entry or EntryPoint("train.py", "script", path=str(code / "train.py"))
    hps = {**DP, "sagemaker_mpi_num_of_processes_per_host": 2, **(hps or {})}
    return build_plan(make_ctx(tmp_path, hps, settings=settings, hosts=hosts, entry=entry))


def test_local_process_pytorch_is_one_torchrun_for_every_host(tmp_path):
    plan = _plan(tmp_path, "import smdistributed.dataparallel.torch.torch_smddp\n")
    assert plan.launcher == "smdistributed" and plan.world_size == 4
    (torchrun,) = plan.main_processes
    assert torchrun.argv[1:5] == ["-m", "torch.distributed.run", "--nnodes", "1"]
    assert torchrun.argv[torchrun.argv.index("--nproc_per_node") + 1] == "4"
    assert json.loads(torchrun.env["LAUNCHBAY_TORCH_LOCAL"])["hosts"] == ["algo-1", "algo-2"]
    assert "LAUNCHBAY_MPI_LOCAL" not in torchrun.env and "LAUNCHBAY_SMDDP" not in torchrun.env
    assert torchrun.env["GLOO_SOCKET_IFNAME"] == "lo"
    assert not plan.notes


def test_one_local_host_is_one_torchrun(tmp_path):
    plan = _plan(tmp_path, "import smdistributed.dataparallel.torch.torch_smddp\n", hosts=1)
    (torchrun,) = plan.main_processes
    assert plan.launcher == "smdistributed" and plan.world_size == 2
    assert "torch.distributed.run" in torchrun.argv


def test_custom_mpi_options_are_named_as_unused(tmp_path):
    plan = _plan(
        tmp_path,
        "import smdistributed.dataparallel.torch.torch_smddp\n",
        hps={"sagemaker_distributed_dataparallel_custom_mpi_options": "-x FOO=1"},
    )
    assert any("'-x FOO=1' are not used" in note for note in plan.notes)


@pytest.mark.parametrize(
    ("script", "settings", "entry"),
    [
        ("import smdistributed.dataparallel.tensorflow as sdp\n", STANDINS, None),  # TF
        # Code that uses MPI itself expects MPI's world.
        ("import smdistributed.dataparallel as dp\nfrom mpi4py import MPI\n", STANDINS, None),
        ("", STANDINS, EntryPoint("run.sh", "command")),  # not Python
        # Local Docker (containers, not local_process): mpirun over SSH, as before.
        (
            "import smdistributed.dataparallel.torch.torch_smddp\n",
            RuntimeSettings(standins=True),
            None,
        ),
    ],
    ids=["tensorflow", "mpi4py", "command", "docker"],
)
def test_tensorflow_commands_and_containers_keep_mpi(
    tmp_path, monkeypatch, script, settings, entry
):
    monkeypatch.setattr(mpi, "SSHD", sys.executable)  # containers run sshd; any file will do
    plan = _plan(tmp_path, script, settings=settings, entry=entry)
    assert plan.launcher == "smdistributed"
    assert all("torch.distributed.run" not in p.argv for p in plan.processes)
    (mpirun,) = plan.main_processes
    assert mpirun.argv[0] == "mpirun" and mpirun.env["LAUNCHBAY_SMDDP"] == "1"
    if settings.local_process:
        assert mpirun.argv[:3] == ["mpirun", "-np", "4"]
