"""Fetching and unpacking code, entry point resolution, requirements.txt handling."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from launchbay.runtime import code
from launchbay.runtime.errors import TrainingSetupError, UnsafeArchiveError


def _tar(path: Path, members: list[tuple[str, str, str]]) -> Path:
    """members: (kind, name, data-or-link-target) with kind file|symlink|hardlink|dir|fifo."""
    with tarfile.open(path, "w:gz") as tar:
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "dir": tarfile.DIRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            info.linkname = payload
            tar.addfile(info)
    return path


@pytest.mark.parametrize(
    "bad",
    [
        ("file", "/etc/evil.py", "x"),
        ("file", "../evil.py", "x"),
        ("file", "pkg/../../evil.py", "x"),
        ("symlink", "link", "/etc/passwd"),
        ("symlink", "pkg/link", "../../outside"),
        ("hardlink", "hard", "../outside"),
        ("fifo", "pipe", ""),
    ],
)
def test_archive_members_escaping_the_code_dir_are_refused(tmp_path: Path, bad: tuple) -> None:
    archive = _tar(tmp_path / "sourcedir.tar.gz", [("file", "train.py", "print(1)"), bad])
    dest = tmp_path / "code"
    with pytest.raises(UnsafeArchiveError) as info:
        code.safe_extract(str(archive), str(dest))
    assert bad[1] in str(info.value) and "outside the code directory" in str(info.value)
    assert not (dest / "train.py").exists(), "nothing is extracted from a refused archive"
    assert not (tmp_path / "evil.py").exists()


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


CHAINED = {
    # A link whose target goes through another link from the same archive.
    "dotdot through a dir link": [
        ("symlink", "a", "."),
        ("symlink", "b", "a/.."),
        ("file", "b/evil.py", "x"),
    ],
    "link to a link to outside": [
        ("symlink", "d", "."),
        ("symlink", "x", "d/../evil.py"),
        ("file", "x", "x"),
    ],
    "three links deep": [
        ("dir", "sub", ""),
        ("symlink", "sub/up", ".."),
        ("symlink", "sub/up2", "up/sub/up"),
        ("symlink", "esc", "sub/up2/.."),
        ("file", "esc/evil.py", "x"),
    ],
    "a later member re-points a link": [
        ("symlink", "l", "t/evil.py"),
        ("symlink", "t", "sub/.."),
        ("symlink", "sub", "."),
    ],
    "hard link through a link": [
        ("symlink", "a", "."),
        ("symlink", "b", "a/.."),
        ("hardlink", "h", "b/outside.txt"),
    ],
    "absolute link": [("symlink", "abs", "/etc"), ("file", "abs/evil.py", "x")],
    "dotdot member": [("file", "pkg/../../evil.py", "x")],
    "hard link outside": [("hardlink", "h", "../outside.txt")],
    "file written through a link": [("symlink", "f", "../evil.py"), ("file", "f", "x")],
}


@pytest.mark.parametrize("use_data_filter", [True, False], ids=["data-filter", "no-filter"])
@pytest.mark.parametrize("case", sorted(CHAINED))
def test_chained_links_are_refused_and_nothing_is_written(
    tmp_path: Path, case: str, use_data_filter: bool
) -> None:
    """The check resolves links as extraction will; with or without tarfile's data filter."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "outside.txt").write_text("host file")
    members = [("file", "train.py", "print(1)"), *CHAINED[case]]
    archive = _tar(tmp_path / "sourcedir.tar.gz", members)
    dest = work / "code"
    before = _listing(tmp_path)
    with pytest.raises(UnsafeArchiveError) as info:
        code.safe_extract(str(archive), str(dest), use_data_filter=use_data_filter)
    assert "outside the code directory" in str(info.value)
    assert "through other links in the archive" in str(info.value)
    assert "Nothing was unpacked" in str(info.value)
    assert os.listdir(dest) == [], "nothing at all is written inside when refused"
    assert _listing(tmp_path) == sorted([*before, "work/code"]), "nothing is written outside"
    assert (work / "outside.txt").read_text() == "host file"


