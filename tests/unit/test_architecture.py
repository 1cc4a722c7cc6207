"""The package's layering, checked on its source: no import cycle, every module imports alone.

The import graph is read from each module's top-level ``import`` statements (those
that run when the module is imported; imports inside functions and under
``if TYPE_CHECKING:`` are not edges). Importing ``launchbay.a.b`` also runs
``launchbay/a/__init__.py``, so a module depends on the target's parent packages too
(except its own, which are already being imported when it runs).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import launchbay

ROOT = Path(launchbay.__file__).resolve().parent
#: Modules that import a training framework by design (the local stand-ins): not
#: imported in the fresh-import check, which would load torch and TensorFlow.
FRAMEWORK_MODULES = ("launchbay.runtime.standins",)


def module_names() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)) and not _is_type_checking(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return found


def _every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement: also inside functions and ``if TYPE_CHECKING:`` blocks."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _from_module(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module a ``from ... import`` statement of module ``name`` reads (relative resolved)."""
    base = node.module or ""
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    return base


def _import_targets(
    node: ast.Import | ast.ImportFrom, name: str, path: Path, modules: Mapping[str, Path]
) -> list[str]:
    """The modules an import statement of module ``name`` names (relative ones resolved).

    ``from package import name`` names the module ``package.name`` when there is one,
    else ``package`` itself.
    """
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _from_module(node, name, path)
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    ]


def import_graph(*, everywhere: bool = False) -> dict[str, set[str]]:
    """Module -> the package modules it imports at import time (parents included).

    ``everywhere``: count every import statement, also those inside functions and
    under ``if TYPE_CHECKING:`` (the type graph and deferred imports).
    """
    modules = module_names()
    statements = _every_import if everywhere else _top_level_imports

    def with_parents(name: str) -> set[str]:
        parts = name.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & modules.keys()

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in statements(ast.parse(path.read_text(), str(path))):
            for target in _import_targets(node, name, path, modules):
                if target.split(".")[0] == "launchbay":
                    edges |= with_parents(target)
        # A module's own packages are being imported already when it runs: not edges.
        graph[name] = edges - with_parents(name)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_graph_reader_sees_a_cycle():
    graph = {
        "launchbay.a": {"launchbay.b"},
        "launchbay.b": {"launchbay.c"},
        "launchbay.c": {"launchbay.a"},
    }
    assert find_cycle(graph) == ["launchbay.a", "launchbay.b", "launchbay.c", "launchbay.a"]
    assert find_cycle({"launchbay.a": {"launchbay.b"}, "launchbay.b": set()}) is None
    edges = import_graph()
    assert "launchbay.backends.registry" in edges["launchbay.backends"]
    assert {"launchbay.backends", "launchbay.backends.registry"} <= edges["launchbay.cli.jobs"]
    assert "launchbay.backends" not in edges["launchbay.backends.docker"]  # its own package


def test_no_import_cycle_between_the_packages_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_runtime_imports_nothing_from_the_client():
    graph = import_graph()
    wrong = {
        (name, target)
        for name, targets in graph.items()
        if name.startswith("launchbay.runtime")
        for target in targets
        if target != "launchbay" and not target.startswith("launchbay.runtime")
    }
    assert wrong == set()


