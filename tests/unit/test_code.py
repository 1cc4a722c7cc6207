"""Source packaging: deterministic archives, layout, ignore rules and validation."""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from launchbay.code import CodeBundle, code_s3_uri, package_code, validate_code
from launchbay.errors import ConfigurationError, InputError


def _write(path: Path, text: str = "x", mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    _write(root / "train.py", "print('train')\n")
    _write(root / "pkg" / "__init__.py", "")
    _write(root / "pkg" / "util.py", "VALUE = 1\n")
    _write(root / "pkg" / "util.pyc", "compiled")
    _write(root / "pkg" / "__pycache__" / "util.cpython-311.pyc", "compiled")
    _write(root / ".git" / "HEAD", "ref: refs/heads/main\n")
    _write(root / "data" / "labels.txt", "a\nb\n")
    (root / "empty").mkdir()
    return root


def _members(bundle: CodeBundle) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r:gz") as tar:
        return tar.getmembers()


def _read(bundle: CodeBundle, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(bundle.data), mode="r:gz") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


# -- determinism ---------------------------------------------------------------------
def test_same_files_give_same_bytes(src: Path) -> None:
    first = package_code("train.py", str(src), cache_dir=None)
    second = package_code("train.py", str(src), cache_dir=None)
    assert first.data == second.data
    assert first.sha256 == second.sha256
    assert len(first.sha256) == 64
    assert first.size == len(first.data)


def test_touching_mtimes_and_copying_elsewhere_keeps_bytes(src: Path, tmp_path: Path) -> None:
    before = package_code("train.py", src, cache_dir=None)
    for path in src.rglob("*"):
        os.utime(path, (1_000_000, 1_000_000))
    assert package_code("train.py", src, cache_dir=None).data == before.data

    copy = tmp_path / "elsewhere" / "copy-of-src"
    shutil.copytree(src, copy)
    assert package_code("train.py", copy, cache_dir=None).sha256 == before.sha256


def test_content_change_changes_hash(src: Path) -> None:
    before = package_code("train.py", src)
    (src / "pkg" / "util.py").write_text("VALUE = 2\n")
    assert package_code("train.py", src).sha256 != before.sha256


# -- the archive cache ------------------------------------------------------------------
def _cached(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.tar.gz"))


def test_unchanged_files_reuse_the_cached_archive(src: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = package_code("train.py", src, cache_dir=str(cache))
    [archive] = _cached(cache)
    assert archive.read_bytes() == first.data
    assert package_code("train.py", src, cache_dir=None).data == first.data
    # a hit is served from the cache file as it is (the archive is not built again)
    other = package_code("other.py", _write(tmp_path / "o" / "other.py").parent, cache_dir=None)
    archive.write_bytes(other.data)
    again = package_code("train.py", src, cache_dir=str(cache))
    assert again.data == other.data and again.sha256 == other.sha256
    assert again.script_name == "train.py" and again.files == first.files


@pytest.mark.parametrize(
    "change", ["content", "same-size-same-mtime", "new-file", "rename", "chmod"]
)
def test_any_change_to_the_files_builds_the_archive_again(
    src: Path, tmp_path: Path, change: str
) -> None:
    cache = tmp_path / "cache"
    package_code("train.py", src, cache_dir=str(cache))
    util = src / "pkg" / "util.py"
    if change == "content":
        util.write_text("VALUE = 22\n")
    elif change == "same-size-same-mtime":  # only the ctime (and the bytes) differ
        stat = util.stat()
        util.write_text("VALUE = 2\n")
        os.utime(util, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    elif change == "new-file":
        _write(src / "pkg" / "extra.py", "")
    elif change == "rename":
        util.rename(src / "pkg" / "util2.py")
    else:
        util.chmod(0o755)
    cached = package_code("train.py", src, cache_dir=str(cache))
    assert cached.data == package_code("train.py", src, cache_dir=None).data
    assert len(_cached(cache)) == 2


def test_the_cache_keeps_the_most_recently_used_archives(src: Path, tmp_path: Path) -> None:
    from launchbay.code import CACHE_ENTRIES

    cache = tmp_path / "cache"
    for i in range(CACHE_ENTRIES + 3):
        (src / "pkg" / "util.py").write_text(f"VALUE = {i}\n")
        package_code("train.py", src, cache_dir=str(cache))
    assert len(_cached(cache)) == CACHE_ENTRIES


def test_the_cache_can_be_turned_off_or_moved(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAUNCHBAY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LAUNCHBAY_CODE_CACHE", "0")
    package_code("train.py", src)
    assert not (tmp_path / "home").exists()
    monkeypatch.setenv("LAUNCHBAY_CODE_CACHE", str(tmp_path / "elsewhere"))
    package_code("train.py", src)
    assert len(_cached(tmp_path / "elsewhere")) == 1
    monkeypatch.delenv("LAUNCHBAY_CODE_CACHE")
    package_code("train.py", src)
    assert len(_cached(tmp_path / "home" / "cache" / "code")) == 1


def test_an_unwritable_cache_does_not_fail_packaging(src: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    bundle = package_code("train.py", src, cache_dir=str(blocker / "cache"))
    assert bundle.data == package_code("train.py", src, cache_dir=None).data


def test_archive_metadata_is_normalised(src: Path) -> None:
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o700)
    (src / "pkg" / "util.py").chmod(0o600)
    bundle = package_code("train.py", src)

    # gzip header: no FNAME flag, mtime 0
    assert bundle.data[:2] == b"\x1f\x8b"
    assert bundle.data[3] == 0, "gzip flags must be 0 (no file name)"
    assert bundle.data[4:8] == b"\x00\x00\x00\x00", "gzip mtime must be 0"
    assert gzip.decompress(bundle.data)  # well-formed

    members = {m.name: m for m in _members(bundle)}
    for member in members.values():
        assert member.mtime == 0
        assert (member.uid, member.gid) == (0, 0)
        assert (member.uname, member.gname) == ("", "")
    assert members["run.sh"].mode == 0o755
    assert members["pkg/util.py"].mode == 0o644
    assert members["train.py"].mode == 0o644
    assert members["pkg"].isdir() and members["pkg"].mode == 0o755


def test_archive_members_are_sorted_and_listed(src: Path) -> None:
    bundle = package_code("train.py", src)
    names = [m.name for m in _members(bundle)]
    assert names == [
        "data",
        "data/labels.txt",
        "empty",
        "pkg",
        "pkg/__init__.py",
        "pkg/util.py",
        "train.py",
    ]
    assert bundle.files == ("data/labels.txt", "pkg/__init__.py", "pkg/util.py", "train.py")
    assert bundle.script_name == "train.py"
    assert _read(bundle, "train.py") == b"print('train')\n"


def test_bundle_is_frozen_and_repr_has_no_bytes(src: Path) -> None:
    bundle = package_code("train.py", src)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bundle.sha256 = "x"  # type: ignore[misc]
    assert "data=" not in repr(bundle) and bundle.sha256 in repr(bundle)


# -- layout ----------------------------------------------------------------------------
def test_entry_point_alone_without_source_dir(src: Path) -> None:
    bundle = package_code(src / "pkg" / "util.py")
    assert bundle.files == ("util.py",)
    assert bundle.script_name == "util.py"
    assert [m.name for m in _members(bundle)] == ["util.py"]


def test_entry_point_in_a_subdirectory_of_source_dir(src: Path) -> None:
    bundle = package_code("pkg/util.py", src)
    assert bundle.script_name == "pkg/util.py"
    assert "train.py" in bundle.files


def test_absolute_entry_point_inside_source_dir_is_made_relative(src: Path) -> None:
    bundle = package_code(str(src / "pkg" / "util.py"), str(src))
    assert bundle.script_name == "pkg/util.py"


def test_dependencies_are_top_level_entries(src: Path, tmp_path: Path) -> None:
    lib = tmp_path / "deps" / "mylib"
    _write(lib / "__init__.py", "")
    _write(lib / "core.py", "X = 1\n")
    _write(lib / "__pycache__" / "core.cpython-311.pyc", "compiled")
    helper = _write(tmp_path / "deps" / "helper.py", "def f(): ...\n")

    bundle = package_code("train.py", src, dependencies=[str(lib) + "/", helper])
    assert "mylib/__init__.py" in bundle.files
    assert "mylib/core.py" in bundle.files
    assert "helper.py" in bundle.files
    assert not any("__pycache__" in name for name in bundle.files)

    alone = package_code(src / "train.py", dependencies=[lib])
    assert alone.files == ("mylib/__init__.py", "mylib/core.py", "train.py")


def test_dependency_name_clash_is_an_error(src: Path, tmp_path: Path) -> None:
    other = _write(tmp_path / "other" / "train.py")
    with pytest.raises(ConfigurationError) as info:
        package_code("train.py", src, dependencies=[other])
    assert info.value.argument == "dependencies"
    assert str(other) in str(info.value) and "'train.py'" in str(info.value)
    assert "differs" in str(info.value)


def test_dependency_repeating_source_dir_files_byte_for_byte_is_accepted(
    src: Path, tmp_path: Path
) -> None:
    """SDK v2 accepts a dependency that repeats what source_dir already holds (e.g. one inside it)."""
    (src / "helper.py").write_bytes(b"HELP = 1\n")
    _write(src / "lib" / "a.py", "A = 1\n")
    _write(src / "lib" / "b.py", "B = 1\n")
    copy = _write(tmp_path / "copy" / "helper.py", "HELP = 1\n")
    alone = package_code("train.py", src)
    repeated = package_code(
        "train.py", src, dependencies=[src / "helper.py", copy, src / "lib", str(src / "lib") + "/"]
    )
    assert repeated.files == alone.files
    assert repeated.sha256 == alone.sha256


def test_dependency_directory_that_adds_or_changes_a_file_is_a_clash(
    src: Path, tmp_path: Path
) -> None:
    _write(src / "lib" / "a.py", "A = 1\n")
    changed = _write(tmp_path / "v2" / "lib" / "a.py", "A = 2\n").parent
    with pytest.raises(ConfigurationError, match=r"'lib/a.py' differs") as info:
        package_code("train.py", src, dependencies=[changed])
    assert info.value.argument == "dependencies" and str(changed) in str(info.value)
    extra = _write(tmp_path / "v3" / "lib" / "a.py", "A = 1\n").parent
    _write(extra / "new.py", "N = 1\n")
    with pytest.raises(ConfigurationError, match=r"'lib/new.py' is not in it"):
        package_code("train.py", src, dependencies=[extra])
    dir_for_file = _write(tmp_path / "v4" / "train.py" / "x.py").parent
    with pytest.raises(ConfigurationError, match="'train.py'"):
        package_code("train.py", src, dependencies=[dir_for_file])


# -- skip and ignore rules -------------------------------------------------------------------
def test_builtin_skips(src: Path) -> None:
    files = package_code("train.py", src).files
    assert not any(name.startswith(".git/") for name in files)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in files)


def test_launchbayignore_rules(src: Path) -> None:
    _write(
        src / ".launchbayignore",
        "\n".join(
            [
                "# comments and blank lines are ignored",
                "",
                "*.log",
                "build/",
                "secret.txt",
                "data/raw",
                "/top-only.txt",
                "docs/**/draft.md",
            ]
        )
        + "\n",
    )
    _write(src / "run.log")
    _write(src / "pkg" / "deep.log")
    _write(src / "build" / "out.bin")  # directory named build: ignored
    _write(src / "pkg" / "build")  # a *file* named build: kept (build/ matches dirs only)
    _write(src / "secret.txt")
    _write(src / "pkg" / "secret.txt")  # unanchored name matches at any depth
    _write(src / "data" / "raw" / "big.csv")  # anchored path: ignored
    _write(src / "pkg" / "data" / "raw" / "keep.csv")  # same path elsewhere: kept
    _write(src / "top-only.txt")
    _write(src / "pkg" / "top-only.txt")  # leading slash anchors: kept
    _write(src / "docs" / "a" / "b" / "draft.md")
    _write(src / "docs" / "draft.md")  # ** matches zero directories too
    _write(src / "docs" / "final.md")

    files = set(package_code("train.py", src).files)
    assert files == {
        ".launchbayignore",
        "data/labels.txt",
        "docs/final.md",
        "pkg/__init__.py",
        "pkg/build",
        "pkg/data/raw/keep.csv",
        "pkg/top-only.txt",
        "pkg/util.py",
        "train.py",
    }


def test_negated_ignore_pattern_is_rejected(src: Path) -> None:
    _write(src / ".launchbayignore", "*.txt\n!keep.txt\n")
    with pytest.raises(ConfigurationError, match=r"\.launchbayignore:2.*'!keep\.txt'"):
        package_code("train.py", src)


def test_ignored_entry_point_is_an_error(src: Path) -> None:
    _write(src / ".launchbayignore", "train.py\n")
    with pytest.raises(ConfigurationError, match=r"entry_point='train\.py'.*\.launchbayignore"):
        package_code("train.py", src)


# -- symlinks ------------------------------------------------------------------------------
def test_symlinks_inside_are_followed_outside_are_skipped(src: Path, tmp_path: Path) -> None:
    outside = _write(tmp_path / "outside.txt", "outside")
    (src / "link-to-util.py").symlink_to(src / "pkg" / "util.py")
    (src / "pkg-link").symlink_to(src / "pkg", target_is_directory=True)
    (src / "escape.txt").symlink_to(outside)
    (src / "broken").symlink_to(src / "does-not-exist")
    (src / "pkg" / "loop").symlink_to(src / "pkg", target_is_directory=True)

    bundle = package_code("train.py", src)
    assert _read(bundle, "link-to-util.py") == b"VALUE = 1\n"
    assert "pkg-link/util.py" in bundle.files
    assert "escape.txt" not in bundle.files
    assert "broken" not in bundle.files
    assert not any(name.startswith("pkg/loop/") for name in bundle.files)
    names = [m.name for m in _members(bundle)]
    assert all(m.isfile() or m.isdir() for m in _members(bundle)), names


# -- validation ----------------------------------------------------------------------------------
# case -> (src, tmp_path) -> (kwargs, argument named in the error, value shown)
_ERROR_CASES = {
    "missing entry point": lambda src, tmp: ({"entry_point": "nope.py", "source_dir": src}, "entry_point", "nope.py"),
    "missing entry point, no source_dir": lambda src, tmp: ({"entry_point": str(tmp / "nope.py")}, "entry_point", str(tmp / "nope.py")),
    "entry point is a directory": lambda src, tmp: ({"entry_point": "pkg", "source_dir": src}, "entry_point", "pkg"),
    "missing source_dir": lambda src, tmp: ({"entry_point": "train.py", "source_dir": tmp / "gone"}, "source_dir", str(tmp / "gone")),
    "source_dir is a file": lambda src, tmp: ({"entry_point": "train.py", "source_dir": tmp / "a-file"}, "source_dir", str(tmp / "a-file")),
    "dot-dot escape": lambda src, tmp: ({"entry_point": "../outside.py", "source_dir": src}, "entry_point", "../outside.py"),
    "absolute path outside": lambda src, tmp: ({"entry_point": str(tmp / "outside.py"), "source_dir": src}, "entry_point", str(tmp / "outside.py")),
    "missing dependency": lambda src, tmp: ({"entry_point": "train.py", "source_dir": src, "dependencies": [tmp / "lib"]}, "dependencies", str(tmp / "lib")),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_ERROR_CASES))
def test_validation_errors_name_argument_and_value(src: Path, tmp_path: Path, case: str) -> None:
    _write(tmp_path / "outside.py")
    (tmp_path / "a-file").write_text("")
    kwargs, argument, shown = _ERROR_CASES[case](src, tmp_path)
    for function in (validate_code, package_code):
        with pytest.raises(ConfigurationError) as info:
            function(**kwargs)
        message = str(info.value)
        assert info.value.argument == argument, case
        assert f"Invalid {argument}=" in message, case
        assert repr(shown) in message, (case, message)
        assert "Accepted:" in message, case


def test_valid_arguments_pass(src: Path) -> None:
    validate_code("train.py", src)
    validate_code("pkg/util.py", str(src), dependencies=[src / "data"])
    validate_code(src / "train.py")


def test_s3_source_dir_passes_validation_but_is_not_packaged(src: Path) -> None:
    validate_code("train.py", "s3://my-bucket/code/sourcedir.tar.gz")
    with pytest.raises(ConfigurationError, match=r"source_dir='s3://my-bucket/code"):
        package_code("train.py", "s3://my-bucket/code/sourcedir.tar.gz")
    with pytest.raises(InputError, match=r"source_dir='s3://Bad_Bucket/x'"):
        validate_code("train.py", "s3://Bad_Bucket/x")


# -- S3 location ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (None, "s3://bkt/source/{sha}/sourcedir.tar.gz"),
        ("", "s3://bkt/source/{sha}/sourcedir.tar.gz"),
        ("team", "s3://bkt/team/source/{sha}/sourcedir.tar.gz"),
        ("team/job/", "s3://bkt/team/job/source/{sha}/sourcedir.tar.gz"),
        ("/team//job", "s3://bkt/team/job/source/{sha}/sourcedir.tar.gz"),
    ],
)
def test_code_s3_uri(src: Path, prefix: str | None, expected: str) -> None:
    bundle = package_code("train.py", src)
    assert code_s3_uri("bkt", prefix, bundle) == expected.format(sha=bundle.sha256)
