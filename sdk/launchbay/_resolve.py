"""Resolution: what an estimator's job needs beyond its arguments, found once per job.

Functions over the bound arguments (an estimator, typed as
:class:`~launchbay._bound.BoundArguments`), called by the estimator's dry run and
``fit()`` and by whoever builds a job from an estimator: the job's name (given, or
claimed from a base: :mod:`launchbay._names`, :func:`job_name`), its
:func:`region` and :func:`role_arn`, the output path (:func:`default_output_path`)
and where the code archive is stored (:func:`code_location`, :func:`code_uri`), the
packaged code (:func:`package_code`) and its staging (:func:`stage`), the debugger
and profiler request fields (:func:`debugger_fields`; region tables in
:mod:`launchbay._regions`), and, for ``local_process``, whether this Python has the
framework asked for (:func:`check_installed_framework`).

What differs between estimator classes stays a method of the class, called here
through the object: the image (``training_image_uri()``) and whether the default
debugger hook is kept (``_debugger_allowed()``).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from launchbay import _request, arguments, code
from launchbay._bound import BoundArguments
from launchbay._home import usable_local_home
from launchbay._instances import version_tuple
from launchbay._names import base_name_from_image, name_from_base, validate_job_name
from launchbay._regions import FRAMEWORK_DISTRIBUTIONS, LOCAL_MODULES
from launchbay.s3uri import is_s3_uri, parse_s3_uri

__all__ = [
    "check_installed_framework",
    "code_location",
    "code_uri",
    "debugger_fields",
    "default_output_path",
    "instance_types",
    "job_name",
    "local_home_uri",
    "notice_local_rules",
    "package_code",
    "region",
    "request_spec",
    "role_arn",
    "stage",
    "stage_rule_sources",
]

logger = logging.getLogger(__name__)


def request_spec(args: BoundArguments, **resolved: Any) -> _request.RequestSpec:
    """The request spec: the fields the estimator's arguments fill, and what was resolved.

    The argument -> request field mapping is the declaration's
    (:func:`launchbay.arguments.request_fields`), for the dry check at
    construction and for the job's plan.
    """
    return _request.RequestSpec(fields=arguments.request_fields(args), **resolved)


def job_name(args: BoundArguments, given: str | None) -> str:
    """``given`` (checked), else a name claimed from ``base_job_name`` or the image's name."""
    if given is not None:
        return validate_job_name(given)
    base = args.base_job_name or base_name_from_image(args.training_image_uri())
    return name_from_base(base)


def default_output_path(args: BoundArguments) -> tuple[str, bool]:
    """(output_path, whether it came from the session's default bucket and prefix)."""
    if args.output_path is not None:
        return args.output_path, False
    if args.is_local:
        return local_home_uri("output") + "/", False
    session = args.session
    prefix = session.default_bucket_prefix
    path = f"s3://{session.default_bucket_name()}/"
    if prefix:
        path += prefix.strip("/") + "/"
    return path, True


def code_location(args: BoundArguments, output_path: str, from_default: bool) -> tuple[str, str]:
    """(bucket-or-file-root, key prefix) under which the code tarball is stored."""
    if args.code_location is not None:
        location = args.code_location
    elif args.is_local and not output_path.startswith("s3://"):
        return local_home_uri(), ""
    elif output_path.startswith("s3://") and from_default:
        location = output_path
    elif output_path.startswith("s3://"):
        bucket, _ = parse_s3_uri(output_path, argument="output_path")
        return bucket, ""
    else:
        location = output_path
    if location.startswith("s3://"):
        bucket, key = parse_s3_uri(location, argument="code_location")
        return bucket, key.strip("/")
    return location.rstrip("/"), ""


def package_code(args: BoundArguments) -> Any:
    """The estimator's code packaged in memory (:func:`launchbay.code.package_code`)."""
    assert args.entry_point is not None, "only a job with an entry point packages code"
    return code.package_code(args.entry_point, args.source_dir, args.dependencies)


def code_uri(bundle: Any, root: str, prefix: str) -> str:
    """Where the code archive ``bundle`` is stored under ``root`` (:func:`code_location`)."""
    if root.startswith("file://"):
        return f"{root}/source/{bundle.sha256}/sourcedir.tar.gz"
    return code.code_s3_uri(root, prefix, bundle)


def region(args: BoundArguments) -> str:
    """The job's region: the session's; for a local job made without one, the environment's."""
    if args.is_local and args.sagemaker_session is None:
        # Local runs need no AWS: take the configured region if any, never ask boto3.
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return args.session.boto_region_name


def role_arn(args: BoundArguments) -> str:
    """The role's ARN (a role name expanded by the session for a SageMaker job)."""
    if args.role is None:
        return "arn:aws:iam::000000000000:role/launchbay-local"
    if "/" in args.role or args.is_local:
        return args.role
    return args.session.expand_role(args.role)


