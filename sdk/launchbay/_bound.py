"""The bound arguments of every estimator, as typed attributes mypy and editors see.

The constructor binds each argument of :data:`launchbay.arguments.ARGUMENTS` with
``setattr``; :class:`BoundArguments` declares the attribute of each one the base
class takes, with the type its kind stores (``Argument.type``).
``tests/unit/test_arguments.py`` keeps the annotations and the table equal (names
and types), so they cannot drift; the framework classes annotate the arguments
they own the same way.

The functions that hold the cross-field rules (:mod:`launchbay._rules`) and the
resolution of names, locations, image and code (:mod:`launchbay._resolve`) take
an object of this class (an estimator) as their first argument; what they use of
the estimator besides its arguments (where it runs, its session, and the hooks
estimator classes override) is declared here for the type checker and given by
:class:`~launchbay.estimator.EstimatorBase`, the one class that inherits this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from launchbay.debugger import (
    DebuggerHookConfig,
    ProfilerConfig,
    RuleBase,
    TensorBoardOutputConfig,
)
from launchbay.inputs import InstanceGroup
from launchbay.session import Session
from launchbay.vpc import VpcConfig

if TYPE_CHECKING:
    from launchbay.backends.plan import Placement

__all__ = ["BoundArguments"]


class BoundArguments:
    """The attributes :func:`launchbay.arguments.bind` sets (one per declared argument)."""

    image_uri: str | None
    entry_point: str | None
    source_dir: str | None
    dependencies: list[str]
    role: str | None
    instance_type: str | None
    instance_count: int | None
    instance_groups: list[InstanceGroup] | None
    keep_alive_period_in_seconds: int | None
    volume_size: int | None
    volume_kms_key: str | None
    max_run: int | None
    input_mode: str
    output_path: str | None
    output_kms_key: str | None
    code_location: str | None
    base_job_name: str | None
    disable_output_compression: bool
    checkpoint_s3_uri: str | None
    checkpoint_local_path: str | None
    model_uri: str | None
    model_channel_name: str
    subnets: list[str] | None
    security_group_ids: list[str] | None
    vpc_config: VpcConfig | Mapping[str, Any] | None
    _enable_network_isolation: bool
    encrypt_inter_container_traffic: bool
    use_spot_instances: bool
    max_wait: int | None
    max_retry_attempts: int | None
    environment: dict[str, str] | None
    tags: list[dict[str, str]] | None
    metric_definitions: list[dict[str, str]] | None
    enable_sagemaker_metrics: bool | None
    container_log_level: int
    container_entry_point: list[str] | None
    container_arguments: list[str] | None
    debugger_hook_config: DebuggerHookConfig | Literal[False] | None
    tensorboard_output_config: TensorBoardOutputConfig | None
    rules: list[RuleBase] | None
    profiler_config: ProfilerConfig | None
    disable_profiler: bool
    _hyperparameters: dict[str, Any]
    _distribution_arg: dict[str, Any] | None
    sagemaker_session: Session | None

    #: The framework of the official images (``"pytorch"``), None for the generic estimator.
    _framework_name: str | None = None
    #: Whether an ``image_uri`` is required (the generic :class:`~launchbay.estimator.Estimator`).
    _image_required: bool = False

    if TYPE_CHECKING:  # given by EstimatorBase

        @property
        def placement(self) -> Placement:
            raise NotImplementedError

        @property
        def is_local(self) -> bool:
            raise NotImplementedError

        @property
        def session(self) -> Session:
            raise NotImplementedError

        def training_image_uri(self) -> str:
            raise NotImplementedError

        # Hooks the estimator classes override, called by launchbay._rules and _resolve.
        def _check_framework_rules(self) -> None:
            raise NotImplementedError

        def _debugger_allowed(self) -> bool:
            raise NotImplementedError

        def _encode_user_hyperparameter(self, value: Any) -> str:
            raise NotImplementedError
