"""SageMaker SDK defaults files: read as SDK v2 reads them, applied as SDK v2 applies them.

Two files shape every request SDK v2 sends (docs/compatibility.md, "Defaults files"):

* the admin file, ``$SAGEMAKER_ADMIN_CONFIG_OVERRIDE`` else
  ``<first of $XDG_CONFIG_DIRS, else /etc/xdg>/sagemaker/config.yaml``;
* the user file, ``$SAGEMAKER_USER_CONFIG_OVERRIDE`` else
  ``<$XDG_CONFIG_HOME, else ~/.config>/sagemaker/config.yaml``.

Each may be a file, a directory holding ``config.yaml``, or an ``s3://`` URI of
either. They are merged admin first, user second (mappings key by key; any other
value of the user file replaces the admin's). A missing default file is skipped;
a missing override is an error. Each file is checked against launchbay's schema
(``schemas/sagemaker_config.schema.json``) and an invalid one is refused with a
:class:`~launchbay.errors.ConfigurationError` naming the file, the key path and
what is accepted.

SDK v2 local mode's own file, ``~/.sagemaker/config.yaml`` (``local:``
``local_code``, ``container_root``, ``container_config``), is read by
:func:`load_local_mode` for the local Docker backend.

The files are read at the first estimator or session, once per source (the
result is cached by location, size and modification time); yaml, jsonschema and
boto3 are imported only then, never by ``import launchbay``.

Every value taken from a file is logged at INFO on ``launchbay.config``, one line
per key (``Applied value from config key = SageMaker.TrainingJob.RoleArn``), as
SDK v2 logs them on ``sagemaker.config``.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from launchbay.errors import ConfigurationError

__all__ = [
    "ADMIN_ENV",
    "USER_ENV",
    "LOCAL_MODE_ENV",
    "Source",
    "SageMakerConfig",
    "LocalModeConfig",
    "load",
    "from_dict",
    "config_for",
    "estimator_defaults",
    "apply_to_request",
    "load_local_mode",
    "docker_host_options",
    "clear_cache",
]

logger = logging.getLogger("launchbay.config")

ADMIN_ENV = "SAGEMAKER_ADMIN_CONFIG_OVERRIDE"
USER_ENV = "SAGEMAKER_USER_CONFIG_OVERRIDE"
#: launchbay's own override of SDK v2 local mode's ``~/.sagemaker/config.yaml`` (tests, CI).
LOCAL_MODE_ENV = "LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG"
CONFIG_FILE = "config.yaml"

# Key paths (dotted, as SDK v2 names them in its log lines).
ROLE_ARN = "SageMaker.TrainingJob.RoleArn"
OUTPUT_KMS_KEY = "SageMaker.TrainingJob.OutputDataConfig.KmsKeyId"
VOLUME_KMS_KEY = "SageMaker.TrainingJob.ResourceConfig.VolumeKmsKeyId"
SUBNETS = "SageMaker.TrainingJob.VpcConfig.Subnets"
SECURITY_GROUP_IDS = "SageMaker.TrainingJob.VpcConfig.SecurityGroupIds"
INTER_CONTAINER_ENCRYPTION = "SageMaker.TrainingJob.EnableInterContainerTrafficEncryption"
NETWORK_ISOLATION = "SageMaker.TrainingJob.EnableNetworkIsolation"
ENVIRONMENT = "SageMaker.TrainingJob.Environment"
DISABLE_PROFILER = "SageMaker.TrainingJob.ProfilerConfig.DisableProfiler"
TAGS = "SageMaker.TrainingJob.Tags"
DEBUG_HOOK_CONFIG = "SageMaker.PythonSDK.Modules.Estimator.DebugHookConfig"
DEFAULT_S3_BUCKET = "SageMaker.PythonSDK.Modules.Session.DefaultS3Bucket"
DEFAULT_S3_PREFIX = "SageMaker.PythonSDK.Modules.Session.DefaultS3ObjectKeyPrefix"

#: Estimator argument -> the key that fills it when it is not given (or given as None).
ESTIMATOR_KEYS: dict[str, str] = {
    "role": ROLE_ARN,
    "output_kms_key": OUTPUT_KMS_KEY,
    "encrypt_inter_container_traffic": INTER_CONTAINER_ENCRYPTION,
    "debugger_hook_config": DEBUG_HOOK_CONFIG,
    "enable_network_isolation": NETWORK_ISOLATION,
    "disable_profiler": DISABLE_PROFILER,
    "environment": ENVIRONMENT,
}

#: Every key launchbay applies (``launchbay config show`` lists these).
APPLIED_KEYS = (
    ROLE_ARN,
    SUBNETS,
    SECURITY_GROUP_IDS,
    OUTPUT_KMS_KEY,
    VOLUME_KMS_KEY,
    INTER_CONTAINER_ENCRYPTION,
    NETWORK_ISOLATION,
    ENVIRONMENT,
    DISABLE_PROFILER,
    TAGS,
    DEBUG_HOOK_CONFIG,
    DEFAULT_S3_BUCKET,
    DEFAULT_S3_PREFIX,
)


@dataclass(frozen=True)
class Source:
    """One place defaults were looked for: ``kind`` is ``admin``, ``user`` or ``argument``."""

    kind: str
    location: str
    #: The variable that named it (``SAGEMAKER_USER_CONFIG_OVERRIDE``), or None for the default.
    variable: str | None = None
    #: Whether a non-empty file was found and applied.
    loaded: bool = False

    def describe(self) -> str:
        via = f" (from {self.variable})" if self.variable else ""
        return f"{self.kind} config {self.location}{via}"


@dataclass
class SageMakerConfig:
    """The merged defaults and where each of their leaves came from."""

    data: dict[str, Any] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)
    origins: dict[str, Source] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.data)

    def get(self, path: str) -> Any:
        """A deep copy of the value at the dotted ``path``, or None."""
        node: Any = self.data
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return copy.deepcopy(node)

    def origin(self, path: str) -> Source | None:
        """The source of the value at ``path`` (the last file that set it)."""
        if path in self.origins:
            return self.origins[path]
        found = [s for p, s in self.origins.items() if p.startswith(path + ".")]
        return found[-1] if found else None


# --------------------------------------------------------------------------- reading


def _admin_default() -> str:
    dirs = os.environ.get("XDG_CONFIG_DIRS", "").strip() or "/etc/xdg"
    first = dirs.split(os.pathsep)[0] or "/etc/xdg"
    return os.path.join(os.path.expanduser(first), "sagemaker", CONFIG_FILE)


def _user_default() -> str:
    home = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.join("~", ".config")
    return os.path.join(os.path.expanduser(home), "sagemaker", CONFIG_FILE)


def sources() -> list[Source]:
    """Where the admin and user files are looked for now (environment read at each call)."""
    out = []
    for kind, env, default in (
        ("admin", ADMIN_ENV, _admin_default),
        ("user", USER_ENV, _user_default),
    ):
        override = os.environ.get(env)
        if override is not None:
            out.append(Source(kind, override, env))
        else:
            out.append(Source(kind, default()))
    return out


_lock = threading.Lock()
_cache: dict[Any, Any] = {}
_schema: dict[str, Any] | None = None
_validator: Any = None


def clear_cache() -> None:
    """Forget every file read (the next estimator or session reads them again)."""
    with _lock:
        _cache.clear()


def _file_key(path: str) -> Any:
    try:
        st = os.stat(path)
    except OSError:
        return (path, None)
    return (path, st.st_mtime_ns, st.st_size, st.st_ino)


_WHAT = "the SageMaker config file"
_LOCAL_WHAT = "the SageMaker local mode config file"


def _refused(
    exc: Any, variable: str | None, location: str, what: str = _WHAT
) -> ConfigurationError:
    """The bounded reader's refusal as the defaults files' error (file, variable, accepted)."""
    via = f" (from {variable})" if variable else ""
    reason = f"{exc.reason} (docs/jobspec.md, Limits)"
    if exc.reason.startswith("invalid YAML: "):
        reason = (
            f"it is not valid YAML ({exc.reason.removeprefix('invalid YAML: ')}). Accepted: a "
            "YAML mapping (docs/compatibility.md, Defaults files)"
        )
    return ConfigurationError(
        f"Invalid {what.removeprefix('the ')} {exc.where}{via}: {reason}.",
        argument=variable or exc.filename,
        value=location,
    )


def _read_yaml(path: str, variable: str | None, location: str, what: str = _WHAT) -> Any:
    """The file at ``path`` through the one bounded YAML reader (launchbay._yamlfile)."""
    from launchbay import _yamlfile

    try:
        return _yamlfile.read(path, what=what)
    except _yamlfile.YamlFileError as exc:
        raise _refused(exc, variable, location, what) from None


def _read_local(source: Source) -> Any:
    path = os.path.expanduser(source.location)
    if os.path.isdir(path):
        path = os.path.join(path, CONFIG_FILE)
    if not os.path.exists(path):
        if source.variable is None:
            return None  # a default location with no file: nothing to apply
        raise ConfigurationError(
            f"Invalid {source.variable}={source.location!r}: there is no file there (nor a "
            f"directory holding {CONFIG_FILE}). Accepted: the path of a SageMaker config file, a "
            f"directory holding {CONFIG_FILE}, or an s3:// URI of either.",
            argument=source.variable,
            value=source.location,
        )
    key = ("file", *_file_key(path))
    with _lock:
        if key in _cache:
            return copy.deepcopy(_cache[key])
    content = _read_yaml(path, source.variable, source.location)
    if content:
        validate(content, path)
    with _lock:
        _cache[key] = content
    return copy.deepcopy(content)


def _read_s3(source: Source, boto_session: Any = None) -> Any:
    key = ("s3", source.location)
    with _lock:
        if key in _cache:
            return copy.deepcopy(_cache[key])
    from launchbay import _yamlfile, transfer
    from launchbay.s3uri import parse_s3_uri

    boto3 = transfer.import_boto3("Reading a SageMaker config file from S3")
    import botocore.exceptions  # heavy: only for s3:// config files

    variable = source.variable or source.kind
    bucket, prefix = parse_s3_uri(source.location, argument=variable)
    session = boto_session or boto3.Session()
    # As SDK v2: the object at the URI, or the prefix's config.yaml. Looked up by key
    # (HeadObject), never by listing: a prefix with thousands of objects is read the same.
    base = prefix.rstrip("/")
    directory = f"{base}/{CONFIG_FILE}" if base else CONFIG_FILE
    candidates = [directory] + ([prefix] if prefix and prefix != directory else [])
    chosen: str | None = None
    try:
        s3 = session.client("s3")
        for candidate in candidates:
            try:
                head = s3.head_object(Bucket=bucket, Key=candidate)
            except botocore.exceptions.ClientError as exc:
                code = str(exc.response.get("Error", {}).get("Code", ""))
                if code in ("404", "NoSuchKey", "NotFound"):
                    continue
                raise
            chosen = candidate
            break
        if chosen is None:
            listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
            raise ConfigurationError(
                f"Invalid {variable}={source.location!r}: "
                + (
                    "no S3 object has that key or prefix"
                    if not listed.get("Contents")
                    else f"it is neither an object nor a prefix holding {CONFIG_FILE}"
                )
                + f". Accepted: the s3:// URI of a config file, or of a prefix holding {CONFIG_FILE}.",
                argument=variable,
                value=source.location,
            )
        where = f"s3://{bucket}/{chosen}"
        body = s3.get_object(Bucket=bucket, Key=chosen)["Body"]
        try:
            # Never more than one byte past the limit, whatever the object's size.
            raw = _yamlfile.read_stream(body, where, what=_WHAT, size=head.get("ContentLength"))
        finally:
            body.close()
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise ConfigurationError(
            f"Could not read the SageMaker config file {source.location} ({variable}): {exc}. "
            "Accepted: an s3:// URI these AWS credentials can read.",
            argument=variable,
            value=source.location,
        ) from exc
    except _yamlfile.YamlFileError as exc:
        raise _refused(exc, source.variable, source.location) from None
    try:
        content = _yamlfile.load(_yamlfile.decode(raw, where, what=_WHAT), where, what=_WHAT)
    except _yamlfile.YamlFileError as exc:
        raise _refused(exc, source.variable, source.location) from None
    if content:
        validate(content, where)
    with _lock:
        _cache[key] = content
    return copy.deepcopy(content)


def _merge(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """Mappings merged key by key; any other value of ``other`` replaces ``into``'s."""
    for key, value in other.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _leaves(value: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(value, Mapping) and value:
        for key, sub in value.items():
            yield from _leaves(sub, f"{prefix}.{key}" if prefix else str(key))
    elif prefix:
        yield prefix


def load(boto_session: Any = None) -> SageMakerConfig:
    """The admin file merged with the user file (the user's values win); see the module doc.

    Raises:
        ConfigurationError: an override names nothing, a file cannot be read, is not
            YAML, or does not match the schema (the file, key path and what is accepted).
    """
    config = SageMakerConfig()
    for source in sources():
        if source.location.startswith("s3://"):
            content = _read_s3(source, boto_session)
        else:
            content = _read_local(source)
        if content:
            loaded = Source(source.kind, source.location, source.variable, loaded=True)
            _merge(config.data, content)
            for leaf in _leaves(content):
                config.origins.pop(leaf, None)
                config.origins[leaf] = loaded
            config.sources.append(loaded)
            logger.debug("Fetched defaults config from location: %s", source.location)
        else:
            config.sources.append(source)
            logger.debug("Not applying SDK defaults from location: %s", source.location)
    return config


def from_dict(values: Mapping[str, Any]) -> SageMakerConfig:
    """A config given as a dict (``Session(sagemaker_config=...)``), checked like a file."""
    source = Source("argument", "sagemaker_config", None, loaded=True)
    validate(values, "sagemaker_config")
    data = copy.deepcopy(dict(values))
    return SageMakerConfig(data, [source], {leaf: source for leaf in _leaves(data)})


def config_for(session: Any) -> SageMakerConfig:
    """The defaults a session carries (``session.sagemaker_config``), else the files'."""
    if session is not None:
        carried = getattr(session, "sagemaker_defaults", None)
        if isinstance(carried, SageMakerConfig):
            return carried
        carried = getattr(session, "sagemaker_config", None)
        if isinstance(carried, SageMakerConfig):
            return carried
        if isinstance(carried, Mapping):
            return from_dict(carried)
    return load()


# --------------------------------------------------------------------------- the schema


def schema() -> dict[str, Any]:
    """launchbay's JSON Schema (2020-12) of a SageMaker defaults file."""
    global _schema
    if _schema is None:
        path = os.path.join(os.path.dirname(__file__), "schemas", "sagemaker_config.schema.json")
        with open(path, encoding="utf-8") as f:
            _schema = json.load(f)
    return _schema


def _accepted(error: Any) -> str:
    spec = error.schema if isinstance(error.schema, Mapping) else {}
    kind = error.validator
    if "x-accepted" in spec:
        return str(spec["x-accepted"])
    if kind == "additionalProperties":
        names = sorted(spec.get("properties", {}))
        if names:
            return "the keys " + ", ".join(names)
        patterns = list(spec.get("patternProperties", {}))
        return "keys matching " + " or ".join(patterns)
    if kind == "type":
        return f"a value of type {error.validator_value}"
    if kind == "enum":
        return "one of " + ", ".join(repr(v) for v in error.validator_value)
    if kind == "required":
        return "a mapping with " + ", ".join(repr(v) for v in error.validator_value)
    if kind == "pattern":
        return f"a string matching {error.validator_value}"
    if kind in ("minLength", "maxLength", "minItems", "maxItems", "maxProperties"):
        return f"{kind} {error.validator_value}"
    return str(spec.get("type", "a value of the documented form"))


def _short(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters (a value shown in a message stays one line long)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def validate(values: Any, where: str) -> None:
    """Check ``values`` (a file's content) against :func:`schema`.

    Raises:
        ConfigurationError: naming ``where``, the key path, the value and what is accepted.
    """
    global _validator
    import jsonschema  # heavy: only when a defaults file exists

    if _validator is None:
        _validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(_validator.iter_errors(values))
    if error is None:
        return
    path = ".".join(str(p) for p in error.absolute_path) or "<top level>"
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        if extra and allowed:
            path = ".".join([*(str(p) for p in error.absolute_path), str(extra[0])])
    value = error.instance if error.validator != "additionalProperties" else None
    shown = "" if value is None or isinstance(value, Mapping) else f" = {_short(repr(value))}"
    raise ConfigurationError(
        f"Invalid SageMaker config file {where}: {path}{shown}: {_short(error.message)}. "
        f"Accepted: {_accepted(error)} (docs/compatibility.md, Defaults files).",
        argument=path,
        value=value,
    )


# --------------------------------------------------------------------------- applying


def _applied(path: str, config: SageMakerConfig) -> None:
    source = config.origin(path)
    where = f" ({source.location})" if source is not None else ""
    logger.info("Applied value from config key = %s%s", path, where)


def _given(cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> set[str]:
    """Argument names given a value other than None (v1 names under their v2 names)."""
    from launchbay import arguments  # same layer; imported here to keep import light

    names = dict(zip(getattr(cls, "_positional", ()), args, strict=False))
    renamed = arguments.v1_names()
    for name, value in kwargs.items():
        names[renamed.get(name, name)] = value
    return {name for name, value in names.items() if value is not None}


def estimator_defaults(
    cls: type, args: tuple[Any, ...], kwargs: Mapping[str, Any], raw: dict[str, Any]
) -> dict[str, Any]:
    """``raw`` (bound arguments) with the defaults files' values where none was given.

    As SDK v2's ``EstimatorBase.__init__``: the role, output KMS key,
    inter-container encryption, network isolation, profiler switch, environment
    and the debugger hook switch each come from their key when the argument is
    not given (or None); the VPC when neither ``subnets`` nor
    ``security_group_ids`` (nor launchbay's ``vpc_config``) is given. The volume
    KMS key and tags are the request's (:func:`apply_to_request`).
    """
    config = config_for(raw.get("sagemaker_session"))
    if not config:
        return raw
    given = _given(cls, args, kwargs)
    out = dict(raw)
    for argument, path in ESTIMATOR_KEYS.items():
        if argument in given or argument not in out:
            continue
        value = config.get(path)
        if value is None:
            continue
        out[argument] = value
        _applied(path, config)
    if not given & {"subnets", "security_group_ids", "vpc_config"} and "subnets" in out:
        subnets, groups = config.get(SUBNETS), config.get(SECURITY_GROUP_IDS)
        if (subnets is None) != (groups is None):
            have, missing = (
                (SUBNETS, SECURITY_GROUP_IDS) if groups is None else (SECURITY_GROUP_IDS, SUBNETS)
            )
            source = config.origin(have)
            raise ConfigurationError(
                f"Invalid SageMaker config file {source.location if source else ''}: {have} is "
                f"set but {missing} is not. Accepted: a VpcConfig with both Subnets and "
                "SecurityGroupIds (or neither), or pass subnets and security_group_ids.",
                argument=missing,
            )
        if subnets is not None:
            out["subnets"], out["security_group_ids"] = subnets, groups
            _applied(SUBNETS, config)
            _applied(SECURITY_GROUP_IDS, config)
    return out


def supports_volume_kms(instance_type: str) -> bool:
    """Whether SageMaker attaches an EBS volume (and so a volume KMS key) to ``instance_type``.

    As SDK v2 decides: not for local types, nor for families with instance storage
    (a ``d`` in the family: ``ml.p4d``, ``ml.c5d``, ``ml.g4dn``), nor ``g5``, ``g6``,
    ``p5`` and ``trn1`` families.
    """
    if instance_type.startswith("local"):
        return False
    parts = instance_type.split(".")
    if len(parts) == 3 and parts[0] == "ml":
        parts = parts[1:]
    if len(parts) != 2:
        return True  # not an instance type launchbay accepts; its own check says so
    family = parts[0]
    return "d" not in family and not family.startswith(("g5", "g6", "p5", "trn1"))


def apply_to_request(request: dict[str, Any], config: SageMakerConfig) -> dict[str, Any]:
    """The defaults SDK v2's ``Session.get_train_request`` merges into the finished request.

    * ``ResourceConfig.VolumeKmsKeyId`` when none was given, except for an instance
      type without an EBS volume (:func:`supports_volume_kms`);
    * ``Tags``: the file's tags appended, except those whose Key the job's tags
      already have (the job's win).
    """
    if not config:
        return request
    resources = request.get("ResourceConfig", {})
    key = config.get(VOLUME_KMS_KEY)
    if key is not None and "VolumeKmsKeyId" not in resources:
        instance_type = resources.get("InstanceType")
        if instance_type is None or supports_volume_kms(instance_type):
            request.setdefault("ResourceConfig", {})["VolumeKmsKeyId"] = key
            _applied(VOLUME_KMS_KEY, config)
    tags = config.get(TAGS)
    if tags:
        merged = list(request.get("Tags") or [])
        have = {tag.get("Key") for tag in merged}
        added = [tag for tag in tags if tag["Key"] not in have]
        if added:
            request["Tags"] = merged + added
            source = config.origin(TAGS)
            logger.info(
                "Applied value(s) from config key = %s%s",
                TAGS,
                f" ({source.location})" if source else "",
            )
    return request


def session_default(path: str, given: Any, config: SageMakerConfig) -> Any:
    """``given`` if not None, else the value at ``path`` (logged when applied)."""
    if given is not None:
        return given
    value = config.get(path)
    if value is not None:
        _applied(path, config)
    return value


# --------------------------------------------------------------------------- local mode

#: ``local.container_config`` keys (Compose service options) -> ``create_host_config`` kwargs.
DOCKER_HOST_OPTIONS: dict[str, str] = {
    "shm_size": "shm_size",
    "mem_limit": "mem_limit",
    "memswap_limit": "memswap_limit",
    "mem_reservation": "mem_reservation",
    "cpu_shares": "cpu_shares",
    "cpuset": "cpuset_cpus",
    "pids_limit": "pids_limit",
    "ulimits": "ulimits",
    "privileged": "privileged",
    "cap_add": "cap_add",
    "cap_drop": "cap_drop",
    "security_opt": "security_opt",
    "sysctls": "sysctls",
    "ipc": "ipc_mode",
    "tmpfs": "tmpfs",
    "group_add": "group_add",
    "dns": "dns",
    "runtime": "runtime",
    "oom_kill_disable": "oom_kill_disable",
}


@dataclass(frozen=True)
class LocalModeConfig:
    """SDK v2 local mode's ``local:`` section, from ``path``."""

    path: str
    local_code: bool | None = None
    container_root: str | None = None
    container_config: dict[str, Any] = field(default_factory=dict)
    region_name: str | None = None
    serving_port: int | None = None


def local_mode_path() -> str:
    """``$LAUNCHBAY_SAGEMAKER_LOCAL_CONFIG``, else ``~/.sagemaker/config.yaml``."""
    return os.environ.get(LOCAL_MODE_ENV) or os.path.join(
        os.path.expanduser("~"), ".sagemaker", CONFIG_FILE
    )


_LOCAL_TYPES = {
    "local_code": (bool, "true or false"),
    "container_root": (str, "a directory path"),
    "container_config": (dict, "a mapping of Docker Compose service options"),
    "region_name": (str, "an AWS region name"),
    "serving_port": (int, "a port number"),
}


def load_local_mode() -> LocalModeConfig | None:
    """The local-mode file's ``local:`` section, or None when there is no such file.

    Raises:
        ConfigurationError: the file is not YAML, or a key has the wrong type, or
            ``container_config`` holds an option launchbay cannot give Docker.
    """
    path = local_mode_path()
    try:
        os.stat(path)
    except FileNotFoundError:
        return None  # no file (or a link to none): nothing to apply, as SDK v2
    except OSError:
        pass  # the reader names what is wrong
    key = ("local", *_file_key(path))
    with _lock:
        if key in _cache:
            return _cache[key]
    variable = LOCAL_MODE_ENV if os.environ.get(LOCAL_MODE_ENV) else None
    content = _read_yaml(path, variable, path, _LOCAL_WHAT)
    section = content.get("local") if isinstance(content, Mapping) else None
    if content is not None and not isinstance(section, Mapping):
        raise ConfigurationError(
            f"Invalid SageMaker local mode config file {path}: it has no 'local' mapping. "
            "Accepted: local: {local_code, container_root, container_config, region_name, "
            "serving_port}.",
            argument="local",
            value=section,
        )
    values: dict[str, Any] = {}
    for name, value in (section or {}).items():
        if name not in _LOCAL_TYPES:
            logger.warning("Ignoring unknown key local.%s in %s", name, path)
            continue
        kind, accepted = _LOCAL_TYPES[name]
        if value is None:
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigurationError(
                f"Invalid SageMaker local mode config file {path}: local.{name} = {value!r}. "
                f"Accepted: {accepted}.",
                argument=f"local.{name}",
                value=value,
            )
        values[name] = value
    docker_host_options(values.get("container_config") or {}, path)  # refuse early
    result = LocalModeConfig(path, **values)
    with _lock:
        _cache[key] = result
    return result


def _ulimits(value: Any, where: str) -> list[Any]:
    from docker.types import Ulimit  # heavy: only for local Docker jobs with ulimits

    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"Invalid SageMaker local mode config file {where}: local.container_config.ulimits "
            f"= {value!r}. Accepted: a mapping of name to a number or {{soft, hard}}.",
            argument="local.container_config.ulimits",
            value=value,
        )
    out = []
    for name, limit in value.items():
        if isinstance(limit, Mapping):
            soft, hard = limit.get("soft"), limit.get("hard")
            out.append(Ulimit(name=name, soft=soft, hard=hard))  # type: ignore[arg-type]  # docker takes None (unset bound); types-docker says int
        else:
            out.append(Ulimit(name=name, soft=limit, hard=limit))
    return out


def docker_host_options(container_config: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``local.container_config`` as ``APIClient.create_host_config`` keyword arguments.

    Raises:
        ConfigurationError: an option with no Docker host setting (the file, the key
            and the accepted options are named); launchbay sets the image, command,
            volumes, networks, environment and entry point itself.
    """
    out: dict[str, Any] = {}
    for name, value in container_config.items():
        if name not in DOCKER_HOST_OPTIONS:
            raise ConfigurationError(
                f"Invalid SageMaker local mode config file {where}: local.container_config."
                f"{name} is not an option launchbay gives Docker. Accepted: "
                + ", ".join(sorted(DOCKER_HOST_OPTIONS))
                + " (docs/compatibility.md, Local mode file).",
                argument=f"local.container_config.{name}",
                value=value,
            )
        target = DOCKER_HOST_OPTIONS[name]
        if name == "ulimits":
            out[target] = value  # turned into docker.types.Ulimit by host_options_for_docker
        elif name == "shm_size" and not isinstance(value, (str, int)):
            raise ConfigurationError(
                f"Invalid SageMaker local mode config file {where}: local.container_config."
                f"shm_size = {value!r}. Accepted: a size such as '8g' or a number of bytes.",
                argument="local.container_config.shm_size",
                value=value,
            )
        else:
            out[target] = value
    return out


def host_options_for_docker(where: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`docker_host_options`' result ready for the Docker SDK (ulimits as objects)."""
    out = dict(options)
    if "ulimits" in out:
        out["ulimits"] = _ulimits(out["ulimits"], where)
    return out


# --------------------------------------------------------------------------- launchbay config show

_LOCAL_NOTES = {
    "container_config": "applied to every local Docker container (instance_type local/local_gpu)",
    "local_code": "no effect: local jobs always use the code on this machine (file://)",
    "container_root": "not applied: local job directories stay under $LAUNCHBAY_HOME/jobs "
    "(set LAUNCHBAY_HOME to move them)",
    "region_name": "not applied: launchbay takes the region from the session or AWS settings",
    "serving_port": "not applied: launchbay does not serve models",
}


#: Names whose values SDK v2's config log lines show as ``***`` (``config_utils``).
_SENSITIVE = re.compile(r"(secret|password|key|token)", re.IGNORECASE)
MASK = "***"


def masked(value: Any) -> Any:
    """``value`` with the entries of a mapping whose name looks secret shown as ``***``.

    As SDK v2 logs a config value (``sagemaker.config.config_utils``): each key of a
    mapping that holds ``secret``, ``password``, ``key`` or ``token`` (any case) has its
    value replaced; other values are kept.
    """
    if isinstance(value, Mapping):
        return {k: MASK if _SENSITIVE.search(str(k)) else v for k, v in value.items()}
    return value


def describe(*, show_values: bool = False) -> dict[str, Any]:
    """What ``launchbay config show`` prints: sources, effective defaults and their origin.

    Values of mappings whose names look secret (``Environment.API_TOKEN``) are ``***``
    (:func:`masked`) unless ``show_values``.
    """
    shown = (lambda value: value) if show_values else masked
    config = load()
    defaults = []
    for path in APPLIED_KEYS:
        value = config.get(path)
        if value is None:
            continue
        source = config.origin(path)
        defaults.append(
            {
                "key": path,
                "value": shown(value),
                "source": source.location if source else None,
                "kind": source.kind if source else None,
            }
        )
    applied = set(APPLIED_KEYS)
    unused = sorted(
        leaf
        for leaf in config.origins
        if leaf != "SchemaVersion"
        and not any(leaf == k or leaf.startswith(k + ".") for k in applied)
    )
    local_path = local_mode_path()
    local = load_local_mode()
    local_values = []
    if local is not None:
        for name in (
            "container_config",
            "local_code",
            "container_root",
            "region_name",
            "serving_port",
        ):
            value = getattr(local, name)
            if value in (None, {}):
                continue
            local_values.append(
                {"key": f"local.{name}", "value": shown(value), "effect": _LOCAL_NOTES[name]}
            )
    return {
        "sources": [
            {
                "kind": s.kind,
                "location": s.location,
                "variable": s.variable,
                "loaded": s.loaded,
            }
            for s in config.sources
        ],
        "defaults": defaults,
        "not_used_by_launchbay": unused,
        "local_mode": {"path": local_path, "found": local is not None, "values": local_values},
    }


def describe_text(described: Mapping[str, Any]) -> list[str]:
    """:func:`describe` as lines for people."""
    lines = ["SageMaker SDK defaults files (admin first; the user file's values win):"]
    for s in described["sources"]:
        via = f" (from {s['variable']})" if s["variable"] else " (default location)"
        state = "read" if s["loaded"] else "nothing to apply (missing or empty)"
        lines.append(f"  {s['kind']:<5} {s['location']}{via}: {state}")
    lines.append("Effective defaults:")
    if not described["defaults"]:
        lines.append("  (none)")
    for d in described["defaults"]:
        value = json.dumps(d["value"]) if not isinstance(d["value"], str) else d["value"]
        lines.append(f"  {d['key']} = {value}  [{d['kind']}: {d['source']}]")
    if described["not_used_by_launchbay"]:
        lines.append("In the files but not used by launchbay (training jobs only):")
        lines.extend(f"  {key}" for key in described["not_used_by_launchbay"])
    local = described["local_mode"]
    lines.append(
        f"SDK v2 local mode file: {local['path']}: " + ("read" if local["found"] else "not found")
    )
    for v in local["values"]:
        value = json.dumps(v["value"]) if not isinstance(v["value"], str) else v["value"]
        lines.append(f"  {v['key']} = {value}  [{v['effect']}]")
    return lines