@pytest.mark.parametrize("use_data_filter", [True, False], ids=["data-filter", "no-filter"])
def test_links_that_stay_inside_are_extracted_with_or_without_the_filter(
    tmp_path: Path, use_data_filter: bool
) -> None:
    archive = _tar(
        tmp_path / "s.tar.gz",
        [
            ("dir", "pkg", ""),
            ("file", "pkg/mod.py", "M"),
            ("symlink", "latest", "."),
            ("symlink", "p", "latest/pkg"),
            ("symlink", "up", "pkg/.."),
            ("file", "p/extra.py", "E"),
            ("hardlink", "hard.py", "pkg/mod.py"),
            ("symlink", "m", "up/p/mod.py"),
        ],
    )
    dest = tmp_path / "code"
    code.safe_extract(str(archive), str(dest), use_data_filter=use_data_filter)
    assert (dest / "pkg" / "extra.py").read_text() == "E"
    assert (dest / "m").read_text() == "M"
    assert (dest / "hard.py").read_text() == "M"
    assert os.readlink(dest / "latest") == "."


def test_safe_archive_is_extracted(tmp_path: Path) -> None:
    archive = _tar(
        tmp_path / "s.tar.gz",
        [
            ("dir", "pkg", ""),
            ("file", "pkg/__init__.py", ""),
            ("file", "train.py", "print(1)"),
            ("symlink", "pkg/alias.py", "../train.py"),
        ],
    )
    dest = tmp_path / "code"
    code.safe_extract(str(archive), str(dest))
    assert (dest / "train.py").read_text() == "print(1)"
    assert (dest / "pkg" / "alias.py").resolve() == (dest / "train.py").resolve()


def test_fetch_code_from_tarball_file_uri_and_directory(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "sourcedir.tar.gz", [("file", "train.py", "A")])
    assert code.fetch_code(str(archive), str(tmp_path / "c1"))
    assert (tmp_path / "c1" / "train.py").read_text() == "A"
    assert code.fetch_code(f"file://{archive}", str(tmp_path / "c2"))
    assert (tmp_path / "c2" / "train.py").read_text() == "A"
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "m.py").write_text("B")
    assert code.fetch_code(str(source), str(tmp_path / "c3"))
    assert (tmp_path / "c3" / "sub" / "m.py").read_text() == "B"
    # A code dir with content is left alone (code baked into an image wins).
    assert not code.fetch_code(str(archive), str(tmp_path / "c3"))
    assert not code.fetch_code(None, str(tmp_path / "c4"))
    with pytest.raises(TrainingSetupError, match="does not exist"):
        code.fetch_code(str(tmp_path / "missing.tar.gz"), str(tmp_path / "c5"))


def test_s3_code_needs_boto3_only_then(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_boto3(name: str, *args: object, **kwargs: object):
        if name == "boto3":
            raise ImportError("no boto3")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_boto3)
    with pytest.raises(TrainingSetupError, match="boto3 is not installed"):
        code.fetch_code("s3://bucket/key/sourcedir.tar.gz", str(tmp_path / "c"))


def test_s3_code_is_fetched_through_aws_endpoint_url(tmp_path: Path, aws: str) -> None:
    import boto3

    archive = _tar(tmp_path / "sourcedir.tar.gz", [("file", "train.py", "S3")])
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="code", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.upload_file(str(archive), "code", "job/source/sourcedir.tar.gz")
    assert code.fetch_code("s3://code/job/source/sourcedir.tar.gz", str(tmp_path / "c"))
    assert (tmp_path / "c" / "train.py").read_text() == "S3"


def test_entry_point_kinds(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "run.sh").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "main.py").write_text("")
    assert code.resolve_entry_point(str(tmp_path), "train.py").kind == "script"
    assert code.resolve_entry_point(str(tmp_path), "run.sh").kind == "command"
    module = code.resolve_entry_point(str(tmp_path), "pkg.main")
    assert (module.kind, module.module) == ("module", "pkg.main")
    assert code.resolve_entry_point(str(tmp_path), "serve").kind == "command"
    (tmp_path / "setup.py").write_text("")
    package = code.resolve_entry_point(str(tmp_path), "train.py")
    assert (package.kind, package.module) == ("module", "train")


