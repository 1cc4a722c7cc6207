"""A Ray host's outputs arrive whole, with ``local_process``'s rules, without the client holding them.

``scripts/outputs.py`` writes a 256 MiB model, links that stay inside (relative, absolute
through ``SM_MODEL_DIR``, to a directory), one that leaves the tree, and a FIFO. The job
runs in a client subprocess (``ray_outputs_driver.py``) so that its peak memory (VmHWM)
is the client's alone. Issue 31, items 5 and 6: before, the FIFO (or the absolute link)
made the client's extraction abort, every member after it was lost, and the job ended
Completed with a one-file model.tar.gz; and the whole archive went through the client's
memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

from ray_cluster_helpers import SCRIPTS

DRIVER = Path(__file__).parent / "ray_outputs_driver.py"
BIG_MB = 256
#: How much more the client's peak resident memory (VmHWM) may grow when a host sends
#: 256 MiB than when it sends 1 MiB. (A client connected to Ray peaks at about 170 MiB
#: here even for a 1 MiB model: Ray's libraries alone are 99 MiB of it.)
CLIENT_GROWTH_KIB = 48 * 1024


def _run(tmp_path: Path, name: str, instance_type: str, big_mb: int, env: dict) -> dict:
    out = tmp_path / "out"
    child = subprocess.run(
        [sys.executable, str(DRIVER), str(SCRIPTS), name, f"file://{out}", instance_type,
         str(big_mb)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    assert child.returncode == 0 and lines, child.stdout[-3000:] + child.stderr[-3000:]
    result = json.loads(lines[-1])
    result["dir"] = out / name / "output"
    result["log"] = child.stdout + child.stderr
    return result


def _members(archive: Path) -> dict[str, tuple[str, str]]:
    """name -> (kind, link target or sha256 of the data)."""
    found = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.issym():
                found[member.name] = ("link", member.linkname)
            elif member.isfile():
                digest = hashlib.sha256()
                with tar.extractfile(member) as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        digest.update(block)
                found[member.name] = ("file", digest.hexdigest())
    return found


def _big_digest(mb: int) -> str:
    digest = hashlib.sha256(b"BIG-MODEL-MARKER")
    block = bytes(1 << 20)
    for _ in range(mb):
        digest.update(block)
    return digest.hexdigest()


def test_a_hosts_big_model_links_and_fifo_come_back_as_local_process_keeps_them(
    ray_cluster, ray_home, tmp_path
):
    env = dict(os.environ, RAY_ADDRESS=ray_cluster.address, PYTHONUNBUFFERED="1")
    # What local_process keeps of the same host (a small model, the same links and FIFO).
    local = _run(tmp_path, "outputs-local", "local_process", 1, env)
    assert local["status"] == "Completed", local
    small = _run(tmp_path, "outputs-ray-small", "ray", 1, env)
    assert small["status"] == "Completed", small
    ray = _run(tmp_path, "outputs-ray", "ray", BIG_MB, env)
    assert ray["status"] == "Completed", ray

    kept_locally = _members(local["dir"] / "model.tar.gz")
    model = _members(ray["dir"] / "model.tar.gz")
    assert set(model) == set(kept_locally), (sorted(model), sorted(kept_locally))
    assert model["big.bin"] == ("file", _big_digest(BIG_MB))
    for name in set(model) - {"big.bin"}:
        assert model[name] == kept_locally[name], name
    assert model["latest"] == ("link", "weights.pt")
    assert model["abs"] == ("link", "weights.pt")  # absolute inside: kept, made relative
    assert model["sub/up"] == ("link", "..")
    assert "escape" not in model and "apipe" not in model
    data = _members(ray["dir"] / "output.tar.gz")
    assert (
        set(data) == {"algo-1.txt", "algo-2.txt"} == set(_members(local["dir"] / "output.tar.gz"))
    )
    # What was left out is named in warnings, as local_process names it.
    for left_out in ("model/escape", "model/apipe"):
        assert left_out in ray["log"], ray["log"][-3000:]
    # The 256 MiB never were whole in the client's memory.
    growth = ray["vmhwm_kib"] - small["vmhwm_kib"]
    numbers = (
        f"client VmHWM: {ray['vmhwm_kib'] / 1024:.1f} MiB with a {BIG_MB} MiB model, "
        f"{small['vmhwm_kib'] / 1024:.1f} MiB with 1 MiB, "
        f"{ray['connected_vmhwm_kib'] / 1024:.1f} MiB once connected to Ray"
    )
    print(numbers)
    assert growth < CLIENT_GROWTH_KIB, numbers
