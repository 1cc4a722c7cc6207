"""YAML job specs: a training job as a file, for CI and the ``launchbay`` command.

A job spec holds what an estimator holds. Every key is the estimator argument of
the same name (``role``, ``instance_type``, ``hyperparameters`` ...), plus:

* ``framework`` (``pytorch`` | ``tensorflow`` | ``huggingface`` | ``sklearn`` | ``xgboost`` |
  ``mxnet``) picks the framework estimator;
  without it ``image_uri`` makes a generic :class:`launchbay.Estimator`;
* ``inputs``: the channels ``fit()`` gets (a URI, or channel -> URI /
  TrainingInput fields / FileSystemInput fields);
* ``job_name``: the exact job name;
* ``vpc: {stack: NAME}``: the VPC of a stack made by ``launchbay vpc up``
  (:mod:`launchbay.vpc`), instead of ``subnets``/``security_group_ids``; it is
  looked up (``launchbay.vpc.describe``) when the estimator is built for
  submission or a dry run, not by ``validate``;
* ``tuning``: a hyperparameter tuning job over this training job (the tuner's
  arguments, :mod:`launchbay.tuning.spec`), which ``launchbay submit`` runs instead;
* ``rehearse: {interruptions: "60s,120s"}`` (or a list of items): what SageMaker will do
  to a local job, rehearsed (spot interruptions, host losses:
  :mod:`launchbay.backends.local.rehearsal`); it becomes the job's
  ``LAUNCHBAY_REHEARSE_INTERRUPTIONS`` environment variable, and only a local job takes it;
* ``x-*`` keys are ignored: a place for YAML anchors (``x-defaults: &defaults``).

Loading a spec (:func:`load`) goes through these steps, each reporting every
problem it finds with ``file:line: key.path: message``:

1. parse the YAML, keeping the line of every key and value (PyYAML node marks);
   duplicate keys are errors;
2. fill ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?message}``
   from the environment (``$$`` is a literal ``$``); an unset variable is an error
   naming it and the key path. A plain (unquoted) value that is exactly one
   reference takes the YAML type of what it expands to (``instance_count:
   ${COUNT}`` is an integer), except where the schema wants a string;
3. apply overrides (``--set key.path=value``, parsed as YAML the same way);
4. validate against ``schemas/jobspec.schema.json`` (JSON Schema 2020-12); an
   unknown key is reported with the closest known one;
5. check what the schema cannot say, and resolve relative paths (``source_dir``,
   ``dependencies``, ``entry_point`` without ``source_dir``) against the spec
   file's directory.

:meth:`launchbay.estimator.EstimatorBase.from_spec` then makes the estimator; an
estimator error is reported at the line of the key it names (:meth:`JobSpec.error_for`).
:func:`spec_from_arguments` (given an estimator's argument values) and :func:`dump`
are the way back (``Estimator.to_yaml``); this module never sees the estimator class.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launchbay import _yamlfile, arguments, distribution, vpc
from launchbay._specyaml import (  # reading the text; JobSpecError, Problem, ... re-exported
    NULLS,
    Composer,
    JobSpecError,
    KeyPath,
    Locations,
    Problem,
    assign,
    dotted,
    escape,
    get_path,
    kind_of,
    parse_set,
    problem_of,
    scalar_from_text,
    substitute,
)
from launchbay.backends.local import rehearsal
from launchbay.backends.local.rehearsal import SETTING_NAME
from launchbay.errors import ConfigurationError, ProvisioningError, suggestion
from launchbay.inputs import FileSystemInput, TrainingInput
from launchbay.runtime.names import LOCAL_INSTANCE_TYPES

if TYPE_CHECKING:  # pragma: no cover
    pass

__all__ = [
    "JobSpec",
    "JobSpecError",
    "Problem",
    "load",
    "loads",
    "parse_set",
    "schema",
    "spec_from_arguments",
    "dump",
]

logger = logging.getLogger("launchbay.jobspec")


#: Keys that are not estimator arguments.
SPEC_ONLY_KEYS = ("framework", "inputs", "job_name", "vpc", "tuning", "rehearse")
#: TrainingInput / FileSystemInput fields of a channel mapping.
TRAINING_INPUT_FIELDS = (
    "s3_data",
    "distribution",
    "compression",
    "content_type",
    "record_wrapping",
    "s3_data_type",
    "instance_groups",
    "input_mode",
    "attribute_names",
    "target_attribute_name",
    "shuffle_config",
)
FILE_SYSTEM_FIELDS = (
    "file_system_id",
    "file_system_type",
    "directory_path",
    "file_system_access_mode",
    "content_type",
)
#: An environment variable's name: an estimator argument of this form is a machine's setting.
_SETTING = re.compile(r"^[A-Z][A-Z0-9_]*$")
_ARGUMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[[^\]]*\])*)")
_EXPECTED = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


# --------------------------------------------------------------------------- schema


_SCHEMA: dict[str, Any] | None = None


def schema() -> dict[str, Any]:
    """The job spec's JSON Schema.

    The estimator arguments' properties are derived from their declaration
    (:func:`launchbay.arguments.spec_properties`); the keys that are not
    arguments (``framework``, ``inputs``, ``job_name``, ``vpc``), the rules
    between keys and ``$defs`` come from ``schemas/jobspec.schema.json``, which
    is the whole schema rendered for editors (:func:`render_schema`; a test keeps
    the file equal to it).
    """
    global _SCHEMA
    if _SCHEMA is None:
        text = (
            importlib.resources.files("launchbay")
            .joinpath("schemas/jobspec.schema.json")
            .read_text(encoding="utf-8")
        )
        _SCHEMA = render_schema(json.loads(text))
    return _SCHEMA


def render_schema(base: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with its argument properties replaced by the declared ones.

    The ``distribution`` property refers to the distribution schema's definitions,
    which are added to ``$defs``.

    Order: ``framework``, the arguments in declaration order, then the other
    spec-only keys.
    """
    out = copy.deepcopy(dict(base))
    old = base.get("properties", {})
    properties: dict[str, Any] = {}
    if "framework" in old:
        from launchbay._regions import FRAMEWORK_ESTIMATORS

        properties["framework"] = {**old["framework"], "enum": list(FRAMEWORK_ESTIMATORS)}
    properties.update(arguments.spec_properties())
    for key in SPEC_ONLY_KEYS:
        if key in old and key not in properties:
            properties[key] = old[key]
    out["properties"] = properties
    # The distribution dict's own schema (schemas/distribution.schema.json), embedded.
    out.setdefault("$defs", {}).update(distribution.schema_defs())
    return out


