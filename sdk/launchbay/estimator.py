"""Estimators: SageMaker-SDK-v2-compatible arguments turned into one CreateTrainingJob request.

The estimator owns defaults, validation and naming. It resolves everything that
needs the outside world (region, default bucket, code location, image URI) and
hands plain values to :func:`launchbay._request.build_request`, the one pure
function that makes the request for every backend. ``fit()`` stages the code
and gives the finished request to a backend; it never changes what the dry run
(:meth:`EstimatorBase.create_training_job_request`) showed.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launchbay import (
    _attach,
    _request,
    _resolve,
    _rules,
    arguments,
    image_uris,
)
from launchbay._after_training import AfterTraining
from launchbay._bound import BoundArguments
from launchbay._instances import version_tuple
from launchbay._logs import show_logs
from launchbay._names import base_name_from_image as base_name_from_image  # re-exported
from launchbay._names import name_from_base as name_from_base  # re-exported
from launchbay._names import validate_job_name as validate_job_name  # re-exported
from launchbay._regions import DEBUGGER_UNSUPPORTED_REGIONS as DEBUGGER_UNSUPPORTED_REGIONS
from launchbay._regions import FRAMEWORK_ESTIMATORS
from launchbay._regions import PROFILER_UNSUPPORTED_REGIONS as PROFILER_UNSUPPORTED_REGIONS
from launchbay._resolve import local_home_uri as local_home_uri  # re-exported
from launchbay.distribution import Distribution, parse_distribution
from launchbay.errors import ConfigurationError
from launchbay.inputs import channels_from_inputs
from launchbay.runtime.names import (
    DOCKER_INSTANCE_TYPES,
    HP,
    LOCAL_GPU,
    LOCAL_INSTANCE_TYPES,
    LOCAL_PROCESS,
    SETTING,
)
from launchbay.session import Session

if TYPE_CHECKING:
    from launchbay import jobspec  # imported by the first spec read or written
    from launchbay.backends.plan import JobPlan, Placement, Resources  # by the first estimator

__all__ = ["EstimatorBase", "Estimator", "Framework", "PreparedJob"]

logger = logging.getLogger("launchbay.estimator")

NETWORK_ISOLATION_CODE_PATH = _request.NETWORK_ISOLATION_CODE_PATH


@dataclass(frozen=True)
class PreparedJob:
    """A job resolved and checked but not started (:meth:`EstimatorBase.prepare_job`).

    The seam a tuner builds its trials on: ``plan`` (the job's :class:`JobPlan`, its
    request the base of a ``TrainingJobDefinition``), ``backend`` (the training
    backend the plan is placed on), ``session`` (the session that backend was made
    with: ``None`` for a client-driven job made without one) and ``stage()``, which
    stores the job's code (and creates the default bucket it uses) once.
    """

    plan: JobPlan
    backend: Any
    session: Any
    stage: Callable[[], None]


class EstimatorBase(BoundArguments, AfterTraining):
    """What every estimator shares: SDK v2's arguments, validation and the request.

    A facade over functions, not a tower of mixins. The arguments are declared once,
    in :mod:`launchbay.arguments`, and typed as attributes in
    :class:`launchbay._bound.BoundArguments`: the constructor binds and checks them
    from there, then applies the rules that involve several of them (functions of
    :mod:`launchbay._rules`); names, locations, image and code are resolved by the
    functions of :mod:`launchbay._resolve`, which the tuner and the job spec reach
    through this class's public seam (:meth:`prepare_job`). ``AfterTraining`` adds
    SDK v2's calls after training (``deploy()`` ...), handed over to SDK v2.

    Subclasses set ``_framework_name``, which declared arguments they take
    (``_owners``), their positional arguments (``_positional``, SDK v2's order), and
    override the hooks those functions call through the object: the image
    (:meth:`training_image_uri`), the rules of their framework
    (``_check_framework_rules``, or ``_check_rules`` for rules that come first), how
    user hyperparameters are encoded (``_encode_user_hyperparameter``), whether
    SageMaker metrics are on (``_sagemaker_metrics``) and the default debugger hook
    kept (``_debugger_allowed``), and the check of this Python for ``local_process``
    (``_check_installed_framework``).
    """

    _owners: tuple[str, ...] = (arguments.BASE,)
    _positional: tuple[str, ...] = ("role", "instance_count", "instance_type")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = arguments.signature(cls)  # type: ignore[attr-defined]  # inspect reads this class attribute

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        declared = arguments.declared(type(self))
        raw = arguments.bind(type(self), args, kwargs, stacklevel=3)
        # SageMaker SDK defaults files fill what was not given, as in SDK v2 (issue 26).
        from launchbay import _sagemaker_config  # imported by the first estimator made

        raw = _sagemaker_config.estimator_defaults(type(self), args, kwargs, raw)
        values = arguments.check(declared, raw, _local_before_checks(raw))
        for argument in declared:
            setattr(self, argument.attribute, values[argument.name])
        self.latest_training_job: Any = None
        self._current_job_name: str | None = None
        #: The inputs and job name of the job spec this estimator came from (from_yaml).
        self.spec_inputs: Any = None
        self.spec_job_name: str | None = None
        self._check_rules()
        self.distribution_config: Distribution = self._parse_distribution()
        _rules.check_request_fields(self)

    # -- hooks the estimator classes override (called by launchbay._rules and _resolve) --

    def _check_rules(self) -> None:
        """The cross-field rules (:func:`launchbay._rules.check_rules`)."""
        _rules.check_rules(self)

    def _check_framework_rules(self) -> None:
        """A framework's rules (:func:`launchbay._rules.check_framework_rules`)."""
        _rules.check_framework_rules(self)

    def _encode_user_hyperparameter(self, value: Any) -> str:
        """A user hyperparameter as it is sent (JSON)."""
        return json.dumps(value)

    def _sagemaker_metrics(self) -> bool | None:
        """The request's ``EnableSageMakerMetricsTimeSeries`` (None: not sent)."""
        return self.enable_sagemaker_metrics

    def _debugger_allowed(self) -> bool:
        """Framework rules that turn the default debugger hook off."""
        return True

    def _check_installed_framework(self) -> None:
        """A local_process job: this Python's framework against the asked one (a warning)."""
        # The warning points at the caller of fit(): this function, this method, start_job(), fit().
        _resolve.check_installed_framework(self, stacklevel=5)

    # -- construction helpers -------------------------------------------------

    @property
    def placement(self) -> Placement:
        """Where this estimator's jobs run: the one rule of :mod:`launchbay.plan`.

        Raises:
            ConfigurationError: instance groups that no one backend runs (local
                and ``ml.*`` mixed, or two local types).
        """
        from launchbay.backends.plan import place  # the backends load with the first estimator

        return place(self.instance_type, self.instance_groups)

    @property
    def is_local(self) -> bool:
        """True when the jobs run on this machine (a local instance type, or local groups)."""
        return self.placement.local

    def _parse_distribution(self) -> Distribution:
        if self._distribution_arg is None:
            return Distribution(instance_type=self.instance_type, framework=self._framework_name)
        return parse_distribution(
            self._distribution_arg,
            framework=self._framework_name,
            framework_version=getattr(self, "framework_version", None),
            py_version=getattr(self, "py_version", None),
            image_uri=self.image_uri,
            instance_type=self.instance_type,
            entry_point=self.entry_point,
            instance_groups=self.instance_groups,
        )

    @property
    def distribution(self) -> dict[str, Any]:
        """The ``distribution`` dict as given (a copy)."""
        return copy.deepcopy(self._distribution_arg) if self._distribution_arg else {}

    # -- hyperparameters -------------------------------------------------------

    def set_hyperparameters(self, **kwargs: Any) -> None:
        """Add or replace hyperparameters (values must be JSON-serialisable)."""
        arguments.check_json(kwargs)
        merged = {**self._hyperparameters, **copy.deepcopy(kwargs)}
        _rules.check_hyperparameters(self, merged)
        self._hyperparameters = merged

    def hyperparameters(self) -> dict[str, str]:
        """The user's hyperparameters as they are sent (strings), without sagemaker_* keys."""
        return {k: self._encode_user_hyperparameter(v) for k, v in self._hyperparameters.items()}

    def _extra_hyperparameters(self, job_name: str, output_path: str) -> dict[str, Any]:
        """Framework keys added after the distribution's (TensorFlow's model_dir)."""
        return {}

    def _distribution_hyperparameters(self) -> dict[str, Any]:
        """The distribution's ``sagemaker_*`` keys (frameworks whose v2 keys differ override it)."""
        return self.distribution_config.to_hyperparameters()

    # -- the request -----------------------------------------------------------

    @property
    def session(self) -> Any:
        if self.sagemaker_session is None:
            self.sagemaker_session = Session()
        return self.sagemaker_session

    def enable_network_isolation(self) -> bool:
        return self._enable_network_isolation

    def training_image_uri(self) -> str:
        if not self.image_uri:
            raise ConfigurationError(
                "image_uri is required for the generic Estimator: accepted a Docker image URI "
                "such as '123456789012.dkr.ecr.us-west-2.amazonaws.com/my-image:latest'.",
                argument="image_uri",
            )
        return self.image_uri

    def _plan(self, inputs: Any, job_name: str | None) -> tuple[JobPlan, Any, str | None]:
        """Resolve everything and build the job's plan: (plan, code bundle, code URI).

        Where the job runs and on which hosts comes first
        (:func:`launchbay.backends.plan.resolve_resources`): a local job this
        machine cannot run (too many ranks, too few GPUs) is refused before its
        code is packaged, and the GPUs are looked for once.
        """
        resources = self.resources()
        name = _resolve.job_name(self, job_name)
        region = _resolve.region(self)
        output_path, from_default = _resolve.default_output_path(self)
        image = self.training_image_uri()

        bundle = code_uri = None
        script_hps: dict[str, Any] = {}
        if self.entry_point is not None:
            staged = ("s3://", "file://") if self.is_local else ("s3://",)
            if isinstance(self.source_dir, str) and self.source_dir.startswith(staged):
                code_uri = self.source_dir  # a staged archive (_rules.validate_code)
                script = self.entry_point
            else:
                bundle = _resolve.package_code(self)
                root, prefix = _resolve.code_location(self, output_path, from_default)
                code_uri = _resolve.code_uri(bundle, root, prefix)
                script = bundle.script_name
            script_hps = {
                HP.SUBMIT_DIRECTORY: (
                    NETWORK_ISOLATION_CODE_PATH if self.enable_network_isolation() else code_uri
                ),
                HP.PROGRAM: script,
                HP.CONTAINER_LOG_LEVEL: self.container_log_level,
                HP.JOB_NAME: name,
                HP.REGION: region,
            }

        hyperparameters = self.hyperparameters()
        hyperparameters.update({k: json.dumps(v) for k, v in script_hps.items()})
        hyperparameters.update(
            {k: json.dumps(v) for k, v in self._distribution_hyperparameters().items()}
        )
        hyperparameters.update(
            {k: json.dumps(v) for k, v in self._extra_hyperparameters(name, output_path).items()}
        )

        channels = channels_from_inputs(inputs, allow_file=self.is_local)
        extra_channels: list[tuple[str, str, str | None, str | None]] = []
        if self.model_uri:
            extra_channels.append(
                (self.model_channel_name, self.model_uri, "application/x-sagemaker-model", "File")
            )
        if self.enable_network_isolation() and code_uri is not None:
            extra_channels.append(("code", code_uri, None, None))
        for channel_name, uri, content_type, mode in extra_channels:
            channels = _request.add_channel(channels, channel_name, uri, content_type, mode)

        input_mode = self.input_mode
        if inputs is not None and hasattr(inputs, "config") and "InputMode" in inputs.config:
            input_mode = inputs.config["InputMode"]

        request = _request.build_request(
            _resolve.request_spec(
                self,
                job_name=name,
                role=_resolve.role_arn(self),
                image_uri=image,
                input_mode=input_mode,
                hyperparameters=hyperparameters,
                channels=channels,
                output_path=output_path,
                enable_sagemaker_metrics=self._sagemaker_metrics(),
                enable_network_isolation=self.enable_network_isolation(),
                **_resolve.debugger_fields(self, region, output_path, name),
            )
        )
        # The defaults files' volume KMS key and tags, merged as SDK v2's session does.
        from launchbay import _sagemaker_config

        request = _sagemaker_config.apply_to_request(
            request, _sagemaker_config.config_for(self.sagemaker_session)
        )
        _rules.check_request(self, request)
        from launchbay.backends.plan import plan_request

        return plan_request(request, resources=resources), bundle, code_uri

    def resources(self) -> Resources:
        """Where the jobs run and on which hosts; refuses a local job this machine cannot run.

        :func:`launchbay.backends.plan.resolve_resources` for this estimator's
        instance type and count (or groups) and its distribution's processes per
        host (named in errors by its key), without building a request: what
        ``launchbay validate`` checks, and the first step of the dry run and ``fit()``.

        Raises:
            ConfigurationError: more ranks than this machine runs, or too few GPUs
                for a local job (docs/local.md).
        """
        config = self.distribution_config
        per_host, where = None, None
        for section, sub in (("torch_distributed", config.torch_distributed),
                             ("smdistributed", config.dataparallel), ("mpi", config.mpi)):  # fmt: skip
            if sub is not None and sub.processes_per_host:
                per_host = sub.processes_per_host
                where = (
                    "distribution['smdistributed']['dataparallel']['processes_per_host']"
                    if section == "smdistributed"
                    else f"distribution[{section!r}]['processes_per_host']"
                )
                break
        if self.instance_groups:
            resources: dict[str, Any] = {
                "InstanceGroups": [g.to_request_dict() for g in self.instance_groups]
            }
        else:
            resources = {"InstanceType": self.instance_type, "InstanceCount": self.instance_count}
        from launchbay.backends.plan import resolve_resources

        return resolve_resources(resources, per_host, processes_argument=where)

    def _backend(self, plan: JobPlan) -> Any:
        """The backend the plan is placed on, with this estimator's session."""
        from launchbay import backends  # through the package, where tests and callers find it

        session = self.sagemaker_session if plan.local else self.session
        return backends.backend_for_plan(plan, session)

    def prepare_job(self, inputs: Any = None, job_name: str | None = None) -> PreparedJob:
        """The job ``fit()`` would start, resolved and checked, not started; uploads nothing.

        Refuses what ``fit()`` would refuse before anything starts. ``stage()`` of the
        result stores the code where the plan's request points.
        """
        plan, bundle, code_uri = self._plan(inputs, job_name)
        backend = self._backend(plan)
        backend.check(plan)  # the refusals fit() would meet, before anything starts
        session = self.sagemaker_session if plan.local else self.session
        request = dict(plan.request)

        def stage() -> None:
            _resolve.stage(self, dict(request), bundle, code_uri)

        return PreparedJob(plan, backend, session, stage)

    def create_training_job_request(
        self, inputs: Any = None, job_name: str | None = None
    ) -> dict[str, Any]:
        """The exact CreateTrainingJob request ``fit()`` would send; uploads nothing.

        The code tarball is packaged in memory to compute its content hash, which
        names its S3 key; nothing is written to S3 and no bucket is created.
        """
        plan, _, _ = self._plan(inputs, job_name)
        self._backend(plan).check(plan)  # the refusals fit() would meet, before anything starts
        return dict(plan.request)

    # -- running -----------------------------------------------------------------

    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: str | bool | None = "All",
        job_name: str | None = None,
    ) -> Any:
        """Stage code and start the training job; with ``wait`` follow it to the end.

        Args:
            inputs: Channels: an S3 URI, a :class:`~launchbay.inputs.TrainingInput`,
                or a dict of channel name to either.
            wait: Follow the job until it ends (status changes and logs); with
                ``False``, return as soon as the job is created. A job on this
                machine (``local_process``, ``local``, ``local_gpu``) then runs in
                a runner process of its own and outlives this one, as a SageMaker
                job does; ``LAUNCHBAY_LOCAL_NO_WAIT=attached`` keeps it in this
                process instead (it stops when this process exits). See
                docs/local.md, "fit(wait=False)".
            logs: SDK v2's values: ``"All"``/``True`` shows every host's log lines
                with the status, ``"None"``/``False``/``None`` the status only.
            job_name: The job's name (default: base name plus a timestamp).

        Returns the :class:`launchbay.job.TrainingJob` handle (also kept as
        ``latest_training_job``).

        Raises:
            JobFailedError: with ``wait``, the job ended Failed or Stopped; it
                carries the failure reason and the failing host's last log lines.
        """
        show_logs(logs)  # a bad value fails before anything is submitted
        job = self.start_job(inputs, job_name, may_detach=not wait)
        if wait:
            job.wait(logs=logs)
        return job

    def start_job(
        self, inputs: Any = None, job_name: str | None = None, *, may_detach: bool = False
    ) -> Any:
        """Stage the code and start the job, without following it: what ``fit()`` starts.

        ``fit()`` calls it, then follows the job when asked to wait; ``launchbay
        submit`` calls it to run the job in its own process and follow it there.
        An estimator from a job spec uses the spec's inputs and job name where none
        are given.

        Args:
            inputs: As ``fit(inputs=...)``.
            job_name: As ``fit(job_name=...)``.
            may_detach: A job on this machine may run in a runner process of its own
                (``fit(wait=False)``; see its ``wait``). False (the default): the job
                runs from this process, which follows it or stops it when it exits.

        Returns the :class:`launchbay.job.TrainingJob` handle (also kept as
        ``latest_training_job``).
        """
        if inputs is None:  # an estimator from a job spec keeps the spec's inputs and name
            inputs = self.spec_inputs
        if job_name is None:
            job_name = self.spec_job_name
        plan, bundle, code_uri = self._plan(inputs, job_name)
        # A bad setting fails before anything starts.
        detach = may_detach and _runs_detached(plan)
        if plan.placement.instance_type == LOCAL_PROCESS:
            self._check_installed_framework()
        backend = self._backend(plan)
        # The plan refused what this machine cannot run before the code was packaged;
        # run() checks the rest once the code is staged (a network-isolated job's "code"
        # channel is the staged archive itself).
        _resolve.stage(self, dict(plan.request), bundle, code_uri)
        job = backend.start_detached(plan) if detach else backend.run(plan)
        self.latest_training_job = job
        self._current_job_name = job.name
        return job

    @property
    def model_data(self) -> str | None:
        """The model artifact URI of the latest job (``.../output/model.tar.gz``).

        ``None`` before any job, or for a failed job that left no artifact.
        """
        if self.latest_training_job is None:
            return None
        return self.latest_training_job.model_data

    def logs(self) -> None:
        """Print the latest job's log lines, every host's, until the job ends (SDK v2's ``logs()``).

        A job that has ended prints its logs and returns at once.

        Raises:
            ConfigurationError: no job was started or attached yet.
        """
        if self.latest_training_job is None:
            raise ConfigurationError.invalid(
                "latest_training_job", None, "a job started by fit() or attach() first"
            )
        self.latest_training_job.logs(follow=True)

    @property
    def training_job_analytics(self) -> Any:
        """The latest job's metrics (SDK v2's ``TrainingJobAnalytics``: ``.dataframe()``).

        Raises:
            ConfigurationError: no job was started or attached yet.
        """
        if self._current_job_name is None:
            raise ConfigurationError.invalid(
                "latest_training_job", None, "a job started by fit() or attach() first"
            )
        from launchbay.analytics import TrainingJobAnalytics  # same layer, imported when asked

        return TrainingJobAnalytics(
            self._current_job_name, sagemaker_session=self.sagemaker_session
        )

    def latest_job_debugger_artifacts_path(self) -> str | None:
        """Where the latest job's debugger hook output went: ``<S3OutputPath>/<job>/debug-output``.

        ``S3OutputPath`` is the request's ``DebugHookConfig`` one (the hook config's
        ``s3_output_path``, else the job's ``output_path``). An ``s3://`` URI is returned as
        is; for a ``file://`` one (where local jobs copied every host's tensors) the plain
        local path is returned, so that ``smdebug.trials.create_trial(path)`` reads it as
        SDK v2 users call it. ``None`` when the job ran without a debugger hook config.

        Raises:
            ConfigurationError: no job has run from this estimator yet.
        """
        return self._artifacts_path("DebugHookConfig", "debug-output", "debugger artifacts")

    def latest_job_tensorboard_artifacts_path(self) -> str | None:
        """Where the latest job's TensorBoard files went: ``<S3OutputPath>/<job>/tensorboard-output``.

        ``S3OutputPath`` is the request's ``TensorBoardOutputConfig`` one (the config's
        ``s3_output_path``). An ``s3://`` URI is returned as is; for a ``file://`` one
        (where local jobs copy them) the plain local path, which ``tensorboard --logdir``
        reads as it is. ``None`` when the job ran without a TensorBoard output config
        (SDK v2 looks at the debugger hook config instead, and fails without one).

        Raises:
            ConfigurationError: no job has run from this estimator yet.
        """
        return self._artifacts_path(
            "TensorBoardOutputConfig", "tensorboard-output", "TensorBoard artifacts"
        )

    def _artifacts_path(self, config: str, folder: str, what: str) -> str | None:
        """``<the request's config S3OutputPath>/<job>/<folder>`` (``file://`` as a plain path)."""
        if self.latest_training_job is None:
            raise ConfigurationError.invalid(
                "latest_training_job",
                None,
                f"a job started by fit() (or attach()) before asking for its {what}",
            )
        target = (self.latest_training_job.describe().get(config) or {}).get("S3OutputPath")
        if not target:
            return None
        path = "/".join([target.rstrip("/"), self.latest_training_job.name, folder])
        return path.removeprefix("file://")

    @classmethod
    def attach(
        cls,
        training_job_name: str,
        sagemaker_session: Any = None,
        model_channel_name: str = "model",
    ) -> Any:
        """Rebuild an estimator from a running or finished SageMaker training job.

        The job's description gives back the arguments (see
        :mod:`launchbay._attach`): ``create_training_job_request(job_name=<same
        name>)`` of the result reproduces the job's request, and
        ``latest_training_job`` is the job, so ``.wait()``, ``.model_data`` and
        ``.stop()`` work.

        Args:
            training_job_name: The job's name.
            sagemaker_session: The :class:`launchbay.Session` (default: a new one).
            model_channel_name: The channel that carried ``model_uri``, if any.

        Raises:
            JobError: the job cannot be described (no such job, no permission).
            ConfigurationError: the job ran another framework's image.
        """
        return _attach.attach(cls, training_job_name, sagemaker_session, model_channel_name)

    def replay(
        self,
        instance_type: str = LOCAL_PROCESS,
        instance_count: int | None = None,
        inputs: Any = None,
        wait: bool = True,
        logs: str | bool | None = "All",
        job_name: str | None = None,
    ) -> Any:
        """Run the attached SageMaker job again on this machine (docs/rehearsing.md).

        ``Estimator.attach(JOB_NAME).replay()``: the job's code archive, entry point,
        hyperparameters, environment, distribution and channels (or ``inputs``), run
        as a local job (:mod:`launchbay.replay`). This estimator stays attached to the
        SageMaker job; the local job's handle is returned.

        Args:
            instance_type: ``local_process`` (default), ``local`` or ``local_gpu``.
            instance_count: Hosts to run (default: the job's).
            inputs: Channels instead of the job's: ``{"train": "s3://..."}`` (a local
                path or ``file://`` URI works too); a new name adds a channel.
            wait: Follow the job to its end; ``False`` runs it detached.
            logs: As ``fit(logs=...)``.
            job_name: The local job's name (default ``<job>-replay-<timestamp>``).

        Raises:
            ConfigurationError: no job is attached, or the replay's arguments are wrong.
            JobFailedError: with ``wait``, the replayed script failed (its traceback is shown).
        """
        if self.latest_training_job is None:
            raise ConfigurationError.invalid(
                "latest_training_job", None, "a job attached with Estimator.attach(JOB_NAME) first"
            )
        from launchbay import replay  # same layer, loaded only to replay

        show_logs(logs)  # a bad value fails before anything is downloaded
        job = self.latest_training_job
        return replay.replay(
            job.name,
            sagemaker_session=self.sagemaker_session,
            description=job.describe(),
            instance_type=instance_type,
            instance_count=instance_count,
            inputs=inputs,
            job_name=job_name,
            wait=wait,
            logs=logs,
        )

    # -- job specs (YAML) ----------------------------------------------------------

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], **overrides: Any) -> EstimatorBase:
        """Build the estimator a YAML job spec describes (see docs/jobspec.md).

        ``Estimator.from_yaml`` returns the class the spec names (``framework:
        pytorch`` -> :class:`~launchbay.pytorch.PyTorch`, ``tensorflow`` ->
        :class:`~launchbay.tensorflow.TensorFlow`, else the generic
        :class:`Estimator`); ``PyTorch.from_yaml`` insists on its framework.
        ``${VAR}`` references are filled from the environment and relative paths
        resolve against the spec file's directory. ``overrides`` are estimator
        arguments that replace the spec's (``instance_type="local_process"``,
        ``sagemaker_session=...``; ``inputs``/``job_name`` too).

        The spec's ``inputs`` and ``job_name`` are kept as ``spec_inputs`` and
        ``spec_job_name``, which ``fit()`` uses when it is given none.

        Raises:
            launchbay.jobspec.JobSpecError: the spec is invalid; the message names
                the file, line and key path of each problem.
        """
        from launchbay import jobspec  # the job-spec modules load with the first spec

        return cls.from_spec(jobspec.load(path), **overrides)

    @classmethod
    def from_spec(
        cls, spec: jobspec.JobSpec, *, resolve_vpc: bool = True, **overrides: Any
    ) -> EstimatorBase:
        """Make the estimator a loaded :class:`~launchbay.jobspec.JobSpec` describes.

        ``overrides`` are estimator arguments (and ``inputs``/``job_name``).
        ``vpc: {stack: NAME}`` becomes ``vpc_config`` by reading the stack now (an
        AWS call), unless ``resolve_vpc`` is false (then the estimator has no VPC:
        what ``launchbay validate`` checks) or ``vpc_config`` is among ``overrides``.

        Raises:
            JobSpecError: the spec names another framework, or the estimator refused
                an argument (located at its key).
            ProvisioningError: the ``vpc`` stack is missing or unusable.
        """
        chosen = _spec_class(spec, cls)
        inputs = overrides.pop("inputs") if "inputs" in overrides else spec.inputs()
        job_name = overrides.pop("job_name", None) or spec.job_name
        kwargs = spec.estimator_kwargs()
        if resolve_vpc and spec.vpc_stack is not None and "vpc_config" not in overrides:
            kwargs["vpc_config"] = spec.vpc_config(session=overrides.get("sagemaker_session"))
        kwargs.update(overrides)
        try:
            estimator = chosen(**kwargs)
        except ConfigurationError as exc:
            raise spec.error_for(exc) from exc
        estimator.spec_inputs = inputs
        estimator.spec_job_name = job_name
        return estimator

    def to_yaml(self, path: str | os.PathLike[str]) -> None:
        """Write this estimator as a YAML job spec that :meth:`from_yaml` reads back.

        Arguments at their default are left out; paths under the spec's directory
        are written relative to it; ``spec_inputs``/``spec_job_name`` are included
        when set. The session is not part of a spec.
        """
        from launchbay import jobspec

        spec = jobspec.spec_from_arguments(
            arguments.bound_values(self),
            framework=self._framework_name,
            inputs=self.spec_inputs,
            job_name=self.spec_job_name,
            base_dir=os.path.dirname(os.path.abspath(os.fspath(path))),
        )
        jobspec.dump(spec, path)


