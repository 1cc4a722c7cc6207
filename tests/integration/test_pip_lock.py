"""Two jobs that install requirements.txt into one interpreter never run pip at once (issue 31, item 9).

A throwaway virtual environment (its own site-packages; launchbay and pip come from
this one's through a ``.pth``) runs a client that starts two ``local_process`` jobs
at once, both with ``LAUNCHBAY_INSTALL_REQUIREMENTS=1`` and the same requirements.txt:
a local package whose ``setup.py`` records when pip ran it, and, the first time,
waits a few seconds for another pip to start beside it. Before, both jobs' pip ran
at once; now the interpreter's lock (``$LAUNCHBAY_HOME/locks/pip-*.lock``) orders them.
"""

from __future__ import annotations

import json
import os
import site
import stat
import subprocess
import sys
from pathlib import Path

SDK = Path(__file__).resolve().parents[2] / "sdk"

SETUP = """
import json, os, time
from setuptools import setup
marks = MARKS
os.makedirs(marks, exist_ok=True)
start = time.time()
first = not os.listdir(marks)
open(os.path.join(marks, f"{os.getpid()}.start"), "w").close()
if first:  # give another pip the time to start beside this one
    deadline = time.time() + 4
    while time.time() < deadline and len([n for n in os.listdir(marks) if n.endswith(".start")]) < 2:
        time.sleep(0.05)
with open(os.path.join(marks, f"{os.getpid()}.json"), "w") as f:
    json.dump({"start": start, "end": time.time()}, f)
setup(name="lbpiplock", version="1.0", py_modules=[])
"""

CLIENT = """
import sys
from launchbay.pytorch import PyTorch
jobs = []
for name in sys.argv[2:4]:
    estimator = PyTorch(
        entry_point="train.py", source_dir=sys.argv[1], role=None,
        instance_type="local_process", instance_count=1, framework_version="2.8.0",
        py_version="py312", environment={"LAUNCHBAY_INSTALL_REQUIREMENTS": "1"},
        output_path="file://" + sys.argv[4],
    )
    estimator.fit(job_name=name, wait=False, logs=False)
    jobs.append(estimator.latest_training_job)
for job in jobs:
    job.wait(logs=False)
    print(job.name, job.describe()["TrainingJobStatus"], flush=True)
"""


def test_two_jobs_installing_into_one_interpreter_take_turns(home, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(own, "launchbay-test.pth").write_text(
        "\n".join([str(SDK), *site.getsitepackages()]) + "\n"
    )
    marks = tmp_path / "marks"
    package = tmp_path / "lbpiplock"
    package.mkdir()
    (package / "setup.py").write_text(SETUP.replace("MARKS", repr(str(marks))))
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('trained')\n")
    (src / "requirements.txt").write_text(f"--no-index\n{package}\n")
    env = dict(os.environ, PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    child = subprocess.run(
        [str(python), "-c", CLIENT, str(src), "pip-lock-a", "pip-lock-b", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    logs = {
        name: (home / "jobs" / name / "logs" / "algo-1.log").read_text()
        for name in ("pip-lock-a", "pip-lock-b")
    }
    assert child.returncode == 0, child.stdout + child.stderr + json.dumps(logs)[-4000:]
    assert "pip-lock-a Completed" in child.stdout and "pip-lock-b Completed" in child.stdout
    runs = sorted(
        (json.loads(p.read_text()) for p in marks.glob("*.json")), key=lambda r: r["start"]
    )
    assert len(runs) >= 2, runs  # pip ran setup.py for each job
    for before, after in zip(runs, runs[1:], strict=False):
        assert before["end"] <= after["start"], f"two pip runs overlapped: {runs}"
    # the job that waited said so; the lock is the interpreter's, under LAUNCHBAY_HOME, 0600
    assert any("Waiting for another job's pip run" in log for log in logs.values()), logs
    locks = list((home / "locks").glob("pip-*.lock"))
    assert len(locks) == 1, locks
    assert stat.S_IMODE(os.stat(locks[0]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home / "locks").st_mode) == 0o700
