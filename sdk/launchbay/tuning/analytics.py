"""A tuning job's trials as a table: SDK v2's ``HyperparameterTuningJobAnalytics``.

``dataframe()`` has one row per trial and SDK v2's columns: each tuned
hyperparameter (as a number where it reads as one), ``TrainingJobName``,
``TrainingJobStatus``, ``FinalObjectiveValue``, ``TrainingStartTime``,
``TrainingEndTime``, ``TrainingElapsedTimeSeconds`` and, for a tuning job of
several estimators, ``TrainingJobDefinitionName``. pandas is optional: without it
``dataframe()`` raises :class:`~launchbay.errors.MissingDependencyError` naming
``pip install 'launchbay[analytics]'``, and :meth:`rows` gives the same table as a
list of dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from launchbay.backends.state import JobState
from launchbay.errors import MissingDependencyError
from launchbay.tuning.sagemaker import TuningJob

__all__ = ["HyperparameterTuningJobAnalytics", "trial_row"]


def trial_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    """One trial's row from its ``TrainingJobSummary`` (SDK v2's columns)."""
    row: dict[str, Any] = {}
    for name, value in (summary.get("TunedHyperParameters") or {}).items():
        try:
            row[name] = float(value)
        except (TypeError, ValueError):
            row[name] = value
    row["TrainingJobName"] = summary.get("TrainingJobName")
    state = JobState.from_description(summary)
    row["TrainingJobStatus"] = state.described("status")
    row["FinalObjectiveValue"] = (
        summary.get("FinalHyperParameterTuningJobObjectiveMetric") or {}
    ).get("Value")
    start, end = state.described("start_time"), state.described("end_time")
    row["TrainingStartTime"] = start
    row["TrainingEndTime"] = end
    if start and end:
        row["TrainingElapsedTimeSeconds"] = (end - start).total_seconds()
    if "TrainingJobDefinitionName" in summary:
        row["TrainingJobDefinitionName"] = summary["TrainingJobDefinitionName"]
    return row


class HyperparameterTuningJobAnalytics:
    """The trials of a tuning job, read once and cached (``clear_cache()`` to re-read).

    Args:
        hyperparameter_tuning_job_name: The tuning job's name.
        sagemaker_session: A :class:`launchbay.Session` (default: a new one, unless a
            local tuning job of that name is here: then that one is read).
        tuning_job: The tuning job's handle (launchbay's: ``tuner.analytics()`` passes
            its local tuning job's).
    """

    def __init__(
        self,
        hyperparameter_tuning_job_name: str,
        sagemaker_session: Any = None,
        tuning_job: Any = None,
    ) -> None:
        if tuning_job is None and sagemaker_session is None:
            from launchbay.tuning import local  # a local tuning job of that name is read here

            if local.exists(hyperparameter_tuning_job_name):
                tuning_job = local.LocalTuningJob(hyperparameter_tuning_job_name)
        if tuning_job is None:
            if sagemaker_session is None:
                from launchbay.session import Session

                sagemaker_session = Session()
            tuning_job = TuningJob(sagemaker_session, hyperparameter_tuning_job_name)
        #: The tuning job's handle: SageMaker's, or a local one (``tuning_job``, or found here).
        self._job = tuning_job
        self._description: dict[str, Any] | None = None
        self._summaries: list[dict[str, Any]] | None = None

    @property
    def name(self) -> str:
        return self._job.name

    def __repr__(self) -> str:
        return f"<launchbay HyperparameterTuningJobAnalytics for {self.name}>"

    def clear_cache(self) -> None:
        self._description = None
        self._summaries = None

    def description(self, force_refresh: bool = False) -> dict[str, Any]:
        """The DescribeHyperParameterTuningJob response (cached)."""
        if force_refresh:
            self.clear_cache()
        if self._description is None:
            self._description = self._job.describe()
        return self._description

    def training_job_summaries(self, force_refresh: bool = False) -> list[dict[str, Any]]:
        """Every trial's ``TrainingJobSummary`` (cached)."""
        if force_refresh:
            self.clear_cache()
        if self._summaries is None:
            self._summaries = self._job.training_jobs()
        return self._summaries

    @property
    def tuning_ranges(self) -> dict[str, Any]:
        """The ranges by hyperparameter name (by definition name, then name, for several estimators)."""
        description = self.description()

        def by_name(ranges: Mapping[str, Any]) -> dict[str, Any]:
            return {
                item["Name"]: item
                for key, items in ranges.items()
                if key != "AutoParameters"
                for item in items
            }

        if description.get("TrainingJobDefinition"):
            return by_name(
                description["HyperParameterTuningJobConfig"].get("ParameterRanges") or {}
            )
        return {
            d["DefinitionName"]: by_name(d.get("HyperParameterRanges") or {})
            for d in description.get("TrainingJobDefinitions") or []
        }

    def rows(self, force_refresh: bool = False) -> list[dict[str, Any]]:
        """The table as a list of dicts, one per trial (no pandas needed)."""
        return [trial_row(s) for s in self.training_job_summaries(force_refresh)]

    def dataframe(self, force_refresh: bool = False) -> Any:
        """The table as a ``pandas.DataFrame``.

        Raises:
            MissingDependencyError: pandas is not installed.
        """
        import importlib

        try:
            pd = importlib.import_module("pandas")  # optional: the analytics extra
        except ImportError as exc:
            raise MissingDependencyError.for_module(
                "pandas", "analytics", "HyperparameterTuningJobAnalytics.dataframe()"
            ) from exc
        return pd.DataFrame(self.rows(force_refresh))

    def export_csv(self, filename: str) -> None:
        """Write :meth:`dataframe` to ``filename`` as CSV (SDK v2's helper)."""
        self.dataframe().to_csv(filename)
