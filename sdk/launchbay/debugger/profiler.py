"""SageMaker Debugger's profiler settings: the request's ``ProfilerConfig``.

SDK v2's ``ProfilerConfig``, ``FrameworkProfile``, the five metrics configs,
``PythonProfiler``/``cProfileTimer`` and ``Profiler``, with the same arguments and
the same request values (docs/debugger.md). Values are checked when an object is
made; a bad one is a :class:`~launchbay.errors.ConfigurationError` naming the
argument, the value and what is accepted.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from launchbay.errors import ConfigurationError
from launchbay.inputs import check_uri

__all__ = [
    "DataloaderProfilingConfig",
    "DetailedProfilingConfig",
    "FrameworkProfile",
    "HorovodProfilingConfig",
    "Profiler",
    "ProfilerConfig",
    "PythonProfiler",
    "PythonProfilingConfig",
    "SMDataParallelProfilingConfig",
    "cProfileTimer",
]

#: Where framework profiling writes its trace files in the container (the default).
PROFILER_LOCAL_PATH = "/opt/ml/output/profiler"
#: The system-metrics intervals the service takes (ProfilingIntervalInMilliseconds).
MONITOR_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)
#: The detailed profiler's processing job (Profiler): its instance type and volume.
DETAILED_PROFILER_INSTANCE_TYPE = "ml.m5.4xlarge"
DETAILED_PROFILER_VOLUME_GB = 128


class PythonProfiler(enum.Enum):
    """The Python profiler of ``PythonProfilingConfig``: cProfile or Pyinstrument."""

    CPROFILE = "cprofile"
    PYINSTRUMENT = "pyinstrument"


class cProfileTimer(enum.Enum):  # noqa: N801 - SDK v2's name
    """The timer cProfile measures with (``PythonProfilingConfig``)."""

    TOTAL_TIME = "total_time"
    CPU_TIME = "cpu_time"
    OFF_CPU_TIME = "off_cpu_time"
    DEFAULT = "default"


def _int(name: str, value: Any, minimum: int, accepted: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError.invalid(name, value, accepted)
    return value


def _positive_number(name: str, value: Any, accepted: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigurationError.invalid(name, value, accepted)
    return value


def _enum(name: str, value: Any, kind: type[enum.Enum]) -> Any:
    if isinstance(value, kind):
        return value
    for member in kind:
        if value == member.value:
            return member
    accepted = ", ".join(f"{kind.__name__}.{m.name} ({m.value!r})" for m in kind)
    raise ConfigurationError.invalid(name, value, accepted)


def _settings_text(values: Mapping[str, Any]) -> str:
    """The settings string the profiler reads (SDK v2's form: a dict literal, ", }" at the end)."""
    parts = []
    for key, value in values.items():
        shown = f'"{value}"' if isinstance(value, str) else str(value)
        parts.append(f'"{key}": {shown}, ')
    return "{" + "".join(parts) + "}"


class _MetricsConfig:
    """One framework-metrics profiling option: a step range or a time range."""

    name = ""
    _default_start_step = 0
    _default_num_steps = 1

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
    ) -> None:
        if not isinstance(profile_default_steps, bool):
            raise ConfigurationError.invalid(
                "profile_default_steps", profile_default_steps, "True or False"
            )
        if profile_default_steps or (
            start_step is None
            and num_steps is None
            and start_unix_time is None
            and duration is None
        ):
            start_step, num_steps = self._default_start_step, self._default_num_steps
        if start_step is not None:
            _int("start_step", start_step, 0, "an integer of at least 0")
        if num_steps is not None:
            _int("num_steps", num_steps, 1, "an integer of at least 1")
        if start_unix_time is not None:
            _int("start_unix_time", start_unix_time, 0, "a Unix time in seconds (an integer)")
            try:
                datetime.fromtimestamp(start_unix_time)
            except (OverflowError, OSError, ValueError):
                raise ConfigurationError.invalid(
                    "start_unix_time", start_unix_time, "a Unix time in seconds (an integer)"
                ) from None
        if duration is not None:
            _positive_number("duration", duration, "a number of seconds greater than 0")
        steps = start_step is not None or num_steps is not None
        if steps and (start_unix_time is not None or duration is not None):
            raise ConfigurationError(
                f"{type(self).__name__}: start_step/num_steps ({start_step!r}, {num_steps!r}) "
                f"cannot be combined with start_unix_time/duration ({start_unix_time!r}, "
                f"{duration!r}). Accepted: a step range or a time range, not both"
                + (
                    " (profile_default_steps=True sets the step range)"
                    if profile_default_steps
                    else ""
                )
                + ".",
                argument="start_unix_time" if start_unix_time is not None else "duration",
                value=start_unix_time if start_unix_time is not None else duration,
            )
        self.range: dict[str, Any]
        if steps:
            # SDK v2: a missing start step is step 0; a missing count is one step.
            self.range = {
                "StartStep": 0 if start_step is None else start_step,
                "NumSteps": (num_steps if num_steps is not None or start_step is None else 1),
            }
        else:
            self.range = {}
            if start_unix_time is not None:
                self.range["StartTimeInSecSinceEpoch"] = start_unix_time
            if duration is not None:
                self.range["Duration"] = duration

    def _settings(self) -> dict[str, Any]:
        return dict(self.range)

    def to_json_string(self) -> str:
        """The value of this option's ``ProfilingParameters`` entry."""
        return _settings_text(self._settings())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._settings()!r})"