def debugger_fields(
    args: BoundArguments, region: str, output_path: str, job_name: str
) -> dict[str, Any]:
    """The Debugger and profiler request fields, as SDK v2 fills them (docs/debugger.md).

    ``DebugHookConfig``, ``DebugRuleConfigurations``, ``ProfilerConfig`` and
    ``ProfilerRuleConfigurations``, by :func:`launchbay.debugger.requests.debugger_fields`.
    A custom rule's local ``source`` is named by its content-addressed S3 key (the
    default bucket's), uploaded by :func:`stage`; a local job keeps the path.
    """
    from launchbay.debugger import requests

    def source_uri(rule: str, path: str) -> str:
        prefix = (args.session.default_bucket_prefix or "").strip("/")
        key = "/".join(p for p in (prefix, requests.source_key(rule, path)) if p)
        return f"s3://{args.session.default_bucket_name()}/{key}"

    return requests.debugger_fields(
        rules=getattr(args, "rules", None),
        hook=args.debugger_hook_config,
        profiler_config=getattr(args, "profiler_config", None),
        disable_profiler=bool(args.disable_profiler),
        region=region,
        output_path=output_path,
        job_name=job_name,
        instance_types=instance_types(args),
        debugger_allowed=args._debugger_allowed(),  # the estimator class's hook
        source_uri=None if args.is_local else source_uri,
        rule_name=name_from_base,
    )


def notice_local_rules(args: BoundArguments) -> None:
    """A local job evaluates its rules on this machine, with smdebug (docs/debugger.md)."""
    rules = getattr(args, "rules", None)
    if rules and args.is_local:
        import importlib.util

        names = ", ".join(rule.name for rule in rules)
        if importlib.util.find_spec("smdebug") is None:
            logger.warning(
                "Debugger rules %s need smdebug on this machine, which is not installed: "
                "the job runs and the rules end in Error. Accepted: pip install "
                "'launchbay[debugger]' (docs/debugger.md).",
                names,
            )
        else:
            logger.info("Debugger rules %s are evaluated on this machine.", names)


def stage_rule_sources(args: BoundArguments, request: dict[str, Any]) -> None:
    """Upload each custom rule's local ``source`` to the key the request names (once)."""
    from launchbay.debugger.requests import rule_sources

    local = rule_sources(getattr(args, "rules", None))
    entries = (request.get("DebugRuleConfigurations") or []) + (
        request.get("ProfilerRuleConfigurations") or []
    )
    for entry in entries:
        path = local.get(entry["RuleConfigurationName"])
        uri = (entry.get("RuleParameters") or {}).get("source_s3_uri")
        if path is None or not isinstance(uri, str) or not is_s3_uri(uri):
            continue
        args.session.default_bucket()
        bucket, key = parse_s3_uri(uri, argument="source")
        if not args.session.object_exists(bucket, key):
            args.session.upload_file(path, bucket, key)


def instance_types(args: BoundArguments) -> list[str]:
    """Each group's instance type, or the instance type ("" where none was given)."""
    if args.instance_groups:
        return [g.instance_type or "" for g in args.instance_groups]
    return [args.instance_type or ""]


def stage(args: BoundArguments, request: dict[str, Any], bundle: Any, code_uri: str | None) -> None:
    """Create the default bucket if the job uses it, and store the code once."""
    output = request["OutputDataConfig"]["S3OutputPath"]
    s3_code = code_uri if bundle is not None and is_s3_uri(code_uri) else None
    buckets = {parse_s3_uri(output, argument="output_path")[0]} if is_s3_uri(output) else set()
    if s3_code is not None:
        buckets.add(parse_s3_uri(s3_code, argument="code_location")[0])
    if buckets and (args.output_path is None or args.code_location is None):
        if args.session.default_bucket_name() in buckets:
            args.session.default_bucket()
    notice_local_rules(args)
    stage_rule_sources(args, request)
    if s3_code is not None:
        code_bucket = parse_s3_uri(s3_code, argument="code_location")[0]
        same_bucket = is_s3_uri(output) and parse_s3_uri(output)[0] == code_bucket
        kms_key = args.output_kms_key if same_bucket else None
        code.stage_code(args.session, bundle, s3_code, kms_key=kms_key)
    elif bundle is not None and code_uri and code_uri.startswith("file://"):
        code.stage_code_file(bundle, code_uri)


def check_installed_framework(args: BoundArguments, *, stacklevel: int = 2) -> None:
    """local_process runs this Python: warn when its framework differs from the asked one.

    ``stacklevel`` is the warnings' (2: this function's caller).
    """
    import importlib.metadata

    framework = args._framework_name
    wanted = getattr(args, "framework_version", None)
    if not framework or not wanted:
        return
    package = LOCAL_MODULES.get(framework, framework)
    # The module comes from several distributions (tensorflow-cpu on PyPI, ...).
    installed = None
    for distribution in FRAMEWORK_DISTRIBUTIONS.get(package, (package,)):
        try:
            installed = importlib.metadata.version(distribution)
            break
        except importlib.metadata.PackageNotFoundError:
            continue
    if installed is None:
        warnings.warn(
            f"framework_version={wanted!r} asks for {framework}, but {package} is not "
            "installed in this Python; the local_process job runs here.",
            UserWarning,
            stacklevel=stacklevel,
        )
        return
    want = version_tuple(wanted)
    if version_tuple(installed)[: len(want)] != want:
        warnings.warn(
            f"framework_version={wanted!r} but this Python has {package} {installed}; the "
            "local_process job runs with the installed version.",
            UserWarning,
            stacklevel=stacklevel,
        )


def local_home_uri(*parts: str) -> str:
    """``file://`` URI under the local root: ``$LAUNCHBAY_HOME`` or ``~/.launchbay``."""
    return "file://" + os.path.join(usable_local_home(), *parts)  # refuses an unusable one