class Estimator(EstimatorBase):
    """The generic estimator: any training image (``image_uri`` required).

    As in SDK v2, hyperparameters are JSON-encoded when ``source_dir`` is given and
    sent with ``str()`` otherwise. ``distribution`` is accepted too (SDK v2 silently
    drops it here): an image running the launchbay runtime or the SageMaker training
    toolkit honours it.
    """

    _owners = (arguments.BASE, arguments.ESTIMATOR)
    _positional = ("image_uri", "role", "instance_count", "instance_type")
    _image_required = True

    def _encode_user_hyperparameter(self, value: Any) -> str:
        return json.dumps(value) if self.source_dir else str(value)


class Framework(EstimatorBase):
    """Base of the framework estimators: script mode, official images, version rules."""

    # Bound from arguments.FRAMEWORK (see launchbay._bound).
    framework_version: str | None
    py_version: str | None

    _owners: tuple[str, ...] = (arguments.BASE, arguments.FRAMEWORK)
    _positional: tuple[str, ...] = (
        "entry_point",
        "framework_version",
        "py_version",
        "source_dir",
        "hyperparameters",
        "image_uri",
        "distribution",
    )
    _metrics_min_version: tuple[int, ...] = ()

    def _sagemaker_metrics(self) -> bool | None:
        if self.enable_sagemaker_metrics is not None:
            return self.enable_sagemaker_metrics
        if (
            self.framework_version
            and version_tuple(self.framework_version) >= self._metrics_min_version
        ):
            return True
        return None

    def _debugger_allowed(self) -> bool:
        # SDK v2: smdebug does not support distributed jobs with checkpointing; its
        # framework estimators always count as "distributed" here.
        return not (self.checkpoint_s3_uri and self.checkpoint_local_path)

    def training_image_uri(self) -> str:
        if self.image_uri:
            return self.image_uri
        if self.is_local:
            # Local runs use the images `launchbay images build` makes (local_process
            # runs no image at all; the name only documents the environment).
            processor = "gpu" if self.instance_type == LOCAL_GPU else "cpu"
            return (
                f"launchbay/{self._framework_name}-training:"
                f"{self.framework_version}-{processor}-{self.py_version}"
            )
        framework, version = self._framework_name, self.framework_version
        # The rules (launchbay._rules.check_framework_rules) refuse a framework estimator without image_uri
        # or framework_version; Framework itself has no framework name.
        assert framework is not None and version is not None, "checked at construction"
        return image_uris.training_image_uri(
            framework,
            version,
            self.py_version,
            _resolve.instance_types(self)[0],
            _resolve.region(self),
            distribution=self.distribution,
        )


