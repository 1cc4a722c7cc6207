"""A training job's state on the way up, and the one codec between it and DescribeTrainingJob.

Backends answer with DescribeTrainingJob-shaped dicts (SageMaker's own answer, a local
job's ``status.json`` and ``describe()``): that shape is the public edge. Inside
``backends/`` and ``tuning/`` a job's described fields are read through
:meth:`JobState.from_description` only, and a local job's description is written by
:func:`to_description` only (``tests/unit/test_architecture.py`` holds the rest of the
package to it).

The codec is lossless: ``to_description(JobState.from_description(d)) == d`` for any
dict ``d``. A status SageMaker adds later stays the string it sent (:func:`status_of`),
and a value of a field that does not have the field's type (a time that is no
datetime, a list that holds no dicts) is kept as it came, in :attr:`JobState.extra`,
and reads as ``None``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "DESCRIPTION_KEYS",
    "JobState",
    "SecondaryStatus",
    "Status",
    "Transition",
    "status_of",
    "to_description",
]


class _StrEnum(str, enum.Enum):
    """An enum whose members are SageMaker's strings (``str()`` and ``format()`` too)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Status(_StrEnum):
    """``TrainingJobStatus``."""

    IN_PROGRESS = "InProgress"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPING = "Stopping"
    STOPPED = "Stopped"

    @property
    def terminal(self) -> bool:
        return self in (Status.COMPLETED, Status.FAILED, Status.STOPPED)


class SecondaryStatus(_StrEnum):
    """``SecondaryStatus`` (and each transition's ``Status``)."""

    STARTING = "Starting"
    LAUNCHING_ML_INSTANCES = "LaunchingMLInstances"
    PREPARING_TRAINING_STACK = "PreparingTrainingStack"
    DOWNLOADING = "Downloading"
    DOWNLOADING_TRAINING_IMAGE = "DownloadingTrainingImage"
    TRAINING = "Training"
    UPLOADING = "Uploading"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    COMPLETED = "Completed"
    FAILED = "Failed"
    INTERRUPTED = "Interrupted"
    MAX_WAIT_TIME_EXCEEDED = "MaxWaitTimeExceeded"
    UPDATING = "Updating"
    RESTARTING = "Restarting"
    PENDING = "Pending"


_E = TypeVar("_E", bound=_StrEnum)


def status_of(kind: type[_E], value: str) -> _E | str:
    """``value`` as a member of ``kind``, or the string itself when ``kind`` has no such member."""
    try:
        return kind(value)
    except ValueError:
        return str(value)


# -- field parsers: the typed value, or _RAW (the value is kept as it came) ---------------
_RAW: Any = object()


def _str(value: Any) -> Any:
    return value if isinstance(value, str) else _RAW


def _time(value: Any) -> Any:
    return value if isinstance(value, _dt.datetime) else _RAW


def _int(value: Any) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) else _RAW