def test_every_module_imports_in_a_fresh_interpreter():
    """Each module imported first, alone (the package's modules are dropped in between)."""
    names = [n for n in module_names() if not n.startswith(FRAMEWORK_MODULES)]
    script = (
        "import importlib, json, sys, traceback\n"
        "failed = {}\n"
        f"for name in {names!r}:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == 'launchbay']:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed[name] = traceback.format_exc(limit=-3)\n"
        "print(json.dumps(failed))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {}


#: The layers, lowest first (docs/architecture.md): a module may import its own layer
#: and those below. The longest matching prefix gives a module's layer.
LAYERS = {
    # 0: inside every training host, standard library only
    "launchbay.runtime": 0,
    # 1: foundations every client module may use
    "launchbay.errors": 1,
    "launchbay._capacity": 1,  # this machine's ranks and GPUs: no backend's
    "launchbay._home": 1,
    "launchbay._lazy": 1,  # the lazy names of launchbay and backends.ray
    "launchbay.s3uri": 1,
    "launchbay._instances": 1,
    "launchbay._patterns": 1,
    "launchbay._regions": 1,
    "launchbay._image_data": 1,
    "launchbay.display": 1,
    "launchbay._docker": 1,
    "launchbay._yamlfile": 1,
    # 2: what a job is made of, and the services it talks to
    "launchbay.inputs": 2,
    "launchbay.debugger": 2,
    "launchbay.distribution": 2,
    "launchbay._request_rules": 2,
    "launchbay.arguments": 2,
    "launchbay._kinds": 2,
    "launchbay._names": 2,
    "launchbay._request": 2,
    "launchbay.image_uris": 2,
    "launchbay._retrieve": 2,
    "launchbay.code": 2,
    "launchbay.transfer": 2,
    "launchbay._runner": 2,
    "launchbay.session": 2,
    "launchbay._sagemaker_config": 2,
    "launchbay.vpc": 2,
    "launchbay.job": 2,
    "launchbay._logs": 2,
    "launchbay.images": 2,
    # 3: backends run a finished request
    "launchbay.backends": 3,
    # 4: the user's API: arguments -> request -> backend
    "launchbay.estimator": 4,
    "launchbay._bound": 4,
    "launchbay._rules": 4,
    "launchbay._resolve": 4,
    "launchbay._attach": 4,
    "launchbay.jobspec": 4,
    "launchbay._specyaml": 2,
    "launchbay.pytorch": 5,
    "launchbay.tensorflow": 5,
    "launchbay.huggingface": 5,
    "launchbay.sklearn": 5,
    "launchbay.xgboost": 5,
    "launchbay.mxnet": 5,
    "launchbay.utils": 5,
    "launchbay.s3": 5,
    "launchbay.instance_group": 5,
    # built-in algorithms (docs/algorithms.md): which images are algorithms (2, read by the
    # backends), the hand-over after training (4, mixed into EstimatorBase), SDK v2's
    # sagemaker.amazon estimators and sagemaker.local (5)
    "launchbay._algorithm_images": 2,
    "launchbay._after_training": 4,
    "launchbay.amazon": 5,
    "launchbay.local": 5,
    # tuning (docs/tuning.md): ranges, settings and the plan are parts of a job (2); the
    # SageMaker side, analytics and the local hook run plans (3); the tuner and attach are
    # user API (5)
    "launchbay.parameter": 5,  # SDK v2's sagemaker.parameter: a re-export of tuning.parameter
    "launchbay.tuning": 3,
    "launchbay.tuning.parameter": 2,
    "launchbay.tuning.configs": 2,
    "launchbay.tuning.plan": 2,
    "launchbay.tuning.attach": 5,
    "launchbay.tuning.spec": 5,
    "launchbay.tuning.backends": 5,  # the tuner's backends rebuild estimators, as attach does
    # metrics read from log lines (standard library) and the tables of SDK v2's sagemaker.analytics
    "launchbay.metrics": 2,
    "launchbay.analytics": 4,
    # a SageMaker job replayed here (docs/rehearsing.md)
    "launchbay.replay": 4,
    "launchbay.tuner": 5,
    # 6: the command line
    "launchbay.cli": 6,
}


def layer_of(module: str) -> int | None:
    matches = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    return LAYERS[max(matches, key=len)] if matches else None


def test_every_module_has_a_layer():
    missing = [n for n in module_names() if n != "launchbay" and layer_of(n) is None]
    assert missing == [], "add these modules to LAYERS (and docs/architecture.md)"


def upward_imports(modules: dict[str, Path], *, commented: bool = False) -> list[str]:
    """Import statements (also inside functions) from a layer to a higher one, uncommented.

    ``import launchbay`` (the package root: lazy and light, for ``__file__`` and the
    version) is not an edge; a comment on the import's line or the two above it
    (saying why) makes an upward import acceptable. ``commented``: list those too.
    """
    upward = []
    for name, path in modules.items():
        source = path.read_text()
        lines = source.splitlines()
        for node in _every_import(ast.parse(source, str(path))):
            for target in _import_targets(node, name, path, modules):
                if not target.startswith("launchbay.") or target.startswith(name + "."):
                    continue
                own, other = layer_of(name), layer_of(target)
                if own is None or other is None or other <= own:
                    continue
                nearby = lines[max(0, node.lineno - 3) : node.lineno]
                if commented or not any("#" in line for line in nearby):
                    upward.append(f"{name}:{node.lineno} imports {target} (layer {other} > {own})")
    return upward


def test_imports_go_down_the_layers_unless_a_comment_says_why():
    assert upward_imports(module_names()) == []


def test_the_layer_check_sees_an_upward_import(tmp_path):
    assert layer_of("launchbay.backends.docker") == 3
    assert layer_of("launchbay.runtime.launchers.mpi") == 0
    quiet = tmp_path / "quiet.py"
    quiet.write_text("def f():\n    from launchbay.estimator import Estimator\n")
    said = tmp_path / "said.py"
    said.write_text("def f():\n    # the backend needs the estimator here because ...\n"
                    "    from launchbay.estimator import Estimator\n")  # fmt: skip
    modules = {"launchbay.backends.quiet": quiet, "launchbay.backends.said": said,
               "launchbay.estimator": quiet}  # fmt: skip
    assert upward_imports(modules) == [
        "launchbay.backends.quiet:2 imports launchbay.estimator (layer 4 > 3)"
    ]


# -- issue 21: the type graph, private modules, module sizes ---------------------------------


def test_no_import_cycle_even_through_typing_only_and_deferred_imports():
    """No circle in the type graph either: ``if TYPE_CHECKING:`` and in-function imports count."""
    cycle = find_cycle(import_graph(everywhere=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_full_graph_sees_typing_only_and_deferred_imports(tmp_path, monkeypatch):
    package = tmp_path / "launchbay"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from launchbay import b\n"
    )
    (package / "b.py").write_text("def f():\n    import launchbay.a\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", package)
    assert import_graph() == {"launchbay": set(), "launchbay.a": set(), "launchbay.b": set()}
    assert find_cycle(import_graph(everywhere=True)) == [
        "launchbay.a",
        "launchbay.b",
        "launchbay.a",
    ]


def private_imports(modules: dict[str, Path]) -> list[str]:
    """Imports (anywhere in a module) of another package's private module.

    A module whose dotted name has a part starting with ``_`` (``launchbay.backends._gpus``)
    is private to the package that holds that part (``launchbay.backends``): modules in
    that package and its subpackages may import it, no other. Top-level private modules
    (``launchbay._home``) are the whole client's; the runtime's are the runtime's.
    """
    found = []
    for name, path in modules.items():
        for node in _every_import(ast.parse(path.read_text(), str(path))):
            for target in _import_targets(node, name, path, modules):
                parts = target.split(".")
                if parts[0] != "launchbay":
                    continue
                for i, part in enumerate(parts[1:], start=1):
                    if part.startswith("_") and not part.startswith("__"):
                        owner = ".".join(parts[:i])
                        if name != owner and not name.startswith(owner + "."):
                            found.append(f"{name}:{node.lineno} imports {target}")
                        break
    return sorted(set(found))


def test_no_module_imports_another_packages_private_module():
    found = {
        (line.split(":")[0], line.split(" imports ")[1]) for line in private_imports(module_names())
    }
    assert found == set(), "import what the package publishes (the runtime: runtime.for_client)"


def test_the_private_import_check_sees_one(tmp_path):
    files = {
        "launchbay.estimator": "from launchbay.backends._gpus import split_gpus\n",
        "launchbay.backends.docker": "from launchbay.backends import _gpus\n",
        "launchbay.backends._gpus": "",
        "launchbay.runtime.launchers.mpi": "import launchbay.runtime._supervisor\n",
        "launchbay.runtime._supervisor": "",
        "launchbay.cli": "def f():\n    from launchbay.runtime import _supervisor\n",
    }
    modules = {}
    for name, text in files.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        modules[name] = path
    assert private_imports(modules) == [
        "launchbay.cli:2 imports launchbay.runtime._supervisor",
        "launchbay.estimator:1 imports launchbay.backends._gpus",
    ]


#: The most lines a module may have (issue 21).
MAX_MODULE_LINES = 1000


def test_no_module_exceeds_a_thousand_lines():
    long = {
        name
        for name, path in module_names().items()
        if len(path.read_text().splitlines()) > MAX_MODULE_LINES
    }
    assert long == set(), f"split these: over {MAX_MODULE_LINES} lines"


def test_at_most_three_imports_go_up_a_layer():
    """Each upward import has a comment saying why (above), and there are at most three."""
    upward = upward_imports(module_names(), commented=True)
    assert len(upward) <= 3, upward


def test_type_checking_ignores_nothing_of_ours_wholesale():
    """mypy runs with its defaults; an ignore names its error code and says why (issue 21)."""
    import configparser
    import re

    config = configparser.ConfigParser()
    config.read(ROOT.parents[1] / "setup.cfg")
    sections = [s for s in config.sections() if s.startswith("mypy")]
    assert "mypy" in sections
    for section in sections:
        options = dict(config[section])
        assert not {"ignore_errors", "disable_error_code", "follow_imports"} & set(options), section
        if section != "mypy":  # per-package sections: third-party packages' missing stubs only
            assert options == {"ignore_missing_imports": "True"}, section
            assert "launchbay" not in section, section
    bare = []
    for name, path in module_names().items():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if "type: ignore" in line and not re.search(r"type: ignore\[[\w,-]+\]\s+#\s*\S", line):
                bare.append(f"{name}:{number}")
    assert bare == [], "a type: ignore names its code and gives its reason on the line"


#: Where YAML may be parsed: the one bounded reader (issue 31), and vpc.py's loader of the
#: CloudFormation templates that ship with launchbay (its own files, not input).
YAML_READERS = {"launchbay._yamlfile", "launchbay.vpc"}
#: PyYAML's ways to parse text: load functions, and loaders made or subclassed.
YAML_PARSERS = {
    "load", "load_all", "safe_load", "safe_load_all", "full_load", "full_load_all",
    "unsafe_load", "unsafe_load_all", "compose", "compose_all", "parse", "scan",
    "Loader", "SafeLoader", "FullLoader", "UnsafeLoader", "BaseLoader",
    "CLoader", "CSafeLoader", "CFullLoader", "CUnsafeLoader", "CBaseLoader",
}  # fmt: skip


def yaml_parsers(modules: Mapping[str, Path]) -> list[str]:
    """``module:line`` of every call of a YAML parser and every class built on a yaml loader.

    Names are matched as ``yaml.X`` and as ``X`` imported from yaml; annotations are not
    calls, so ``loader: yaml.SafeLoader`` in a signature is not one.
    """
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        imported = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("yaml")
            for alias in node.names
            if alias.name in YAML_PARSERS
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                targets = [node.func]
            elif isinstance(node, ast.ClassDef):
                targets = list(node.bases)
            else:
                continue
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr in YAML_PARSERS
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "yaml"
                ) or (isinstance(target, ast.Name) and target.id in imported):
                    found.append(f"{name}:{node.lineno}")
    return found


def test_only_the_bounded_reader_parses_yaml():
    """One bounded reader for every YAML file (docs/architecture.md): nobody else parses YAML."""
    readers = {entry.split(":")[0] for entry in yaml_parsers(module_names())}
    assert "launchbay._yamlfile" in readers  # the scan sees the reader itself
    assert readers - YAML_READERS == set(), sorted(yaml_parsers(module_names()))


def test_the_yaml_scan_sees_a_load_call_and_a_loader(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import yaml\nfrom yaml import safe_load as sl\n"
        "def f(t):\n    return yaml.safe_load(t), sl(t)\n"
        "class L(yaml.SafeLoader):\n    pass\n"
        "def g(loader: yaml.SafeLoader) -> None:\n    yaml.safe_dump({})\n"
    )
    assert sorted(yaml_parsers({"m": module})) == ["m:4", "m:4", "m:5"]


# -- issue 33: a file's interface is its public names -----------------------------------------


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_imported(
    modules: Mapping[str, Path], root: Path | None = None
) -> set[tuple[str, str, str]]:
    """``(importer's path, module, name)`` for each private name a module takes from another.

    Seen anywhere in a module: ``from launchbay.x import _y``, ``from . import _y``, and
    ``m._y`` where ``m`` is a package module bound by ``import launchbay.x as m``,
    ``from launchbay import x`` or plain ``import launchbay.x`` (``launchbay.x._y``).
    A private *module* (``launchbay._docker``, ``launchbay.runtime._netns``) is a file,
    not a name: importing one is the private-module check's business, not this one's;
    a private attribute of one of its names (``Class._y``) is not a name of the module.
    The importer's path is relative to ``root`` (the folder above ``launchbay/``).
    """
    root = ROOT.parent if root is None else root
    found = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        importer = path.relative_to(root).as_posix()
        bound: dict[str, str] = {}  # a local name -> the package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _from_module(node, name, path)
                if base.split(".")[0] != "launchbay":
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif _is_private(alias.name) and base != name:
                        found.add((importer, base, alias.name))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            chain: list[str] = []
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if not isinstance(value, ast.Name):
                continue
            if value.id in bound:
                owner = ".".join([bound[value.id], *chain])
            elif value.id == "launchbay":
                owner = ".".join(["launchbay", *chain])
            else:
                continue
            if owner in modules and owner != name:
                found.add((importer, owner, node.attr))
    return found


#: Private names still taken across files: none. Kept as a set so that an exception, if
#: one is ever needed, is written down here with its reason.
_PRIVATE_IMPORTS_LEFT: set[tuple[str, str, str]] = set()


def test_no_private_name_is_imported_across_files():
    """A name another file uses is part of its file's interface: it has no underscore."""
    found = private_names_imported(module_names())
    assert found - _PRIVATE_IMPORTS_LEFT == set(), "drop the underscore (or move the helper)"
    assert _PRIVATE_IMPORTS_LEFT - found == set(), "gone: remove from _PRIVATE_IMPORTS_LEFT"


def write_package(package: Path, files: dict[str, str]) -> dict[str, Path]:
    """Writes ``files`` (path relative to ``package``: text) and returns {module name: path}."""
    modules = {}
    for relative, text in files.items():
        path = package / relative
        path.write_text(text)
        parts = ["launchbay", *Path(relative).with_suffix("").parts]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def test_the_private_name_check_sees_each_form(tmp_path):
    package = tmp_path / "launchbay"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "_X = 1\ndef _f(): pass\nclass C:\n    def _m(self): pass\n",
        "_priv.py": "def g(): pass\n",
        "sub/__init__.py": "",
        "sub/b.py": (
            "from launchbay.a import _X, C\n"  # a private name: counted
            "from launchbay import _priv\n"  # a private module: not a name
            "from .. import a as alias\n"
            "import launchbay.a as m\n"
            "import launchbay.a\n"
            "def h():\n"
            "    from . import c\n"
            "    return m._f, alias._X, launchbay.a._f, C()._m, _priv.g, c._y\n"
        ),
        "sub/c.py": "_y = 0\nfrom launchbay.sub.c import _y as same\n",
    }
    modules = write_package(package, files)
    assert private_names_imported(modules, tmp_path) == {
        ("launchbay/sub/b.py", "launchbay.a", "_X"),
        ("launchbay/sub/b.py", "launchbay.a", "_f"),
        ("launchbay/sub/b.py", "launchbay.sub.c", "_y"),
    }


