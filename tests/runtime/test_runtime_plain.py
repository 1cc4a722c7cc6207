"""The runtime end to end with one process per host: real ``train`` processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

import psutil

SUCCESS = """
import json, os, sys
print(json.dumps({
    "argv": sys.argv[1:],
    "host": os.environ["SM_CURRENT_HOST"],
    "hps": json.loads(os.environ["SM_HPS"]),
    "model_dir": os.environ["SM_MODEL_DIR"],
    "channels": json.loads(os.environ["SM_CHANNELS"]),
    "cwd": os.getcwd(),
    "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
    "smdebug": os.environ.get("SMDEBUG_CONFIG_FILE_PATH"),
    "checkpoints": os.environ.get("SM_CHECKPOINT_DIR"),
    "helper": __import__("helper").VALUE,
}))
print("to stderr", file=sys.stderr)
open(os.path.join(os.environ["SM_MODEL_DIR"], "model.txt"), "w").write("weights")
"""

FAILING = """
import os

def inner():
    raise ValueError("the loss is nan at step 7")

def outer():
    inner()

print("about to fail")
outer()
"""


def test_plain_script_success(local_job) -> None:
    job = local_job(
        {"train.py": SUCCESS, "helper.py": "VALUE = 42\n"},
        hyperparameters={"epochs": 3, "name": "abc", "sagemaker_container_log_level": 20},
        request_extra={
            "DebugHookConfig": {
                "S3OutputPath": "s3://b/d",
                "HookParameters": {"save_interval": "5"},
            },
            "CheckpointConfig": {"S3Uri": "s3://b/c"},
        },
    )
    result = job.run()["algo-1"]
    assert result.returncode == 0, result.stderr
    (info,) = result.json_lines()
    base = job.base("algo-1")
    assert info["argv"] == ["--epochs", "3", "--name", "abc"]
    assert info["host"] == "algo-1" and info["hps"] == {"epochs": 3, "name": "abc"}
    assert info["cwd"] == str(base / "code") and info["helper"] == 42
    assert info["unbuffered"] == "1"
    assert info["smdebug"] == str(base / "input" / "config" / "debughookconfig.json")
    hook = json.loads((base / "input" / "config" / "debughookconfig.json").read_text())
    assert hook["LocalPath"] == str(base / "output" / "tensors")
    assert info["checkpoints"] == str(base / "checkpoints")
    # One process: output is not labelled.
    assert not any(line.startswith("[rank") for line in result.lines())
    assert "to stderr" in result.stderr and "[rank" not in result.stderr.split("to stderr")[0][-10:]
    assert (base / "model" / "model.txt").read_text() == "weights"
    assert (base / "output" / "success").exists()
    assert not (base / "output" / "failure").exists()


def test_plain_script_failure_is_reported(local_job) -> None:
    job = local_job({"train.py": FAILING})
    result = job.run()["algo-1"]
    assert result.returncode == 1
    head = result.failure[:1024]
    for needle in (
        "algo-1",
        "Rank 0",
        "exit code 1",
        "ValueError: the loss is nan at step 7",
        "in inner",
    ):
        assert needle in head, (needle, head)
    report = result.failure_json
    assert report["host"] == "algo-1" and report["rank"] == 0 and report["local_rank"] == 0
    assert report["exit_code"] == 1 and report["error"] == "ValueError: the loss is nan at step 7"
    assert report["traceback_tail"].splitlines()[-1] == "ValueError: the loss is nan at step 7"
    assert "_bootstrap" not in report["traceback_tail"]
    assert isinstance(report["timestamp"], float)
    assert report["ranks"][0]["rank"] == 0 and "ValueError" in report["ranks"][0]["stderr_tail"]
    # The user sees the script's traceback (without the wrapper's frames) on stderr.
    assert "ValueError: the loss is nan at step 7" in result.stderr
    assert "_bootstrap.py" not in result.stderr


def test_shell_entry_point(local_job) -> None:
    script = """\
    #!/bin/sh
    echo "args: $*"
    echo "host: $SM_CURRENT_HOST"
    echo "bad things" >&2
    exit "$SM_HP_CODE"
    """
    ok = local_job({"run.sh": script}, program="run.sh", hyperparameters={"code": 0, "msg": "a b"})
    result = ok.run()["algo-1"]
    assert result.returncode == 0, result.stderr
    assert "args: --code 0 --msg a b" in result.stdout and "host: algo-1" in result.stdout
    bad = local_job({"run.sh": script}, program="run.sh", hyperparameters={"code": 3})
    result = bad.run()["algo-1"]
    assert result.returncode == 3
    assert "exit code 3" in result.failure[:1024] and "bad things" in result.failure[:1024]
    assert result.failure_json["exit_code"] == 3


def test_module_entry_point(local_job) -> None:
    job = local_job(
        {
            "pkg/__init__.py": "",
            "pkg/main.py": "import sys\nprint('module ran', __name__, sys.argv[1:])\n",
        },
        program="pkg.main",
        hyperparameters={"k": "v"},
    )
    result = job.run()["algo-1"]
    assert result.returncode == 0, result.stderr
    assert "module ran __main__ ['-k', 'v']" in result.stdout


def test_two_plain_hosts_label_their_lines(local_job) -> None:
    job = local_job(
        {"train.py": "import os\nprint('on', os.environ['SM_CURRENT_HOST'])\n"}, hosts=2
    )
    results = job.run()
    assert results["algo-1"].stdout.strip() == "[rank 0] on algo-1"
    assert results["algo-2"].stdout.strip() == "[rank 1] on algo-2"


LEAVES_A_WRITER = """
import subprocess, sys
for i in range(5000):
    print(f"line {i}")
