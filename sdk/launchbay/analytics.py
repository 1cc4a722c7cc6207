"""SDK v2's ``sagemaker.analytics``: a training job's metrics and a tuning job's trials as tables.

:class:`TrainingJobAnalytics` is SDK v2's class of that name for local jobs:
``dataframe()`` has its columns, ``timestamp`` (seconds since the job's
``TrainingStartTime``), ``metric_name`` and ``value``, one row per value the job
logged for each of its ``metric_definitions`` (read with SageMaker's rule by
:mod:`launchbay.metrics`, kept in ``<job dir>/metrics.jsonl`` while the job runs).
``Estimator.training_job_analytics`` returns it for the estimator's latest job.
On SageMaker SDK v2 reads these values from CloudWatch; launchbay does not yet,
and says so (:class:`MetricsNotAvailable`).

:class:`~launchbay.tuning.analytics.HyperparameterTuningJobAnalytics` is
re-exported here, where SDK v2 has it.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from launchbay.errors import ConfigurationError, LaunchbayError, MissingDependencyError
from launchbay.metrics import METRICS_FILE, load_metrics, read_logs, stored_metrics_file
from launchbay.tuning.analytics import HyperparameterTuningJobAnalytics

__all__ = ["TrainingJobAnalytics", "HyperparameterTuningJobAnalytics", "MetricsNotAvailable"]


class MetricsNotAvailable(LaunchbayError, NotImplementedError):
    """The job's metrics cannot be read here (a SageMaker job: CloudWatch is not read yet)."""


class TrainingJobAnalytics:
    """The metrics of one training job (SDK v2's ``TrainingJobAnalytics``).

    Args:
        training_job_name: The job's name.
        metric_names: The metrics to keep (default: every metric the job defines).
        sagemaker_session: The session the job's backend is looked up with.
        start_time, end_time: Keep only values logged within this interval
            (datetimes, as SDK v2 takes them).
        period: Accepted for SDK v2's signature (CloudWatch's aggregation period);
            a local job keeps every value, so it is not used.

    Raises:
        ConfigurationError: no job of that name is here or on SageMaker.
    """

    CLOUDWATCH_NAMESPACE = "/aws/sagemaker/TrainingJobs"

    def __init__(
        self,
        training_job_name: str,
        metric_names: Sequence[str] | None = None,
        sagemaker_session: Any = None,
        start_time: _dt.datetime | None = None,
        end_time: _dt.datetime | None = None,
        period: int | None = None,
    ) -> None:
        if not isinstance(training_job_name, str) or not training_job_name:
            raise ConfigurationError.invalid(
                "training_job_name", training_job_name, "the name of a training job"
            )
        self.name = training_job_name
        self._metric_names = None if metric_names is None else list(metric_names)
        self._session = sagemaker_session
        self._start_time = start_time
        self._end_time = end_time
        self._period = period
        self._rows: list[dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"<launchbay TrainingJobAnalytics for {self.name}>"

    def clear_cache(self) -> None:
        self._rows = None

    def _description(self) -> dict[str, Any]:
        # the backends' registry: looked up where the job is (local first), as attach does
        from launchbay.backends import registry

        backend = registry.backend_for_job(self.name, self._session)
        return dict(backend.describe(self.name))

    def rows(self, force_refresh: bool = False) -> list[dict[str, Any]]:
        """The table as a list of dicts (``timestamp``, ``metric_name``, ``value``); no pandas needed.

        Raises:
            MetricsNotAvailable: a SageMaker job (its metrics are in CloudWatch).
        """
        if force_refresh:
            self.clear_cache()
        if self._rows is None:
            self._rows = self._read()
        return [dict(r) for r in self._rows]

    def _read(self) -> list[dict[str, Any]]:
        description = self._description()
        job_dir = description.get("LocalJobDir")
        if not job_dir:
            raise MetricsNotAvailable(
                f"TrainingJobAnalytics({self.name!r}): this is a SageMaker training job, whose "
                "metrics SDK v2 reads from CloudWatch (namespace /aws/sagemaker/TrainingJobs); "
                "launchbay reads the metrics of local jobs only. Next: "
                "sagemaker.analytics.TrainingJobAnalytics, or the CloudWatch console."
            )
        series = stored_series(str(job_dir), description)
        start = description.get("TrainingStartTime") or description.get("CreationTime")
        origin = start.timestamp() if isinstance(start, _dt.datetime) else 0.0
        wanted = self._metric_names
        low = self._start_time.timestamp() if self._start_time else None
        high = self._end_time.timestamp() if self._end_time else None
        rows = []
        for name, points in series.items():
            if wanted is not None and name not in wanted:
                continue
            for stamp, value in points:
                if (low is not None and stamp < low) or (high is not None and stamp > high):
                    continue
                rows.append(
                    {"timestamp": max(stamp - origin, 0.0), "metric_name": name, "value": value}
                )
        rows.sort(key=lambda r: (r["metric_name"], r["timestamp"]))
        return rows

    def dataframe(self, force_refresh: bool = False) -> Any:
        """The table as a ``pandas.DataFrame`` (SDK v2's columns).

        Raises:
            MissingDependencyError: pandas is not installed.
            MetricsNotAvailable: a SageMaker job.
        """
        try:
            pd = importlib.import_module("pandas")  # optional: the analytics extra
        except ImportError as exc:
            raise MissingDependencyError.for_module(
                "pandas", "analytics", "TrainingJobAnalytics.dataframe()"
            ) from exc
        return pd.DataFrame(self.rows(force_refresh), columns=["timestamp", "metric_name", "value"])

    def export_csv(self, filename: str) -> None:
        """Write :meth:`dataframe` to ``filename`` (SDK v2's helper)."""
        self.dataframe().to_csv(filename)


def stored_series(job_dir: str, description: dict[str, Any]) -> dict[str, list[list[float]]]:
    """A local job's metrics: its metrics file, else read now from its log files.

    A job that ran before metrics were recorded has no metrics file: its log files
    are read to their end with its ``MetricDefinitions`` (in a recorder process, as
    a running job's are: a regex that backtracks cannot hang this one), each value
    stamped with the time its log file was last written. Nothing is written in the
    job's directory.
    """
    if stored_metrics_file(job_dir) is not None:
        return dict(load_metrics(job_dir)["metrics"])
    definitions = (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions")
    if not definitions:
        return {}
    logs = os.path.join(job_dir, "logs")
    try:
        files = sorted(os.path.join(logs, f) for f in os.listdir(logs) if f.endswith(".log"))
    except OSError:
        files = []
    stamp = max((os.path.getmtime(f) for f in files), default=0.0)
    with tempfile.TemporaryDirectory(prefix="launchbay-metrics-") as scratch:
        reader = read_logs(files, definitions, os.path.join(scratch, METRICS_FILE), stamp=stamp)
    return reader.series()
