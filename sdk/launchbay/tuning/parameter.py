"""Hyperparameter ranges: what a tuning job may choose for each tuned hyperparameter.

SDK v2's ``sagemaker.parameter`` classes, with the checks SageMaker itself makes on
a range (so that a bad range fails when it is written, naming the argument):

* :class:`ContinuousParameter` and :class:`IntegerParameter`: ``min_value`` and
  ``max_value`` (numbers, ``min_value <= max_value``) and a ``scaling_type``, one of
  :data:`SCALING_TYPES`. ``Logarithmic`` needs ``min_value > 0``;
  ``ReverseLogarithmic`` is for continuous ranges within ``0 <= x < 1``.
* :class:`CategoricalParameter`: one value or a list; every value is sent as a string
  (``str(value)``), and for framework estimators (which JSON-decode their
  hyperparameters) as the JSON text of that string (:meth:`~CategoricalParameter.as_json_range`).

In the request a range is ``{"Name", "MinValue", "MaxValue", "ScalingType"}`` (the
bounds as strings) or ``{"Name", "Values"}``; :func:`ranges_request` groups them as
``HyperParameterRanges`` wants them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from launchbay.errors import ConfigurationError

__all__ = [
    "ParameterRange",
    "ContinuousParameter",
    "IntegerParameter",
    "CategoricalParameter",
    "SCALING_TYPES",
    "ranges_request",
    "ranges_from_request",
]

#: The scaling types SageMaker accepts for numeric ranges.
SCALING_TYPES = ("Auto", "Linear", "Logarithmic", "ReverseLogarithmic")
#: Most values one categorical range may list (SageMaker's limit).
MAX_CATEGORICAL_VALUES = 30


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ParameterRange:
    """Base of the numeric ranges: ``min_value``, ``max_value`` and ``scaling_type``."""

    #: ``Continuous``, ``Integer`` or ``Categorical``: the ``<type>ParameterRanges`` key.
    range_type: ClassVar[str] = ""
    #: SDK v2 names the range types this way (``sagemaker.parameter.ParameterRange``).
    __all_types__: ClassVar[tuple[str, ...]] = ("Continuous", "Categorical", "Integer")

    def __init__(self, min_value: Any, max_value: Any, scaling_type: str = "Auto") -> None:
        owner = type(self).__name__
        for argument, value in (("min_value", min_value), ("max_value", max_value)):
            if not self._accepts(value):
                raise ConfigurationError.invalid(
                    f"{owner}({argument})", value, self._accepted_values()
                )
        if min_value > max_value:
            raise ConfigurationError.invalid(
                f"{owner}(min_value, max_value)",
                (min_value, max_value),
                "min_value less than or equal to max_value",
            )
        if scaling_type not in SCALING_TYPES:
            raise ConfigurationError.invalid(
                f"{owner}(scaling_type)", scaling_type, ", ".join(SCALING_TYPES)
            )
        if scaling_type == "Logarithmic" and min_value <= 0:
            raise ConfigurationError.invalid(
                f"{owner}(min_value)",
                min_value,
                "a value above 0 with scaling_type='Logarithmic' (SageMaker refuses others)",
            )
        if scaling_type == "ReverseLogarithmic" and not (
            self.range_type == "Continuous" and 0 <= min_value and max_value < 1
        ):
            raise ConfigurationError.invalid(
                f"{owner}(scaling_type)",
                scaling_type,
                "ReverseLogarithmic only on a ContinuousParameter within 0 <= x < 1 "
                "(SageMaker refuses others)",
            )
        self.min_value = min_value
        self.max_value = max_value
        self.scaling_type = scaling_type

    @staticmethod
    def _accepts(value: Any) -> bool:
        return _is_number(value) and math.isfinite(value)

    @staticmethod
    def _accepted_values() -> str:
        return "a finite number"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.min_value!r}, {self.max_value!r}, "
            f"scaling_type={self.scaling_type!r})"
        )

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash((type(self), json.dumps(vars(self), sort_keys=True, default=str)))

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` lies in the range."""
        return bool(self.min_value <= value <= self.max_value)

    @classmethod
    def cast_to_type(cls, value: Any) -> Any:
        """``value`` (as SageMaker passed it, a string) as this range's Python type."""
        return float(value)

    def as_tuning_range(self, name: str) -> dict[str, Any]:
        """This range in the request: bounds as strings, and the scaling type."""
        return {
            "Name": name,
            "MinValue": str(self.min_value),
            "MaxValue": str(self.max_value),
            "ScalingType": self.scaling_type,
        }


