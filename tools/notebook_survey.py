"""How many public SageMaker training notebooks would run their training cells on launchbay.

A static measure (issue 32): the notebooks cannot run here (no AWS, no GPUs, no
internet), so each training notebook is read, its ``sagemaker`` imports are taken
as changed to ``launchbay``, and it **passes** when:

* every training-side name it reaches through ``sagemaker`` resolves in launchbay
  (``sagemaker.inputs.TrainingInput``, ``from sagemaker.s3 import S3Uploader``,
  ``sagemaker.image_uris.retrieve`` ...), and
* every call of such a name binds: its positional count and keyword names are
  accepted by launchbay's callable (estimators through launchbay's own argument
  binder, so v1 names and the keywords SDK v2 drops count as accepted), and
* every method or attribute used on an estimator, tuner, session or analytics
  object made in the notebook exists on launchbay's class (``est.fit``,
  ``est.deploy``, ``tuner.best_estimator`` ...).

Only names that SDK v2 itself resolves are judged (a notebook's own mistakes and
dynamic attributes are not launchbay's). A **training notebook** constructs an
SDK v2 estimator or tuner and calls ``fit``. Out of scope, counted apart: JumpStart
(``sagemaker.jumpstart``), training recipes (``training_recipe=``), Training
Compiler (``compiler_config=``), and the v3 ``ModelTrainer`` API.

Usage (needs ``sagemaker==2.257.7``, which the test extra installs)::

    python tools/notebook_survey.py PATH_TO_NOTEBOOKS_REPO [--json out.json] [--show N]

It prints the share of training notebooks that pass and, by notebooks blocked,
what is missing.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import importlib
import inspect
import io
import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The training side of SDK v2, by the first part of a module path after ``sagemaker.``:
#: names here are judged. Hosting (serializers, predictor, model), processing, Clarify,
#: pipelines, feature store and the like are reported as seen, not judged.
TRAINING_MODULES = {
    "estimator", "pytorch", "tensorflow", "huggingface", "sklearn", "xgboost", "mxnet",
    "inputs", "session", "s3", "image_uris", "tuner", "parameter", "analytics", "debugger",
    "utils", "amazon", "instance_group", "fw_utils", "job", "chainer", "rl", "local",
}  # fmt: skip
#: Module parts and class-name endings of hosting and processing inside those packages
#: (``sagemaker.pytorch.model.PyTorchModel``, ``sagemaker.sklearn.processing``, ...).
HOSTING_PARTS = {"model", "processing", "predictor", "serving", "transformer"}
HOSTING_SUFFIXES = ("Model", "Predictor", "Processor", "TransformInput", "CreateModelInput")
#: Session methods that serve hosting, processing or other services, not training.
NOT_TRAINING_WORDS = (
    "endpoint", "model", "transform", "compilation", "edge", "labeling", "auto_ml",
    "processing", "pipeline", "monitoring", "feature", "lineage", "inference", "deploy",
)  # fmt: skip

OUT_OF_SCOPE = {
    "JumpStart": ("sagemaker.jumpstart",),
    "training recipes": ("training_recipe",),
    "Training Compiler": ("compiler_config", "TrainingCompilerConfig"),
    "v3 ModelTrainer": ("sagemaker.modules", "sagemaker.train", "sagemaker.core", "ModelTrainer"),
}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    logging.disable(logging.CRITICAL)
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink):
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(logging.NOTSET)


_MISSING = object()


def _resolve(dotted: str) -> Any:
    """The object at ``dotted`` (a module path then attributes), or ``_MISSING``."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            with _quiet():
                obj: Any = importlib.import_module(module_name)
        except Exception:
            continue
        for attr in parts[cut:]:
            try:
                with _quiet():
                    obj = getattr(obj, attr)
            except Exception:
                return _MISSING
        return obj
    return _MISSING


_CACHE: dict[str, Any] = {}


def resolve(dotted: str) -> Any:
    if dotted not in _CACHE:
        _CACHE[dotted] = _resolve(dotted)
    return _CACHE[dotted]


