"""Names a package exports but imports on first use (PEP 562 module ``__getattr__``).

``launchbay`` and ``launchbay.backends.ray`` keep their import cheap this way: every
rank imports the first, and a Ray node's agent the second.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: ``import launchbay`` imports this module
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose ``names`` (name -> module
    defining it) are imported on first access and then kept in its ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