def _dicts(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return tuple(copy.deepcopy(v) for v in value)
    return _RAW


def _dict(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, dict) else _RAW


def _enum_of(kind: type[_StrEnum]) -> Callable[[Any], Any]:
    return lambda value: status_of(kind, value) if isinstance(value, str) else _RAW


def _artifacts(value: Any) -> Any:
    if isinstance(value, dict) and list(value) == ["S3ModelArtifacts"]:
        return _str(value["S3ModelArtifacts"])
    return _RAW


def _transitions(value: Any) -> Any:
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return tuple(Transition.from_dict(v) for v in value)
    return _RAW


def _plain(value: Any) -> Any:
    """A field's value as the description holds it (enums as their strings, lists, copies)."""
    if isinstance(value, _StrEnum):
        return str(value.value)
    if isinstance(value, Transition):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return copy.deepcopy(value)


@dataclass(frozen=True)
class Transition:
    """One of ``SecondaryStatusTransitions``."""

    status: SecondaryStatus | str | None = None
    start_time: _dt.datetime | None = None
    end_time: _dt.datetime | None = None
    message: str | None = None
    #: Other keys, and values without their field's type, as they came.
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The keys in the order the dict had them (written back in that order).
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    _KEYS = (
        ("status", "Status", _enum_of(SecondaryStatus)),
        ("start_time", "StartTime", _time),
        ("end_time", "EndTime", _time),
        ("message", "StatusMessage", _str),
    )

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> Transition:
        kwargs: dict[str, Any] = {}
        extra = {k: copy.deepcopy(v) for k, v in value.items()}
        for attr, key, parse in cls._KEYS:
            if key in value and value[key] is not None:
                typed = parse(value[key])
                if typed is not _RAW:
                    kwargs[attr] = typed
                    del extra[key]
        return cls(**kwargs, extra=extra, order=tuple(value))

    def described(self, attr: str) -> Any:
        """The dict's value of field ``attr``, as it came (also one without its type)."""
        value = getattr(self, attr)
        if value is None:
            key = next(key for name, key, _ in self._KEYS if name == attr)
            return copy.deepcopy(self.extra.get(key))
        return _plain(value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for attr, key, _ in self._KEYS:
            value = getattr(self, attr)
            if value is not None:
                out[key] = _plain(value)
        out.update(copy.deepcopy(dict(self.extra)))
        if self.order:
            known = [k for k in self.order if k in out]
            out = {**{k: out[k] for k in known}, **out}
        return out


#: ``JobState`` attribute -> the DescribeTrainingJob key, in the order a local job's
#: description writes them (``WarmPoolStatus`` is added by ``describe()`` last).
_FIELDS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("name", "TrainingJobName", _str),
    ("arn", "TrainingJobArn", _str),
    ("status", "TrainingJobStatus", _enum_of(Status)),
    ("secondary", "SecondaryStatus", _enum_of(SecondaryStatus)),
    ("creation_time", "CreationTime", _time),
    ("last_modified_time", "LastModifiedTime", _time),
    ("transitions", "SecondaryStatusTransitions", _transitions),
    ("job_dir", "LocalJobDir", _str),
    ("client", "LocalClient", _str),
    ("start_time", "TrainingStartTime", _time),
    ("end_time", "TrainingEndTime", _time),
    ("training_seconds", "TrainingTimeInSeconds", _int),
    ("billable_seconds", "BillableTimeInSeconds", _int),
    ("failed_host", "LocalFailedHost", _str),
    ("failure_reason", "FailureReason", _str),
    ("model_artifacts", "ModelArtifacts", _artifacts),
    ("debug_rule_statuses", "DebugRuleEvaluationStatuses", _dicts),
    ("profiler_rule_statuses", "ProfilerRuleEvaluationStatuses", _dicts),
    ("attempts", "LocalAttempts", _dicts),
    ("ending", "LocalEnding", _dict),
    ("detached", "LocalDetached", lambda v: v if isinstance(v, bool) else _RAW),
    ("warm_pool", "WarmPoolStatus", _dict),
)

#: Every key the codec reads: the job's state as DescribeTrainingJob (and launchbay's
#: ``Local*`` additions) describe it. ``TrainingJobName`` is also a request key.
DESCRIPTION_KEYS = tuple(key for _, key, _ in _FIELDS)
_KEY_OF = {attr: key for attr, key, _ in _FIELDS}


@dataclass(frozen=True)
class JobState:
    """A training job's state, as a backend answers it: each field ``None`` when not described.

    ``status`` and ``secondary`` (and each transition's status) are :class:`Status` and
    :class:`SecondaryStatus` members, which compare equal to SageMaker's strings, or
    the string itself for a status this version does not know.
    """

    name: str | None = None
    arn: str | None = None
    status: Status | str | None = None
    secondary: SecondaryStatus | str | None = None
    creation_time: _dt.datetime | None = None
    last_modified_time: _dt.datetime | None = None
    transitions: tuple[Transition, ...] | None = None
    #: A local job's directory (``LocalJobDir``).
    job_dir: str | None = None
    #: The process that runs a local job (``LocalClient``: ``<host>:<pid>``).
    client: str | None = None
    start_time: _dt.datetime | None = None
    end_time: _dt.datetime | None = None
    training_seconds: int | None = None
    billable_seconds: int | None = None
    #: The host whose failure ended a local job (``LocalFailedHost``).
    failed_host: str | None = None
    failure_reason: str | None = None
    #: ``ModelArtifacts.S3ModelArtifacts``.
    model_artifacts: str | None = None
    debug_rule_statuses: tuple[dict[str, Any], ...] | None = None
    profiler_rule_statuses: tuple[dict[str, Any], ...] | None = None
    #: How each attempt of a local job ended (``LocalAttempts``).
    attempts: tuple[dict[str, Any], ...] | None = None
    #: The end a local job was being given when its record was written (``LocalEnding``:
    #: ``Status`` and ``FailureReason``).
    ending: dict[str, Any] | None = None
    #: Whether a detached runner runs the local job (``LocalDetached``, in list summaries).
    detached: bool | None = None
    #: ``WarmPoolStatus``: ``Status``, ``ResourceRetainedBillableTimeInSeconds``, ``ReusedByJob``.
    warm_pool: dict[str, Any] | None = None
    #: Every other key (the request's echo, what SageMaker adds later), and values without
    #: their field's type, as they came, in their order.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> JobState:
        """The state a DescribeTrainingJob dict (or a ListTrainingJobs summary) holds."""
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        parsers = {key: (attr, parse) for attr, key, parse in _FIELDS}
        for key, value in description.items():
            if key in parsers and value is not None:
                attr, parse = parsers[key]
                typed = parse(value)
                if typed is not _RAW:
                    kwargs[attr] = typed
                    continue
            extra[key] = value
        return cls(**kwargs, extra=extra)

    # -- what readers ask ----------------------------------------------------------
    @property
    def terminal(self) -> bool:
        """Whether the job has ended (Completed, Failed or Stopped)."""
        return self.status in (Status.COMPLETED, Status.FAILED, Status.STOPPED)

    @property
    def training(self) -> bool:
        """Whether the secondary status is ``Training``."""
        return self.secondary == SecondaryStatus.TRAINING

    @property
    def last_transition(self) -> Transition | None:
        return self.transitions[-1] if self.transitions else None

    @property
    def ending_outcome(self) -> tuple[str, str | None] | None:
        """``LocalEnding`` as ``(status, failure reason)``, or None."""
        if self.ending is None:
            return None
        reason = self.ending.get("FailureReason")
        return str(self.ending.get("Status")), str(reason) if reason else None

    def described(self, attr: str) -> Any:
        """The description's value of field ``attr``, as described (also one without its type)."""
        key = _KEY_OF[attr]
        value = getattr(self, attr)
        if value is None:
            return copy.deepcopy(self.extra.get(key))
        return {"S3ModelArtifacts": value} if attr == "model_artifacts" else _plain(value)

    @property
    def warm_pool_status(self) -> str | None:
        """``WarmPoolStatus.Status`` (``Available``, ``Terminated``, ``Reused``, ``InUse``)."""
        value = (self.warm_pool or {}).get("Status")
        return value if isinstance(value, str) else None


def to_description(state: JobState, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``state`` as a DescribeTrainingJob dict: the inverse of :meth:`JobState.from_description`.

    ``base`` (a request's echo) comes first, then :attr:`JobState.extra`, then the state's
    fields in a local job's order; a key already there keeps its place. Fields that
    are ``None`` are left out.
    """
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in (base or {}).items()}
    out.update({k: copy.deepcopy(v) for k, v in state.extra.items()})
    for attr, key, _ in _FIELDS:
        value = getattr(state, attr)
        if value is None:
            continue
        if attr == "model_artifacts":
            out[key] = {"S3ModelArtifacts": value}
        else:
            out[key] = _plain(value)
    return out