@pytest.mark.parametrize(
    "name", ["", None, "/abs.py", "../up.py", "a/../b.py", "-m.py", "a b.py", "x;rm"]
)
def test_unsafe_entry_point_names_are_refused(tmp_path: Path, name: str | None) -> None:
    with pytest.raises(TrainingSetupError):
        code.resolve_entry_point(str(tmp_path), name)


def test_requirements_parsing_and_unmet() -> None:
    text = """
    # comment
    pytest>=7
    psutil==0.0.1
    definitely-not-installed-pkg-xyz[extra]>=1 ; python_version > "3"
    -r other.txt
    --index-url https://example.invalid/simple
    git+https://example.invalid/repo.git
    ./local/path
    """
    reqs = code.parse_requirements(text)
    assert [r.name for r in reqs] == ["pytest", "psutil", "definitely-not-installed-pkg-xyz"]
    problems = code.unmet_requirements(reqs)
    assert len(problems) == 2
    assert "psutil==0.0.1 (installed:" in problems[0]
    assert "definitely-not-installed-pkg-xyz" in problems[1] and "not installed" in problems[1]


def test_local_process_mode_reports_instead_of_installing(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "requirements.txt").write_text("definitely-not-installed-pkg-xyz==1.0\npytest\n")
    entry = code.resolve_entry_point(str(tmp_path), "train.py")
    warnings = code.prepare_requirements(str(tmp_path), entry, local_process=True, install=None)
    assert len(warnings) == 1
    assert "definitely-not-installed-pkg-xyz==1.0 (not installed)" in warnings[0]
    assert "LAUNCHBAY_INSTALL_REQUIREMENTS=1" in warnings[0]
    # Satisfied requirements: nothing to say.
    (tmp_path / "requirements.txt").write_text("pytest\n")
    assert code.prepare_requirements(str(tmp_path), entry, local_process=True, install=None) == []


def test_containers_install_like_the_toolkit(tmp_path: Path) -> None:
    """In containers ``pip install -r requirements.txt`` runs (here: a no-op requirement file)."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "requirements.txt").write_text("# nothing to install\n")
    entry = code.resolve_entry_point(str(tmp_path), "train.py")
    assert code.prepare_requirements(str(tmp_path), entry, local_process=False, install=None) == []
    (tmp_path / "requirements.txt").write_text("definitely-not-installed-pkg-xyz==1.0\n")
    with pytest.raises(TrainingSetupError, match="pip install -r requirements.txt' failed"):
        code.prepare_requirements(
            str(tmp_path), entry, local_process=False, install=None, python="/bin/false"
        )
    # Opted out.
    assert code.prepare_requirements(str(tmp_path), entry, local_process=False, install="0")


# A stand-in interpreter for pip: counts its runs, takes a moment, then exits $FAKE_PIP_EXIT.
FAKE_PYTHON = """#!/bin/sh
echo run >> "$(dirname "$0")/runs"
echo "fake pip output"
sleep 1
echo "fake pip error" >&2
exit "${FAKE_PIP_EXIT:-0}"
"""

PREPARE = """
import sys
from launchbay.runtime import code
from launchbay.runtime.errors import TrainingSetupError

code_dir, python, local, shared = sys.argv[1:5]
entry = code.resolve_entry_point(code_dir, "train.py")
try:
    code.prepare_requirements(code_dir, entry, local_process=local == "1", install="1",
                              python=python, shared_dir=shared)
except TrainingSetupError as exc:
    print("FAILED:", str(exc).splitlines()[0])