#: What ``fit(wait=False)`` does with a job on this machine (docs/local.md, "fit(wait=False)").
NO_WAIT_DETACHED, NO_WAIT_ATTACHED = "detached", "attached"


def _runs_detached(plan: JobPlan) -> bool:
    """Whether ``fit(wait=False)`` runs the plan's job in a runner process of its own.

    Jobs on this machine do (``local_process``, ``local``, ``local_gpu``) unless
    ``LAUNCHBAY_LOCAL_NO_WAIT`` (the job's ``environment=``, else this process's
    environment) is ``attached``. Ray jobs stay in this process (their cluster is
    often this process's own ``ray.init()``); SageMaker jobs run remotely anyway.

    Raises:
        ConfigurationError: the setting is neither ``detached`` nor ``attached``.
    """
    if plan.placement.instance_type not in (LOCAL_PROCESS, *DOCKER_INSTANCE_TYPES):
        return False
    environment = plan.request.get("Environment") or {}
    raw = environment.get(SETTING.LOCAL_NO_WAIT, os.environ.get(SETTING.LOCAL_NO_WAIT, ""))
    value = str(raw).strip().lower() or NO_WAIT_DETACHED
    if value not in (NO_WAIT_DETACHED, NO_WAIT_ATTACHED):
        raise ConfigurationError.invalid(
            SETTING.LOCAL_NO_WAIT,
            raw,
            f"{NO_WAIT_DETACHED!r} (fit(wait=False) runs a local job in a process of its own; "
            f"the default) or {NO_WAIT_ATTACHED!r} (the job runs in this process and stops "
            "when it exits)",
        )
    return value == NO_WAIT_DETACHED