class DetailedProfilingConfig(_MetricsConfig):
    """Detailed framework profiling (default: step 5, one step)."""

    name = "DetailedProfilingConfig"
    _default_start_step = 5


class DataloaderProfilingConfig(_MetricsConfig):
    """Data loader profiling (default: step 7, one step), of the metrics matching ``metrics_regex``."""

    name = "DataloaderProfilingConfig"
    _default_start_step = 7

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
        metrics_regex: str = ".*",
    ) -> None:
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)
        try:
            re.compile(metrics_regex)
        except (re.error, TypeError):
            raise ConfigurationError.invalid(
                "metrics_regex", metrics_regex, "a valid regular expression"
            ) from None
        self.metrics_regex = metrics_regex

    def _settings(self) -> dict[str, Any]:
        return {**self.range, "MetricsRegex": self.metrics_regex}


class PythonProfilingConfig(_MetricsConfig):
    """Python profiling with cProfile or Pyinstrument (default: steps 9 to 11)."""

    name = "PythonProfilingConfig"
    _default_start_step = 9
    _default_num_steps = 3

    def __init__(
        self,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
        profile_default_steps: bool = False,
        python_profiler: PythonProfiler | str = PythonProfiler.CPROFILE,
        cprofile_timer: cProfileTimer | str = cProfileTimer.TOTAL_TIME,
    ) -> None:
        super().__init__(start_step, num_steps, start_unix_time, duration, profile_default_steps)
        self.python_profiler = _enum("python_profiler", python_profiler, PythonProfiler)
        timer = _enum("cprofile_timer", cprofile_timer, cProfileTimer)
        if profile_default_steps:
            timer = cProfileTimer.DEFAULT
        # The timer is cProfile's: Pyinstrument has none.
        self.cprofile_timer = None if self.python_profiler is PythonProfiler.PYINSTRUMENT else timer

    def _settings(self) -> dict[str, Any]:
        settings = {**self.range, "ProfilerName": self.python_profiler.value}
        if self.cprofile_timer is not None:
            settings["cProfileTimer"] = self.cprofile_timer.value
        return settings


class HorovodProfilingConfig(_MetricsConfig):
    """Horovod profiling (default: step 13, one step)."""

    name = "HorovodProfilingConfig"
    _default_start_step = 13


class SMDataParallelProfilingConfig(_MetricsConfig):
    """SageMaker distributed data parallel profiling (default: step 15, one step)."""

    name = "SMDataParallelProfilingConfig"
    _default_start_step = 15


