"""``local_process``: what a host owns stays its own, and what a job makes ends with it (issue 31).

* A host's ``127.0.0.1`` is its own loopback (own network): a script's own server there is the
  one it reaches, not the client machine's server on the same port; the client's services
  (moto) are reached through the name the job's endpoints are rewritten to (item 7).
* A host killed by SIGKILL is the one the failure reason names, with the signal and the
  out-of-memory hint, not the host that was stopped because of it (item 8).
* A failed MPI job leaves no Open MPI shared-memory segment in ``/dev/shm`` (item 12).
* ``LAUNCHBAY_JOB_NETWORK`` / ``LAUNCHBAY_HOST_NS_PID`` inherited from another job (launchbay
  run inside a host) or given in ``environment=`` neither break the job nor put it on another
  job's network (item 13).

Real runtimes, real namespaces (these tests run as root; unprivileged user namespaces give
the same), a real moto server, real Open MPI.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from factories import estimator
from job_outputs import archive_members, fit_failure
from job_processes import http_answers
from launchbay import JobFailedError
from launchbay.pytorch import PyTorch

pytestmark = pytest.mark.filterwarnings("ignore:framework_version=:UserWarning")


def _estimator(src: Path, entry_point: str, out: Path, **kwargs) -> PyTorch:
    return estimator(entry_point, src, out=out, **{"instance_count": 2, **kwargs})


def _model(out: Path, est: PyTorch) -> dict[str, bytes]:
    return archive_members(out / est.latest_training_job.name / "output" / "model.tar.gz")


# --------------------------------------------------------------------------- item 7

OWN_LOOPBACK = r"""
import http.client, http.server, json, os, threading, urllib.parse, urllib.request
import boto3

port = int(os.environ["PROBE_PORT"])
host = os.environ["SM_CURRENT_HOST"]

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"host {host}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Answer)
threading.Thread(target=server.serve_forever, daemon=True).start()
report = {}
for name in ("127.0.0.1", "localhost"):
    # urllib takes HTTP_PROXY / NO_PROXY from the environment, as pip and requests do
    report[name] = urllib.request.urlopen(f"http://{name}:{port}/", timeout=30).read().decode()
# A client that sends its loopback to the relay anyway (ignoring NO_PROXY) is refused: the
# relay never hands a host the client machine's loopback.
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
conn.request("GET", f"http://127.0.0.1:{port}/")
report["relayed"] = conn.getresponse().status
s3 = boto3.client("s3")
report["endpoint"] = os.environ["AWS_ENDPOINT_URL"]
report["endpoint_s3"] = os.environ["AWS_ENDPOINT_URL_S3"]
report["object"] = s3.get_object(Bucket="loopback-probe", Key="k")["Body"].read().decode()
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{host}.json"), "w") as f:
    json.dump(report, f)
"""


def test_a_hosts_loopback_is_its_own_and_the_clients_services_are_reached_by_name(
    home, tmp_path, aws
):
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(
        Bucket="loopback-probe", CreateBucketConfiguration={"LocationConstraint": "us-west-2"}
    )
    s3.put_object(Bucket="loopback-probe", Key="k", Body=b"from the client's moto")
    src = tmp_path / "src"
    src.mkdir()
    (src / "own_loopback.py").write_text(OWN_LOOPBACK)
    moto_port = aws.rsplit(":", 1)[1]
    out = tmp_path / "out"
    # The client machine runs a server on the port every host's script serves on.
    with http_answers(lambda path: b"the client machine") as port:
        est = _estimator(
            src,
            "own_loopback.py",
            out,
            environment={
                "LAUNCHBAY_HOST_NETWORK": "own",
                "PROBE_PORT": str(port),
                # given, not inherited: rewritten too
                "AWS_ENDPOINT_URL_S3": f"http://localhost:{moto_port}",
            },
        )
        with pytest.warns(UserWarning, match=r"loopback") as caught:
            est.fit(logs=False)
    notices = [str(w.message) for w in caught if "AWS_ENDPOINT_URL" in str(w.message)]
    assert len(notices) == 1, notices
    assert "AWS_ENDPOINT_URL_S3" in notices[0] and "host.docker.internal" in notices[0]
    model = _model(out, est)
    for host in ("algo-1", "algo-2"):
        report = json.loads(model[f"{host}.json"])
        assert report["127.0.0.1"] == f"host {host}", report  # its own server, not the client's
        assert report["localhost"] == f"host {host}", report
        assert report["relayed"] == 403, report
        assert report["endpoint"] == f"http://host.docker.internal:{moto_port}", report
        assert report["endpoint_s3"] == f"http://host.docker.internal:{moto_port}", report
        assert report["object"] == "from the client's moto", report


# --------------------------------------------------------------------------- item 8

SIGKILLED_HOST = """
import os, signal, time
if os.environ["SM_CURRENT_HOST"] == "algo-2":
    print("algo-2 goes down", flush=True)
    time.sleep(1.0)  # the host's runtime writes the line to its log
    os.kill(os.getppid(), signal.SIGKILL)  # the host's runtime, as the OOM killer would
