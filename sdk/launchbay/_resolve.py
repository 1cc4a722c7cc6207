"""Resolution: what an estimator's job needs beyond its arguments, found once per job.

The job's name (given, or claimed from a base: :mod:`launchbay._names`), its
region and role ARN, the output path and where the code archive is stored, the
packaged code and its staging, the debugger and profiler request fields (region
tables in :mod:`launchbay._regions`), and, for ``local_process``, whether this
Python has the framework asked for. :class:`Resolution` is a mixin of
:class:`~launchbay.estimator.EstimatorBase`: the estimator's dry run and ``fit()``
call these methods; framework classes override some (the image, metrics,
debugger rules).
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

__all__ = ["Resolution", "local_home_uri"]

logger = logging.getLogger(__name__)


class Resolution(BoundArguments):
    """Names, locations, image, code and the resolved request fields of an estimator's job."""

    def _request_spec(self, **resolved: Any) -> _request.RequestSpec:
        """The request spec: the fields this estimator's arguments fill, and what was resolved.

        The argument -> request field mapping is the declaration's
        (:func:`launchbay.arguments.request_fields`), for the dry check at
        construction and for :meth:`_plan`.
        """
        return _request.RequestSpec(fields=arguments.request_fields(self), **resolved)

    def _job_name(self, job_name: str | None) -> str:
        if job_name is not None:
            return validate_job_name(job_name)
        base = self.base_job_name or base_name_from_image(self.training_image_uri())
        return name_from_base(base)

    def _default_output_path(self) -> tuple[str, bool]:
        """(output_path, whether it came from the session's default bucket and prefix)."""
        if self.output_path is not None:
            return self.output_path, False
        if self.is_local:
            return local_home_uri("output") + "/", False
        session = self.session
        prefix = session.default_bucket_prefix
        path = f"s3://{session.default_bucket_name()}/"
        if prefix:
            path += prefix.strip("/") + "/"
        return path, True

    def _code_location(self, output_path: str, from_default: bool) -> tuple[str, str]:
        """(bucket-or-file-root, key prefix) under which the code tarball is stored."""
        if self.code_location is not None:
            location = self.code_location
        elif self.is_local and not output_path.startswith("s3://"):
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

    def _package(self) -> Any:
        assert self.entry_point is not None, "only a job with an entry point packages code"
        return code.package_code(self.entry_point, self.source_dir, self.dependencies)

    def _code_uri(self, bundle: Any, root: str, prefix: str) -> str:
        if root.startswith("file://"):
            return f"{root}/source/{bundle.sha256}/sourcedir.tar.gz"
        return code.code_s3_uri(root, prefix, bundle)

    def _region(self) -> str:
        if self.is_local and self.sagemaker_session is None:
            # Local runs need no AWS: take the configured region if any, never ask boto3.
            return (
                os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
            )
        return self.session.boto_region_name

    def _role_arn(self) -> str:
        if self.role is None:
            return "arn:aws:iam::000000000000:role/launchbay-local"
        if "/" in self.role or self.is_local:
            return self.role
        return self.session.expand_role(self.role)

    def _sagemaker_metrics(self) -> bool | None:
        return self.enable_sagemaker_metrics

    def _debugger_allowed(self) -> bool:
        """Framework rules that turn the default debugger hook off."""
        return True

    def _debugger_fields(self, region: str, output_path: str, job_name: str) -> dict[str, Any]:
        """The Debugger and profiler request fields, as SDK v2 fills them (docs/debugger.md).

        ``DebugHookConfig``, ``DebugRuleConfigurations``, ``ProfilerConfig`` and
        ``ProfilerRuleConfigurations``, by :func:`launchbay.debugger.requests.debugger_fields`.
        A custom rule's local ``source`` is named by its content-addressed S3 key (the
        default bucket's), uploaded by :meth:`_stage`; a local job keeps the path.
        """
        from launchbay.debugger.requests import debugger_fields, source_key

        def source_uri(rule: str, path: str) -> str:
            prefix = (self.session.default_bucket_prefix or "").strip("/")
            key = "/".join(p for p in (prefix, source_key(rule, path)) if p)
            return f"s3://{self.session.default_bucket_name()}/{key}"

        rules = getattr(self, "rules", None)
        return debugger_fields(
            rules=rules,
            hook=self.debugger_hook_config,
            profiler_config=getattr(self, "profiler_config", None),
            disable_profiler=bool(self.disable_profiler),
            region=region,
            output_path=output_path,
            job_name=job_name,
            instance_types=self._instance_types(),
            debugger_allowed=self._debugger_allowed(),
            source_uri=None if self.is_local else source_uri,
            rule_name=name_from_base,
        )

    def _notice_local_rules(self) -> None:
        """A local job evaluates its rules on this machine, with smdebug (docs/debugger.md)."""
        rules = getattr(self, "rules", None)
        if rules and self.is_local:
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

    def _stage_rule_sources(self, request: dict[str, Any]) -> None:
        """Upload each custom rule's local ``source`` to the key the request names (once)."""
        from launchbay.debugger.requests import rule_sources

        local = rule_sources(getattr(self, "rules", None))
        entries = (request.get("DebugRuleConfigurations") or []) + (
            request.get("ProfilerRuleConfigurations") or []
        )
        for entry in entries:
            path = local.get(entry["RuleConfigurationName"])
            uri = (entry.get("RuleParameters") or {}).get("source_s3_uri")
            if path is None or not isinstance(uri, str) or not is_s3_uri(uri):
                continue
            self.session.default_bucket()
            bucket, key = parse_s3_uri(uri, argument="source")
            if not self.session.object_exists(bucket, key):
                self.session.upload_file(path, bucket, key)

    def _instance_types(self) -> list[str]:
        """Each group's instance type, or the instance type ("" where none was given)."""
        if self.instance_groups:
            return [g.instance_type or "" for g in self.instance_groups]
        return [self.instance_type or ""]

    def _stage(self, request: dict[str, Any], bundle: Any, code_uri: str | None) -> None:
        """Create the default bucket if the job uses it, and store the code once."""
        output = request["OutputDataConfig"]["S3OutputPath"]
        s3_code = code_uri if bundle is not None and is_s3_uri(code_uri) else None
        buckets = {parse_s3_uri(output, argument="output_path")[0]} if is_s3_uri(output) else set()
        if s3_code is not None:
            buckets.add(parse_s3_uri(s3_code, argument="code_location")[0])
        if buckets and (self.output_path is None or self.code_location is None):
            if self.session.default_bucket_name() in buckets:
                self.session.default_bucket()
        self._notice_local_rules()
        self._stage_rule_sources(request)
        if s3_code is not None:
            code_bucket = parse_s3_uri(s3_code, argument="code_location")[0]
            same_bucket = is_s3_uri(output) and parse_s3_uri(output)[0] == code_bucket
            kms_key = self.output_kms_key if same_bucket else None
            code.stage_code(self.session, bundle, s3_code, kms_key=kms_key)
        elif bundle is not None and code_uri and code_uri.startswith("file://"):
            code.stage_code_file(bundle, code_uri)

    def _check_installed_framework(self) -> None:
        """local_process runs this Python: warn when its framework differs from the asked one."""
        import importlib.metadata

        framework = self._framework_name
        wanted = getattr(self, "framework_version", None)
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
                stacklevel=3,
            )
            return
        want = version_tuple(wanted)
        if version_tuple(installed)[: len(want)] != want:
            warnings.warn(
                f"framework_version={wanted!r} but this Python has {package} {installed}; the "
                "local_process job runs with the installed version.",
                UserWarning,
                stacklevel=3,
            )


def local_home_uri(*parts: str) -> str:
    """``file://`` URI under the local root: ``$LAUNCHBAY_HOME`` or ``~/.launchbay``."""
    return "file://" + os.path.join(usable_local_home(), *parts)  # refuses an unusable one
