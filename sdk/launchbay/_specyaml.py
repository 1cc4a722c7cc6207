"""Reading a job spec's text: YAML with the line of every key, limits, ``${VAR}`` and ``--set``.

Steps 1-3 of :func:`launchbay.jobspec.load` (see there): parse the YAML keeping each
key's and value's line (duplicate keys are errors), within the limits a job spec
may make the reader go to (size, nesting, aliases, nodes; docs/jobspec.md), through
the one bounded YAML reader every YAML file goes through (:mod:`launchbay._yamlfile`); fill
``${VAR}`` references from the environment; apply ``--set key.path=value``
overrides. Every problem is a :class:`Problem` at its ``file:line``, raised
together as a :class:`JobSpecError`. The spec model, its schema and its checks are
:mod:`launchbay.jobspec`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from launchbay import _yamlfile
from launchbay.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    import yaml

KeyPath = tuple[str | int, ...]

_SCALAR_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
}
NULLS = ("", "~", "null", "Null", "NULL")
#: Limits on what a spec may make the reader do (docs/jobspec.md, "Limits"): those of the
#: one bounded YAML reader, :mod:`launchbay._yamlfile`.
MAX_SPEC_BYTES = _yamlfile.MAX_BYTES
MAX_DEPTH = _yamlfile.MAX_DEPTH
MAX_ALIASES = _yamlfile.MAX_ALIASES
MAX_NODES = _yamlfile.MAX_NODES
_REFERENCE = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_WHOLE_REFERENCE = re.compile(r"^\$\{[^}]*\}$")
_REFERENCE_BODY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:-|-|:\?|\?)(.*))?", re.S)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (``job.yaml:12`` or ``--set ...``), key path, message."""

    where: str
    key: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        key = f"{self.key}: " if self.key else ""
        return f"{self.where}: {key}{self.message}"


class JobSpecError(ConfigurationError):
    """An invalid job spec. ``problems`` lists each one; the message has one per line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        ordered = sorted(problems, key=lambda p: (p.line is None, p.line or 0))
        self.problems = list(ordered)
        first = self.problems[0] if self.problems else None
        super().__init__(
            "\n".join(str(p) for p in self.problems),
            argument=first.key if first else None,
        )


def dotted(path: KeyPath) -> str:
    """``("inputs", "train", "s3_data")`` -> ``inputs.train.s3_data``; ``("tags", 0)`` -> ``tags[0]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + part
    return text


@dataclass
class Locations:
    """Where each key path came from: a line of the file, or an override."""

    filename: str
    key_lines: dict[KeyPath, int] = field(default_factory=dict)
    value_lines: dict[KeyPath, int] = field(default_factory=dict)
    origins: dict[KeyPath, str] = field(default_factory=dict)

    def where(self, path: KeyPath, *, key: bool = False) -> tuple[str, int | None]:
        """``("job.yaml:12", 12)`` for ``path`` (its key's line with ``key``), or an override."""
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            if prefix in self.origins:
                return self.origins[prefix], None
            if key and end == len(path) and prefix in self.key_lines:
                line = self.key_lines[prefix]
            elif prefix in self.value_lines:
                line = self.value_lines[prefix]
            else:
                continue
            return f"{self.filename}:{line}", line
        return self.filename, None

    def problem(self, path: KeyPath, message: str, *, key: bool = False) -> Problem:
        where, line = self.where(path, key=key)
        return Problem(where, dotted(path), message, line)


# --------------------------------------------------------------------------- parsing


class Composer:
    """YAML text -> plain data, remembering the line of every key and value."""

    def __init__(self, text: str, locations: Locations) -> None:
        self.text = text
        self.locations = locations
        self.problems: list[Problem] = []
        self.whole_references: set[KeyPath] = set()
        self.budget = _yamlfile.Budget()

    def compose(self) -> Any:
        filename = self.locations.filename
        try:
            with _yamlfile.compose(self.text, filename, what="the job spec") as (loader, node):
                if node is None:
                    raise JobSpecError([Problem(filename, "", "the job spec is empty", 1)])
                data = self._build(loader, node, (), set())
        except _yamlfile.YamlFileError as exc:
            raise JobSpecError([problem_of(exc)]) from exc
        if self.problems:
            raise JobSpecError(self.problems)
        if not isinstance(data, dict):
            raise JobSpecError(
                [
                    self.locations.problem(
                        (), f"the job spec must be a mapping of keys, not {kind_of(data)}"
                    )
                ]
            )
        return data

    def _build(
        self, loader: yaml.SafeLoader, node: yaml.Node, path: KeyPath, stack: set[int]
    ) -> Any:
        import yaml

        text = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
        over = self.budget.spend(text)
        if over is not None:
            # Aliases repeat what they point at: a few hundred bytes can stand for billions
            # of values (an "alias bomb"). Stop at once, before memory runs out.
            line = node.start_mark.line + 1
            raise JobSpecError(
                [Problem(f"{self.locations.filename}:{line}", dotted(path),
                         _yamlfile.Budget.message("the spec", over), line)]
            )  # fmt: skip
        if path:
            self.locations.value_lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in stack:
            self.problems.append(self.locations.problem(path, "a YAML alias refers to itself"))
            return None
        if isinstance(node, yaml.MappingNode):
            try:
                loader.flatten_mapping(node)  # YAML merge keys (<<)
            except yaml.MarkedYAMLError as exc:
                self.problems.append(self.locations.problem(path, f"invalid merge: {exc.problem}"))
                return {}
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    line = key_node.start_mark.line + 1
                    self.problems.append(
                        Problem(f"{self.locations.filename}:{line}", dotted(path),
                                "keys must be plain names, not lists or mappings", line)
                    )  # fmt: skip
                    continue
                key = str(key_node.value)
                child = (*path, key)
                if key in out:
                    line = key_node.start_mark.line + 1
                    first = self.locations.key_lines.get(child)
                    self.problems.append(
                        Problem(f"{self.locations.filename}:{line}", dotted(child),
                                f"duplicate key (first given on line {first})", line)
                    )  # fmt: skip
                    continue
                self.locations.key_lines[child] = key_node.start_mark.line + 1
                out[key] = self._build(loader, value_node, child, stack | {id(node)})
            return out
        if isinstance(node, yaml.SequenceNode):
            return [
                self._build(loader, item, (*path, index), stack | {id(node)})
                for index, item in enumerate(node.value)
            ]
        assert isinstance(node, yaml.ScalarNode)
        if node.tag not in _SCALAR_TAGS:
            # Timestamps and the like stay text; launchbay has no use for them.
            if node.tag.startswith("tag:yaml.org,2002:"):
                return str(node.value)
            self.problems.append(self.locations.problem(path, f"unsupported YAML tag {node.tag!r}"))
            return None
        value = loader.construct_object(node, deep=True)
        if (
            node.tag == "tag:yaml.org,2002:str"
            and node.style is None
            and _WHOLE_REFERENCE.match(node.value)
        ):
            self.whole_references.add(path)
        return value