time.sleep(60)
"""


def test_a_host_killed_by_sigkill_is_the_one_named(home, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "die.py").write_text(SIGKILLED_HOST)
    est = _estimator(src, "die.py", tmp_path / "out")
    failure = fit_failure(est)
    reason = failure.reason
    assert reason.startswith(
        "AlgorithmError: Host algo-2 failed: killed by SIGKILL (signal 9); SIGKILL is what "
        "the kernel's out-of-memory killer sends"
    ), reason
    assert "algo-2 goes down" in reason
    assert "SIGTERM" not in reason.splitlines()[0], reason


# --------------------------------------------------------------------------- item 12

MPI_FAILS = """
import os, signal, sys, time
from mpi4py import MPI


def slow_end(signum, frame):  # a framework that takes a moment to end, as TensorFlow does
    time.sleep(1.5)
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, slow_end)
comm = MPI.COMM_WORLD
comm.allreduce(comm.Get_rank())  # ranks of one host talk through shared memory
if comm.Get_rank() == 1:
    print("rank 1 fails after talking", flush=True)
    sys.exit(3)  # no MPI_Abort: the job's teardown ends the others
time.sleep(60)
"""


def _shm_segments(since: float) -> set[str]:
    """Open MPI shared-memory files in /dev/shm of this user, made since ``since``."""
    found = set()
    for entry in os.scandir("/dev/shm"):
        if not entry.name.startswith(("vader_segment.", "sm_segment.")):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == os.getuid() and st.st_mtime >= since - 1:
            found.add(entry.name)
    return found


@pytest.mark.parametrize("network", ["own", "shared"])
def test_a_failed_mpi_job_leaves_no_shared_memory_segment(home, tmp_path, network):
    src = tmp_path / "src"
    src.mkdir()
    (src / "fails.py").write_text(MPI_FAILS)
    started = time.time()
    est = _estimator(
        src,
        "fails.py",
        tmp_path / "out",
        distribution={"mpi": {"enabled": True, "processes_per_host": 2}},
        environment={"LAUNCHBAY_HOST_NETWORK": network},
    )
    with pytest.raises(JobFailedError, match="exit code 3"):
        est.fit(logs=False)
    assert not _shm_segments(started)


# --------------------------------------------------------------------------- item 13

NETWORK_PROBE = """
import json, os, socket
st = os.stat("/proc/self/ns/net")
report = {
    "hostname": socket.gethostname(),
    "net": os.stat("/proc/self/ns/net").st_ino,
    "user": os.stat("/proc/self/ns/user").st_ino,
}
with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["SM_CURRENT_HOST"] + ".json"), "w") as f:
    json.dump(report, f)
"""


@pytest.fixture
def other_jobs_switch() -> Iterator[int]:
    """Another job's network switch and relay, as a host of that job would see it; its pid."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchbay.runtime._netns"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert select.select([proc.stdout], [], [], 20)[0]
    word, _, pid = proc.stdout.readline().decode().strip().partition(" ")
    assert word == "ready", (word, pid)
    try:
        yield int(pid)
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


@pytest.mark.parametrize("network", ["own", "shared"])
@pytest.mark.parametrize("where", ["inherited", "environment"])
def test_another_jobs_network_variables_neither_break_nor_redirect_a_job(
    home, tmp_path, monkeypatch, other_jobs_switch, network, where
):
    other = {
        "LAUNCHBAY_JOB_NETWORK": str(other_jobs_switch),
        "LAUNCHBAY_HOST_NS_PID": str(other_jobs_switch),
    }
    environment = {"LAUNCHBAY_HOST_NETWORK": network}
    if where == "inherited":  # launchbay run inside a host of another job
        for name, value in other.items():
            monkeypatch.setenv(name, value)
    else:
        environment.update(other)
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.py").write_text(NETWORK_PROBE)
    out = tmp_path / "out"
    est = _estimator(src, "probe.py", out, environment=environment)
    est.fit(logs=False)
    model = _model(out, est)
    other_user = os.stat(f"/proc/{other_jobs_switch}/ns/user").st_ino
    other_net = os.stat(f"/proc/{other_jobs_switch}/ns/net").st_ino
    mine = os.stat("/proc/self/ns/net").st_ino
    reports = {h: json.loads(model[f"{h}.json"]) for h in ("algo-1", "algo-2")}
    for host, report in reports.items():
        assert report["user"] != other_user, report  # not on the other job's bridge
        assert report["net"] != other_net, report
        if network == "shared":
            assert report["net"] == mine, report  # this machine's network, as asked
        else:
            assert report["hostname"] == host, report
            assert report["net"] != mine, report
    if network == "own":  # both hosts on one bridge of this job's own
        assert reports["algo-1"]["user"] == reports["algo-2"]["user"]


