"""How a host's runtime makes ``algo-N`` resolve (:mod:`launchbay.runtime._hostnames`).

Each case runs in a fresh interpreter, as the runtime does at start, and checks
with ``getent`` (glibc's NSS, what torch's TCPStore and mpirun use). When the
tests run as root the unprivileged cases drop to uid/gid 65534 first (after the
imports: the interpreter may live where that user cannot read).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from launchbay.runtime import _hostnames
from launchbay.runtime.errors import TrainingSetupError

NOBODY = 65534

_CHILD = r"""
import json, os, subprocess, sys, threading, time
from launchbay.runtime import _hostnames
from launchbay.runtime.errors import TrainingSetupError
options = json.loads(sys.argv[1])
if options["unprivileged"] and os.geteuid() == 0:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    # Dropping from root clears "dumpable" (/proc/self/*_map become root's); a process
    # the user started themselves is dumpable.
    import ctypes
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
if options["threaded"]:  # a second thread: unshare(CLONE_NEWUSER) refuses a threaded caller
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
try:
    result = _hostnames.apply()
except TrainingSetupError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
getent = subprocess.run(["getent", "ahosts", "algo-2"], capture_output=True, text=True)
print(json.dumps({
    "mechanism": result and result.mechanism,
    "failures": result and result.failures,
    "getent": sorted({line.split()[0] for line in getent.stdout.splitlines()}),
    "uid": os.getuid(),
    "pid": os.getpid(),
    "etc_hosts_is_job_file": "algo-2" in open("/etc/hosts").read(),
}))
"""


@pytest.fixture
def tmp_path():
    """A directory every user can use (pytest's own is its owner's only)."""
    with tempfile.TemporaryDirectory(prefix="launchbay-hostnames-") as directory:
        os.chmod(directory, 0o777)
        yield Path(directory)


def _run(tmp_path: Path, env: dict[str, str], unprivileged=False, threaded=False) -> dict:
    hosts_file = tmp_path / "hosts"
    _hostnames.write_hosts_file(str(hosts_file), ["algo-1", "algo-2"])
    full_env = dict(os.environ, LAUNCHBAY_HOSTS_FILE=str(hosts_file), **env)
    full_env.pop("LD_PRELOAD", None)
    options = json.dumps({"unprivileged": unprivileged, "threaded": threaded})
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, options],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    if "pid" in result:  # no pid namespace: the parent sees the pid the process sees
        assert result["pid"] == proc.pid
    return result


def test_hosts_file_keeps_this_machines_names_and_adds_each_host(tmp_path):
    path = _hostnames.write_hosts_file(str(tmp_path / "hosts"), ["algo-1", "algo-2"])
    lines = Path(path).read_text().splitlines()
    machine = [
        " ".join(line.split("#")[0].split()) for line in Path("/etc/hosts").read_text().splitlines()
    ]
    assert lines == [line for line in machine if line] + ["127.0.0.1 algo-1", "127.0.0.1 algo-2"]
    assert not [line for line in lines if "#" in line]  # nss_wrapper rejects comments


@pytest.mark.parametrize("unprivileged", [False, True], ids=["caller", "unprivileged"])
def test_namespace_makes_algo_names_resolve_for_c_programs(tmp_path, unprivileged):
    before = Path("/etc/hosts").read_text()
    result = _run(tmp_path, {"LAUNCHBAY_HOST_NAMES": "namespace"}, unprivileged=unprivileged)
    assert result["mechanism"] == "namespace"
    assert result["getent"] == ["127.0.0.1"]
    assert result["etc_hosts_is_job_file"]
    if unprivileged:  # a user namespace that maps the caller's own ids: same uid inside
        assert result["uid"] == (NOBODY if os.geteuid() == 0 else os.getuid())
    assert Path("/etc/hosts").read_text() == before  # never written


def test_nss_wrapper_makes_algo_names_resolve_for_what_the_runtime_starts(tmp_path):
    result = _run(tmp_path, {"LAUNCHBAY_HOST_NAMES": "nss_wrapper"})
    assert result["mechanism"] == "nss_wrapper"
    assert result["getent"] == ["127.0.0.1", "::ffff:127.0.0.1"]
    assert not result["etc_hosts_is_job_file"]  # the runtime's own view is untouched


def test_auto_falls_back_to_nss_wrapper_when_no_namespace_can_be_made(tmp_path):
    result = _run(tmp_path, {"LAUNCHBAY_HOST_NAMES": "auto"}, unprivileged=True, threaded=True)
    assert result["mechanism"] == "nss_wrapper"
    assert result["getent"] == ["127.0.0.1", "::ffff:127.0.0.1"]
    assert result["failures"] == [
        "user+mount namespace: [Errno 22] unshare(CLONE_NEWUSER | CLONE_NEWNS): Invalid argument"
    ]


def test_auto_with_nothing_usable_reports_every_attempt(tmp_path):
    missing = str(tmp_path / "no-such-libnss_wrapper.so")
    result = _run(
        tmp_path,
        {"LAUNCHBAY_HOST_NAMES": "auto", "LAUNCHBAY_NSS_WRAPPER": missing},
        unprivileged=True,
        threaded=True,
    )
    assert result["mechanism"] is None
    assert result["getent"] == []
    assert result["failures"][-1] == (
        f"nss_wrapper: LAUNCHBAY_NSS_WRAPPER={missing!r} is not a file"
    )


def test_a_named_mechanism_that_cannot_work_is_an_error(tmp_path):
    missing = str(tmp_path / "nope.so")
    result = _run(
        tmp_path, {"LAUNCHBAY_HOST_NAMES": "nss_wrapper", "LAUNCHBAY_NSS_WRAPPER": missing}
    )
    assert result["error"] == (
        "LAUNCHBAY_HOST_NAMES='nss_wrapper': the host names of this local_process job cannot "
        f"be made to resolve (nss_wrapper: LAUNCHBAY_NSS_WRAPPER={missing!r} is not a file). "
        "Accepted: auto, namespace (root, or unprivileged user namespaces), nss_wrapper "
        "(libnss-wrapper installed), off."
    )


def test_bad_mode_names_the_accepted_values(tmp_path):
    with pytest.raises(TrainingSetupError) as info:
        _hostnames.apply({"LAUNCHBAY_HOSTS_FILE": str(tmp_path), "LAUNCHBAY_HOST_NAMES": "dns"})
    assert str(info.value) == (
        "Invalid LAUNCHBAY_HOST_NAMES='dns'. Accepted: auto, namespace, nss_wrapper, off."
    )


def test_off_or_outside_local_process_does_nothing(tmp_path):
    environ = {"LAUNCHBAY_HOST_NAMES": "off", "LAUNCHBAY_HOSTS_FILE": str(tmp_path / "h")}
    assert _hostnames.apply(environ) is None
    assert _hostnames.apply({}) is None
    assert "LD_PRELOAD" not in environ