def _local_before_checks(raw: Mapping[str, Any]) -> bool:
    """Whether the arguments as given ask for a local job (before they are checked).

    The rule of :func:`launchbay.plan.place`; arguments it cannot read yet (a
    wrong type) count as not local, and their own check names them.
    """
    from launchbay.backends.plan import place

    try:
        return place(raw.get("instance_type"), raw.get("instance_groups")).local
    except (ConfigurationError, TypeError, AttributeError):
        return raw.get("instance_type") in LOCAL_INSTANCE_TYPES


#: Framework estimators by the job spec's ``framework``: imported when a spec names one.
#: (The framework modules import this one; importing them here, lazily, is the one
#: place this module reaches up a layer.)
FRAMEWORK_CLASSES = FRAMEWORK_ESTIMATORS


def _spec_class(spec: jobspec.JobSpec, requested: type) -> type[EstimatorBase]:
    """The estimator class ``spec`` asks for, checked against the class ``from_yaml`` was called on."""
    import importlib

    from launchbay import jobspec

    if spec.framework in FRAMEWORK_CLASSES:
        module, name = FRAMEWORK_CLASSES[spec.framework]
        chosen: type[EstimatorBase] = getattr(importlib.import_module(module), name)
    else:
        chosen = Estimator
    if requested in (EstimatorBase, Estimator, Framework):
        if requested is Framework and not spec.framework:
            raise jobspec.JobSpecError(
                [
                    spec.problem(
                        (), "Framework.from_yaml needs framework: " + ", ".join(FRAMEWORK_CLASSES)
                    )
                ]
            )
        return chosen
    wanted = requested._framework_name  # type: ignore[attr-defined]  # set on framework subclasses only
    if wanted == spec.framework or (
        spec.framework is None and (wanted is not None or issubclass(requested, Estimator))
    ):
        return requested
    raise jobspec.JobSpecError(
        [
            spec.problem(
                ("framework",),
                f"{requested.__name__}.from_yaml cannot build framework: {spec.framework}. "
                "Use Estimator.from_yaml to build whatever the spec describes.",
            )
        ]
    )
