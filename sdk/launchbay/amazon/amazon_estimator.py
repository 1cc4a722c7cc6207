"""SDK v2's ``sagemaker.amazon.amazon_estimator``: the base of the first-party algorithm estimators.

:class:`AmazonAlgorithmEstimatorBase` is an :class:`~launchbay.estimator.EstimatorBase`
whose image is the algorithm's (``image_uris.retrieve(<algorithm>, region)``) and whose
hyperparameters are the algorithm's own, declared as :class:`Hyperparameter` descriptors
and sent as v2 sends them: ``str(value)`` (``True`` -> ``"True"``, ``0.1`` -> ``"0.1"``),
lists JSON-encoded. ``fit(records)`` takes a :class:`~launchbay.amazon.common.RecordSet`
(or a list of them, or a ``FileSystemRecordSet``), sets ``feature_dim`` and
``mini_batch_size`` from it and sends the request SDK v2 sends (checked key for key by
``tests/compat/test_algorithms_compat.py``).

``record_set(train, labels)`` writes the array as RecordIO-protobuf shards, one per
instance, with a manifest: to ``data_location`` on S3 (default
``s3://<default bucket>/[<prefix>/]sagemaker-record-sets/``) as v2 does, or, for a local
instance type without an ``s3://`` ``data_location``, to a ``file://`` folder under
``$LAUNCHBAY_HOME/record-sets`` as an ``S3Prefix`` channel (local jobs take no manifests).
"""

from __future__ import annotations

import json
import math
import operator
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from launchbay import _resolve
from launchbay.amazon.common import FileSystemRecordSet, RecordSet, encode_shards, manifest
from launchbay.errors import ConfigurationError
from launchbay.estimator import EstimatorBase

__all__ = [
    "AmazonAlgorithmEstimatorBase",
    "FileSystemRecordSet",
    "Hyperparameter",
    "RecordSet",
    "get_image_uri",
]

_BOUNDS = (
    (">=", operator.ge, "at least"),
    ("<=", operator.le, "at most"),
    (">", operator.gt, "above"),
    ("<", operator.lt, "below"),
)


def _bound(text: str) -> tuple[Callable[[Any, Any], bool], float, str]:
    """A bound from ``">0"``, ``">=1"``, ``"<1"``, ``"<=1000"``: (comparison, limit, words)."""
    for op, compare, words in _BOUNDS:
        if text.startswith(op):
            return compare, float(text[len(op) :]), f"{words} {text[len(op) :]}"
    raise ValueError(f"unknown bound {text!r}")