# -- issue 33: the rooms, and the few imports that go up --------------------------------------

#: The rooms, lowest first: each top-level module or subpackage of launchbay is one room
#: (a folder is drawn as one room, whatever its modules' layers). The order is the
#: layers' (docs/architecture.md, ``LAYERS``); within a layer, a room comes before the
#: rooms that import it. Two rooms sit where their folder as a whole belongs:
#: ``tuning`` between the user API and the SDK v2 facades (its attach, spec and tuning
#: backends rebuild estimators and read job specs; ``tuner`` is the facade over it), and
#: ``parameter`` with the SDK v2 facades (it only re-exports ``tuning.parameter``).
ROOMS = [
    # 0: the runtime, inside every training host
    "launchbay.runtime",
    # 1: foundations
    "launchbay._image_data",
    "launchbay._instances",
    "launchbay._patterns",
    "launchbay._regions",
    "launchbay.display",
    "launchbay.errors",
    "launchbay._capacity",
    "launchbay._docker",
    "launchbay._home",
    "launchbay._lazy",
    "launchbay._yamlfile",
    "launchbay.s3uri",
    # 2: the job's parts, and the services they talk to
    "launchbay._logs",
    "launchbay._names",
    "launchbay._retrieve",
    "launchbay._algorithm_images",
    "launchbay._runner",
    "launchbay._specyaml",
    "launchbay.distribution",
    "launchbay.image_uris",
    "launchbay.images",
    "launchbay.inputs",
    "launchbay.debugger",
    "launchbay.job",
    "launchbay.metrics",
    "launchbay._kinds",
    "launchbay.arguments",
    "launchbay._request",
    "launchbay._request_rules",
    "launchbay.transfer",
    "launchbay._sagemaker_config",
    "launchbay.session",
    "launchbay.code",
    "launchbay.vpc",
    # 3: the plan and the backends
    "launchbay.backends",
    # 4: the user API
    "launchbay._after_training",
    "launchbay._attach",
    "launchbay._bound",
    "launchbay._resolve",
    "launchbay._rules",
    "launchbay.analytics",
    "launchbay.jobspec",
    "launchbay.replay",
    "launchbay.estimator",
    # between 4 and 5: tuning, on the estimators
    "launchbay.tuning",
    # 5: SDK v2's facades
    "launchbay.huggingface",
    "launchbay.instance_group",
    "launchbay.local",
    "launchbay.mxnet",
    "launchbay.parameter",
    "launchbay.pytorch",
    "launchbay.s3",
    "launchbay.sklearn",
    "launchbay.tensorflow",
    "launchbay.utils",
    "launchbay.amazon",
    "launchbay.tuner",
    "launchbay.xgboost",
    # 6: the command line
    "launchbay.cli",
]