def problem_of(error: _yamlfile.YamlFileError) -> Problem:
    """The bounded reader's error as a spec :class:`Problem` (``file:line``, no key path)."""
    return Problem(error.where, "", error.reason, error.line)


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def scalar_from_text(text: str, *, collections: bool) -> Any:
    """``text`` read as a YAML value (``3`` -> 3, ``true`` -> True); else the text itself.

    Read by the bounded reader (:func:`launchbay._yamlfile.load`): a value that breaks a
    limit raises ``ValueError`` naming it; one that is not YAML stays text.
    """
    if text.strip() in NULLS:
        return None
    try:
        value = _yamlfile.load(text, "", what="the value")
    except _yamlfile.YamlFileError as exc:
        if exc.reason.startswith("invalid YAML"):
            return text
        raise ValueError(exc.reason) from None
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if collections and isinstance(value, (list, dict)):
        return value
    return text


# --------------------------------------------------------------------------- ${VAR}


def substitute(text: str, environ: Mapping[str, str]) -> str:
    """Fill ``${VAR}`` references of ``text`` from ``environ`` (raises ``ValueError``)."""

    def replace(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$$":
            return "$"
        body = match.group(1)
        if body is None:
            raise ValueError("'${' is not closed: write ${NAME}, or $${ for a literal '${'")
        parsed = _REFERENCE_BODY.fullmatch(body)
        if not parsed:
            raise ValueError(
                f"invalid reference ${{{body}}}: accepted ${{NAME}}, ${{NAME:-default}}, "
                "${NAME-default}, ${NAME:?message}"
            )
        name, operator, argument = parsed.groups()
        value = environ.get(name)
        empty = value is None or value == ""
        if operator in (":-", "-"):
            if value is None or (operator == ":-" and empty):
                return argument or ""
            return value
        if operator in (":?", "?"):
            if value is None or (operator == ":?" and empty):
                raise ValueError(
                    f"environment variable {name} is not set: {argument or 'required'}"
                )
            return value
        if value is None:
            raise ValueError(
                f"environment variable {name} is not set (set it, or write ${{{name}:-default}})"
            )
        return value

    return _REFERENCE.sub(replace, text)


def escape(value: Any) -> Any:
    """Strings with ``$`` doubled, so that loading gives them back unchanged."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: escape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [escape(v) for v in value]
    return value


# --------------------------------------------------------------------------- overrides


def parse_set(items: Iterable[str]) -> list[tuple[KeyPath, str, str]]:
    """``["hyperparameters.epochs=3"]`` -> ``[(("hyperparameters", "epochs"), "3", item)]``.

    Raises :class:`JobSpecError` for an item without ``=`` or with an empty key.
    """
    out = []
    problems = []
    for item in items:
        key, sep, value = item.partition("=")
        parts = key.strip().split(".") if key.strip() else []
        if not sep or not parts or any(not p for p in parts):
            problems.append(
                Problem(
                    f"--set {item}", "", "expected KEY.PATH=VALUE, e.g. hyperparameters.epochs=3"
                )
            )
            continue
        path: KeyPath = tuple(int(p) if p.isdigit() else p for p in parts)
        out.append((path, value, item))
    if problems:
        raise JobSpecError(problems)
    return out


def assign(data: dict[str, Any], path: KeyPath, value: Any) -> str | None:
    """Put ``value`` at ``path`` (making mappings on the way); returns an error or None."""
    target: Any = data
    for depth, part in enumerate(path[:-1]):
        if isinstance(target, list) and isinstance(part, int):
            if part >= len(target):
                return f"{dotted(path[: depth + 1])} is past the end of its list"
        elif isinstance(target, dict):
            part = str(part)
            if not isinstance(target.get(part), (dict, list)):
                target[part] = [] if isinstance(path[depth + 1], int) else {}
        else:
            return f"{dotted(path[:depth])} is {kind_of(target)}, which has no key {part!r}"
        target = target[part]
    last = path[-1]
    if isinstance(target, list) and isinstance(last, int):
        if last > len(target):
            return f"the list has {len(target)} item(s); give an index up to {len(target)}"
        if last == len(target):
            target.append(value)
        else:
            target[last] = value
    elif isinstance(target, dict):
        target[str(last)] = value
    else:
        return f"{dotted(path[:-1])} is {kind_of(target)}, which has no key {last!r}"
    return None


def get_path(data: Any, path: KeyPath) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(str(part))
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data
