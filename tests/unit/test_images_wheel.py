"""The runtime wheel (launchbay.images.wheel) and the content hash ``--reuse`` compares
(launchbay.images.context): the wheel is pip's wheel of this project, holds exactly the
package's files, builds without an index, and its bytes (so the hash) change only when the
sources do. Trees that must change are copies of this checkout, built in a subprocess.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from launchbay import images
from launchbay.errors import MissingDependencyError
from launchbay.images import context, wheel

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sdk" / "launchbay"


def _package_files() -> dict[str, Path]:
    """``{path in the wheel: file}``: every module of sdk/launchbay and infra/, the schemas,
    the image data, the CloudFormation templates (setup.cfg's packages and package_data), and the py.typed
    marker that tells type checkers the package is typed (PEP 561)."""
    files = {
        f"launchbay/{path.relative_to(PACKAGE).as_posix()}": path
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    files["launchbay/py.typed"] = PACKAGE / "py.typed"
    files.update({f"launchbay/schemas/{p.name}": p for p in (PACKAGE / "schemas").glob("*.json")})
    files.update({f"launchbay/data/{p.name}": p for p in (PACKAGE / "data").glob("*.json")})
    files.update({f"launchbay/infra/{p.name}": p for p in (ROOT / "infra").glob("*.py")})
    files.update({f"launchbay/infra/{p.name}": p for p in (ROOT / "infra").glob("*.yaml")})
    return files


def test_the_wheel_holds_exactly_the_package_files(tmp_path):
    path = wheel.build_runtime_wheel(tmp_path)
    assert path.name == "launchbay-0.1.0-py3-none-any.whl"
    expected = _package_files()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        package = {n for n in names if not n.startswith("launchbay-0.1.0.dist-info/")}
        assert package == set(expected)
        for name in sorted(package):
            assert zf.read(name) == expected[name].read_bytes(), name
        dist_info = {n.rsplit("/", 1)[1] for n in names if n not in package}
        entry_points = zf.read("launchbay-0.1.0.dist-info/entry_points.txt").decode()
    assert {"METADATA", "WHEEL", "RECORD", "entry_points.txt", "top_level.txt"} <= dist_info
    for line in (
        "train = launchbay.runtime.train:main",
        "launchbay-train = launchbay.runtime.train:main",
        "launchbay = launchbay.cli:main",
    ):
        assert line in entry_points


def test_the_wheel_is_built_without_an_index(tmp_path, monkeypatch):
    # Every way pip could reach a network points at a closed port: the build never asks.
    for name in ("PIP_INDEX_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9/")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    assert wheel.build_runtime_wheel(tmp_path / "dist").is_file()


def test_unchanged_sources_give_the_same_wheel_and_hash(tmp_path):
    first = wheel.build_runtime_wheel(tmp_path / "one")
    second = wheel.build_runtime_wheel(tmp_path / "two")
    assert first.read_bytes() == second.read_bytes()
    dockerfile = ROOT / "containers" / "pytorch" / "Dockerfile"
    args = {"FRAMEWORK_VERSION": "2.13.0"}
    assert context.build_context(dockerfile, first).digest(args) == context.build_context(
        dockerfile, second
    ).digest(args)


def _copy_project(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*")
    dest.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("sdk", "infra", "containers"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


_DIGEST = """
import sys, tempfile
from launchbay import images
from launchbay.images import context, wheel
built = wheel.build_runtime_wheel(tempfile.mkdtemp())
files = context.build_context(context.dockerfile_for("pytorch"), built)
print(files.digest({"FRAMEWORK_VERSION": "2.13.0"}))
"""


def _digest_of(project: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHBAY_CONTAINERS_DIR"}
    env["PYTHONPATH"] = str(project / "sdk")
    result = subprocess.run(
        [sys.executable, "-c", _DIGEST], capture_output=True, text=True, env=env, cwd=project
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_hash_changes_when_a_runtime_file_changes(tmp_path):
    project = _copy_project(tmp_path / "project")
    before = _digest_of(project)
    assert _digest_of(project) == before  # a second build of the same sources
    train = project / "sdk" / "launchbay" / "runtime" / "train.py"
    train.write_text(train.read_text() + "\n# changed\n")
    changed = _digest_of(project)
    assert changed != before
    # A module added to the runtime is in the wheel (and the hash), one removed is gone.
    (project / "sdk" / "launchbay" / "runtime" / "extra.py").write_text("X = 1\n")
    added = _digest_of(project)
    assert added != changed
    (project / "sdk" / "launchbay" / "runtime" / "extra.py").unlink()
    assert _digest_of(project) == changed


def test_runtime_wheel_installs_with_the_train_entry_point(tmp_path):
    path = images.build_runtime_wheel(tmp_path / "dist")
    again = images.build_runtime_wheel(tmp_path / "again")
    assert path.read_bytes() == again.read_bytes()  # deterministic: Docker's cache holds
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        entry_points = zf.read(f"{dist_info}/entry_points.txt").decode()
    assert "launchbay/runtime/train.py" in names
    assert "launchbay/infra/vpc.yaml" in names  # mapped from infra/ by setup.cfg
    assert "launchbay/schemas/jobspec.schema.json" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert "train = launchbay.runtime.train:main" in entry_points

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(path)],
        check=True,
    )
    assert (venv / "bin" / "train").exists()
    out = subprocess.run(
        [str(venv / "bin" / "train"), "--help"], capture_output=True, text=True, check=True
    )
    assert "usage: train" in out.stdout
    # The installed copy is the wheel's, not this checkout's.
    where = subprocess.run(
        [str(python), "-c", "import launchbay.runtime.train as t; print(t.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    ).stdout
    assert str(venv) in where


def test_an_installed_copy_without_its_sources_is_refused(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "launchbay", ignore=shutil.ignore_patterns("__pycache__"))
    code = "from launchbay.images import wheel; wheel.build_runtime_wheel('out')"
    env = dict(os.environ, PYTHONPATH=str(site))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert result.returncode != 0
    assert "ConfigurationError" in result.stderr
    assert "setup.cfg and pyproject.toml beside sdk/" in result.stderr
    assert "pip install -e ." in result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_setuptools_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "setuptools", None)  # find_spec then finds none
    with pytest.raises(MissingDependencyError, match=r"'setuptools'.*launchbay\[docker\]"):
        wheel.build_runtime_wheel(tmp_path)


def test_source_dir_is_this_checkout():
    assert wheel.source_dir() == ROOT