_METRICS_CONFIGS: tuple[type[_MetricsConfig], ...] = (
    DetailedProfilingConfig,
    DataloaderProfilingConfig,
    PythonProfilingConfig,
    HorovodProfilingConfig,
    SMDataParallelProfilingConfig,
)


class FrameworkProfile:
    """Framework metrics profiling: SDK v2's ``FrameworkProfile`` (deprecated there too).

    Given options (``detailed_profiling_config=`` ...) are profiled alone; else a
    step or time range (``start_step``/``num_steps`` or ``start_unix_time``/
    ``duration``) applies to all five options; else each option's default steps.
    SageMaker's framework images from TensorFlow 2.12 and PyTorch 2.0 on collect no
    framework metrics (SDK v2 warns so); the request still carries them.
    """

    def __init__(
        self,
        local_path: str = PROFILER_LOCAL_PATH,
        file_max_size: int = 10485760,
        file_close_interval: float = 60,
        file_open_fail_threshold: int = 50,
        detailed_profiling_config: DetailedProfilingConfig | None = None,
        dataloader_profiling_config: DataloaderProfilingConfig | None = None,
        python_profiling_config: PythonProfilingConfig | None = None,
        horovod_profiling_config: HorovodProfilingConfig | None = None,
        smdataparallel_profiling_config: SMDataParallelProfilingConfig | None = None,
        start_step: int | None = None,
        num_steps: int | None = None,
        start_unix_time: int | None = None,
        duration: float | None = None,
    ) -> None:
        if not isinstance(local_path, str) or not local_path.startswith("/"):
            raise ConfigurationError.invalid(
                "local_path", local_path, f"an absolute path such as {PROFILER_LOCAL_PATH}"
            )
        _int("file_max_size", file_max_size, 1, "a number of bytes (an integer of at least 1)")
        _positive_number(
            "file_close_interval", file_close_interval, "a number of seconds greater than 0"
        )
        _int("file_open_fail_threshold", file_open_fail_threshold, 1, "an integer of at least 1")
        self.profiling_parameters: dict[str, str] = {
            "LocalPath": local_path,
            "RotateMaxFileSizeInBytes": str(file_max_size),
            "RotateFileCloseIntervalInSeconds": str(file_close_interval),
            "FileOpenFailThreshold": str(file_open_fail_threshold),
        }
        given: dict[str, _MetricsConfig | None] = {
            "detailed_profiling_config": detailed_profiling_config,
            "dataloader_profiling_config": dataloader_profiling_config,
            "python_profiling_config": python_profiling_config,
            "horovod_profiling_config": horovod_profiling_config,
            "smdataparallel_profiling_config": smdataparallel_profiling_config,
        }
        configs: list[_MetricsConfig] = []
        for (argument, config), kind in zip(given.items(), _METRICS_CONFIGS, strict=True):
            if config is not None and not isinstance(config, kind):
                raise ConfigurationError.invalid(argument, config, f"a {kind.__name__}")
            if config is not None:
                configs.append(config)
        if not configs:
            ranged = any(v is not None for v in (start_step, num_steps, start_unix_time, duration))
            configs = [
                kind(start_step, num_steps, start_unix_time, duration)
                if ranged
                else kind(profile_default_steps=True)
                for kind in _METRICS_CONFIGS
            ]
        for made in configs:
            self.profiling_parameters[made.name] = made.to_json_string()

    def __repr__(self) -> str:
        return f"FrameworkProfile({self.profiling_parameters!r})"


class Profiler:
    """SageMaker Profiler (deep profiling): SDK v2's ``Profiler``.

    It adds a detailed-profiler processing rule to the job (on ml.m5.4xlarge with a
    128 GB volume), as SDK v2 does.
    """

    def __init__(self, cpu_profiling_duration: str = "3600", file_rotation_interval: str = "600"):
        self.profiling_parameters = {
            "CPUProfilingDuration": str(cpu_profiling_duration),
            "SMPFileRotationSecs": str(file_rotation_interval),
        }
        self.instanceType = DETAILED_PROFILER_INSTANCE_TYPE  # noqa: N815 - SDK v2's names
        self.volumeSizeInGB = DETAILED_PROFILER_VOLUME_GB  # noqa: N815

    def __repr__(self) -> str:
        return f"Profiler({self.profiling_parameters!r})"


