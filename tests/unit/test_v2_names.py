"""Every name a notebook imports from SDK v2's training-side modules exists in launchbay, or
docs/compatibility.md says why not (issue 32, item 5).

For each module ``sagemaker.<m>`` of :data:`V2_MODULES`, the names are the public
classes and functions it defines (``__module__`` is the module or under it: a
package such as ``sagemaker.pytorch`` re-exports its ``estimator`` submodule's
classes) plus :data:`RE_EXPORTS`, the names v2 imports into that module on purpose
(v2 has no ``__all__``; these are the ones it keeps there for old imports, which
notebooks use). Imported stdlib modules, private names and v2's internal imports
are not names a notebook takes from there.

Each name ``launchbay.<m>`` lacks must be a row of the table under "SDK v2 names
launchbay does not have" in docs/compatibility.md, with its reason; a module
launchbay does not have yet makes all its names missing, documented "not yet". A
row naming something launchbay has now fails too, so the table shrinks as names land.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
HEADING = "## SDK v2 names launchbay does not have"

V2_MODULES = (
    "estimator", "pytorch", "tensorflow", "huggingface", "sklearn", "xgboost", "mxnet",
    "inputs", "session", "s3", "image_uris", "tuner", "analytics", "debugger", "utils",
)  # fmt: skip

#: Names v2 imports into a module and keeps there for notebooks' imports.
RE_EXPORTS = {
    "session": ("TrainingInput", "s3_input"),
    "s3": ("parse_s3_url", "s3_path_join", "determine_bucket_and_prefix"),
    "tuner": ("CategoricalParameter", "ContinuousParameter", "IntegerParameter", "ParameterRange"),
}


def v2_names(module: str) -> list[str]:
    """The public names notebooks import from ``sagemaker.<module>``, sorted."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    v2 = importlib.import_module(f"sagemaker.{module}")
    names = set(RE_EXPORTS.get(module, ()))
    for name, value in vars(v2).items():
        if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        where = getattr(value, "__module__", "") or ""
        if where == v2.__name__ or where.startswith(v2.__name__ + "."):
            names.add(name)
    assert all(hasattr(v2, name) for name in names), module
    return sorted(names)


def missing_names() -> dict[tuple[str, str], str]:
    """``(v2 module, name)`` for each name launchbay lacks -> why (a module not there yet)."""
    missing: dict[tuple[str, str], str] = {}
    for module in V2_MODULES:
        try:
            ours = importlib.import_module(f"launchbay.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"launchbay.{module}":
                raise
            ours = None
        for name in v2_names(module):
            if ours is None or not hasattr(ours, name):
                missing[(f"sagemaker.{module}", name)] = (
                    "module missing" if ours is None else "name missing"
                )
    return missing


def documented() -> dict[tuple[str, str], str]:
    """``(v2 module, name)`` -> reason, from the doc's table (one row per module and reason)."""
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"{DOC} has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[tuple[str, str], str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`sagemaker."):
            continue
        module = cells[0].strip("`")
        reason = cells[2]
        for name in re.findall(r"`([^`]+)`", cells[1]):
            assert (module, name) not in rows, f"{module}.{name} is in the table twice"
            rows[(module, name)] = reason
    return rows


@pytest.fixture(scope="module")
def missing() -> dict[tuple[str, str], str]:
    return missing_names()


def test_every_missing_name_is_documented_with_a_reason(missing) -> None:
    rows = documented()
    undocumented = sorted(
        f"{m}.{n} ({why})" for (m, n), why in missing.items() if (m, n) not in rows
    )
    assert undocumented == [], (
        "launchbay lacks these SDK v2 names and docs/compatibility.md does not say why: "
        + ", ".join(undocumented)
    )
    for key in missing:
        assert rows[key] and rows[key] != "-", f"{key}: the reason is empty"


def test_a_module_launchbay_lacks_is_documented_not_yet(missing) -> None:
    rows = documented()
    for key, why in missing.items():
        if why == "module missing":
            assert rows[key].lower().startswith("not yet"), (key, rows[key])


def test_every_documented_name_is_still_missing(missing) -> None:
    stale = sorted(f"{m}.{n}" for (m, n) in documented() if (m, n) not in missing)
    assert stale == [], (
        "launchbay has these now (or SDK v2 does not define them): remove them from the "
        "table in docs/compatibility.md: " + ", ".join(stale)
    )


def test_the_walk_sees_what_notebooks_import() -> None:
    assert {"PyTorch"} <= set(v2_names("pytorch"))
    assert {"TrainingInput", "s3_input", "Session", "get_execution_role"} <= set(
        v2_names("session")
    )
    assert {"S3Uploader", "S3Downloader", "s3_path_join", "parse_s3_url"} <= set(v2_names("s3"))
    assert {"IntegerParameter", "HyperparameterTuner"} <= set(v2_names("tuner"))
    assert "os" not in v2_names("utils") and "Session" not in v2_names("estimator")
