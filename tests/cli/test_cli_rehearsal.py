"""``launchbay submit --interrupt-after``: a 2-host spot job interrupted twice, and the
summary naming a script that ignored its restored checkpoints (issue 35 item 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from factories import OMIT, job_spec

SCRIPTS = Path(__file__).parent.parent / "integration" / "local_process_scripts"


def write_spec(root: Path, name: str) -> Path:
    (root / "code").mkdir(parents=True)
    shutil.copy(SCRIPTS / "epochs_checkpointed.py", root / "code")
    spec = root / "job.yaml"
    spec.write_text(
        job_spec(
            'hyperparameters: {epochs: 28, epoch-seconds: 0.25, resume: "false"}\n',
            framework_version='"2.8.0"',
            py_version="py312",
            entry_point="epochs_checkpointed.py",
            source_dir="code",
            role=OMIT,
            instance_type="local_process",
            instance_count=2,
            job_name=name,
            use_spot_instances="true",
            max_run=600,
            max_wait=900,
            checkpoint_s3_uri=f"file://{root / 'ckpt'}",
            output_path=f"file://{root / 'out'}",
        )
    )
    return spec


def test_submit_interrupt_after_names_a_script_that_ignores_its_checkpoints(run_cli, project):
    spec = write_spec(project.root, "cli-spot-ignore")
    result = run_cli("submit", spec, "--interrupt-after", "4s,4s", timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = (
        "Attempts:  2 interruptions; after each restart the script opened none of the "
        "restored checkpoint files"
    )
    assert summary in result.stdout, result.stdout
    shown = run_cli("status", "cli-spot-ignore", "--output", "json")
    attempts = json.loads(shown.stdout)["attempts"]
    assert attempts["interruptions"] == 2 and attempts["checkpoint_files_read"] == [0, 0]


def test_a_bad_interrupt_after_names_the_option_value_and_what_is_accepted(run_cli, project):
    spec = write_spec(project.root, "cli-spot-bad")
    result = run_cli("submit", spec, "--interrupt-after", "soon")
    assert result.returncode != 0
    assert "Invalid --interrupt-after='soon'. 'soon' is not an item." in result.stderr, (
        result.stderr
    )
    assert "Accepted: a comma-separated list" in result.stderr