class ProfilerConfig:
    """System and framework profiling of a job: the request's ``ProfilerConfig``.

    Args:
        s3_output_path: Where profiling data goes (default: the job's output path).
        system_monitor_interval_millis: System metrics interval: one of 100, 200,
            500, 1000, 5000, 60000 (the service's default is 500).
        framework_profile_params: A :class:`FrameworkProfile`.
        profile_params: A :class:`Profiler` (not with ``framework_profile_params``).
        disable_profiler: ``True`` turns the profiler off.
    """

    def __init__(
        self,
        s3_output_path: str | None = None,
        system_monitor_interval_millis: int | None = None,
        framework_profile_params: FrameworkProfile | None = None,
        profile_params: Profiler | None = None,
        disable_profiler: bool = False,
    ) -> None:
        if s3_output_path is not None:
            s3_output_path = check_uri(s3_output_path, "s3_output_path", allow_file=True)
        if system_monitor_interval_millis is not None and (
            isinstance(system_monitor_interval_millis, bool)
            or system_monitor_interval_millis not in MONITOR_INTERVALS_MS
        ):
            raise ConfigurationError.invalid(
                "system_monitor_interval_millis",
                system_monitor_interval_millis,
                "one of " + ", ".join(map(str, MONITOR_INTERVALS_MS)) + " (milliseconds)",
            )
        if framework_profile_params is not None and not isinstance(
            framework_profile_params, FrameworkProfile
        ):
            raise ConfigurationError.invalid(
                "framework_profile_params", framework_profile_params, "a FrameworkProfile"
            )
        if profile_params is not None and not isinstance(profile_params, Profiler):
            raise ConfigurationError.invalid("profile_params", profile_params, "a Profiler")
        if profile_params is not None and framework_profile_params is not None:
            raise ConfigurationError(
                "profile_params (SageMaker Profiler) cannot be combined with "
                "framework_profile_params (framework profiling). Accepted: one of them.",
                argument="profile_params",
                value=profile_params,
            )
        if not isinstance(disable_profiler, bool):
            raise ConfigurationError.invalid("disable_profiler", disable_profiler, "True or False")
        self.s3_output_path = s3_output_path
        self.system_monitor_interval_millis = system_monitor_interval_millis
        self.framework_profile_params = framework_profile_params
        self.profile_params = profile_params
        self.disable_profiler = disable_profiler

    def __repr__(self) -> str:
        return (
            f"ProfilerConfig(s3_output_path={self.s3_output_path!r}, "
            f"system_monitor_interval_millis={self.system_monitor_interval_millis!r}, "
            f"framework_profile_params={self.framework_profile_params!r}, "
            f"profile_params={self.profile_params!r}, disable_profiler={self.disable_profiler!r})"
        )

    def to_request_dict(self, default_s3_output_path: str | None = None) -> dict[str, Any]:
        """The ``ProfilerConfig`` request entry (``S3OutputPath`` only while profiling is on)."""
        request: dict[str, Any] = {}
        s3_output_path = self.s3_output_path or default_s3_output_path
        if s3_output_path is not None and self.disable_profiler is False:
            request["S3OutputPath"] = s3_output_path
        request["DisableProfiler"] = self.disable_profiler
        if self.system_monitor_interval_millis is not None:
            request["ProfilingIntervalInMilliseconds"] = self.system_monitor_interval_millis
        params = self.profile_params or self.framework_profile_params
        if params is not None:
            request["ProfilingParameters"] = dict(params.profiling_parameters)
        return request

    # SDK v2's name for the same method.
    def _to_request_dict(self) -> dict[str, Any]:
        return self.to_request_dict()
