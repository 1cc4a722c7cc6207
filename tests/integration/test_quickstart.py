"""The README's main job runs as documented and puts the model where it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_main_job(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "python examples/quickstart/run.py" in readme
    env = dict(os.environ, LAUNCHBAY_HOME=str(tmp_path / "home"))
    out = subprocess.run(
        [sys.executable, "examples/quickstart/run.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "algo-1 | [rank 0] epoch 20/20" in out.stdout
    assert "algo-2 | [rank 1] algo-2 rank 1/2 done" in out.stdout
    model_line = [line for line in out.stdout.splitlines() if line.startswith("Model: ")][-1]
    archive = model_line.removeprefix("Model: file://")
    assert archive.startswith(str(tmp_path / "home" / "output"))
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["metrics.json", "model.pt"]
        metrics = json.load(tar.extractfile("metrics.json"))
    assert metrics["world"] == 2
    assert abs(metrics["weight"] - 3) < 0.3 and abs(metrics["bias"] + 2) < 0.3