"""


def _hosts_prepare(tmp_path: Path, *, local: bool, exit_code: int = 0) -> list[str]:
    """Two hosts' runtimes preparing requirements.txt at once; what each printed."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    procs = []
    for host in ("algo-1", "algo-2"):
        code_dir = tmp_path / host / "code"
        code_dir.mkdir(parents=True)
        (code_dir / "train.py").write_text("")
        (code_dir / "requirements.txt").write_text("tiny==1.0\n")
        env = dict(os.environ, FAKE_PIP_EXIT=str(exit_code))
        args = [str(code_dir), str(python), "1" if local else "0", str(tmp_path / "shared")]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", PREPARE, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
        )
    return [p.communicate(timeout=60)[0] for p in procs]


def test_local_process_hosts_run_pip_once_and_share_its_result(tmp_path: Path) -> None:
    outputs = _hosts_prepare(tmp_path, local=True)
    assert (tmp_path / "bin" / "runs").read_text() == "run\n"
    assert sum(out.count("fake pip output") for out in outputs) == 1  # pip's output, once
    assert not any("FAILED" in out for out in outputs)
    assert sorted(os.listdir(tmp_path / "shared" / "requirements"))[0].endswith(".json")


def test_local_process_hosts_share_a_failed_install(tmp_path: Path) -> None:
    outputs = _hosts_prepare(tmp_path, local=True, exit_code=3)
    assert (tmp_path / "bin" / "runs").read_text() == "run\n"
    failures = [line for out in outputs for line in out.splitlines() if "FAILED" in line]
    assert len(failures) == 2 and len(set(failures)) == 1, outputs
    assert "failed with exit code 3" in failures[0]


def test_containers_each_install_into_their_own_interpreter(tmp_path: Path) -> None:
    """Docker: one container per host, each with its own interpreter, each installs."""
    _hosts_prepare(tmp_path, local=False)
    assert (tmp_path / "bin" / "runs").read_text() == "run\nrun\n"
    assert not (tmp_path / "shared").exists()


def _one_host_prepare(tmp_path: Path, job: str, requirements: str) -> str:
    code_dir = tmp_path / job / "code"
    code_dir.mkdir(parents=True)
    (code_dir / "train.py").write_text("")
    (code_dir / "requirements.txt").write_text(requirements)
    args = [str(code_dir), str(tmp_path / "bin" / "python"), "1", str(tmp_path / job / "shared")]
    done = subprocess.run(
        [sys.executable, "-c", "import logging; logging.basicConfig(level=20)\n" + PREPARE, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


def test_local_process_skips_pip_for_requirements_it_installed_and_nothing_changed(
    tmp_path: Path, home: Path
) -> None:
    """issue 36 item 3: a second job's already-satisfied requirements.txt costs no pip run;
    an install or removal in the environment since (site-packages changed), other
    requirements, or a requirements.txt with an option or a path runs pip again."""
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    runs = tmp_path / "bin" / "runs"

    _one_host_prepare(tmp_path, "job-1", "tiny==1.0\n")
    assert runs.read_text() == "run\n"
    out = _one_host_prepare(tmp_path, "job-2", "tiny==1.0\n")
    assert runs.read_text() == "run\n", out  # no pip run at all
    assert "already installed" in out and "FAILED" not in out

    (site / "other-1.0.dist-info").mkdir()  # something installed since: pip runs again
    time.sleep(0.01)
    _one_host_prepare(tmp_path, "job-3", "tiny==1.0\n")
    assert runs.read_text() == "run\n" * 2
    _one_host_prepare(tmp_path, "job-4", "tiny==1.0\n")
    assert runs.read_text() == "run\n" * 2

    _one_host_prepare(tmp_path, "job-5", "tiny==2.0\n")  # other requirements
    assert runs.read_text() == "run\n" * 3
    for job in ("job-6", "job-7"):  # a path can change under the same text: pip always runs
        _one_host_prepare(tmp_path, job, "-e ./pkg\n")
    assert runs.read_text() == "run\n" * 5
    markers = [p for p in (home / "locks").rglob("*") if p.parent.name.endswith(".satisfied")]
    assert markers and all(p.stat().st_mode & 0o077 == 0 for p in markers)
    assert all(p.parent.stat().st_mode & 0o077 == 0 for p in markers)
