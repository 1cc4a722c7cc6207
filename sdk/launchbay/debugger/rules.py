"""SageMaker Debugger rules: SDK v2's ``Rule`` and ``ProfilerRule``.

A rule becomes one entry of the request's ``DebugRuleConfigurations`` (``Rule``)
or ``ProfilerRuleConfigurations`` (``ProfilerRule``); SageMaker runs each as a
processing job beside the training job. Built-in rules take their base config
from :mod:`launchbay.debugger.rule_configs` (the ``smdebug-rulesconfig``
package) and run on the region's rule evaluator image, which the estimator
fills in (:mod:`launchbay.debugger.requests`). docs/debugger.md.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from launchbay.debugger.hook import CollectionConfig, str_dict
from launchbay.errors import ConfigurationError

__all__ = ["DEFAULT_RULE_EVALUATOR_IMAGE", "ProfilerRule", "Rule", "RuleBase"]

#: The image of a built-in rule until the estimator resolves the region's (SDK v2's marker).
DEFAULT_RULE_EVALUATOR_IMAGE = "DEFAULT_RULE_EVALUATOR_IMAGE"
#: The name SDK v2 gives SageMaker Profiler's processing rule (a timestamp follows).
DETAILED_PROFILER_RULE = "DetailedProfilerProcessingJobConfig"

_BUILTIN_ACCEPTED = "a rule config from launchbay.debugger.rule_configs, e.g. rule_configs.{}()"


def _text(argument: str, value: Any, accepted: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError.invalid(argument, value, accepted)
    return value


def _optional_text(argument: str, value: Any, accepted: str) -> str | None:
    return None if value is None else _text(argument, value, accepted)


def _volume(value: Any) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigurationError.invalid("volume_size_in_gb", value, "an integer of at least 1")
    return value


def _trials(paths: Any) -> dict[str, str]:
    """``other_trial_<i>`` parameters for SimilarAcrossRuns (the other jobs' debug output)."""
    if paths is None:
        return {}
    if isinstance(paths, str) or not isinstance(paths, Sequence):
        raise ConfigurationError.invalid(
            "other_trials_s3_input_paths", paths, "a list of s3:// URIs"
        )
    return {
        f"other_trial_{index}": _text(f"other_trials_s3_input_paths[{index}]", path, "an s3:// URI")
        for index, path in enumerate(paths)
    }


def _collections(value: Any) -> list[CollectionConfig]:
    if value is None:
        return []
    if isinstance(value, CollectionConfig) or not isinstance(value, Sequence):
        raise ConfigurationError.invalid(
            "collections_to_save", value, "a list of CollectionConfig objects"
        )
    for item in value:
        if not isinstance(item, CollectionConfig):
            raise ConfigurationError.invalid(
                "collections_to_save", item, "a list of CollectionConfig objects"
            )
    return list(value)


def _check_actions(actions: Any) -> Any:
    """An action or ActionList of ``rule_configs`` (smdebug-rulesconfig's classes), or None."""
    if actions is None:
        return None
    from launchbay.debugger import rule_configs  # lazy: smdebug-rulesconfig only with actions

    if not rule_configs.is_valid_action_object(actions):
        raise ConfigurationError.invalid(
            "actions",
            actions,
            "rule_configs.ActionList(...) or one action: rule_configs.StopTraining(), "
            "rule_configs.Email(address), rule_configs.SMS(phone number)",
        )
    return actions


def _source_and_invoke(source: Any, rule_to_invoke: Any) -> dict[str, str]:
    if bool(source) != bool(rule_to_invoke):
        given, missing = ("source", "rule_to_invoke") if source else ("rule_to_invoke", "source")
        raise ConfigurationError(
            f"{given} is given without {missing}: a custom rule names the file that holds it "
            "(source: an s3:// URI or a local path) and the rule class to run in it "
            "(rule_to_invoke). Accepted: both, or neither.",
            argument=missing,
        )
    if not source:
        return {}
    return {
        "source_s3_uri": _text("source", source, "an s3:// URI or the path of a local file"),
        "rule_to_invoke": _text("rule_to_invoke", rule_to_invoke, "the rule's class name"),
    }


class RuleBase:
    """What every rule has; made by ``Rule.sagemaker``/``custom`` and ``ProfilerRule``'s."""

    def __init__(
        self,
        name: str,
        image_uri: str,
        instance_type: str | None,
        container_local_output_path: str | None,
        s3_output_path: str | None,
        volume_size_in_gb: int | None,
        rule_parameters: dict[str, Any],
    ) -> None:
        self.name = name
        self.image_uri = image_uri
        self.instance_type = instance_type
        self.container_local_output_path = container_local_output_path
        self.s3_output_path = s3_output_path
        self.volume_size_in_gb = volume_size_in_gb
        self.rule_parameters = rule_parameters

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, image_uri={self.image_uri!r})"

    @property
    def uses_default_image(self) -> bool:
        return self.image_uri == DEFAULT_RULE_EVALUATOR_IMAGE

    def _base_request(self, image_uri: str) -> dict[str, Any]:
        """The entry's fields besides ``RuleParameters``; a built-in rule's image is resolved."""
        request: dict[str, Any] = {
            "RuleConfigurationName": self.name,
            "RuleEvaluatorImage": image_uri,
        }
        builtin = self.uses_default_image and not self.name.startswith(DETAILED_PROFILER_RULE)
        # SageMaker picks the instance of a built-in rule (SDK v2 leaves them out).
        if self.instance_type and not builtin:
            request["InstanceType"] = self.instance_type
        if self.volume_size_in_gb and not builtin:
            request["VolumeSizeInGB"] = self.volume_size_in_gb
        if self.container_local_output_path:
            request["LocalPath"] = self.container_local_output_path
        if self.s3_output_path:
            request["S3OutputPath"] = self.s3_output_path
        return request


