"""The README's main job runs as documented, puts the model where it says, and warns of nothing.

Nothing the user did not cause is printed (issue 22, item 10): the README's command
installs numpy beside torch (without it torch warns "Failed to initialize NumPy" in
every process that imports it), and no rank ends with torch's "`reduce_op` is
deprecated" FutureWarning (the bootstrap's last flush touched every object).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_main_job(tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "python examples/quickstart/run.py" in readme
    # As a newcomer runs it: none of the session's moto settings (AWS_ENDPOINT_URL on this
    # machine's loopback would rightly get its rewrite notice).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["LAUNCHBAY_HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, "examples/quickstart/run.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    noisy = [
        line
        for line in (out.stdout + out.stderr).splitlines()
        if re.search(r"warn|deprecat", line, re.IGNORECASE)
    ]
    assert noisy == [], "\n".join(noisy)
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


def test_readme_main_job_installs_numpy_beside_torch():
    """torch without numpy warns in every process that imports it: the command installs both."""
    (command,) = [
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if "python examples/quickstart/run.py" in line and "pip install" in line
    ]
    pip = shlex.split(command.split("pip install", 1)[1].split("&&", 1)[0])
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    extras = {name: value.split() for name, value in setup["options.extras_require"].items()}
    installed = set()
    for arg in pip:
        match = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
        if match:
            for extra in match.group(1).split(","):
                installed.update(re.split(r"[=<>!~\[;]", req)[0] for req in extras[extra])
        elif not arg.startswith("-"):
            installed.add(re.split(r"[=<>!~\[;]", arg)[0])
    assert {"torch", "numpy"} <= installed, command