def ours(dotted: str) -> str:
    return "launchbay" + dotted[len("sagemaker") :]


def code_of(path: Path) -> str:
    """The notebook's code cells, magics and shell lines left out."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    cells = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        lines = [
            line
            for line in text.splitlines()
            if not line.lstrip().startswith(("%", "!", "?")) and not line.rstrip().endswith("?")
        ]
        cell_code = "\n".join(lines)
        try:
            ast.parse(cell_code)
        except SyntaxError:
            continue
        cells.append(cell_code)
    return "\n\n".join(cells)


@dataclass
class Notebook:
    path: str
    training: bool = False
    out_of_scope: str | None = None
    problems: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)


def training_side(dotted: str, obj: Any) -> bool:
    """Whether a v2 name belongs to the training side (judged) or to another service."""
    module = str(getattr(obj, "__module__", None) or getattr(obj, "__name__", ""))
    name = str(getattr(obj, "__name__", dotted.rsplit(".", 1)[-1]))
    inner = module.split(".")
    if HOSTING_PARTS & set(inner[1:]) or name.endswith(HOSTING_SUFFIXES):
        return False  # hosting and processing classes that live in framework packages
    parts = dotted.split(".")
    if len(parts) > 1 and parts[1] in TRAINING_MODULES:
        return True
    return len(inner) > 1 and inner[0] == "sagemaker" and inner[1] in TRAINING_MODULES


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``sagemaker.x.y`` for an attribute chain rooted at a sagemaker alias."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(names)])
    return None


def _v2_kind(obj: Any) -> str | None:
    """``estimator``, ``tuner`` or ``None`` for an SDK v2 object."""
    if not inspect.isclass(obj):
        return None
    from sagemaker.estimator import EstimatorBase
    from sagemaker.tuner import HyperparameterTuner

    if issubclass(obj, EstimatorBase):
        return "estimator"
    if issubclass(obj, HyperparameterTuner):
        return "tuner"
    return None


def _binds(ours_obj: Any, call: ast.Call) -> str | None:
    """Why launchbay's callable would refuse this call's shape, or None."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None  # *args / **kwargs: the shape is not known
    args = tuple(None for _ in call.args)
    kwargs = {k.arg: None for k in call.keywords if k.arg}
    if inspect.isclass(ours_obj) and hasattr(ours_obj, "_owners"):
        from launchbay import arguments

        # The built-in algorithm estimators take their hyperparameters besides the
        # estimator's arguments (after its positional ones): the binder sees the rest.
        algorithm = set(getattr(ours_obj, "_algorithm_arguments", ()))
        if algorithm:
            algorithm.add("data_location")  # the algorithm estimators' own argument too
            kwargs = {k: v for k, v in kwargs.items() if k not in algorithm}
            args = args[: len(getattr(ours_obj, "_positional", ()))]

        try:
            with _quiet():
                arguments.bind(ours_obj, args, kwargs)
        except Exception as exc:
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        return None
    try:
        signature = inspect.signature(ours_obj)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        return str(exc)
    return None


