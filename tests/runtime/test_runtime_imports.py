"""The runtime is standard library only and never imports launchbay's client side."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from launchbay.runtime import _records
from launchbay.runtime.launchers import mpi

PROBE = """
import json, sys
before = set(sys.modules)
import launchbay.runtime.train, launchbay.runtime._bootstrap, launchbay.runtime._tf_ps
import launchbay.runtime.launchers.mpi, launchbay.runtime.launchers.tf_config
new = sorted(set(sys.modules) - before)
print(json.dumps(new))
"""


def test_runtime_imports_only_the_standard_library() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    modules = json.loads(out.stdout)
    third_party = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"launchbay"}
    assert not third_party, third_party
    ours = {m for m in modules if m.startswith("launchbay")}
    allowed = {"launchbay", "launchbay._lazy"}  # the package and its lazy names (nothing more)
    client_side = {m for m in ours if m not in allowed and not m.startswith("launchbay.runtime")}
    assert not client_side, client_side


def test_train_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "launchbay.runtime.train", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "SAGEMAKER_BASE_DIR" in out.stdout


def test_local_mpi_worker_waits_for_the_master(tmp_path: Path) -> None:
    done, heartbeat = tmp_path / "done.json", tmp_path / "heartbeat"
    waiter = mpi._LocalDoneWaiter(str(done), str(heartbeat), startup_timeout=5)
    assert waiter.poll(0.0) is None
    assert waiter.poll(6.0) == 1 and "did not start" in (waiter.reason or "")
    waiter = mpi._LocalDoneWaiter(str(done), str(heartbeat), startup_timeout=5)
    heartbeat.touch()
    assert waiter.poll(0.0) is None
    stale = time.time() - 60
    import os

    os.utime(heartbeat, (stale, stale))
    assert waiter.poll(1.0) == 1 and "stopped responding" in (waiter.reason or "")
    _records.write_record(str(done), {"exit_code": 3})
    assert mpi._LocalDoneWaiter(str(done), str(heartbeat), 5).poll(0.0) == 3


def test_ssh_worker_takes_the_masters_status(tmp_path: Path) -> None:
    status = tmp_path / "done.algo-1"
    waiter = mpi._SshWorkerWaiter("127.0.0.1", str(status), str(tmp_path), startup_timeout=5)
    assert waiter.poll(0.0) is None
    status.write_text("2")
    assert waiter.poll(1.0) == 2
    status.write_text("")  # the toolkit's empty status file means success
    assert mpi._SshWorkerWaiter("127.0.0.1", str(status), str(tmp_path), 5).poll(0.0) == 0


def test_gates(tmp_path: Path) -> None:
    gate = mpi._FilesGate([str(tmp_path / "a")], timeout=1, what="peers")
    assert not gate.poll(0.0)
    (tmp_path / "a").touch()
    assert gate.poll(0.5)
    late = mpi._FilesGate([str(tmp_path / "b")], timeout=1, what="peers")
    late.poll(0.0)
    try:
        late.poll(2.0)
    except Exception as exc:  # TrainingSetupError
        assert "Timed out" in str(exc)
    else:
        raise AssertionError("no timeout")