def room_of(module: str) -> str | None:
    """A module's room: ``launchbay.x`` for ``launchbay.x`` and everything under it."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "launchbay" and len(parts) > 1 else None


def imports_up_the_rooms(
    modules: Mapping[str, Path], rooms: list[str] = ROOMS
) -> set[tuple[str, str]]:
    """``(module, target)`` for each import, anywhere in a module, of a higher room's module.

    Imports inside functions and under ``if TYPE_CHECKING:`` count as much as those at
    the top; ``import launchbay`` (the package root) is no room's.
    """
    rank = {room: i for i, room in enumerate(rooms)}
    found = set()
    for name, path in modules.items():
        own = room_of(name)
        for node in _every_import(ast.parse(path.read_text(), str(path))):
            for target in _import_targets(node, name, path, modules):
                other = room_of(target)
                if own in rank and other in rank and rank[other] > rank[own]:
                    found.add((name, target))
    return found


#: The imports that still go up the rooms: issue 33's remaining work (at most three).
#: A ratchet: a new upward import fails the test below, and so does an entry that no
#: longer exists (remove it), so this set only shrinks.
_UPWARD_IMPORTS_LEFT = {
    # SDK v2 has the tuning table in sagemaker.analytics: re-exported from tuning/
    ("launchbay.analytics", "launchbay.tuning.analytics"),
    # a job spec's tuning: section becomes a HyperparameterTuner (tuning/ is not edited yet)
    ("launchbay.tuning.spec", "launchbay.tuner"),
}


def test_every_room_has_its_place():
    rooms = {room_of(name) for name in module_names()} - {None}
    assert rooms ^ set(ROOMS) == set(), "place these rooms in ROOMS (and docs/architecture.md)"
    assert len(ROOMS) == len(set(ROOMS))


def test_rooms_follow_the_layers():
    """The rooms' order is the layers' (tuning and parameter, drawn whole, aside)."""
    whole = {"launchbay.tuning": 4.5, "launchbay.parameter": 5}
    layers = [whole.get(room, layer_of(room)) for room in ROOMS]
    assert layers == sorted(layers)


def test_at_most_three_imports_go_up_the_rooms():
    """With folders drawn as one room each, at most 3 imports run from a lower room up."""
    found = imports_up_the_rooms(module_names())
    print("imports up the rooms:", *sorted(f"{a} -> {b}" for a, b in found), sep="\n  ")
    assert found - _UPWARD_IMPORTS_LEFT == set(), "import down the rooms (ROOMS)"
    assert _UPWARD_IMPORTS_LEFT - found == set(), "gone: remove from _UPWARD_IMPORTS_LEFT"
    assert len(found) <= 3


def test_the_room_check_sees_an_import_up(tmp_path):
    package = tmp_path / "launchbay"
    (package / "low").mkdir(parents=True)
    files = {
        "low/__init__.py": "",
        "low/a.py": "from launchbay.low import b\nimport launchbay\n",  # same room; root
        "low/b.py": "def f():\n    from launchbay.high import c\n",  # up, in a function
        "high.py": "from launchbay.low.a import x\n",  # down
    }
    modules = write_package(package, files)
    rooms = ["launchbay.low", "launchbay.high"]
    assert imports_up_the_rooms(modules, rooms) == {("launchbay.low.b", "launchbay.high")}


# -- issue 33: the plan imports no backend ----------------------------------------------------


def backend_imports(name: str, path: Path, modules: Mapping[str, Path]) -> list[str]:
    """Each import (anywhere in module ``name``) of ``launchbay.backends`` or a module under it
    other than ``name`` itself: a backend, or a part of the local, Docker, Ray or SageMaker wings.
    """
    found = []
    for node in _every_import(ast.parse(path.read_text(), str(path))):
        for target in _import_targets(node, name, path, modules):
            if target == name or not (target + ".").startswith("launchbay.backends."):
                continue
            found.append(f"{name}:{node.lineno} imports {target}")
    return sorted(set(found))


def test_the_plan_imports_no_backend():
    """The plan is what every backend reads; it reads none of them (this machine's capacity is
    the foundation ``launchbay._capacity``, not the local wing's)."""
    modules = module_names()
    name = "launchbay.backends.plan"
    assert backend_imports(name, modules[name], modules) == []


def test_the_backend_import_check_sees_an_import_inside_a_function(tmp_path):
    package = tmp_path / "launchbay"
    (package / "backends" / "local").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "_capacity.py": "",
        "backends/__init__.py": "",
        "backends/docker.py": "",
        "backends/local/__init__.py": "",
        "backends/local/capacity.py": "",
        "backends/plan.py": (
            "from launchbay._capacity import split_gpus\n"  # a foundation: fine
            "def resolve():\n"
            "    from .local import capacity\n"  # relative, inside a function
            "    import launchbay.backends.docker\n"
            "    from launchbay.backends import plan\n"  # itself
        ),
    }
    modules = write_package(package, files)
    name = "launchbay.backends.plan"
    assert backend_imports(name, modules[name], modules) == [
        "launchbay.backends.plan:3 imports launchbay.backends.local.capacity",
        "launchbay.backends.plan:4 imports launchbay.backends.docker",
    ]


