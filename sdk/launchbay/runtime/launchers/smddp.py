"""smdistributed dataparallel through the local stand-in: which launcher starts the ranks.

The stand-in's PyTorch API (:mod:`launchbay.runtime.standins`) runs on
``torch.distributed``: its ranks need ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT``, which torchrun gives. Its TensorFlow API runs
its collectives on MPI (mpi4py). So in a ``local_process`` job a PyTorch script is
started by torchrun -- one for every host, as ``torch_distributed`` is
(:func:`.mpi.build_torchrun_local`), so neither mpi4py nor OpenMPI is needed --
and a TensorFlow script, code that imports mpi4py itself, or a non-Python entry
point by one ``mpirun`` (:func:`.mpi.build_smddp_local`). Local Docker jobs keep
``mpirun`` over SSH for both, as SageMaker does.

The runtime is not told the framework (the request has no field for it that a
SageMaker job would not also see), so it is read from the code:
:func:`entry_framework` follows the entry point's imports through the modules of
the code directory (a source directory may hold a PyTorch and a TensorFlow script
side by side, as the SMDDP notebook's does).
"""

from __future__ import annotations

import ast
import importlib.util
import os

from launchbay.runtime.code import EntryPoint
from launchbay.runtime.launchers import mpi, torchrun
from launchbay.runtime.launchers.base import LaunchContext, LaunchPlan
from launchbay.runtime.names import HP

__all__ = [
    "PYTORCH",
    "TENSORFLOW",
    "entry_imports",
    "entry_framework",
    "uses_torchrun",
    "build_local",
]

PYTORCH = "pytorch"
TENSORFLOW = "tensorflow"

_LIBRARY = "smdistributed.dataparallel"
#: At most this many files of the code directory are read, each up to this many bytes.
_MAX_FILES = 256
_MAX_BYTES = 4 * 1024 * 1024


def _imports(tree: ast.AST, package: list[str]) -> set[str]:
    """Every module name ``tree`` imports (``from a import b`` gives ``a`` and ``a.b``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                if node.level - 1 > len(package):
                    continue
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module:
                names.add(module)
            names.update(f"{module}.{a.name}" if module else a.name for a in node.names)
    return names


def _module_file(roots: list[str], name: str) -> list[tuple[str, list[str]]]:
    """The files of the code directory that importing ``name`` runs, with their packages."""
    parts = name.split(".")
    found: list[tuple[str, list[str]]] = []
    for root in roots:
        for depth in range(1, len(parts) + 1):
            base = os.path.join(root, *parts[:depth])
            for path, package in (
                (os.path.join(base, "__init__.py"), parts[:depth]),
                (base + ".py", parts[: depth - 1]),
            ):
                if os.path.isfile(path):
                    found.append((path, package))
    return found


def _entry_files(code_dir: str, entry: EntryPoint) -> list[tuple[str, list[str]]]:
    if entry.kind == "script" and entry.path:
        return [(entry.path, [])]
    if entry.kind == "module" and entry.module:
        parts = entry.module.split(".")
        base = os.path.join(code_dir, *parts)
        main = os.path.join(base, "__main__.py")
        files = _module_file([code_dir], entry.module)
        return files + ([(main, parts)] if os.path.isfile(main) else [])
    return []


def entry_imports(code_dir: str, entry: EntryPoint) -> set[str]:
    """Every module name the entry point imports, directly or through the code directory's
    modules it imports (parsed, never run; at most :data:`_MAX_FILES` files)."""
    pending = _entry_files(code_dir, entry)
    script_dir = os.path.dirname(entry.path) if entry.kind == "script" and entry.path else None
    roots = [d for d in (script_dir, code_dir) if d]
    roots = list(dict.fromkeys(os.path.realpath(d) for d in roots))
    seen: set[str] = set()
    imported: set[str] = set()
    while pending and len(seen) < _MAX_FILES:
        path, package = pending.pop()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            with open(real, "rb") as f:
                source = f.read(_MAX_BYTES)
            tree = ast.parse(source, filename=real)
        except (OSError, SyntaxError, ValueError):
            continue
        names = _imports(tree, package)
        imported |= names
        for name in names:
            pending.extend(_module_file(roots, name))
    return imported


def _uses(imported: set[str], prefix: str) -> bool:
    return any(n == prefix or n.startswith(prefix + ".") for n in imported)


def entry_framework(code_dir: str, entry: EntryPoint) -> str | None:
    """:data:`TENSORFLOW` or :data:`PYTORCH`: the stand-in API the entry point imports.

    ``smdistributed.dataparallel.tensorflow`` means TensorFlow,
    ``smdistributed.dataparallel.torch`` PyTorch (both: TensorFlow, whose collectives
    need MPI). Without either, ``tensorflow`` imported without ``torch`` means
    TensorFlow, ``torch`` PyTorch; else ``None``. See :func:`entry_imports`.
    """
    return _framework(entry_imports(code_dir, entry))


def _framework(imported: set[str]) -> str | None:
    if _uses(imported, f"{_LIBRARY}.tensorflow"):
        return TENSORFLOW
    if _uses(imported, f"{_LIBRARY}.torch"):
        return PYTORCH
    if _uses(imported, "tensorflow") and not _uses(imported, "torch"):
        return TENSORFLOW
    if _uses(imported, "torch"):
        return PYTORCH
    return None


def uses_torchrun(ctx: LaunchContext) -> bool:
    """Whether this ``local_process`` smdistributed job starts its ranks with torchrun.

    Yes for a Python entry point that uses the PyTorch API, or that names neither
    framework where torch is installed. TensorFlow, code that imports ``mpi4py``
    itself (it expects MPI's world) and non-Python entry points keep ``mpirun``.
    """
    if not ctx.entry.is_python:
        return False
    imported = entry_imports(ctx.code_dir, ctx.entry)
    if _uses(imported, "mpi4py"):
        return False
    framework = _framework(imported)
    if framework is None:
        return importlib.util.find_spec("torch") is not None
    return framework == PYTORCH


def build_local(ctx: LaunchContext) -> LaunchPlan:
    """The stand-in's plan in a local job without ``smddprun`` (torchrun or mpirun, see above)."""
    if ctx.settings.ray and uses_torchrun(ctx):
        # A Ray host is a node of its own: one torchrun per host, as torch_distributed.
        plan = torchrun.build(ctx)
        plan.launcher = "smdistributed"
        return plan
    if not (ctx.settings.local_process and uses_torchrun(ctx)):
        return mpi.build_smddp_local(ctx)
    if len(ctx.env.distribution_hosts) > 1:
        plan = mpi.build_torchrun_local(ctx)
    else:
        plan = torchrun.build(ctx)
    plan.launcher = "smdistributed"
    options = str(ctx.env.additional_framework_parameters.get(HP.SMDDP_CUSTOM_MPI_OPTIONS) or "")
    if options.strip():
        plan.notes.append(
            f"custom_mpi_options {options!r} are not used: in local_process mode a PyTorch "
            "script of smdistributed dataparallel is started by torchrun, without MPI."
        )
    return plan
