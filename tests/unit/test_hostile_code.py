"""Source packaging under hostile conditions (issue 25): launchbay's home inside
``source_dir``, and many threads packaging and staging the same new code at once.

Real trees, real archives, real threads; nothing of launchbay is mocked.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import os
import tarfile
import threading
from pathlib import Path

import pytest

from launchbay.code import package_code, stage_code_file
from launchbay.errors import ConfigurationError


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getnames()


def _project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('train')\n")
    (root / "pkg" / "util.py").write_text("X = 1\n")
    return root


def _fake_job(home: Path, name: str) -> None:
    """What a local job leaves in $LAUNCHBAY_HOME: its files, environment values included."""
    job = home / "jobs" / name
    job.mkdir(parents=True)
    (job / "request.json").write_text('{"Environment": {"API_TOKEN": "s3cr3t"}}')
    (job / "model.tar.gz").write_bytes(os.urandom(4096))


# -- item 9: $LAUNCHBAY_HOME inside source_dir ------------------------------------------
def test_launchbay_home_inside_source_dir_is_never_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    project = _project(tmp_path / "project")
    # the project keeps launchbay's files beside the code, named relatively from inside it
    monkeypatch.chdir(project)
    monkeypatch.setenv("LAUNCHBAY_HOME", ".launchbay")
    cache = tmp_path / "cache"
    home = project / ".launchbay"
    _fake_job(home, "job-1")
    # other spellings of the home inside the tree: a link to it, and a link to a file in it
    (project / "linked-home").symlink_to(".launchbay", target_is_directory=True)
    (project / "pkg" / "request.json").symlink_to(home / "jobs" / "job-1" / "request.json")

    caplog.set_level(logging.INFO, logger="launchbay.code")
    first = package_code("train.py", ".", cache_dir=str(cache))
    assert sorted(_names(first.data)) == ["pkg", "pkg/util.py", "train.py"]
    assert b"s3cr3t" not in gzip.decompress(first.data)
    said = [r for r in caplog.records if "Not packaging" in r.getMessage()]
    assert said and said[0].levelno == logging.INFO and "LAUNCHBAY_HOME" in said[0].getMessage()

    # jobs keep landing in the home: the archive stays the same bytes (it used to hold every
    # earlier job, and grow ~4x a job), and the home is said at INFO only once
    for i in range(2, 5):
        _fake_job(home, f"job-{i}")
        caplog.clear()
        again = package_code("train.py", ".", cache_dir=str(cache))
        assert again.sha256 == first.sha256 and again.size == first.size
        assert all(
            r.levelno < logging.INFO for r in caplog.records if "Not packaging" in r.getMessage()
        )


def test_the_archive_cache_inside_source_dir_is_never_packed(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    cache = project / "archives"
    first = package_code("train.py", project, cache_dir=str(cache))
    assert list(cache.glob("*.tar.gz")), "the archive was cached inside the project"
    again = package_code("train.py", project, cache_dir=str(cache))
    assert again.sha256 == first.sha256
    assert not [n for n in _names(again.data) if n.startswith("archives")]


def test_a_dependency_holding_the_home_leaves_it_out_and_the_home_itself_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = _project(tmp_path / "project")
    lib = tmp_path / "lib"
    (lib / "mylib").mkdir(parents=True)
    (lib / "mylib" / "__init__.py").write_text("")
    home = lib / "state"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(home))
    _fake_job(home, "job-1")
    bundle = package_code("train.py", project, [str(lib)], cache_dir=None)
    assert "lib/mylib/__init__.py" in bundle.files
    assert not [n for n in _names(bundle.data) if "state" in n]

    with pytest.raises(ConfigurationError, match=r"source_dir=.*LAUNCHBAY_HOME"):
        (home / "train.py").write_text("")
        package_code("train.py", str(home), cache_dir=None)
    with pytest.raises(ConfigurationError, match=r"dependencies=.*LAUNCHBAY_HOME"):
        package_code("train.py", project, [str(home)], cache_dir=None)


def test_code_inside_the_home_is_still_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("LAUNCHBAY_HOME", str(home))
    project = _project(home / "projects" / "p")
    bundle = package_code("train.py", project, cache_dir=str(home / "cache" / "code"))
    assert bundle.files == ("pkg/util.py", "train.py")


# -- item 11: threads packaging and staging the same new code -----------------------------
def _sweep(project: Path, cache: Path, staged_root: Path, threads: int) -> list[tuple[str, bytes]]:
    """``threads`` threads at once do what a fit() does with the code: package, then stage.

    Returns each thread's (sha256, staged bytes); raises the threads' errors.
    """
    start = threading.Barrier(threads, timeout=60)
    staged = threading.Barrier(threads, timeout=60)
    results: list[tuple[str, bytes]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def fit() -> None:
        try:
            start.wait()
            bundle = package_code("train.py", project, cache_dir=str(cache))
            target = staged_root / bundle.sha256 / "sourcedir.tar.gz"
            staged.wait()
            stage_code_file(bundle, f"file://{target}")
            with lock:
                results.append((bundle.sha256, target.read_bytes()))
        except BaseException as exc:  # collected and reported below
            with lock:
                errors.append(exc)
            start.abort()
            staged.abort()

    workers = [threading.Thread(target=fit) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert not errors, errors
    return results


def test_threads_packaging_and_staging_the_same_new_code_all_succeed(tmp_path: Path) -> None:
    """A ThreadPoolExecutor sweep of fit()s with the same new code: every one starts.

    The threads used to share the temporary name ``<path>.<pid>.tmp``: all but
    one failed at once with a raw FileNotFoundError.
    """
    project = _project(tmp_path / "project")
    cache = tmp_path / "cache"
    threads = 8
    for round_ in range(10):  # new code each round: nothing cached or staged yet
        (project / "pkg" / "util.py").write_text(f"X = {round_}\n")
        (project / "weights.bin").write_bytes(os.urandom(2 * 1024 * 1024))
        results = _sweep(project, cache, tmp_path / "staged", threads)
        assert len(results) == threads
        [digest] = {digest for digest, _ in results}
        assert {hashlib.sha256(data).hexdigest() for _, data in results} == {digest}
        cached = list(cache.glob("*.tar.gz"))
        assert [p for p in cached if hashlib.sha256(p.read_bytes()).hexdigest() == digest]
    # no temporary file is left in the cache or beside the staged archives
    assert not [p for p in cache.iterdir() if not p.name.endswith(".tar.gz")]
    assert not [p for p in (tmp_path / "staged").rglob("*") if p.name.endswith(".tmp")]