# -- issue 33: a job's DescribeTrainingJob fields are read through one codec --------------
#: Keys only a job's description has (not its request): backends/ and tuning/ read them
#: through launchbay.backends.state (JobState.from_description), and nowhere else.
DESCRIPTION_ONLY_KEYS = (
    "TrainingJobArn", "TrainingJobStatus", "SecondaryStatus", "SecondaryStatusTransitions",
    "FailureReason", "CreationTime", "LastModifiedTime", "TrainingStartTime",
    "TrainingEndTime", "TrainingTimeInSeconds", "BillableTimeInSeconds", "ModelArtifacts",
    "WarmPoolStatus", "DebugRuleEvaluationStatuses", "ProfilerRuleEvaluationStatuses",
    "ProfilingStatus", "FinalMetricDataList", "TuningJobArn",
    # launchbay's additions to a local job's description
    "LocalJobDir", "LocalClient", "LocalFailedHost", "LocalAttempts", "LocalEnding",
    "LocalDetached",
)  # fmt: skip
#: (module, key): reads of these keys in dicts that are no training job's description.
_NOT_A_JOB_DESCRIPTION = {
    ("backends/local/rules.py", "LastModifiedTime"),  # a Debugger rule's own status record
    ("backends/sagemaker.py", "TrainingJobArn"),  # CreateTrainingJob's response
    ("tuning/local.py", "LocalClient"),  # a local tuning job's record
    ("tuning/sagemaker.py", "FailureReason"),  # DescribeHyperParameterTuningJob's answer
}


