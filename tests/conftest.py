"""Shared fixtures.

AWS tests talk to a real moto server (``ThreadedMotoServer`` on a free
loopback port), reached through ``AWS_ENDPOINT_URL`` exactly as a subprocess
or a container would reach it.

* ``moto_server`` (session scope): starts the server once, points the AWS
  environment at it for the whole session (fake credentials, region
  us-west-2, no shared config files), yields its URL, then restores the
  environment and stops the server.
* ``moto_at`` (function scope): ``moto_at(address)`` starts a moto server of the test's own
  on one address (the Docker network's gateway for containers; never all interfaces) and
  points the AWS environment at it. Both start moto through ``_moto``, the one place that does.
* ``aws`` (function scope): a clean moto state (``POST /moto-api/reset``) and
  the environment above for one test; yields the server URL.
* ``session``: a ``launchbay.Session(region_name="us-west-2")`` on a clean moto.
* ``home``: ``$LAUNCHBAY_HOME`` in the test's temporary directory (where local jobs keep
  their directories, outputs and names) and a 5 s grace period for stopping ranks.
* ``fake_gpus``: ``fake_gpus(n)`` puts an ``nvidia-smi`` on ``PATH`` that lists ``n`` GPUs
  (``GPU 0: Fake GPU (UUID: GPU-fake-0)`` ...), as a GPU machine's driver would; this
  machine has none. ``CUDA_VISIBLE_DEVICES`` is cleared for the test.
* every test: ``LAUNCHBAY_CODE_CACHE`` is a directory of the session's temporary
  directory, so cached source archives never land in the user's home.
* every test: nothing the test's jobs started is left when it ends (``_no_leftovers``): no
  process whose environment or command line names the test's ``LAUNCHBAY_HOME``, no mount
  (namespace files included) under it, no ``/dev/shm`` entry named after one of its jobs.
  A baseline taken as the test body starts is compared after the test's fixtures are torn
  down (detached jobs count until the test stops them), with a short grace wait; only the
  test's own home counts, so parallel workers and Ray's object store are never counted.
  Leftover processes are killed, and the test fails naming them.
* tiers and workers: every test carries the marker of its tier (``unit``, ``integration``,
  ``docker``, ``ray``; ``pytest -m unit`` runs the fast tier alone). The suite runs on
  every core (``-n auto --dist loadgroup`` in setup.cfg, pytest-xdist); the Docker and the Ray
  tests each form one ``xdist_group`` that one worker runs in order (one engine's images and
  one Ray cluster, started once, are theirs), and these two groups are handed out first so
  that the longest chains start at once. Every other fixture is safe beside another worker:
  servers take free ports, jobs their own names and ``LAUNCHBAY_HOME``.
* every test: no SageMaker SDK defaults file of this machine is read
  (``SAGEMAKER_ADMIN_CONFIG_OVERRIDE`` / ``SAGEMAKER_USER_CONFIG_OVERRIDE`` name one
  empty file, ``LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG`` a missing one); tests about those
  files set the variables themselves.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from launchbay.session import Session

MOTO_REGION = "us-west-2"

TESTS = Path(__file__).resolve().parent

#: The tier of each folder of tests/ (a marker of the same name; setup.cfg describes them).
_TIERS = {"unit": "unit", "compat": "unit", "amazon": "unit", "docker": "docker", "ray": "ray"}
#: Tiers whose tests share one machine-wide resource: one xdist worker runs each, in order.
_ONE_WORKER = ("docker", "ray")
#: Files of other tiers that run Docker jobs too: a Docker job's start sweeps the engine for
#: orphaned jobs, so they run on the Docker worker, never beside a Docker test's dying client.
_DOCKER_USERS = {
    "notebooks/test_notebooks.py",
    "integration/test_after_training.py",
    "integration/test_local_process_host_fidelity.py",
    "integration/test_sdk_v2_helpers.py",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups to name the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks each test with its tier; the one-worker tiers form xdist groups, handed out first.

    It runs before pytest-xdist's own hook, which turns the ``xdist_group`` markers into the
    ``@group`` suffix of each item's id that ``--dist loadgroup`` schedules by
    (:func:`pytest_collection_finish` checks that it did).
    """
    for item in items:
        try:
            parts = Path(item.path).resolve().relative_to(TESTS).parts
        except ValueError:
            continue
        tier = _TIERS.get(parts[0], "integration")
        item.add_marker(getattr(pytest.mark, tier))
        if tier in _ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(tier))
        elif "/".join(parts) in _DOCKER_USERS:
            item.add_marker(pytest.mark.xdist_group("docker"))

    def first_the_long_chains(item: pytest.Item) -> int:
        groups = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
        return _ONE_WORKER.index(groups[0]) if groups and groups[0] in _ONE_WORKER else 2

    items.sort(key=first_the_long_chains)  # stable: the order within each part is kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """An xdist worker stops at once if ``--dist loadgroup`` lost the groups.

    pytest-xdist names each grouped item ``<id>@<group>``; with pytest 9.2 that renaming has
    no effect (pytest-dev/pytest-xdist#1386) and the Docker and Ray tests were silently
    spread over every worker, a Ray cluster started per worker.
    """
    config = session.config
    if not getattr(config.option, "loadgroup", False):  # not an xdist worker of loadgroup
        return
    lost = [
        item.nodeid
        for item in session.items
        if any(m.args for m in item.iter_markers("xdist_group")) and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup ignored the xdist groups of {len(lost)} tests (e.g. {lost[0]}): "
            "this pytest and pytest-xdist do not work together (pytest-dev/pytest-xdist#1386); "
            "install the versions setup.cfg's test extra asks for"
        )


# --------------------------------------------------------------------------- botocore's files

#: botocore's data files (service models, endpoints.json), parsed once per test process.
_BOTOCORE_FILES: dict[tuple[str, int, int], object] = {}


def _parse_botocore_files_once() -> None:
    """Every botocore session in this process shares each data file's parsed content.

    SDK v2 makes a fresh botocore session for every region or partition lookup, and each
    parses endpoints.json and the service models again (about 0.07 s a lookup, half of the
    compat tests' time). A session keeps what it parsed and hands the same objects to every
    client it makes, so botocore never writes into them; sharing them across sessions asks
    no more of it. Keyed by path, size and mtime: a changed file is parsed again.
    """
    import botocore.loaders

    parse = botocore.loaders.JSONFileLoader._load_file

    def load_once(self: object, full_path: str, open_method: object) -> object:
        try:
            st = os.stat(full_path)
        except OSError:
            return None
        key = (full_path, st.st_size, st.st_mtime_ns)
        if key not in _BOTOCORE_FILES:
            _BOTOCORE_FILES[key] = parse(self, full_path, open_method)
        return _BOTOCORE_FILES[key]

    botocore.loaders.JSONFileLoader._load_file = load_once  # type: ignore[method-assign]


_parse_botocore_files_once()


def _aws_env(url: str, tmp_dir: str) -> dict[str, str]:
    missing = os.path.join(tmp_dir, "no-such-aws-file")
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": MOTO_REGION,
        "AWS_REGION": MOTO_REGION,
        "AWS_CONFIG_FILE": missing,
        "AWS_SHARED_CREDENTIALS_FILE": missing,
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }


_UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN")


def _apply_env(mp: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        mp.setenv(name, value)
    for name in _UNSET:
        mp.delenv(name, raising=False)


# --------------------------------------------------------------------------- leftovers

#: How long a test's leftovers may take to go away after it ends.
_LEFTOVER_GRACE = 10.0


@dataclass
class _Owned:
    """What one test's ``LAUNCHBAY_HOME`` holds on this machine at one moment."""

    processes: dict[tuple[int, bytes], str] = field(default_factory=dict)  # (pid, start): cmd
    mounts: set[str] = field(default_factory=set)
    shm: set[str] = field(default_factory=set)

    def minus(self, before: _Owned) -> _Owned:
        return _Owned(
            {k: v for k, v in self.processes.items() if k not in before.processes},
            self.mounts - before.mounts,
            self.shm - before.shm,
        )

    def __bool__(self) -> bool:
        return bool(self.processes or self.mounts or self.shm)


def _unescape_mount_point(text: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _owned(home: str) -> _Owned:
    """Processes, mounts and ``/dev/shm`` entries of the jobs of ``home`` (a scan of /proc)."""
    owned = _Owned()
    pattern = re.compile(re.escape(home.encode()) + rb"(?:/|\x00|$)")
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            if fields[0] in (b"Z", b"X"):  # a zombie holds nothing; its parent reaps it
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except (OSError, IndexError):
            continue
        if pattern.search(cmdline) or pattern.search(environ):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            owned.processes[(int(name), fields[19])] = command[:200]
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            point = _unescape_mount_point(line.split()[4])
            if point == home or point.startswith(home + "/"):
                owned.mounts.add(point)
    try:
        jobs = [n for n in os.listdir(os.path.join(home, "jobs")) if not n.startswith(".")]
        entries = os.listdir("/dev/shm") if jobs else []
    except OSError:
        entries = []
    owned.shm = {e for e in entries if any(job in e for job in jobs)}
    return owned


def _home_now() -> str | None:
    home = os.environ.get("LAUNCHBAY_HOME")
    return os.path.abspath(home) if home else None


_BASELINES = pytest.StashKey[dict[str, _Owned]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """The baseline of the test's home as its body starts (its fixtures have set the home)."""
    baselines: dict[str, _Owned] = {}
    home = _home_now() if sys.platform.startswith("linux") else None
    if home:
        baselines[home] = _owned(home)
    item.stash[_BASELINES] = baselines
    yield
    home = _home_now() if sys.platform.startswith("linux") else None
    if home and home not in baselines:  # set by the test body itself
        baselines[home] = _Owned()


@pytest.fixture(autouse=True)
def _no_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test when its jobs left a process, a mount or a ``/dev/shm`` entry.

    Set up before, and so torn down after, the test's other fixtures.
    """
    yield
    baselines = request.node.stash.get(_BASELINES, {})
    for home, before in baselines.items():
        deadline = time.monotonic() + _LEFTOVER_GRACE
        left = _owned(home).minus(before)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _owned(home).minus(before)
        if not left:
            continue
        for pid, _ in left.processes:  # the test's own; later tests must not inherit them
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        lines = [f"process {pid}: {command}" for (pid, _), command in left.processes.items()]
        lines += [f"mount {point}" for point in sorted(left.mounts)]
        lines += [f"/dev/shm/{entry}" for entry in sorted(left.shm)]
        pytest.fail(
            f"The test left {len(lines)} thing(s) of its jobs ({home}):\n" + "\n".join(lines),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _code_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Source archives are cached in the session's temporary directory, never in ``~``."""
    monkeypatch.setenv("LAUNCHBAY_CODE_CACHE", str(tmp_path_factory.getbasetemp() / "code-cache"))


@pytest.fixture(scope="session")
def _empty_sagemaker_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sagemaker-config") / "empty.yaml"
    path.write_text("")
    return path


@pytest.fixture(autouse=True)
def _no_machine_sagemaker_config(
    _empty_sagemaker_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/etc/xdg, ~/.config and ~/.sagemaker SageMaker config files never shape a test."""
    monkeypatch.setenv("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", str(_empty_sagemaker_config))
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(_empty_sagemaker_config))
    monkeypatch.setenv(
        "LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG", str(_empty_sagemaker_config.parent / "no-local.yaml")
    )


@contextmanager
def _moto(address: str) -> Iterator[str]:
    """The one way the tests start moto: a ``ThreadedMotoServer`` on ``address`` and a free
    port while the block runs; yields its URL. werkzeug's line per request is kept quiet."""
    from moto.server import ThreadedMotoServer

    werkzeug = logging.getLogger("werkzeug")
    saved_level = werkzeug.level
    werkzeug.setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address=address, port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        assert host == address, (host, address)
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        werkzeug.setLevel(saved_level)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto server on 127.0.0.1 for the whole test session; yields its URL."""
    with _moto("127.0.0.1") as url, pytest.MonkeyPatch.context() as mp:
        _apply_env(mp, _aws_env(url, str(tmp_path_factory.mktemp("aws"))))
        yield url


@pytest.fixture
def moto_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """``moto_at(address)``: a moto server of this test alone, on ``address`` (never all
    interfaces: a Docker network's gateway, say, for its containers), with the AWS
    environment pointing at it; returns its URL. It stops when the test ends."""
    with ExitStack() as servers:

        def start(address: str) -> str:
            assert address not in ("0.0.0.0", "::", ""), "moto listens on one address only"
            url = servers.enter_context(_moto(address))
            _apply_env(monkeypatch, _aws_env(url, str(tmp_path)))
            return url

        yield start


def reset_moto(url: str) -> None:
    """Forget every resource the moto server holds."""
    request = urllib.request.Request(f"{url}/moto-api/reset", method="POST", data=b"")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


@pytest.fixture
def aws(moto_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]) -> str:
    """A clean moto state and the moto AWS environment for one test; returns the URL."""
    reset_moto(moto_server)
    _apply_env(monkeypatch, _aws_env(moto_server, os.fspath(tmp_path)))
    return moto_server


@pytest.fixture
def session(aws: str) -> Session:
    """A ``launchbay.Session`` in us-west-2 talking to a freshly reset moto server."""
    import launchbay

    return launchbay.Session(region_name=MOTO_REGION)


@pytest.fixture
def src(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``src/`` with ``train.py``, ``util.py`` and ``run.sh``; the test runs in its parent.

    Estimators in the tests use ``source_dir="src"`` relative to that directory.
    Test files with other needs define their own ``src``.
    """
    root = Path(tmp_path) / "src"
    root.mkdir()
    (root / "train.py").write_text("print('train')\n")
    (root / "util.py").write_text("X = 1\n")
    (root / "run.sh").write_text("echo run\n")
    monkeypatch.chdir(tmp_path)
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$LAUNCHBAY_HOME`` under ``tmp_path`` (local jobs' files), and a 5 s stop grace period."""
    root = tmp_path / "home"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(root))
    monkeypatch.setenv("LAUNCHBAY_GRACE_SECONDS", "5")
    return root


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``fake_gpus(n)``: an ``nvidia-smi --list-gpus`` on ``PATH`` listing ``n`` GPUs."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(count: int) -> Path:
        bin_dir = tmp_path / "fake-nvidia-bin"
        bin_dir.mkdir(exist_ok=True)
        lines = "".join(f"GPU {i}: Fake GPU (UUID: GPU-fake-{i})\n" for i in range(count))
        script = bin_dir / "nvidia-smi"
        script.write_text(
            "#!/bin/sh\n"
            '[ "$1" = "--list-gpus" ] || { echo "fake nvidia-smi: only --list-gpus" >&2; exit 2; }\n'
            # who asked: the calling process (tests count the client's lookups)
            f'echo "$PPID" >> "{bin_dir}/calls.log"\n'
            f"printf '{lines}'\n"
        )
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        return bin_dir

    return install
