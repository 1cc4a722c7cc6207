"""The one safe extraction (issue 31, item 10): it skips what it refuses, with a warning, and
writes everything else, with or without tarfile's ``data`` filter (Python 3.10 before 3.10.12
and 3.11 before 3.11.4 lack it: Debian 12's ``/usr/bin/python3`` 3.11.2 is run here as is)."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

SDK = Path(__file__).resolve().parents[2] / "sdk"
NO_FILTER = Path(__file__).resolve().parents[1] / "no_data_filter"
DEBIAN_PYTHON = "/usr/bin/python3"

# A tree as a host could send it: every refusable thing before the good members.
MEMBERS = [
    ("symlink", "model/abs", "/etc/hostname"),
    ("fifo", "model/apipe", ""),
    ("file", "../evil.txt", "x"),
    ("symlink", "model/esc", "../../outside"),
    ("file", "model/esc/evil.txt", "x"),
    ("file", "model/big.bin", "B" * 5000),
    ("symlink", "model/latest", "big.bin"),
    ("hardlink", "model/hard.bin", "model/big.bin"),
    ("file", "output/data/result.txt", "R"),
]
KEPT = {"model/big.bin", "model/latest", "model/hard.bin", "output/data/result.txt"}
REFUSED = {"model/abs", "model/apipe", "../evil.txt", "model/esc", "model/esc/evil.txt"}


def _tar(path: Path, members=MEMBERS) -> Path:
    with tarfile.open(path, "w") as tar:
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            info.mode = 0o4777 if kind == "file" else 0o755
            if kind == "file":
                data = payload.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE}[kind]  # fmt: skip
            info.linkname = payload
            tar.addfile(info)
    return path


CHECK = """
import json, os, stat, sys, tarfile
sys.path.insert(0, sys.argv[1])
from launchbay.runtime.archive import safe_extract
result = safe_extract(sys.argv[2], sys.argv[3], private=sys.argv[4] == "1")
found = {}
for d, dirs, files in os.walk(sys.argv[3]):
    for n in dirs + files:
        p = os.path.join(d, n)
        found[os.path.relpath(p, sys.argv[3])] = oct(stat.S_IMODE(os.lstat(p).st_mode))
print(json.dumps({"filter": hasattr(tarfile, "data_filter"), "version": sys.version.split()[0],
                  "skipped": [n for n, _ in result.skipped], "failed": result.failed,
                  "found": found}))
"""


def _extract_with(python: str, archive: Path, dest: Path, private: bool, env=None) -> dict:
    child = subprocess.run(
        [python, "-c", CHECK, str(SDK), str(archive), str(dest), "1" if private else "0"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout.splitlines()[-1])
    result["stderr"] = child.stderr
    return result


def _check(result: dict, dest: Path, work: Path) -> None:
    assert set(result["skipped"]) == REFUSED, result
    assert result["failed"] == []
    assert (dest / "model" / "big.bin").read_text() == "B" * 5000
    assert (dest / "model" / "hard.bin").read_text() == "B" * 5000
    assert os.readlink(dest / "model" / "latest") == "big.bin"
    assert (dest / "output" / "data" / "result.txt").read_text() == "R"
    assert not os.path.lexists(dest / "model" / "abs")
    assert not os.path.lexists(dest / "model" / "apipe")
    assert not (work / "evil.txt").exists() and not (work / "outside").exists()
    for name in ("Not extracting model/abs", "Not extracting model/apipe"):
        assert name in result["stderr"], result["stderr"]
    big = dest / "model" / "big.bin"
    assert not os.stat(big).st_mode & (stat.S_ISUID | stat.S_IWGRP | stat.S_IWOTH)


@pytest.mark.parametrize("without_filter", [False, True], ids=["data-filter", "no-data-filter"])
def test_refused_members_are_skipped_with_a_warning_and_the_rest_is_written(
    tmp_path: Path, without_filter: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    archive = _tar(tmp_path / "host.tar")
    env = dict(os.environ)
    if without_filter:
        env["PYTHONPATH"] = os.pathsep.join([str(NO_FILTER), env.get("PYTHONPATH", "")])
    result = _extract_with(sys.executable, archive, work / "dest", False, env)
    assert result["filter"] is not without_filter
    _check(result, work / "dest", work)


@pytest.mark.skipif(not os.access(DEBIAN_PYTHON, os.X_OK), reason="no /usr/bin/python3")
def test_under_debian_python_without_the_data_filter(tmp_path: Path) -> None:
    """This machine's /usr/bin/python3 (Debian 12: 3.11.2, no extraction filters), as is."""
    work = tmp_path / "work"
    work.mkdir()
    archive = _tar(tmp_path / "host.tar")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    result = _extract_with(DEBIAN_PYTHON, archive, work / "dest", True, env)
    if result["filter"]:
        pytest.skip(f"{DEBIAN_PYTHON} {result['version']} has the data filter")
    _check(result, work / "dest", work)
    # private: only the owner's (folders 0700, files 0600, links untouched)
    for rel, mode in result["found"].items():
        path = work / "dest" / rel
        if not path.is_symlink():
            assert int(mode, 8) & 0o077 == 0, (rel, mode)