def description_key_reads(tree: ast.AST, keys: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(line, key)`` of each string literal in ``keys`` used to read a dict.

    A read is ``d["Key"]`` (not an assignment to it), ``d.get("Key")`` (also ``pop``
    and ``setdefault``) and ``"Key" in d``.
    """
    found = []
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and node.args
        ):
            key = node.args[0]
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
        ):
            key = node.left
        if isinstance(key, ast.Constant) and key.value in keys:
            found.append((node.lineno, str(key.value)))
    return found


def test_only_the_codec_reads_a_jobs_description():
    """backends/ and tuning/ read DescribeTrainingJob fields through JobState only (issue 33)."""
    from launchbay.backends.state import DESCRIPTION_KEYS

    assert set(DESCRIPTION_KEYS) - {"TrainingJobName"} <= set(DESCRIPTION_ONLY_KEYS)
    found = set()
    where = []
    for package in ("backends", "tuning"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "backends/state.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for line, key in description_key_reads(tree, DESCRIPTION_ONLY_KEYS):
                if (relative, key) not in _NOT_A_JOB_DESCRIPTION:
                    where.append(f"{relative}:{line} reads {key!r}")
                found.add((relative, key))
    assert where == [], "read it through JobState.from_description(...)"
    assert _NOT_A_JOB_DESCRIPTION <= found, "gone: remove from _NOT_A_JOB_DESCRIPTION"


def test_the_description_read_check_sees_each_kind_of_read():
    source = (
        'a = d["TrainingJobStatus"]\n'
        'b = d.get("FailureReason")\n'
        'c = "ModelArtifacts" in d\n'
        'd["TrainingEndTime"] = 1\n'  # a write, not a read
        'e = {"CreationTime": 1}\n'  # neither
    )
    found = description_key_reads(ast.parse(source), DESCRIPTION_ONLY_KEYS)
    assert sorted(found) == [(1, "TrainingJobStatus"), (2, "FailureReason"), (3, "ModelArtifacts")]


def test_a_jobs_host_names_are_made_in_one_place():
    """``algo-N`` is made by ``backends.plan.algo_hosts`` only (the runtime, its own side of
    the contract, reads the names it is given), and counted by ``instance_count_of``."""
    makers = sorted(
        str(path.relative_to(ROOT.parent))
        for name, path in module_names().items()
        if not name.startswith("launchbay.runtime")
        and re.search(r"""f["']algo-\{""", path.read_text(encoding="utf-8"))
    )
    assert makers == ["launchbay/backends/plan.py"]
    from launchbay.backends.plan import algo_hosts, instance_count_of

    groups = {"InstanceGroups": [{"InstanceType": "a", "InstanceCount": 2},
                                 {"InstanceType": "b", "InstanceCount": 1}]}  # fmt: skip
    assert algo_hosts(instance_count_of(groups)) == ("algo-1", "algo-2", "algo-3")
    assert algo_hosts(instance_count_of({"InstanceCount": 2})) == ("algo-1", "algo-2")