class ContinuousParameter(ParameterRange):
    """Any real number between ``min_value`` and ``max_value``."""

    range_type = "Continuous"


class IntegerParameter(ParameterRange):
    """Any integer between ``min_value`` and ``max_value`` (both included)."""

    range_type = "Integer"

    @staticmethod
    def _accepts(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    @staticmethod
    def _accepted_values() -> str:
        return "an integer"

    @classmethod
    def cast_to_type(cls, value: Any) -> Any:
        return int(value)


class CategoricalParameter(ParameterRange):
    """One of a list of values, each sent as a string."""

    range_type = "Categorical"

    def __init__(self, values: Any) -> None:  # no bounds: the base constructor does not apply
        listed = values if isinstance(values, list | tuple) else [values]
        if not listed or len(listed) > MAX_CATEGORICAL_VALUES:
            raise ConfigurationError.invalid(
                "CategoricalParameter(values)",
                values,
                f"one value or a list of 1 to {MAX_CATEGORICAL_VALUES} values",
            )
        self.values = [str(v) for v in listed]

    def __repr__(self) -> str:
        return f"CategoricalParameter({self.values!r})"

    def is_valid(self, value: Any) -> bool:
        return value in self.values

    @classmethod
    def cast_to_type(cls, value: Any) -> Any:
        return str(value)

    def as_tuning_range(self, name: str) -> dict[str, Any]:
        """This range in the request, each value as its string."""
        return {"Name": name, "Values": list(self.values)}

    def as_json_range(self, name: str) -> dict[str, Any]:
        """This range for an estimator that JSON-decodes its hyperparameters (frameworks)."""
        return {"Name": name, "Values": [json.dumps(v) for v in self.values]}


def check_ranges(ranges: Any, argument: str = "hyperparameter_ranges") -> dict[str, ParameterRange]:
    """``ranges`` as a dict of name -> range, or a ConfigurationError naming ``argument``."""
    if not isinstance(ranges, Mapping):
        raise ConfigurationError.invalid(
            argument, ranges, "a dict of hyperparameter name to ContinuousParameter, "
            "IntegerParameter or CategoricalParameter",
        )  # fmt: skip
    out: dict[str, ParameterRange] = {}
    for name, value in ranges.items():
        if not isinstance(name, str) or not name:
            raise ConfigurationError.invalid(
                f"{argument} key", name, "a hyperparameter name (a non-empty string)"
            )
        if not isinstance(value, ParameterRange):
            raise ConfigurationError.invalid(
                f"{argument}[{name!r}]",
                value,
                "a ContinuousParameter, IntegerParameter or CategoricalParameter",
            )
        out[name] = value
    return out


def ranges_request(ranges: Mapping[str, ParameterRange], json_values: bool) -> dict[str, Any]:
    """``HyperParameterRanges``: each range under its type, in the order given.

    ``json_values``: categorical values as JSON text (framework estimators, SDK v2's rule).
    """
    out: dict[str, Any] = {}
    for range_type in ParameterRange.__all_types__:
        listed = []
        for name, parameter in ranges.items():
            if parameter.range_type != range_type:
                continue
            if json_values and isinstance(parameter, CategoricalParameter):
                listed.append(parameter.as_json_range(name))
            else:
                listed.append(parameter.as_tuning_range(name))
        out[f"{range_type}ParameterRanges"] = listed
    return out


def ranges_from_request(
    request: Mapping[str, Any], json_values: bool = False
) -> dict[str, ParameterRange]:
    """The ranges of a ``HyperParameterRanges`` (a job's description), as objects.

    ``json_values``: the categorical values were sent as JSON text (a framework
    estimator's); they are decoded, so that the range sends them again as they were
    (SDK v2's ``attach`` keeps the JSON text, and encodes it a second time).
    Numeric bounds are parsed, with their scaling type.
    """
    out: dict[str, ParameterRange] = {}
    for item in request.get("CategoricalParameterRanges") or []:
        values = list(item["Values"])
        if json_values:
            values = [_json_text(v) for v in values]
        out[item["Name"]] = CategoricalParameter(values)
    for item in request.get("ContinuousParameterRanges") or []:
        out[item["Name"]] = ContinuousParameter(
            float(item["MinValue"]), float(item["MaxValue"]), item.get("ScalingType", "Auto")
        )
    for item in request.get("IntegerParameterRanges") or []:
        out[item["Name"]] = IntegerParameter(
            int(item["MinValue"]), int(item["MaxValue"]), item.get("ScalingType", "Auto")
        )
    return out


def _json_text(value: str) -> str:
    """The string a JSON text of a string holds (other values as they are)."""
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return decoded if isinstance(decoded, str) else value