def survey(path: Path) -> Notebook:
    record = Notebook(str(path))
    code = code_of(path)
    if "sagemaker" not in code:
        return record
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return record
    aliases: dict[str, str] = {}  # local name -> sagemaker dotted path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sagemaker" or alias.name.startswith("sagemaker."):
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases["sagemaker"] = "sagemaker"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sagemaker" or node.module.startswith("sagemaker."):
                for alias in node.names:
                    if alias.name != "*":
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    # Which local names hold objects of a judged class: name -> sagemaker dotted class path.
    instances: dict[str, str] = {}
    made_by: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            target = node.targets[0]
            called = _dotted(node.value.func, aliases)
            if called and isinstance(target, ast.Name):
                made_by[target.id] = called

    constructs_training = False
    calls_fit = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "fit":
            calls_fit = True
        if isinstance(node, ast.Call):
            called = _dotted(node.func, aliases)
            if called and _v2_kind(resolve(called)):
                constructs_training = True
    record.training = constructs_training and calls_fit
    if not record.training:
        return record
    for label, markers in OUT_OF_SCOPE.items():
        if any(marker in code for marker in markers):
            record.out_of_scope = label
            return record

    for name, called in made_by.items():
        obj = resolve(called)
        if inspect.isclass(obj) and obj.__module__.startswith("sagemaker"):
            instances[name] = called

    def judge_name(dotted: str) -> None:
        obj = resolve(dotted)
        if obj is _MISSING:
            return  # SDK v2 has no such name either
        if not training_side(dotted, obj):
            record.other.add(dotted)
            return
        if resolve(ours(dotted)) is _MISSING:
            record.problems.add(f"name {dotted}")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "sagemaker" or node.module.startswith("sagemaker."):
                for alias in node.names:
                    if alias.name != "*":
                        judge_name(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sagemaker."):
                    judge_name(alias.name)
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node, aliases)
            if dotted:
                judge_name(dotted)
            elif isinstance(node.value, ast.Name) and node.value.id in instances:
                cls_path = instances[node.value.id]
                v2_cls = resolve(cls_path)
                our_cls = resolve(ours(cls_path))
                hosting = (
                    v2_cls is not _MISSING
                    and cls_path.endswith("Session")
                    and any(word in node.attr for word in NOT_TRAINING_WORDS)
                )
                if (
                    v2_cls is not _MISSING
                    and our_cls is not _MISSING
                    and training_side(cls_path, v2_cls)
                    and not hosting
                    and hasattr(v2_cls, node.attr)
                    and not node.attr.startswith("_")
                    and not hasattr(our_cls, node.attr)
                ):
                    record.problems.add(f"{cls_path.rsplit('.', 1)[-1]}.{node.attr}")
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func, aliases)
            if (
                dotted
                and resolve(dotted) is not _MISSING
                and training_side(dotted, resolve(dotted))
            ):
                our_obj = resolve(ours(dotted))
                if our_obj is not _MISSING and callable(our_obj):
                    refused = _binds(our_obj, node)
                    if refused:
                        short = dotted.rsplit(".", 1)[-1]
                        bad = [k.arg for k in node.keywords if k.arg and k.arg in refused]
                        what = f"keyword {bad[0]}" if bad else refused
                        record.problems.add(f"call {short}({what})")
    return record


def notebooks(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a checkout of a notebooks repository")
    parser.add_argument("--json", type=Path, help="write every notebook's result here")
    parser.add_argument("--show", type=int, default=25, help="rows of blockers to print")
    args = parser.parse_args(argv)
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    results = [survey(path) for path in notebooks(args.root)]
    training = [r for r in results if r.training]
    excluded = collections.Counter(r.out_of_scope for r in training if r.out_of_scope)
    judged = [r for r in training if not r.out_of_scope]
    passed = [r for r in judged if not r.problems]
    blockers: collections.Counter[str] = collections.Counter()
    for r in judged:
        blockers.update(r.problems)
    share = 100.0 * len(passed) / len(judged) if judged else 0.0
    print(f"notebooks read: {len(results)}; training notebooks: {len(training)}")
    for label, count in sorted(excluded.items()):
        print(f"  out of scope ({label}): {count}")
    print(f"judged: {len(judged)}; pass: {len(passed)} ({share:.1f}%)")
    print("blocked by (notebooks):")
    for problem, count in blockers.most_common(args.show):
        print(f"  {count:4d}  {problem}")
    others: collections.Counter[str] = collections.Counter()
    for r in judged:
        others.update({name.split(".")[1] if "." in name else name for name in r.other})
    print("not training-side, seen but not judged (notebooks, by module):")
    print("  " + ", ".join(f"{name} {count}" for name, count in others.most_common(12)))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {"path": r.path, "out_of_scope": r.out_of_scope, "problems": sorted(r.problems)}
                    for r in training
                ],
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