class Hyperparameter:
    """One algorithm hyperparameter: an attribute that converts, checks and stores the value.

    ``Hyperparameter("local_lloyd_max_iter", int, ">0")`` on ``KMeans.max_iterations``
    sends ``est.max_iterations`` as ``local_lloyd_max_iter``. ``checks`` are bounds
    (``">0"``, ``">=1"``, ``"<1"``, ``"<=1000"``) or a tuple of accepted values. A value
    is converted with ``kind`` as SDK v2 converts it (``int("3")``, ``float(1)``), then
    checked; ``None`` unsets it (nothing is sent).
    """

    def __init__(
        self, name: str, kind: type, *checks: str | tuple[str, ...], accepted: str = ""
    ) -> None:
        self.name, self.kind = name, kind
        self.attribute = name
        self.choices: tuple[str, ...] | None = None
        self.bounds: list[tuple[Callable[[Any, Any], bool], float, str]] = []
        for check in checks:
            if isinstance(check, tuple):
                self.choices = check
            else:
                self.bounds.append(_bound(check))
        self._accepted = accepted

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    @property
    def accepted(self) -> str:
        if self._accepted:
            return self._accepted
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        what = {int: "an integer", float: "a number", bool: "a boolean", list: "a list"}.get(
            self.kind, "a string"
        )
        return " ".join([what, " and ".join(words for _, _, words in self.bounds)]).strip()

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__.setdefault("_algorithm_hyperparameters", {}).get(self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__.setdefault("_algorithm_hyperparameters", {})[self.name] = self.convert(value)

    def convert(self, value: Any) -> Any:
        """``value`` as sent (before ``str``), or a ConfigurationError naming the argument."""
        if value is None:
            return None
        try:
            converted = self.kind(value)
        except (TypeError, ValueError):
            raise ConfigurationError.invalid(self.attribute, value, self.accepted) from None
        if isinstance(converted, float) and not math.isfinite(converted):
            raise ConfigurationError.invalid(self.attribute, value, self.accepted)
        if self.choices is not None and converted not in self.choices:
            raise ConfigurationError.invalid(self.attribute, value, self.accepted)
        if not all(compare(converted, limit) for compare, limit, _ in self.bounds):
            raise ConfigurationError.invalid(self.attribute, value, self.accepted)
        return converted

    @staticmethod
    def serialize(value: Any) -> str:
        """How SDK v2 sends a value: lists as JSON, anything else with ``str()``."""
        return json.dumps(value) if isinstance(value, list) else str(value)


class AmazonAlgorithmEstimatorBase(EstimatorBase):
    """Base of the first-party algorithm estimators (``LinearLearner``, ``KMeans``, ...).

    Takes :class:`~launchbay.estimator.EstimatorBase`'s arguments (``role``,
    ``instance_count``, ``instance_type``, ``output_path``, ``volume_size``, ``tags`` ...),
    ``data_location`` (where ``record_set()`` writes) and the algorithm's hyperparameters,
    positional after ``instance_type`` in SDK v2's order.
    """

    #: The algorithm's name in ``image_uris.retrieve`` and its image version.
    repo_name: str = ""
    repo_version: str = "1"
    #: The algorithm's hyperparameter attributes, in SDK v2's positional order.
    _algorithm_arguments: tuple[str, ...] = ()
    #: ``mini_batch_size`` when ``fit()`` gets none: at most this many records per instance.
    DEFAULT_MINI_BATCH_SIZE: int | None = None

    feature_dim = Hyperparameter("feature_dim", int, ">0")
    mini_batch_size = Hyperparameter("mini_batch_size", int, ">0")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        import inspect

        base = cls.__signature__  # type: ignore[attr-defined]  # set by EstimatorBase
        params = list(base.parameters.values())
        positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        rest = [p for p in params if p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD]
        own = [
            inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None)
            for n in cls._algorithm_arguments
        ]
        extra = [inspect.Parameter("data_location", inspect.Parameter.KEYWORD_ONLY, default=None)]
        cls.__signature__ = inspect.Signature(positional + own + rest + extra)  # type: ignore[attr-defined]  # read by inspect

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        count = len(self._positional)
        if len(args) > count + len(self._algorithm_arguments):
            raise TypeError(
                f"{type(self).__name__}() takes at most "
                f"{count + len(self._algorithm_arguments)} positional arguments"
            )
        algorithm = dict(zip(self._algorithm_arguments, args[count:], strict=False))
        for name in self._algorithm_arguments:
            if name in kwargs:
                if name in algorithm:
                    raise TypeError(f"{type(self).__name__}() got multiple values for {name!r}")
                algorithm[name] = kwargs.pop(name)
        data_location = kwargs.pop("data_location", None)
        super().__init__(*args[:count], **kwargs)
        for name in self._algorithm_arguments:
            setattr(self, name, algorithm.get(name))
        self._data_location: str | None = None
        if data_location is not None:
            self.data_location = data_location
        self._check_algorithm_arguments()

    def _check_algorithm_arguments(self) -> None:
        """Rules between an algorithm's hyperparameters (subclasses add theirs)."""

    # -- what is sent ------------------------------------------------------------------

    def training_image_uri(self) -> str:
        """``image_uri`` when given, else the algorithm's image in the job's region."""
        if self.image_uri:
            return self.image_uri
        from launchbay._retrieve import retrieve

        return retrieve(self.repo_name, _resolve.region(self), version=self.repo_version)

    def hyperparameters(self) -> dict[str, str]:
        """The algorithm's hyperparameters that are set, as SDK v2 sends them (strings)."""
        values = self.__dict__.get("_algorithm_hyperparameters", {})
        sent = {name: Hyperparameter.serialize(v) for name, v in values.items() if v is not None}
        sent.update(super().hyperparameters())  # hyperparameters= given to the constructor
        return sent

    def _encode_user_hyperparameter(self, value: Any) -> str:
        return Hyperparameter.serialize(value)

    # -- data --------------------------------------------------------------------------

    @property
    def data_location(self) -> str | None:
        """Where ``record_set()`` writes (``s3://``; ``file://`` for local jobs); ``None``: the default."""
        return self._data_location

    @data_location.setter
    def data_location(self, value: str) -> None:
        accepted = "an s3:// URI (file:// for local instance types)"
        if not isinstance(value, str) or not (
            value.startswith("s3://") or (self.is_local and value.startswith("file://"))
        ):
            raise ConfigurationError.invalid("data_location", value, accepted)
        self._data_location = value if value.endswith("/") else value + "/"

    def _default_data_location(self) -> str:
        if self.is_local:
            return _resolve.local_home_uri("record-sets") + "/"
        session = self.session
        prefix = session.default_bucket_prefix
        parts = [
            session.default_bucket(),
            *([prefix.strip("/")] if prefix else []),
            "sagemaker-record-sets",
        ]
        return "s3://" + "/".join(parts) + "/"

    def record_set(
        self,
        train: Any,
        labels: Any = None,
        channel: str = "train",
        encrypt: bool = False,
        distribution: str = "ShardedByS3Key",
    ) -> RecordSet:
        """Write ``train`` (a 2-D NumPy array) and ``labels`` as RecordIO-protobuf shards.

        One shard per instance (``matrix_<i>.pbr``, the last one taking the remainder
        rows) and a manifest (``.amazon.manifest``) listing them, under
        ``<data_location><Class>-<timestamp>/``. ``encrypt`` asks S3 for AES-256
        server-side encryption.

        Returns a :class:`RecordSet` of the manifest (``ManifestFile``), or, written to a
        ``file://`` folder for a local job, of the folder (``S3Prefix``).
        """
        from launchbay.utils import sagemaker_timestamp

        location = self._data_location or self._default_data_location()
        folder = f"{location}{type(self).__name__}-{sagemaker_timestamp()}/"
        count = self.instance_count or 1
        files = encode_shards(train, labels, count)
        if folder.startswith("file://"):
            path = folder[len("file://") :]
            os.makedirs(path, mode=0o700, exist_ok=True)
            for name, data in files:
                with open(os.path.join(path, name), "wb") as out:
                    out.write(data)
            return RecordSet(
                folder, num_records=train.shape[0], feature_dim=train.shape[1],
                s3_data_type="S3Prefix", channel=channel, distribution=distribution,
            )  # fmt: skip
        from launchbay.s3uri import parse_s3_uri

        bucket, prefix = parse_s3_uri(folder, argument="data_location")
        prefix = prefix.strip("/") + "/"
        extra = {"ServerSideEncryption": "AES256"} if encrypt else None
        session = self.session
        for name, data in files:
            session.upload_bytes(data, bucket, prefix + name, extra_args=extra)
        manifest_uri = session.upload_bytes(
            manifest(f"s3://{bucket}/{prefix}", [name for name, _ in files]),
            bucket,
            prefix + ".amazon.manifest",
            extra_args=extra,
        )
        return RecordSet(
            manifest_uri, num_records=train.shape[0], feature_dim=train.shape[1],
            channel=channel, distribution=distribution,
        )  # fmt: skip

    # -- training ----------------------------------------------------------------------

    def _default_mini_batch_size(self, num_records: int) -> int | None:
        if self.DEFAULT_MINI_BATCH_SIZE is None:
            return None
        return min(
            self.DEFAULT_MINI_BATCH_SIZE, max(1, int(num_records / (self.instance_count or 1)))
        )

    def _mini_batch_size_for(self, records: Any, given: int | None) -> int | None:
        """``mini_batch_size`` for this ``fit()`` (subclasses apply their rules)."""
        return given

    def _prepare_for_training(self, records: Any, mini_batch_size: int | None) -> None:
        """Set ``feature_dim`` (from the train record set) and ``mini_batch_size``."""
        train = _train_records(records)
        self.feature_dim = train.feature_dim
        self.mini_batch_size = self._mini_batch_size_for(train, mini_batch_size)

    def _channels(self, records: Any) -> Any:
        if isinstance(records, RecordSet | FileSystemRecordSet):
            return records.data_channel()
        if isinstance(records, list | tuple):
            channels: dict[str, Any] = {}
            for record in records:
                channels.update(record.data_channel())
            return channels
        return records

    def create_training_job_request(
        self, inputs: Any = None, job_name: str | None = None, mini_batch_size: int | None = None
    ) -> dict[str, Any]:
        """The request ``fit(inputs, mini_batch_size)`` would send; uploads nothing."""
        self._prepare_for_training(inputs, mini_batch_size)
        return super().create_training_job_request(self._channels(inputs), job_name)

    def fit(  # type: ignore[override]  # SDK v2's signature: records and mini_batch_size first
        self,
        records: RecordSet | FileSystemRecordSet | Sequence[RecordSet] | None = None,
        mini_batch_size: int | None = None,
        wait: bool = True,
        logs: str | bool | None = "All",
        job_name: str | None = None,
        experiment_config: dict[str, str] | None = None,
    ) -> Any:
        """Train on ``records`` (a :class:`RecordSet`, e.g. from :meth:`record_set`, or a list).

        ``feature_dim`` comes from the ``train`` record set; ``mini_batch_size`` from the
        argument or the algorithm's default.

        Raises:
            ConfigurationError: no ``train`` record set, or ``experiment_config`` (SageMaker
                Experiments are not part of launchbay).
        """
        if experiment_config:
            raise ConfigurationError.invalid(
                "experiment_config", experiment_config, "None (launchbay does not use "
                "SageMaker Experiments)",
            )  # fmt: skip
        if records is None and self.spec_inputs is not None:
            records = self.spec_inputs
        self._prepare_for_training(records, mini_batch_size)
        return super().fit(self._channels(records), wait=wait, logs=logs, job_name=job_name)


def _train_records(records: Any) -> Any:
    """The record set of the ``train`` channel (the one of a single record set)."""
    if isinstance(records, list | tuple):
        for record in records:
            if getattr(record, "channel", None) == "train":
                return record
        raise ConfigurationError.invalid(
            "records",
            [getattr(r, "channel", r) for r in records],
            "a list with a 'train' RecordSet",
        )
    if not hasattr(records, "feature_dim"):
        raise ConfigurationError.invalid(
            "records",
            records,
            "a RecordSet (from record_set()), a FileSystemRecordSet, or a list of them",
        )
    return records


def get_image_uri(region_name: str, repo_name: str, repo_version: str = "1") -> str:
    """The image of a built-in algorithm: SDK v1's name for :func:`launchbay.image_uris.retrieve`.

    Warns (``DeprecationWarning``) as SDK v2 does: the method was renamed.
    """
    from launchbay._retrieve import retrieve

    warnings.warn(
        "The method get_image_uri has been renamed in SageMaker SDK v2: use "
        "launchbay.image_uris.retrieve(framework, region, version)",
        DeprecationWarning,
        stacklevel=2,
    )
    return retrieve(framework=repo_name, region=region_name, version=repo_version)
