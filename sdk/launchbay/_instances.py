"""Reading instance types and version strings, shared by the distribution rules and image lookup.

Standard library only and free of ``re``/``json``, so importing it costs nothing.
"""

from __future__ import annotations

__all__ = ["instance_family", "version_tuple"]


def instance_family(instance_type: str) -> str:
    """The family of ``ml.<family>.<size>`` or ``ml_<family>`` (``"g4dn"``), else ``""``.

    Same reading as SageMaker SDK v2: a lower-case family of letters, digits and
    dashes after ``ml.`` or ``ml_``, then an optional dot and a word.
    """
    if not isinstance(instance_type, str) or instance_type[:3] not in ("ml.", "ml_"):
        return ""
    rest = instance_type[3:]
    end = 0
    while end < len(rest) and (rest[end] in "-0123456789" or "a" <= rest[end] <= "z"):
        end += 1
    family, tail = rest[:end], rest[end:]
    if tail.startswith("."):
        tail = tail[1:]
    if not family or not all(ch.isalnum() or ch == "_" for ch in tail):
        return ""
    return family


def version_tuple(version: str | None) -> tuple[int, ...]:
    """The leading numeric parts of a version: ``"2.13.0+cpu"`` -> ``(2, 13, 0)``."""
    parts = []
    for piece in str(version or "").split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)