# -- issue 33: the host runners return what they make; the control loop keeps it ------------

#: The host runners of the local control loop, and the helpers they hand the job to.
RUNNER_MODULES = (
    "backends/local/process_hosts.py",
    "backends/local/container_hosts.py",
    "backends/local/container_exits.py",
    "backends/local/warm_pool.py",
    "backends/local/logs.py",
    "backends/ray/hosts.py",
)
#: Methods that change a list, dict, set or event in place.
_MUTATORS = {
    "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
    "setdefault", "add", "discard", "sort", "reverse", "set", "__setitem__", "__delitem__",
}  # fmt: skip
#: What a host runner may call on the job itself: it wakes the followers, nothing more.
_JOB_CALLS = {"notify", "note_output", "wait_for_output"}


def _on_the_job(node: ast.expr) -> str | None:
    """``job.x`` for an expression that reaches into ``job.x`` (``job.x``, ``job.x[k].y`` ...)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        inner = node.value
        if isinstance(inner, ast.Name) and inner.id == "job":
            return f"job.{node.attr}" if isinstance(node, ast.Attribute) else "job[...]"
        node = inner
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign | ast.Delete):
        pending = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor | ast.NamedExpr):
        pending = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        pending = [node.optional_vars]
    else:
        return []
    found = []
    while pending:
        target = pending.pop()
        if isinstance(target, ast.Tuple | ast.List):
            pending.extend(target.elts)
        elif isinstance(target, ast.Starred):
            pending.append(target.value)
        else:
            found.append(target)
    return found


def writes_to_the_job(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for each write to an attribute of ``job``: an assignment (plain,
    augmented, annotated, ``del``, a loop or ``with`` target) to ``job.x``, ``job.x[k]``,
    ``job.x.y``; a mutating method of one (``job.readers.append``, ``job.procs.update`` ...);
    ``setattr``/``delattr`` on ``job``; a method of the job other than :data:`_JOB_CALLS`."""
    found = []
    for node in ast.walk(tree):
        for target in _targets(node):
            where = _on_the_job(target)
            if where is not None:
                found.append((target.lineno, f"assigns {where}"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id == "job":
                found.append((node.lineno, f"{func.id}(job, ...)"))
        if not isinstance(func, ast.Attribute):
            continue
        if isinstance(func.value, ast.Name) and func.value.id == "job":
            if func.attr not in _JOB_CALLS:
                found.append((node.lineno, f"calls job.{func.attr}()"))
        elif func.attr in _MUTATORS:
            where = _on_the_job(func.value)
            if where is not None:
                found.append((node.lineno, f"calls .{func.attr}() on {where}"))
    return sorted(found)


def test_host_runners_never_write_into_the_job():
    """A host runner returns what it made; it never writes into the job (issue 33).

    ``LocalJob`` has one owner, the local control loop (``backends/local/running.py``,
    ``control.py``, ``recovery.py``): a host runner's ``prepare`` and ``start`` return
    what they made (``hosts.HostHandles``: each host's handle, the log readers) and the
    loop keeps it (``job.procs``, ``job.readers``); how the hosts' trees look here is
    ``host_view(plan)``'s answer, which the loop keeps as ``job.host_plan``. So in the
    runner modules (and the helpers they hand the job to, :data:`RUNNER_MODULES`), the
    name ``job`` (the ``LocalJob`` parameter, or a closure over it) is only read: no
    assignment, augmented or annotated assignment, ``del``, subscript assignment or
    mutating method (``append``, ``update``, ``pop``, ``set`` ...) on any attribute of it,
    no ``setattr``, and of its own methods only those that wake the followers
    (``notify``, ``note_output``, ``wait_for_output``). A runner's own handles (a
    container's id and exit code) are its own objects and may change. The check reads
    the source (an alias such as ``procs = job.procs`` is not followed: don't make one).
    """
    found = {
        f"{relative}:{line} {what}"
        for relative in RUNNER_MODULES
        for line, what in writes_to_the_job(ast.parse((ROOT / relative).read_text()))
    }
    assert found == set(), "return it from prepare()/start(): the control loop keeps it"


def test_the_job_write_check_sees_each_form():
    source = (
        "def start(self, job, entry):\n"
        "    job.procs = {}\n"  # 2
        "    job.procs[host] = proc\n"  # 3
        "    job.output_count += 1\n"  # 4
        "    job.readers.append(thread)\n"  # 5
        "    job.procs.update(actors)\n"  # 6
        "    job.host_plan, x = plan, 1\n"  # 7
        "    setattr(job, 'gpus', None)\n"  # 8
        "    job._set_secondary('Training', '')\n"  # 9
        "    del job.procs['algo-1']\n"  # 10
        "    job.stop_requested.set()\n"  # 11
        "    entry.id = job.procs['algo-1'].id\n"  # reads the job: fine
        "    job.notify(); job.layout.host_dir('algo-1'); job.procs.values()\n"
        "    seen[job.name] = 1\n"
    )
    lines = [line for line, _ in writes_to_the_job(ast.parse(source))]
    assert lines == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]


# -- issue 33, item 6: the estimator as a facade over functions ----------------------------------


def _every_subclass(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_every_subclass(sub)]
    return found


def test_the_estimator_is_a_facade_over_functions_not_a_mixin_tower():
    """``EstimatorBase``'s bases are its bound arguments and the hand-over after training,
    nothing else; the rules and the resolution are functions over the bound arguments
    (``_rules``, ``_resolve``: no classes), called by the estimator, the tuner and the job
    spec alike. An estimator class adds no other base: what it changes, it overrides."""
    import importlib
    import inspect

    from launchbay import _after_training, _bound, _resolve, _rules
    from launchbay.estimator import EstimatorBase

    assert EstimatorBase.__mro__ == (
        EstimatorBase,
        _bound.BoundArguments,
        _after_training.AfterTraining,
        object,
    )
    for module in (_rules, _resolve):
        classes = [n for n, v in vars(module).items() if inspect.isclass(v)
                   and v.__module__ == module.__name__]  # fmt: skip
        assert classes == [], f"{module.__name__} holds functions over the bound arguments"
    for name in ("pytorch", "tensorflow", "huggingface", "sklearn", "xgboost", "mxnet"):
        importlib.import_module(f"launchbay.{name}")
    for path in (ROOT / "amazon").glob("[!_]*.py"):  # the algorithms, imported lazily otherwise
        importlib.import_module(f"launchbay.amazon.{path.stem}")
    estimators = _every_subclass(EstimatorBase)
    assert len(estimators) > 15
    for cls in estimators:
        extra = [k for k in cls.__mro__ if k not in EstimatorBase.__mro__
                 and not issubclass(k, EstimatorBase)]  # fmt: skip
        assert extra == [], f"{cls.__qualname__} mixes in {extra}"