def _expand(nodes: Iterable[Any], root: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Subschemas with ``$ref``, ``anyOf``, ``oneOf`` and ``allOf`` followed."""
    out: list[dict[str, Any]] = []
    stack = [n for n in nodes if isinstance(n, dict)]
    while stack:
        node = stack.pop()
        out.append(node)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            stack.append(target)
        for keyword in ("anyOf", "oneOf", "allOf"):
            stack.extend(n for n in node.get(keyword, []) if isinstance(n, dict))
    return out


def _schemas_at(path: KeyPath) -> list[dict[str, Any]]:
    root = schema()
    nodes = _expand([root], root)
    for part in path:
        found: list[Any] = []
        for node in nodes:
            if isinstance(part, int):
                if isinstance(node.get("items"), dict):
                    found.append(node["items"])
            elif part in node.get("properties", {}):
                found.append(node["properties"][part])
            elif isinstance(node.get("additionalProperties"), dict):
                found.append(node["additionalProperties"])
        nodes = _expand(found, root)
    return nodes


def _accepts_string(path: KeyPath) -> bool:
    """True when the schema accepts a string at ``path`` (so an expanded value stays text)."""
    for node in _schemas_at(path):
        kind = node.get("type")
        kinds = [kind] if isinstance(kind, str) else list(kind or [])
        if "string" in kinds:
            return True
        if any(isinstance(v, str) for v in node.get("enum", [])):
            return True
    return False


# --------------------------------------------------------------------------- validation


def _schema_problems(data: dict[str, Any], locations: Locations) -> list[Problem]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    problems: list[Problem] = []
    for error in validator.iter_errors(data):
        problems.extend(_describe(error, locations))
    unique: dict[str, Problem] = {}
    for problem in problems:
        unique.setdefault(str(problem), problem)
    return list(unique.values())


def _describe(error: Any, locations: Locations) -> list[Problem]:
    """Readable problems for one jsonschema error."""
    path: KeyPath = tuple(error.absolute_path)
    kind = error.validator
    sub = error.schema if isinstance(error.schema, dict) else {}
    if kind == "additionalProperties":
        known = sorted(sub.get("properties", {}))
        patterns = [re.compile(p) for p in sub.get("patternProperties", {})]
        extra = [
            k
            for k in error.instance
            if k not in sub.get("properties", {}) and not any(p.search(k) for p in patterns)
        ]
        out = []
        for key in extra:
            close = suggestion(key, known)
            if close:
                hint = f" Did you mean {close!r}?"
            elif known:
                hint = " Known keys: " + ", ".join(known) + "."
            else:
                hint = ""
            out.append(locations.problem((*path, key), f"unknown key.{hint}", key=True))
        return out
    if kind == "required":
        where, line = locations.where(path)
        return [
            Problem(where, dotted((*path, k)), "missing required key", line)
            for k in error.validator_value
            if k not in error.instance
        ]
    if kind in ("anyOf", "oneOf"):
        return _describe_alternatives(error, path, sub, locations)
    if kind == "type":
        expected = error.validator_value
        kinds = [expected] if isinstance(expected, str) else list(expected)
        text = " or ".join(_EXPECTED.get(k, k) for k in kinds)
        hint = ""
        if "string" in kinds and isinstance(error.instance, (int, float)):
            hint = " (put it in quotes to make it a string)"
        return [locations.problem(path, f"expected {text}, got {kind_of(error.instance)}{hint}")]
    if kind in ("enum", "const"):
        values = error.validator_value if kind == "enum" else [error.validator_value]
        accepted = ", ".join(json.dumps(v) for v in values)
        return [
            locations.problem(path, f"{kind_of(error.instance)} is not accepted: one of {accepted}")
        ]
    if kind == "pattern":
        accepted = sub.get("x-accepted") or f"text matching {error.validator_value}"
        return [locations.problem(path, f"{kind_of(error.instance)} is not accepted: {accepted}")]
    if kind in ("minimum", "maximum"):
        bound = "at least" if kind == "minimum" else "at most"
        return [
            locations.problem(
                path, f"{kind_of(error.instance)} is not accepted: {bound} {error.validator_value}"
            )
        ]
    if kind == "minLength":
        return [locations.problem(path, "must not be empty")]
    if kind == "minItems":
        return [locations.problem(path, f"needs at least {error.validator_value} item(s)")]
    return [locations.problem(path, error.message)]


def _describe_alternatives(
    error: Any, path: KeyPath, sub: Mapping[str, Any], locations: Locations
) -> list[Problem]:
    """anyOf / oneOf: report the alternative that fits the value's kind."""
    context = list(error.context or [])
    missing = sub.get("x-missing")
    if missing and all(
        e.validator in ("required", "not", "oneOf", "anyOf") and not e.relative_path
        for e in context
    ):
        verb = "needs exactly one of" if error.validator == "oneOf" else "needs"
        where = "the job spec" if not path else "this entry"
        return [locations.problem(path, f"{where} {verb}: {missing}")]
    branches: dict[int, list[Any]] = {}
    for item in context:
        branches.setdefault(item.schema_path[0], []).append(item)
    fitting = {
        index: errors
        for index, errors in branches.items()
        if not any(e.validator == "type" and not e.relative_path for e in errors)
    }
    if fitting and len(fitting) < len(error.validator_value):
        # The value has the kind of some alternatives; report what is wrong inside them.
        best = min(fitting.values(), key=len)
        out: list[Problem] = []
        for item in best:
            out.extend(_describe(item, locations))
        return out
    kinds: list[str] = []
    for alternative in error.validator_value:
        kind = alternative.get("type")
        if kind is None and "const" in alternative:
            kinds.append(json.dumps(alternative["const"]))
        elif kind is None and "enum" in alternative:
            kinds.append("one of " + ", ".join(json.dumps(v) for v in alternative["enum"]))
        else:
            for k in [kind] if isinstance(kind, str) else list(kind or []):
                if alternative.get("x-accepted") and k == "string":
                    kinds.append(alternative["x-accepted"])
                else:
                    kinds.append(_EXPECTED.get(k, k))
    text = " or ".join(dict.fromkeys(kinds)) or "another value"
    return [locations.problem(path, f"expected {text}, got {kind_of(error.instance)}")]


# --------------------------------------------------------------------------- the spec


@dataclass
class JobSpec:
    """A loaded, validated job spec.

    Attributes:
        data: The spec after ``${VAR}`` substitution and overrides, with relative
            paths resolved (plain YAML data).
        path: The spec file (None for a spec read from text).
        locations: Where each key came from, for error messages.
    """

    data: dict[str, Any]
    path: str | None
    locations: Locations

    @property
    def framework(self) -> str | None:
        """``pytorch``, ``tensorflow`` or None (the generic Estimator)."""
        return self.data.get("framework")

    @property
    def job_name(self) -> str | None:
        """The spec's ``job_name`` (None: the estimator generates one)."""
        return self.data.get("job_name")

    @property
    def instance_type(self) -> str | None:
        """The instance type (of the first instance group when there are groups)."""
        if "instance_type" in self.data:
            return self.data["instance_type"]
        groups = self.data.get("instance_groups") or [{}]
        return groups[0].get("instance_type")

    # -- errors -----------------------------------------------------------------
    def problem(self, path: KeyPath, message: str) -> Problem:
        """A :class:`Problem` located at ``path``."""
        return self.locations.problem(path, message)

    def error_for(self, exc: ConfigurationError) -> ConfigurationError:
        """``exc`` (from the estimator) located at the key its ``argument`` names.

        An error about a setting of this machine (an environment variable such as
        ``LAUNCHBAY_HOME``, named in capitals) is not the spec's: it is returned
        as it is, without a file and line.
        """
        if isinstance(exc, JobSpecError):
            return exc
        argument = getattr(exc, "argument", None)
        if isinstance(argument, str) and _SETTING.match(argument):
            return ConfigurationError(str(exc), argument=argument, value=exc.value)
        path = self._path_of(getattr(exc, "argument", None))
        if path is None:
            return JobSpecError([Problem(self.locations.filename, "", str(exc))])
        return JobSpecError([self.locations.problem(path, str(exc))])

    def _path_of(self, argument: Any) -> KeyPath | None:
        if not isinstance(argument, str):
            return None
        if argument.startswith("InstanceGroup."):
            return ("instance_groups",) if "instance_groups" in self.data else None
        match = _ARGUMENT.match(argument)
        if not match:
            return None
        head = match.group(1)
        if head in self.data or head in schema()["properties"]:
            parts: list[str | int] = [head]
            for item in re.findall(r"\[([^\]]*)\]", match.group(2)):
                item = item.strip("'\"")
                parts.append(int(item) if item.isdigit() else item)
            path = tuple(parts)
            while len(path) > 1 and get_path(self.data, path) is None:
                path = path[:-1]
            return path
        return None

    # -- the estimator ------------------------------------------------------------
    def estimator_kwargs(self) -> dict[str, Any]:
        """The estimator's keyword arguments (everything but inputs, job_name, framework, vpc).

        Each key is read back as its declaration says (:func:`launchbay.arguments.from_spec`);
        ``instance_count`` defaults to 1 without ``instance_groups``.
        """
        kwargs = arguments.from_spec(
            {
                k: v
                for k, v in self.data.items()
                if k not in SPEC_ONLY_KEYS and not k.startswith("x-")
            }
        )
        if "instance_groups" not in kwargs:
            kwargs.setdefault("instance_count", 1)
        interruptions = rehearse_setting(self.data)
        if interruptions is not None:  # the local backends read it from the job's environment
            kwargs["environment"] = {
                **(kwargs.get("environment") or {}),
                SETTING_NAME: interruptions,
            }
        return kwargs

    def inputs(self) -> Any:
        """``fit()``'s inputs: a URI, or channel -> URI / TrainingInput / FileSystemInput."""
        inputs = self.data.get("inputs")
        if inputs is None or isinstance(inputs, str):
            return inputs
        out: dict[str, Any] = {}
        problems = []
        for channel, value in inputs.items():
            if isinstance(value, str):
                out[channel] = value
                continue
            try:
                if "s3_data" in value:
                    out[channel] = TrainingInput(**value)
                else:
                    out[channel] = FileSystemInput(**value)
            except ConfigurationError as exc:
                argument = exc.argument
                path: KeyPath = ("inputs", channel)
                if argument is not None and argument in value:
                    path = (*path, argument)
                problems.append(self.problem(path, str(exc)))
        if problems:
            raise JobSpecError(problems)
        return out

    @property
    def vpc_stack(self) -> str | None:
        """The stack named by ``vpc: {stack: NAME}`` (None without ``vpc``)."""
        vpc = self.data.get("vpc")
        return vpc.get("stack") if isinstance(vpc, dict) else None

    def vpc_config(self, region: str | None = None, *, session: Any = None) -> Any:
        """The :class:`launchbay.vpc.VpcConfig` of the spec's ``vpc`` stack (None without one).

        The stack's outputs are read now (``launchbay.vpc.describe``).

        Raises:
            ProvisioningError: the stack is missing or unusable; the message starts
                with the spec's file, line and ``vpc.stack``.
        """
        stack = self.vpc_stack
        if stack is None:
            return None
        try:
            return vpc.describe(stack, region, session=session)
        except ProvisioningError as exc:
            raise ProvisioningError(
                str(self.problem(("vpc", "stack"), str(exc))),
                stack_name=exc.stack_name,
                region=exc.region,
                status=exc.status,
                reason=exc.reason,
            ) from exc


def load(
    path: str | os.PathLike[str],
    *,
    overrides: Iterable[str] = (),
    values: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    """Read, fill, override and validate the job spec at ``path``.

    Args:
        path: The YAML file.
        overrides: ``KEY.PATH=VALUE`` strings (``--set``); values are read as YAML.
        values: Top-level keys to replace, already typed (``--instance-type``, ``--job-name``);
            ``{"instance_type": ...}`` also replaces the type of every instance group.
        environ: Where ``${VAR}`` come from (default ``os.environ``).

    Raises:
        JobSpecError: with every problem found, each naming its line and key path.
    """
    filename = os.fspath(path)
    try:
        # Regular files only, never more than one byte past the limit (docs/jobspec.md, Limits).
        raw = _yamlfile.read_bytes(filename, what="the job spec")
        text = _yamlfile.decode(raw, filename, what="the job spec")
    except _yamlfile.YamlFileError as exc:
        raise JobSpecError([problem_of(exc)]) from None
    return loads(
        text,
        filename=filename,
        base_dir=os.path.dirname(os.path.abspath(filename)),
        overrides=overrides,
        values=values,
        environ=environ,
    )


def loads(
    text: str,
    *,
    filename: str = "<spec>",
    base_dir: str | None = None,
    overrides: Iterable[str] = (),
    values: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    """:func:`load` for spec text; relative paths resolve against ``base_dir`` (default: cwd)."""
    environ = os.environ if environ is None else environ
    locations = Locations(filename)
    composer = Composer(text, locations)
    data = composer.compose()

    # ${VAR}
    problems: list[Problem] = []
    coercible: set[KeyPath] = set()

    def fill(value: Any, path: KeyPath) -> Any:
        if isinstance(value, str):
            if "$" not in value:
                return value
            try:
                filled = substitute(value, environ)
            except ValueError as exc:
                problems.append(locations.problem(path, str(exc)))
                return value
            if path in composer.whole_references:
                coercible.add(path)
            return filled
        if isinstance(value, dict):
            return {k: fill(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v, (*path, i)) for i, v in enumerate(value)]
        return value

    # x-* keys are ignored (YAML anchors live there); what they lend is filled where used.
    data = {k: v if k.startswith("x-") else fill(v, (k,)) for k, v in data.items()}
    if problems:
        raise JobSpecError(problems)

    # Overrides
    for key, value in (values or {}).items():
        if value is None:
            continue
        if key == "instance_type" and isinstance(data.get("instance_groups"), list):
            for index, group in enumerate(data["instance_groups"]):
                if isinstance(group, dict):
                    group["instance_type"] = value
                    locations.origins[("instance_groups", index, "instance_type")] = (
                        f"--instance-type {value}"
                    )
            continue
        data[key] = value
        locations.origins[(key,)] = f"--{key.replace('_', '-')} {value}"
    for path, raw, item in parse_set(overrides):
        created = next(
            (path[:depth] for depth in range(1, len(path)) if get_path(data, path[:depth]) is None),
            path,
        )
        error = assign(data, path, raw)
        if error:
            problems.append(Problem(f"--set {item}", dotted(path), error))
            continue
        locations.origins[created] = locations.origins[path] = f"--set {item}"
        coercible.add(path)
    if problems:
        raise JobSpecError(problems)

    # Types of expanded values and --set values. At the top level, an empty or null
    # value means "not given" (``role: ${ROLE:-}``, ``--set output_path=null``).
    for path in sorted(coercible, key=len):
        current = get_path(data, path)
        if not isinstance(current, str):
            continue
        if len(path) == 1 and current.strip() in NULLS:
            coerced: Any = None
        elif _accepts_string(path):
            continue
        else:
            try:
                coerced = scalar_from_text(
                    current, collections=path not in composer.whole_references
                )
            except ValueError as exc:  # a YAML limit (nesting, aliases, size)
                problems.append(locations.problem(path, str(exc)))
                continue
        assign(data, path, coerced)
    if problems:
        raise JobSpecError(problems)
    data = {k: v for k, v in data.items() if v is not None}

    problems = _schema_problems(data, locations)
    if problems:
        raise JobSpecError(problems)
    spec = JobSpec(data, filename if filename != "<spec>" else None, locations)
    _check(spec)
    _resolve_paths(spec, base_dir or os.getcwd())
    return spec


def _check(spec: JobSpec) -> None:
    """Rules the schema does not state."""
    data = spec.data
    problems = []
    if "vpc" in data:
        for key in ("subnets", "security_group_ids"):
            if key in data:
                problems.append(
                    spec.problem(
                        (key,),
                        f"{key} cannot be combined with vpc: give either vpc: {{stack: NAME}} "
                        "or subnets and security_group_ids",
                    )
                )
    if data.get("framework") is None:
        for key in ("framework_version", "py_version"):
            if key in data:
                problems.append(
                    spec.problem(
                        (key,),
                        f"{key} applies to framework estimators only: add framework: pytorch "
                        f"or framework: tensorflow, or remove {key}",
                    )
                )
    if "model_dir" in data and data.get("framework") != "tensorflow":
        problems.append(
            spec.problem(("model_dir",), "model_dir applies to framework: tensorflow only")
        )
    if "instance_groups" in data:
        for key in ("instance_type", "instance_count"):
            if key in data:
                problems.append(
                    spec.problem(
                        (key,),
                        f"{key} cannot be combined with instance_groups: give either "
                        "instance_groups or instance_type/instance_count",
                    )
                )
    problems.extend(_rehearse_problems(spec))
    if problems:
        raise JobSpecError(problems)


def rehearse_setting(data: Mapping[str, Any]) -> str | None:
    """``rehearse.interruptions`` as the setting's text (a list's items joined), or None."""
    value = (data.get("rehearse") or {}).get("interruptions")
    if value is None:
        return None
    return ",".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _rehearse_problems(spec: JobSpec) -> list[Problem]:
    """``rehearse:`` is for local jobs, and its items are the setting's."""
    setting = rehearse_setting(spec.data)
    if setting is None:
        return []
    path: KeyPath = ("rehearse", "interruptions")
    if spec.instance_type not in LOCAL_INSTANCE_TYPES:
        accepted = ", ".join(LOCAL_INSTANCE_TYPES)
        return [
            spec.problem(
                path,
                f"rehearse applies to local jobs (instance_type {accepted}); this job's "
                f"instance_type is {spec.instance_type!r}",
            )
        ]
    try:
        rehearsal.parse(setting, "rehearse.interruptions")
    except ConfigurationError as exc:
        return [spec.problem(path, str(exc))]
    return []


def _resolve_paths(spec: JobSpec, base_dir: str) -> None:
    data = spec.data

    def resolve(value: str) -> str:
        if arguments.is_uri(value):
            return value
        return os.path.normpath(os.path.join(base_dir, os.path.expanduser(value)))

    if isinstance(data.get("source_dir"), str):
        data["source_dir"] = resolve(data["source_dir"])
    elif isinstance(data.get("entry_point"), str):
        data["entry_point"] = resolve(data["entry_point"])
    if isinstance(data.get("dependencies"), list):
        data["dependencies"] = [resolve(d) for d in data["dependencies"]]


# --------------------------------------------------------------------------- estimator -> spec


def _channel_spec(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, FileSystemInput):
        source = value.config["DataSource"]["FileSystemDataSource"]
        out = {
            "file_system_id": source["FileSystemId"],
            "file_system_type": source["FileSystemType"],
            "directory_path": source["DirectoryPath"],
        }
        if source.get("FileSystemAccessMode", "ro") != "ro":
            out["file_system_access_mode"] = source["FileSystemAccessMode"]
        if value.config.get("ContentType"):
            out["content_type"] = value.config["ContentType"]
        return out
    if isinstance(value, TrainingInput):
        if value.config == TrainingInput(value.uri).config:
            return value.uri
        config = value.config
        source = config["DataSource"]["S3DataSource"]
        out = {"s3_data": source["S3Uri"]}
        fields = {
            "distribution": source.get("S3DataDistributionType"),
            "compression": config.get("CompressionType"),
            "content_type": config.get("ContentType"),
            "record_wrapping": config.get("RecordWrapperType"),
            "s3_data_type": source.get("S3DataType"),
            "instance_groups": source.get("InstanceGroupNames"),
            "input_mode": config.get("InputMode"),
            "attribute_names": source.get("AttributeNames"),
            "target_attribute_name": config.get("TargetAttributeName"),
            "shuffle_config": (config.get("ShuffleConfig") or {}).get("Seed"),
        }
        if fields["s3_data_type"] == "S3Prefix":
            fields["s3_data_type"] = None
        if fields["distribution"] == "FullyReplicated" and not fields["target_attribute_name"]:
            fields["distribution"] = None
        out.update({k: copy.deepcopy(v) for k, v in fields.items() if v is not None})
        return out
    raise ConfigurationError.invalid(
        "inputs", value, "an S3/file URI, a TrainingInput or a FileSystemInput"
    )


def spec_from_arguments(
    values: Mapping[str, Any],
    *,
    framework: str | None = None,
    inputs: Any = None,
    job_name: str | None = None,
    base_dir: str | None = None,
) -> dict[str, Any]:
    """The job spec of an estimator's argument ``values`` as plain data.

    ``values`` are argument name -> stored value (:func:`launchbay.arguments.bound_values`);
    keys at their default are left out. Paths inside ``base_dir`` (the directory
    the spec is written to) are written relative to it. ``framework``, ``inputs``
    and ``job_name`` are included when set (``Estimator.to_yaml`` gives its
    framework and its ``spec_inputs`` and ``spec_job_name``).
    """
    base = os.path.abspath(base_dir or os.getcwd())
    spec: dict[str, Any] = {}
    if framework is not None:
        spec["framework"] = framework
    spec.update(arguments.to_spec(values, base))
    if isinstance(inputs, Mapping):
        spec["inputs"] = {name: _channel_spec(v) for name, v in inputs.items()}
    elif inputs is not None:
        spec["inputs"] = _channel_spec(inputs)
    if job_name is not None:
        spec["job_name"] = job_name
    return spec


def dump(spec: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write ``spec`` (plain data) as YAML; ``$`` is written as ``$$`` so it loads back as is."""
    import yaml

    text = yaml.safe_dump(
        escape(dict(spec)), sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write("# launchbay job spec (docs/jobspec.md)\n")
        f.write(text)