class Rule(RuleBase):
    """A debugging rule (tensors): ``Rule.sagemaker(rule_configs.<rule>())`` or ``Rule.custom``."""

    def __init__(
        self,
        name: str,
        image_uri: str,
        instance_type: str | None,
        container_local_output_path: str | None,
        s3_output_path: str | None,
        volume_size_in_gb: int | None,
        rule_parameters: dict[str, Any],
        collections_to_save: list[CollectionConfig],
        actions: Any = None,
    ) -> None:
        super().__init__(
            name,
            image_uri,
            instance_type,
            container_local_output_path,
            s3_output_path,
            volume_size_in_gb,
            rule_parameters,
        )
        self.collection_configs = collections_to_save
        self.actions = actions
        #: How ``Rule.sagemaker`` made it (written back to a job spec), else None.
        self._made_as: dict[str, Any] | None = None

    @classmethod
    def sagemaker(
        cls,
        base_config: Mapping[str, Any],
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: Mapping[str, Any] | None = None,
        collections_to_save: list[CollectionConfig] | None = None,
        actions: Any = None,
    ) -> Rule:
        """A built-in rule: ``base_config`` from ``rule_configs`` (``rule_configs.overfit()``).

        ``rule_parameters`` are added to the rule's own (numbers and booleans become
        strings); ``collections_to_save`` replaces the collections the rule saves by
        default; ``actions`` (``rule_configs.ActionList(StopTraining(), Email(...))``)
        run when the rule fires.
        """
        if not isinstance(base_config, Mapping) or not isinstance(
            base_config.get("DebugRuleConfiguration"), Mapping
        ):
            raise ConfigurationError.invalid(
                "base_config", base_config, _BUILTIN_ACCEPTED.format("vanishing_gradient")
            )
        user = str_dict("rule_parameters", rule_parameters) or {}
        if user.get("rule_to_invoke") is not None:
            raise ConfigurationError.invalid(
                "rule_parameters['rule_to_invoke']",
                user["rule_to_invoke"],
                "no rule_to_invoke for a built-in rule (it names its own); a rule of your "
                "own is Rule.custom(..., source=..., rule_to_invoke=...)",
            )
        rule = base_config["DebugRuleConfiguration"]
        parameters: dict[str, Any] = _trials(other_trials_s3_input_paths)
        parameters.update(copy.deepcopy(dict(rule.get("RuleParameters") or {})))
        parameters.update(user)
        defaults = [
            CollectionConfig(item.get("CollectionName"), item.get("CollectionParameters") or {})
            for item in base_config.get("CollectionConfigurations") or []
        ]
        made = cls(
            name=_text("name", name or rule.get("RuleConfigurationName"), "a rule name"),
            image_uri=DEFAULT_RULE_EVALUATOR_IMAGE,
            instance_type=None,
            container_local_output_path=_optional_text(
                "container_local_output_path", container_local_output_path, "an absolute path"
            ),
            s3_output_path=_optional_text("s3_output_path", s3_output_path, "an s3:// URI"),
            volume_size_in_gb=None,
            rule_parameters=parameters,
            collections_to_save=_collections(collections_to_save) or defaults,
            actions=_check_actions(actions),
        )
        made._made_as = {
            "builtin": rule.get("RuleConfigurationName"),
            "name": name,
            "parameters": dict(user) or None,
            "collections": _collections(collections_to_save) or None,
            "other_trials_s3_input_paths": other_trials_s3_input_paths,
        }
        return made

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str,
        instance_type: str,
        volume_size_in_gb: int,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        other_trials_s3_input_paths: list[str] | None = None,
        rule_parameters: Mapping[str, Any] | None = None,
        collections_to_save: list[CollectionConfig] | None = None,
        actions: Any = None,
    ) -> Rule:
        """A rule of your own: ``rule_to_invoke``, a class in ``source``, run on ``image_uri``.

        ``source`` is an ``s3://`` URI or a local file, which ``fit()`` uploads (as
        SDK v2 does) for a SageMaker job.
        """
        parameters = _trials(other_trials_s3_input_paths)
        parameters.update(_source_and_invoke(source, rule_to_invoke))
        parameters.update(str_dict("rule_parameters", rule_parameters) or {})
        return cls(
            name=_text("name", name, "a rule name"),
            image_uri=_text("image_uri", image_uri, "the URI of the rule's evaluator image"),
            instance_type=_text("instance_type", instance_type, "an ml.* instance type"),
            container_local_output_path=_optional_text(
                "container_local_output_path", container_local_output_path, "an absolute path"
            ),
            s3_output_path=_optional_text("s3_output_path", s3_output_path, "an s3:// URI"),
            volume_size_in_gb=_volume(volume_size_in_gb),
            rule_parameters=parameters,
            collections_to_save=_collections(collections_to_save),
            actions=_check_actions(actions),
        )

    def to_debugger_rule_config_dict(
        self, image_uri: str | None = None, job_name: str | None = None
    ) -> dict[str, Any]:
        """The ``DebugRuleConfigurations`` entry; ``actions`` name ``job_name`` to stop.

        Nothing of the rule changes: a ``StopTraining()`` without a prefix stops
        ``job_name`` in this request only.
        """
        request = self._base_request(image_uri or self.image_uri)
        parameters = dict(self.rule_parameters)
        parameters.pop("action_json", None)  # only actions= writes it
        if self.actions is not None:
            parameters["action_json"] = _actions_text(self.actions, job_name)
        if parameters:
            request["RuleParameters"] = parameters
        return request


