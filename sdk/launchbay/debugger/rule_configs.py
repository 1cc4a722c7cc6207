"""The built-in rule configs: SDK v2's ``sagemaker.debugger.rule_configs``.

SDK v2 takes them from the ``smdebug-rulesconfig`` package (1.0.1), and so does
launchbay (``pip install 'launchbay[debugger]'``): its debugging rules
(``vanishing_gradient()``, ``loss_not_decreasing()``, ``overfit()`` ... each a base
config for :meth:`~launchbay.debugger.Rule.sagemaker`), its profiling rules
(``ProfilerReport()``, ``CPUBottleneck()`` ... for
:meth:`~launchbay.debugger.ProfilerRule.sagemaker`) and the actions a rule runs
when it fires (``ActionList``, ``StopTraining``, ``Email``, ``SMS``).

The package is imported when a name is first looked up here, not when
:mod:`launchbay.debugger` is imported. The actions are smdebug-rulesconfig's
classes with their arguments checked first, so a bad value names the argument,
the value and what is accepted (smdebug-rulesconfig's own check says neither).
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from launchbay.errors import ConfigurationError, MissingDependencyError

#: What smdebug-rulesconfig offers here, looked up when first used (module __getattr__).
_NAMES = (
    # debugging rules
    "all_zero", "check_input_images", "class_imbalance", "confusion", "create_xgboost_report",
    "dead_relu", "exploding_tensor", "feature_importance_overweight", "loss_not_decreasing",
    "nlp_sequence_ratio", "overfit", "overtraining", "poor_weight_initialization",
    "saturated_activation", "similar_across_runs", "stalled_training_rule", "tensor_variance",
    "tree_depth", "unchanged_tensor", "vanishing_gradient", "weight_update_ratio",
    # profiling rules
    "BatchSize", "CPUBottleneck", "GPUMemoryIncrease", "IOBottleneck", "LoadBalancing",
    "LowGPUUtilization", "MaxInitializationTime", "OverallSystemUsage", "ProfilerReport",
    "StepOutlier",
    # actions
    "ActionList", "Email", "SMS", "StopTraining", "is_valid_action_object",
    "get_collection",
)  # fmt: skip
__all__ = list(_NAMES)

_ACTIONS = ("ActionList", "Email", "SMS", "StopTraining")
#: smdebug-rulesconfig's own rules for the action arguments (the rule container reads them).
_PREFIX = re.compile(r"[A-Za-z0-9\-]+")
_EMAIL = re.compile(r"[a-z0-9]+[@]\w+[.]\w{2,3}")
_PHONE = re.compile(r"\+\d{1,15}")
_made: dict[str, Any] = {}


def _package() -> Any:
    try:
        return importlib.import_module("smdebug_rulesconfig")
    except ImportError:
        raise MissingDependencyError.for_module(
            "smdebug_rulesconfig", "debugger", "launchbay.debugger.rule_configs"
        ) from None


def _check(argument: str, value: Any, pattern: re.Pattern[str], accepted: str) -> None:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ConfigurationError.invalid(argument, value, accepted)


def _action_classes(package: Any) -> dict[str, Any]:
    """smdebug-rulesconfig's action classes, each with its argument checked first."""
    base_stop, base_email, base_sms = package.StopTraining, package.Email, package.SMS
    base_list, action = package.ActionList, package.actions.actions.Action

    class StopTraining(base_stop):  # type: ignore[misc,valid-type]  # a base loaded at run time
        """Stop the training job when the rule fires (the job of this estimator by default)."""

        def __init__(self, training_job_prefix: str | None = None) -> None:
            if training_job_prefix is not None:
                _check(
                    "training_job_prefix",
                    training_job_prefix,
                    _PREFIX,
                    "letters, digits and hyphens (the prefix of one running job's name)",
                )
            super().__init__(training_job_prefix)

    class Email(base_email):  # type: ignore[misc,valid-type]  # a base loaded at run time
        """Send an email (through Amazon SNS) when the rule fires."""

        def __init__(self, email_address: str) -> None:
            _check(
                "email_address",
                email_address,
                _EMAIL,
                "an address such as name@example.com (lowercase letters and digits, "
                "then @domain.tld)",
            )
            super().__init__(email_address)

    class SMS(base_sms):  # type: ignore[misc,valid-type]  # a base loaded at run time
        """Send a text message (through Amazon SNS) when the rule fires."""

        def __init__(self, phone_number: str) -> None:
            _check(
                "phone_number",
                phone_number,
                _PHONE,
                "an E.164 phone number such as '+14155550123' (+, then up to 15 digits)",
            )
            super().__init__(phone_number)

    class ActionList(base_list):  # type: ignore[misc,valid-type]  # a base loaded at run time
        """The actions a rule runs when it fires: ``ActionList(StopTraining(), Email(...))``."""

        def __init__(self, *actions: Any) -> None:
            for index, item in enumerate(actions):
                if not isinstance(item, action):
                    raise ConfigurationError.invalid(
                        f"actions[{index}]", item, "StopTraining(), Email(...) or SMS(...)"
                    )
            super().__init__(*actions)

    made = {"StopTraining": StopTraining, "Email": Email, "SMS": SMS, "ActionList": ActionList}
    for name, cls in made.items():
        cls.__module__, cls.__qualname__ = __name__, name
    return made


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _made:
        package = _package()
        if name in _ACTIONS:
            _made.update(_action_classes(package))
        else:
            _made[name] = getattr(package, name)
    return _made[name]


def __dir__() -> list[str]:
    return sorted(__all__)
