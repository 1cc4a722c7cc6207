"""``launchbay validate`` / ``submit --dry-run`` refuse what a host would refuse or misuse (issue 25).

The entry point's name, channel names ``.`` and ``..`` and the checkpoint path are
checked by the runtime's own rules before anything runs: exit 2, the spec's line,
the argument, the value and what is accepted.
"""

from __future__ import annotations

import subprocess

import pytest

SPEC = """
framework: pytorch
framework_version: "2.8.0"
py_version: py312
entry_point: {entry_point}
source_dir: src
instance_type: local_process
{extra}
"""


def check_refused(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["my train.py", "-train.py", "$(touch pwned).py"])
def test_validate_refuses_an_entry_point_the_hosts_would_refuse(run_cli, project, name):
    (project.root / "src" / name).write_text("print('hi')\n")
    spec = project.spec(SPEC.format(entry_point=f"'{name}'", extra=""))
    check_refused(
        run_cli("validate", spec),
        "job.yaml:4: entry_point:",
        f"Invalid entry_point={name!r}",
        "is not a plain relative path: the hosts would refuse to run it",
        "Accepted: a plain relative path",
    )
    assert not (project.root / "src" / "pwned").exists()
    ok = project.spec(SPEC.format(entry_point="train.py", extra=""), name="ok.yaml")
    assert run_cli("validate", ok).returncode == 0


def test_validate_refuses_a_checkpoint_path_in_the_contract(run_cli, project):
    spec = project.spec(
        SPEC.format(entry_point="train.py", extra="checkpoint_local_path: /opt/ml/input/config")
    )
    check_refused(
        run_cli("validate", spec),
        "checkpoint_local_path:",
        "Invalid checkpoint_local_path='/opt/ml/input/config'",
        "It lies in /opt/ml/input, which the container contract owns",
    )


def test_a_dry_run_refuses_a_channel_named_dotdot(run_cli, project):
    data = project.root / "data"
    data.mkdir()
    spec = project.spec(
        SPEC.format(entry_point="train.py", extra=f"inputs:\n  '..': file://{data}")
    )
    check_refused(
        run_cli("submit", spec, "--dry-run"),
        "Invalid channel name '..' in inputs",
        "other than '.' and '..'",
    )