def _actions_text(actions: Any, job_name: str | None) -> str:
    """The ``action_json`` parameter: the actions as the rule container reads them.

    smdebug-rulesconfig's serialisation, with a ``StopTraining`` that names no
    prefix given ``job_name`` (as SDK v2 does at ``fit()``), made on a copy.
    """
    actions = copy.deepcopy(actions)
    if job_name is not None:
        for action in getattr(actions, "actions", (actions,)):
            if getattr(action, "use_default_training_job_prefix", False):
                action.action_parameters["training_job_prefix"] = job_name
    return str(actions.serialize())


class ProfilerRule(RuleBase):
    """A profiling rule (system and framework metrics): ``ProfilerRule.sagemaker(...)``."""

    @classmethod
    def sagemaker(
        cls,
        base_config: Any,
        name: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        instance_type: str | None = None,
        volume_size_in_gb: int | None = None,
    ) -> ProfilerRule:
        """A built-in profiling rule: ``base_config`` such as ``rule_configs.ProfilerReport()``."""
        rule_name = getattr(base_config, "rule_name", None)
        parameters = getattr(base_config, "rule_parameters", None)
        if not isinstance(rule_name, str) or not isinstance(parameters, Mapping):
            raise ConfigurationError.invalid(
                "base_config",
                base_config,
                "a profiler rule from launchbay.debugger.rule_configs, e.g. "
                "rule_configs.ProfilerReport()",
            )
        used = _text("name", name or rule_name, "a rule name")
        if used.startswith(DETAILED_PROFILER_RULE):
            from launchbay.debugger.profiler import (
                DETAILED_PROFILER_INSTANCE_TYPE,
                DETAILED_PROFILER_VOLUME_GB,
            )

            volume_size_in_gb = volume_size_in_gb or DETAILED_PROFILER_VOLUME_GB
            instance_type = instance_type or DETAILED_PROFILER_INSTANCE_TYPE
        return cls(
            name=used,
            image_uri=DEFAULT_RULE_EVALUATOR_IMAGE,
            instance_type=_optional_text("instance_type", instance_type, "an ml.* instance type"),
            container_local_output_path=_optional_text(
                "container_local_output_path", container_local_output_path, "an absolute path"
            ),
            s3_output_path=_optional_text("s3_output_path", s3_output_path, "an s3:// URI"),
            volume_size_in_gb=_volume(volume_size_in_gb),
            rule_parameters=dict(parameters),
        )

    @classmethod
    def custom(
        cls,
        name: str,
        image_uri: str,
        instance_type: str,
        volume_size_in_gb: int,
        source: str | None = None,
        rule_to_invoke: str | None = None,
        container_local_output_path: str | None = None,
        s3_output_path: str | None = None,
        rule_parameters: Mapping[str, Any] | None = None,
    ) -> ProfilerRule:
        """A profiling rule of your own (see :meth:`Rule.custom`)."""
        parameters: dict[str, Any] = _source_and_invoke(source, rule_to_invoke)
        if rule_parameters is not None and not isinstance(rule_parameters, Mapping):
            raise ConfigurationError.invalid("rule_parameters", rule_parameters, "a dict")
        parameters.update(rule_parameters or {})
        return cls(
            name=_text("name", name, "a rule name"),
            image_uri=_text("image_uri", image_uri, "the URI of the rule's evaluator image"),
            instance_type=_text("instance_type", instance_type, "an ml.* instance type"),
            container_local_output_path=_optional_text(
                "container_local_output_path", container_local_output_path, "an absolute path"
            ),
            s3_output_path=_optional_text("s3_output_path", s3_output_path, "an s3:// URI"),
            volume_size_in_gb=_volume(volume_size_in_gb),
            rule_parameters=parameters,
        )

    def to_profiler_rule_config_dict(self, image_uri: str | None = None) -> dict[str, Any]:
        """The ``ProfilerRuleConfigurations`` entry (parameter values as strings, as v2 sends)."""
        request = self._base_request(image_uri or self.image_uri)
        if self.rule_parameters:
            request["RuleParameters"] = {k: str(v) for k, v in self.rule_parameters.items()}
        return request