# --------------------------------------------------------------------------- notes: /sys, /dev/shm

MACHINE_VIEW = """
import json, os
marker = "/dev/shm/launchbay-probe-" + os.environ["SM_CURRENT_HOST"]
open(marker, "w").close()  # in the host's own /dev/shm
report = {
    "net": sorted(os.listdir("/sys/class/net")),
    "cgroup": bool(os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup") else None,
    "shm": sorted(os.listdir("/dev/shm")),
}
with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["SM_CURRENT_HOST"] + ".json"), "w") as f:
    json.dump(report, f)
"""


def test_an_own_network_host_has_its_own_sys_and_dev_shm(home, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "view.py").write_text(MACHINE_VIEW)
    out = tmp_path / "out"
    est = _estimator(src, "view.py", out, environment={"LAUNCHBAY_HOST_NETWORK": "own"})
    est.fit(logs=False)
    model = _model(out, est)
    machine_cgroup = bool(os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup") else None
    for host in ("algo-1", "algo-2"):
        report = json.loads(model[f"{host}.json"])
        assert report["net"] == ["eth0", "lo"], report  # the host's interfaces only
        assert report["cgroup"] == machine_cgroup, report  # the mounts below /sys stay
        assert report["shm"] == [f"launchbay-probe-{host}"], report
        assert not os.path.exists(f"/dev/shm/launchbay-probe-{host}")
    log = (home / "jobs" / est.latest_training_job.name / "logs" / "algo-1.log").read_text()
    assert "shares this machine's" not in log, log


RELAY_FLOOD = """
import json, os, socket, urllib.parse
from launchbay.runtime._relay import MAX_CONNECTIONS
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
held = []
for _ in range(MAX_CONNECTIONS):  # connections that never send a request
    held.append(socket.create_connection((proxy.hostname, proxy.port), timeout=30))
extra = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
answer = extra.recv(200).decode(errors="replace")
for s in held:
    s.close()
with open(os.path.join(os.environ["SM_MODEL_DIR"], "relay.json"), "w") as f:
    json.dump({"answer": answer.splitlines()[0] if answer else ""}, f)
"""


def test_the_relay_bounds_its_connections(home, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "flood.py").write_text(RELAY_FLOOD)
    out = tmp_path / "out"
    est = _estimator(src, "flood.py", out, instance_count=1)
    est.fit(logs=False)
    assert json.loads(_model(out, est)["relay.json"]) == {
        "answer": "HTTP/1.1 503 Service Unavailable"
    }


RELAY_FAILURES = """
import json, os, urllib.error, urllib.request
pages = {}
for name, url in (("dns", "http://nowhere.invalid/"), ("refused", os.environ["REFUSED_URL"])):
    try:  # through HTTP_PROXY, the job's relay, as pip and requests go
        urllib.request.urlopen(url, timeout=60)
        pages[name] = "reached"
    except urllib.error.HTTPError as exc:
        pages[name] = f"{exc.code} {exc.read().decode()}"
    print(f"page {name}: {pages[name]}", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["SM_CURRENT_HOST"] + ".json"), "w") as f:
    json.dump(pages, f)
"""


def test_a_target_the_relay_cannot_reach_is_named_with_the_host_and_the_cause(home, tmp_path):
    """Issue 33: no bare "502 Bad Gateway". The page a script gets and one line in the asking
    host's log name the host, the target ``host:port`` and why (DNS, refused)."""
    with socket.socket() as probe:  # a port of this machine's loopback where nothing listens
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    src = tmp_path / "src"
    src.mkdir()
    (src / "unreachable.py").write_text(RELAY_FAILURES)
    out = tmp_path / "out"
    est = _estimator(
        src,
        "unreachable.py",
        out,
        environment={"REFUSED_URL": f"http://host.docker.internal:{closed}/"},
    )
    est.fit(logs=False)
    model = _model(out, est)
    logs = home / "jobs" / est.latest_training_job.name / "logs"
    for index, host in enumerate(("algo-1", "algo-2"), start=1):
        who = f"{host} (10.213.0.{index})"
        pages = json.loads(model[f"{host}.json"])
        assert pages["dns"].startswith(
            f"502 launchbay relay: {who} could not reach nowhere.invalid:80: DNS failure"
        ), pages
        assert pages["refused"].startswith(
            f"502 launchbay relay: {who} could not reach host.docker.internal:{closed}: "
            f"connection refused: nothing listens on port {closed}"
        ), pages
        lines = [
            line
            for line in (logs / f"{host}.log").read_text().splitlines()
            if line.startswith("[launchbay] WARNING relay:")
        ]
        assert len(lines) == 2, lines
        assert lines[0] == f"[launchbay] WARNING {pages['dns'][len('502 launchbay ') :].strip()}"
        assert lines[1].startswith(
            f"[launchbay] WARNING relay: {who} could not reach host.docker.internal:{closed}: "
            "connection refused"
        ), lines