sys.stdout.flush()
# A leftover that holds the script's stdout and stderr open after the script has ended.
leftover = subprocess.Popen(["sleep", "300"])
print(leftover.pid, file=open("leftover.pid", "w"))
"""


def test_a_script_that_ends_is_read_to_its_last_line_though_a_leftover_holds_its_output(
    local_job,
) -> None:
    # The runtime learns of the end from the process itself, not from its output's end:
    # every line written before it is delivered, and the leftover is stopped with the job.
    job = local_job({"train.py": LEAVES_A_WRITER})
    result = job.run()["algo-1"]
    assert result.returncode == 0, result.stderr
    lines = [line.removeprefix("[rank 0] ") for line in result.stdout.splitlines()]
    assert lines == [f"line {i}" for i in range(5000)]
    pid = int((job.base("algo-1") / "code" / "leftover.pid").read_text())
    with contextlib.suppress(psutil.NoSuchProcess):  # gone, or only waiting to be reaped
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_bad_entry_point_is_a_setup_failure(local_job) -> None:
    job = local_job({"train.py": ""}, program="../escape.py")
    result = job.run()["algo-1"]
    assert result.returncode == 1
    assert "not a plain relative path" in result.failure and result.failure_json["host"] == "algo-1"


def test_unmet_requirements_are_reported_not_installed(local_job) -> None:
    job = local_job(
        {
            "train.py": "print('ran')\n",
            "requirements.txt": "definitely-not-installed-pkg-xyz==1.0\n",
        }
    )
    result = job.run()["algo-1"]
    assert result.returncode == 0
    assert "definitely-not-installed-pkg-xyz==1.0 (not installed)" in result.stderr


SIGTERM_SCRIPT = """
import os, signal, sys, time

def on_term(signum, frame):
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "checkpoint"), "w") as f:
        f.write("saved on SIGTERM")
    sys.exit(0)

signal.signal(signal.SIGTERM, on_term)
open(os.path.join(os.environ["SM_MODEL_DIR"], "started"), "w").close()
while True:
    time.sleep(0.05)
"""

STUBBORN_SCRIPT = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
open(os.path.join(os.environ["SM_MODEL_DIR"], "started"), "w").close()
time.sleep(600)
"""


def _wait_for(path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sigterm_is_forwarded_and_the_checkpoint_is_written(local_job) -> None:
    job = local_job({"train.py": SIGTERM_SCRIPT})
    job.start()
    model = job.base("algo-1") / "model"
    _wait_for(model / "started")
    job.procs["algo-1"].send_signal(signal.SIGTERM)
    sent = time.monotonic()
    result = job.wait(timeout=30)["algo-1"]
    assert time.monotonic() - sent < 3
    assert result.returncode == 128 + signal.SIGTERM
    assert (model / "checkpoint").read_text() == "saved on SIGTERM"
    assert "SIGTERM" in result.failure[:1024]
    assert not job.leftovers()


def test_processes_ignoring_sigterm_are_killed_after_the_grace_period(local_job) -> None:
    job = local_job({"train.py": STUBBORN_SCRIPT}, env={"LAUNCHBAY_GRACE_SECONDS": "1"})
    job.start()
    _wait_for(job.base("algo-1") / "model" / "started")
    runtime = psutil.Process(job.procs["algo-1"].pid)
    assert len(runtime.children(recursive=True)) >= 2
    os.kill(job.procs["algo-1"].pid, signal.SIGINT)
    sent = time.monotonic()
    result = job.wait(timeout=30)["algo-1"]
    assert time.monotonic() - sent < 1 + 3
    assert result.returncode == 128 + signal.SIGINT
    assert not job.leftovers()
