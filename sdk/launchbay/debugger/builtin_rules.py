"""Built-in Debugger rules that local jobs evaluate, as smdebug rule classes.

smdebug 1.0.34 (PyPI) ships the rule interface (``smdebug.rules.rule.Rule``) and the
rule invoker (``smdebug.rules.rule_invoker.invoke_rule``), but not the built-in rules:
those live in SageMaker's rule container (``sagemaker-debugger-rules``). launchbay
implements the ones below on that interface, from the parameters and behaviour the
SageMaker Debugger documentation gives for each (each class says what it checks);
:mod:`launchbay.debugger.evaluate` runs them through ``invoke_rule`` as the rule
container runs its own. Parameters arrive as the request sends them: strings.

Imported only in a rule process (it imports smdebug). docs/debugger.md.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from smdebug.exceptions import TensorUnavailableForStep
from smdebug.rules.rule import Rule

__all__ = ["BUILTIN_RULES", "AllZero", "ExplodingTensor", "LossNotDecreasing", "VanishingGradient"]


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def _names(trial: Any, collection_names: str, tensor_regex: str, default: str | None) -> list[str]:
    """Tensor names of the collections (comma-separated) and regexes given, else ``default``'s."""
    names: set[str] = set()
    collections = [c.strip() for c in str(collection_names or "").split(",") if c.strip()]
    regexes = [r.strip() for r in str(tensor_regex or "").split(",") if r.strip()]
    for collection in collections:
        names.update(trial.tensor_names(collection=collection))
    if regexes:
        names.update(trial.tensor_names(regex=regexes))
    if not collections and not regexes:
        names.update(trial.tensor_names(collection=default) if default else trial.tensor_names())
    return sorted(names)


def _values(trial: Any, name: str, step: int) -> list[tuple[str, np.ndarray]]:
    """``[(worker, value)]`` of tensor ``name`` at ``step`` (every worker that saved it)."""
    tensor = trial.tensor(name)
    found = []
    for worker in tensor.workers(step):
        value = tensor.value(step, worker=worker)
        if value is not None:
            found.append((worker, np.asarray(value, dtype=np.float64)))
    return found


class _LocalRule(Rule):
    """A rule that keeps what it found, for the status details."""

    def __init__(self, base_trial: Any) -> None:
        super().__init__(base_trial, action_str="")
        self.finding = ""

    def tensors_at(self, names: list[str], step: int) -> list[tuple[str, str, np.ndarray]]:
        found = []
        for name in names:
            try:
                found += [
                    (name, worker, value) for worker, value in _values(self.base_trial, name, step)
                ]
            except TensorUnavailableForStep:
                continue
        return found


class VanishingGradient(_LocalRule):
    """Gradients too small: the mean of a gradient's absolute values below ``threshold`` (1e-7)."""

    def __init__(self, base_trial: Any, threshold: str = "0.0000001") -> None:
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step: int) -> bool:
        for name, worker, value in self.tensors_at(
            _names(self.base_trial, "", "", "gradients"), step
        ):
            mean = float(np.mean(np.abs(value))) if value.size else 0.0
            if mean < self.threshold:
                self.finding = (
                    f"the mean absolute value of {name} ({worker}) is {mean:.3g} at step {step}, "
                    f"below threshold {self.threshold:g}"
                )
                return True
        return False


class ExplodingTensor(_LocalRule):
    """A tensor holds NaN or infinite values (NaN only with ``only_nan``)."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str = "",
        tensor_regex: str = "",
        only_nan: str = "False",
    ) -> None:
        super().__init__(base_trial)
        self.collection_names, self.tensor_regex = collection_names, tensor_regex
        self.only_nan = _flag(only_nan)

    def invoke_at_step(self, step: int) -> bool:
        names = _names(self.base_trial, self.collection_names, self.tensor_regex, None)
        for name, worker, value in self.tensors_at(names, step):
            bad = np.isnan(value) if self.only_nan else ~np.isfinite(value)
            if bad.any():
                self.finding = (
                    f"{name} ({worker}) holds {int(bad.sum())} NaN/infinite value(s) at step {step}"
                )
                return True
        return False


class AllZero(_LocalRule):
    """A tensor whose share of zeros is at least ``threshold`` percent (100: all zero)."""

    def __init__(
        self,
        base_trial: Any,
        collection_names: str = "",
        tensor_regex: str = "",
        threshold: str = "100",
    ) -> None:
        super().__init__(base_trial)
        self.collection_names, self.tensor_regex = collection_names, tensor_regex
        self.threshold = float(threshold)

    def invoke_at_step(self, step: int) -> bool:
        names = _names(self.base_trial, self.collection_names, self.tensor_regex, None)
        for name, worker, value in self.tensors_at(names, step):
            share = 100.0 * float(np.mean(value == 0)) if value.size else 100.0
            if share >= self.threshold:
                self.finding = f"{share:.0f}% of {name} ({worker}) is zero at step {step}"
                return True
        return False


class LossNotDecreasing(_LocalRule):
    """The loss did not fall by ``diff_percent`` percent (0.1) over ``num_steps`` steps (10).

    The loss (the ``losses`` collection with ``use_losses_collection``, and the
    tensors ``tensor_regex`` names), averaged over the workers, is compared with its
    value at the latest saved step at least ``num_steps`` before; a rise of more than
    ``increase_threshold_percent`` (5) is named as such.
    """

    def __init__(
        self,
        base_trial: Any,
        tensor_regex: str = "",
        use_losses_collection: str = "True",
        num_steps: str = "10",
        diff_percent: str = "0.1",
        increase_threshold_percent: str = "5",
        mode: str = "",
    ) -> None:
        super().__init__(base_trial)
        self.tensor_regex = tensor_regex
        self.use_losses = _flag(use_losses_collection)
        self.num_steps = int(num_steps)
        self.diff_percent = float(diff_percent)
        self.increase_percent = float(increase_threshold_percent)

    def _loss(self, name: str, step: int) -> float | None:
        try:
            values = _values(self.base_trial, name, step)
        except TensorUnavailableForStep:
            return None
        return float(np.mean([float(np.mean(v)) for _, v in values])) if values else None

    def invoke_at_step(self, step: int) -> bool:
        names = set(self.base_trial.tensor_names(collection="losses")) if self.use_losses else set()
        if self.tensor_regex:
            names.update(
                self.base_trial.tensor_names(
                    regex=[r for r in re.split(",", self.tensor_regex) if r]
                )
            )
        for name in sorted(names):
            current = self._loss(name, step)
            earlier = [
                s for s in self.base_trial.tensor(name).steps() if s <= step - self.num_steps
            ]
            if current is None or not earlier:
                continue
            before = self._loss(name, earlier[-1])
            if before is None:
                continue
            fell = 100.0 * (before - current) / abs(before) if before else -100.0 * abs(current)
            if fell < self.diff_percent:
                how = (
                    f"rose by {-fell:.3g}% (more than {self.increase_percent:g}%)"
                    if -fell > self.increase_percent
                    else f"fell by {max(fell, 0.0):.3g}% (less than {self.diff_percent:g}%)"
                )
                self.finding = f"{name} {how} from step {earlier[-1]} ({before:.6g}) to step {step} ({current:.6g})"
                return True
        return False


#: ``rule_to_invoke`` -> the class, for the built-in rules local jobs evaluate.
BUILTIN_RULES: dict[str, type[_LocalRule]] = {
    cls.__name__: cls for cls in (VanishingGradient, ExplodingTensor, AllZero, LossNotDecreasing)
}
