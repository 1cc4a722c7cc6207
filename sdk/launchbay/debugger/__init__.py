"""SageMaker Debugger: the hook, rules, the profiler and TensorBoard output (SDK v2's names).

``from launchbay.debugger import ...`` takes what ``from sagemaker.debugger import ...``
does: ``DebuggerHookConfig``/``CollectionConfig`` (the request's ``DebugHookConfig``),
``Rule``/``ProfilerRule`` with ``rule_configs`` (``DebugRuleConfigurations``,
``ProfilerRuleConfigurations``), ``ProfilerConfig``, ``FrameworkProfile`` and its
metrics configs (``ProfilerConfig``), and ``TensorBoardOutputConfig``.
``rule_configs`` is the ``smdebug-rulesconfig`` package's, loaded when first used
(``pip install 'launchbay[debugger]'``). docs/debugger.md.
"""

from __future__ import annotations

from typing import Any

from launchbay.debugger.hook import (
    DEFAULT_TENSORBOARD_PATH,
    TENSORBOARD_PATH_ACCEPTED,
    CollectionConfig,
    DebuggerHookConfig,
    TensorBoardOutputConfig,
    tensorboard_path_problem,
)
from launchbay.debugger.profiler import (
    DataloaderProfilingConfig,
    DetailedProfilingConfig,
    FrameworkProfile,
    HorovodProfilingConfig,
    Profiler,
    ProfilerConfig,
    PythonProfiler,
    PythonProfilingConfig,
    SMDataParallelProfilingConfig,
    cProfileTimer,
)
from launchbay.debugger.rules import ProfilerRule, Rule, RuleBase

__all__ = [
    "DEFAULT_TENSORBOARD_PATH",
    "TENSORBOARD_PATH_ACCEPTED",
    "CollectionConfig",
    "DataloaderProfilingConfig",
    "DebuggerHookConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "HorovodProfilingConfig",
    "Profiler",
    "ProfilerConfig",
    "ProfilerRule",
    "PythonProfiler",
    "PythonProfilingConfig",
    "Rule",
    "RuleBase",
    "SMDataParallelProfilingConfig",
    "TensorBoardOutputConfig",
    "cProfileTimer",
    "rule_configs",
    "tensorboard_path_problem",
]


def __getattr__(name: str) -> Any:
    """``rule_configs``: imported on first use (it loads smdebug-rulesconfig only when used)."""
    if name == "rule_configs":
        import importlib

        return importlib.import_module("launchbay.debugger.rule_configs")
    raise AttributeError(f"module 'launchbay.debugger' has no attribute {name!r}")
