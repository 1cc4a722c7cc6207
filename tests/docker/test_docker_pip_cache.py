"""``requirements.txt`` in local Docker mode goes through a pip cache that outlives the
container (issue 36 item 3, :mod:`launchbay.backends.local.pip_cache`).

The package index is a container this test makes: a tiny PEP 503 index serving one
wheel the test writes, in the host's network namespace but listening only on the
engine's bridge gateway (``host.docker.internal`` in a job's containers), never on
this machine's loopback. It prints every request, so the test counts downloads.
Its wheel responses say ``Cache-Control: max-age=31536000, immutable``, as PyPI's do.
"""

from __future__ import annotations

import hashlib
import socket
import time
import zipfile
from pathlib import Path

import pytest

from launchbay import Estimator

pytestmark = [pytest.mark.docker]

IMAGE = "launchbay/pytorch-training:2.13.0-cpu-py311"


@pytest.fixture(scope="module")
def image(docker_client):
    """The CPU PyTorch image as it is on the engine: the cache needs nothing of the runtime
    inside it, so a source change here does not make this test rebuild the image."""
    docker_client.images.get(IMAGE)
    return IMAGE


PACKAGE, VERSION = "lbcachetest", "1.0"
WHEEL = f"{PACKAGE}-{VERSION}-py3-none-any.whl"

SERVER = r"""
import http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        if self.path.endswith(".whl"):
            self.send_header("Cache-Control", "max-age=31536000, immutable")
        super().end_headers()
    def log_message(self, fmt, *args):
        print("REQUEST", self.command, self.path, flush=True)
http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])),
    lambda *a: Handler(*a, directory="/index"))
print("READY", flush=True)
server.serve_forever()
"""

TRAIN = """
import lbcachetest
print("imported", lbcachetest.VALUE)
"""


def _write_wheel(path: Path) -> None:
    dist = f"{PACKAGE}-{VERSION}.dist-info"
    files = {
        f"{PACKAGE}/__init__.py": "VALUE = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = [f"{name},," for name in files] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)


@pytest.fixture
def index(tmp_path, docker_client, image, host_gateway):
    """The index container; yields (its URL as the job's containers see it, requests so far)."""
    root = tmp_path / "index"
    (root / "packages").mkdir(parents=True)
    (root / "simple" / PACKAGE).mkdir(parents=True)
    _write_wheel(root / "packages" / WHEEL)
    digest = hashlib.sha256((root / "packages" / WHEEL).read_bytes()).hexdigest()
    (root / "simple" / PACKAGE / "index.html").write_text(
        f'<a href="../../packages/{WHEEL}#sha256={digest}">{WHEEL}</a>\n'
    )
    (tmp_path / "server.py").write_text(SERVER)
    gateway = host_gateway
    with socket.socket() as probe:  # a free port on the gateway address
        probe.bind((gateway, 0))
        port = probe.getsockname()[1]
    container = docker_client.containers.run(
        image,
        ["python", "/server.py", gateway, str(port)],
        entrypoint=[],
        network_mode="host",
        volumes={
            str(root): {"bind": "/index", "mode": "ro"},
            str(tmp_path / "server.py"): {"bind": "/server.py", "mode": "ro"},
        },
        labels={"launchbay.test": "pip-index"},
        detach=True,
    )
    try:
        deadline = time.monotonic() + 30
        while b"READY" not in container.logs():
            assert time.monotonic() < deadline, container.logs()
            time.sleep(0.1)

        def requests() -> list[str]:
            return [
                line.split(" ", 1)[1]
                for line in container.logs().decode().splitlines()
                if line.startswith("REQUEST ")
            ]

        yield f"http://host.docker.internal:{port}/simple", requests
    finally:
        container.remove(force=True)


def _fit(source: Path, url: str, name: str) -> Estimator:
    est = Estimator(
        image_uri=IMAGE,
        role=None,
        instance_type="local",
        instance_count=1,
        entry_point="train.py",
        source_dir=str(source),
        environment={
            "PIP_INDEX_URL": url,
            "PIP_TRUSTED_HOST": "host.docker.internal",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
        base_job_name=name,
    )
    est.fit(logs=False)
    return est


def test_second_docker_job_with_the_same_requirements_downloads_nothing(home, tmp_path, index):
    url, requests = index
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    (source / "requirements.txt").write_text(f"{PACKAGE}=={VERSION}\n")

    first = _fit(source, url, "pip-first")
    wheel_gets = [r for r in requests() if r.startswith("GET ") and r.endswith(".whl")]
    assert len(wheel_gets) == 1, requests()  # the first job downloads the wheel
    seen = len(requests())

    second = _fit(source, url, "pip-second")
    again = requests()[seen:]
    # The second job downloads no package file; pip asks for the project's page only
    # (it always revalidates index pages: max-age=0).
    assert not [r for r in again if ".whl" in r], again
    assert all(r.endswith(f"/simple/{PACKAGE}/") for r in again), again
    # Both jobs imported the package (a failed import fails the job and fit() raises).
    assert first.model_data and second.model_data

    # One cache per image, the user's alone.
    caches = list((home / "cache" / "pip").iterdir())
    assert len(caches) == 1
    for path in (home / "cache", home / "cache" / "pip", caches[0]):
        assert path.stat().st_mode & 0o077 == 0, oct(path.stat().st_mode)
    assert any(p.is_file() for p in caches[0].rglob("*"))  # pip's cache lives there
