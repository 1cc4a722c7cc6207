"""SDK v2's ``sagemaker.amazon.common``: the RecordIO-protobuf format of the built-in algorithms.

The first-party algorithms (LinearLearner, KMeans, PCA, ...) read training data as
``application/x-recordio-protobuf``: a stream of RecordIO frames, each holding one
``aialgs.data.Record`` protobuf message. This module writes and reads that format in
plain Python (no generated protobuf code, no ``protobuf`` package):

RecordIO framing, per record::

    uint32 magic = 0xced7230a (little-endian) | uint32 length | payload | zero padding to 4 bytes

(the top 3 bits of ``length`` are MXNet's continuation flags; writers here never split a
record, and readers refuse split ones). The payload is a protobuf ``Record``::

    Record        { map<string, Value> features = 1; map<string, Value> label = 2;
                    string uid = 3; string metadata = 4; string configuration = 5; }
    Value         { oneof { Float32Tensor float32_tensor = 2; Float64Tensor float64_tensor = 3;
                            Int32Tensor int32_tensor = 7; Bytes bytes = 9; } }
    <T>Tensor     { repeated <T> values = 1 [packed]; repeated uint64 keys = 2 [packed];
                    repeated uint64 shape = 3 [packed]; }
    Bytes         { repeated bytes value = 1; string content_type = 2; }

A dense row becomes ``features["values"]`` with the row's numbers; a sparse row also gets
``keys`` (the column indices) and ``shape`` (``[number of columns]``); a label becomes
``label["values"]`` with one number. NumPy ``float32`` is written as ``Float32Tensor``,
``float64`` as ``Float64Tensor`` and the platform integer (``int64``) as ``Int32Tensor``, as
SDK v2 writes them, byte for byte (``tests/amazon/test_recordio.py`` compares with v2).

:func:`read_records` gives back :class:`Record` objects whose attributes read as v2's
generated classes do: ``record.features["values"].float32_tensor.values``,
``record.label["values"].WhichOneof("value")``.

NumPy (and SciPy for sparse matrices) are imported by the functions that take arrays.
"""

from __future__ import annotations

import io
import json
import logging
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from launchbay.errors import ConfigurationError

__all__ = [
    "Bytes",
    "FileSystemRecordSet",
    "Float32Tensor",
    "Float64Tensor",
    "Int32Tensor",
    "Record",
    "RecordSet",
    "Value",
    "read_recordio",
    "read_records",
    "write_numpy_to_dense_tensor",
    "write_recordio",
    "write_spmatrix_to_sparse_tensor",
]

logger = logging.getLogger("launchbay.amazon")

RECORDIO_MAGIC = 0xCED7230A
_LENGTH_MASK = (1 << 29) - 1
_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LENGTH, _WIRE_FIXED32 = 0, 1, 2, 5


# --------------------------------------------------------------------------- the messages


@dataclass
class _Tensor:
    values: list[Any] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    shape: list[int] = field(default_factory=list)


class Float32Tensor(_Tensor):
    """``values`` are 32-bit floats (read back as Python floats)."""


class Float64Tensor(_Tensor):
    """``values`` are 64-bit floats."""


class Int32Tensor(_Tensor):
    """``values`` are 32-bit signed integers."""


@dataclass
class Bytes:
    """Raw payloads (``value``) with an optional ``content_type``."""

    value: list[bytes] = field(default_factory=list)
    content_type: str = ""


_ONEOF = {2: "float32_tensor", 3: "float64_tensor", 7: "int32_tensor", 9: "bytes"}
_TENSORS: dict[str, type[_Tensor]] = {
    "float32_tensor": Float32Tensor,
    "float64_tensor": Float64Tensor,
    "int32_tensor": Int32Tensor,
}


@dataclass
class Value:
    """One of a float32, float64 or int32 tensor, or bytes (protobuf's ``oneof value``)."""

    kind: str | None = None
    payload: Any = None

    def WhichOneof(self, group: str) -> str | None:  # noqa: N802  the protobuf method name
        """The name of the field that is set (``"float32_tensor"`` ...), as protobuf's method."""
        if group != "value":
            raise ValueError(f"Value has no oneof group {group!r}; accepted: 'value'")
        return self.kind

    def _get(self, kind: str) -> Any:
        if self.kind == kind:
            return self.payload
        return Bytes() if kind == "bytes" else _TENSORS[kind]()

    @property
    def float32_tensor(self) -> Float32Tensor:
        tensor: Float32Tensor = self._get("float32_tensor")
        return tensor

    @property
    def float64_tensor(self) -> Float64Tensor:
        tensor: Float64Tensor = self._get("float64_tensor")
        return tensor

    @property
    def int32_tensor(self) -> Int32Tensor:
        tensor: Int32Tensor = self._get("int32_tensor")
        return tensor

    @property
    def bytes(self) -> Bytes:
        payload: Bytes = self._get("bytes")
        return payload


@dataclass
class Record:
    """One ``aialgs.data.Record``: ``features`` and ``label`` maps of :class:`Value`."""

    features: dict[str, Value] = field(default_factory=dict)
    label: dict[str, Value] = field(default_factory=dict)
    uid: str = ""
    metadata: str = ""
    configuration: str = ""

    def SerializeToString(self) -> bytes:  # noqa: N802  the protobuf method name
        """The protobuf encoding of this record."""
        return encode_record(self)

    @classmethod
    def FromString(cls, data: bytes) -> Record:  # noqa: N802  the protobuf method name
        """Parse one protobuf-encoded record."""
        return decode_record(data)


# --------------------------------------------------------------------------- protobuf wire format


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # negative int32/int64: ten bytes, two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _tag(number, _WIRE_LENGTH) + _varint(len(payload)) + payload


def _packed(number: int, payload: bytes) -> bytes:
    return _length_delimited(number, payload) if payload else b""


def _encode_tensor(kind: str, tensor: _Tensor) -> bytes:
    if kind == "float32_tensor":
        values = struct.pack(f"<{len(tensor.values)}f", *tensor.values)
    elif kind == "float64_tensor":
        values = struct.pack(f"<{len(tensor.values)}d", *tensor.values)
    else:
        for number in tensor.values:
            if not -(2**31) <= int(number) < 2**31:
                raise ConfigurationError.invalid(
                    "array", int(number), "integers that fit in 32 bits (Int32Tensor)"
                )
        values = b"".join(_varint(int(v)) for v in tensor.values)
    return (
        _packed(1, values)
        + _packed(2, b"".join(_varint(int(k)) for k in tensor.keys))
        + _packed(3, b"".join(_varint(int(s)) for s in tensor.shape))
    )


def _encode_value(value: Value) -> bytes:
    if value.kind is None:
        return b""
    number = {name: n for n, name in _ONEOF.items()}[value.kind]
    if value.kind == "bytes":
        payload = value.payload
        body = b"".join(_length_delimited(1, item) for item in payload.value)
        if payload.content_type:
            body += _length_delimited(2, payload.content_type.encode())
    else:
        body = _encode_tensor(value.kind, value.payload)
    return _length_delimited(number, body)


def _encode_map(number: int, entries: dict[str, Value]) -> bytes:
    out = b""
    for key, value in entries.items():
        entry = _length_delimited(1, key.encode()) + _length_delimited(2, _encode_value(value))
        out += _length_delimited(number, entry)
    return out


def encode_record(record: Record) -> bytes:
    """The protobuf encoding of ``record`` (fields in number order, as protobuf writes them)."""
    out = _encode_map(1, record.features) + _encode_map(2, record.label)
    for number, text in ((3, record.uid), (4, record.metadata), (5, record.configuration)):
        if text:
            out += _length_delimited(number, text.encode())
    return out


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = memoryview(data), 0

    def varint(self) -> int:
        result = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise ValueError("truncated protobuf varint")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("protobuf varint longer than 10 bytes")

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise ValueError("truncated protobuf field")
        chunk = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return chunk

    def fields(self) -> Iterator[tuple[int, int, Any]]:
        while self.pos < len(self.data):
            key = self.varint()
            number, wire = key >> 3, key & 7
            if wire == _WIRE_VARINT:
                yield number, wire, self.varint()
            elif wire == _WIRE_FIXED64:
                yield number, wire, self.take(8)
            elif wire == _WIRE_LENGTH:
                yield number, wire, self.take(self.varint())
            elif wire == _WIRE_FIXED32:
                yield number, wire, self.take(4)
            else:
                raise ValueError(f"unsupported protobuf wire type {wire}")


def _varints(data: bytes) -> list[int]:
    reader, out = _Reader(data), []
    while reader.pos < len(reader.data):
        out.append(reader.varint())
    return out


def _signed32(value: int) -> int:
    value &= (1 << 64) - 1
    value = value - (1 << 64) if value >= 1 << 63 else value
    return value


def _decode_tensor(kind: str, data: bytes) -> _Tensor:
    tensor = _TENSORS[kind]()
    fmt = {"float32_tensor": "f", "float64_tensor": "d"}.get(kind)
    for number, wire, raw in _Reader(data).fields():
        if number == 1:
            if fmt is None:
                numbers = [raw] if wire == _WIRE_VARINT else _varints(raw)
                tensor.values.extend(_signed32(v) for v in numbers)
            elif wire == _WIRE_LENGTH:
                tensor.values.extend(
                    struct.unpack(f"<{len(raw) // struct.calcsize(fmt)}{fmt}", raw)
                )
            else:  # an unpacked element
                tensor.values.append(struct.unpack(f"<{fmt}", raw)[0])
        elif number in (2, 3):
            target = tensor.keys if number == 2 else tensor.shape
            target.extend([raw] if wire == _WIRE_VARINT else _varints(raw))
    return tensor


def _decode_value(data: bytes) -> Value:
    value = Value()
    for number, _, raw in _Reader(data).fields():
        kind = _ONEOF.get(number)
        if kind is None:
            continue
        if kind == "bytes":
            payload = Bytes()
            for sub, _, item in _Reader(raw).fields():
                if sub == 1:
                    payload.value.append(item)
                elif sub == 2:
                    payload.content_type = item.decode()
            value.kind, value.payload = kind, payload
        else:
            value.kind, value.payload = kind, _decode_tensor(kind, raw)
    return value


def decode_record(data: bytes) -> Record:
    """Parse one protobuf-encoded ``Record``.

    Raises:
        ValueError: the bytes are not a well-formed protobuf message.
    """
    record = Record()
    for number, _, raw in _Reader(data).fields():
        if number in (1, 2):
            key, value = "", Value()
            for sub, _, item in _Reader(raw).fields():
                if sub == 1:
                    key = item.decode()
                elif sub == 2:
                    value = _decode_value(item)
            (record.features if number == 1 else record.label)[key] = value
        elif number == 3:
            record.uid = raw.decode()
        elif number == 4:
            record.metadata = raw.decode()
        elif number == 5:
            record.configuration = raw.decode()
    return record


# --------------------------------------------------------------------------- RecordIO framing


def write_recordio(file: IO[bytes], data: bytes) -> None:
    """Write one RecordIO frame holding ``data``."""
    if len(data) > _LENGTH_MASK:
        raise ConfigurationError.invalid(
            "record", f"{len(data)} bytes", f"at most {_LENGTH_MASK} bytes per RecordIO record"
        )
    file.write(struct.pack("<II", RECORDIO_MAGIC, len(data)))
    file.write(data)
    file.write(b"\0" * (-len(data) % 4))


def read_recordio(file: IO[bytes]) -> Iterator[bytes]:
    """Yield the payload of each RecordIO frame in ``file``.

    Raises:
        ValueError: a frame without the RecordIO magic, a truncated frame, or a record
            split over several frames (MXNet's continuation flags).
    """
    while True:
        header = file.read(8)
        if not header:
            return
        if len(header) < 8:
            raise ValueError("truncated RecordIO header")
        magic, length = struct.unpack("<II", header)
        if magic != RECORDIO_MAGIC:
            raise ValueError(
                f"not a RecordIO frame: magic {magic:#x}, expected {RECORDIO_MAGIC:#x}"
            )
        if length >> 29:
            raise ValueError("RecordIO records split over several frames are not supported")
        payload = file.read(length)
        if len(payload) < length:
            raise ValueError("truncated RecordIO record")
        file.read(-length % 4)
        yield payload


def read_records(file: IO[bytes]) -> list[Record]:
    """Every :class:`Record` in a RecordIO-protobuf stream (SDK v2's ``read_records``)."""
    return [decode_record(payload) for payload in read_recordio(file)]


# --------------------------------------------------------------------------- NumPy / SciPy writers


def _tensor_kind(dtype: Any, argument: str) -> str:
    import numpy as np

    if dtype == np.dtype(int):
        return "int32_tensor"
    if dtype == np.dtype(float):
        return "float64_tensor"
    if dtype == np.dtype("float32"):
        return "float32_tensor"
    raise ConfigurationError.invalid(
        f"{argument}.dtype", str(dtype), f"float32, float64 or {np.dtype(int)}"
    )


def _python_numbers(kind: str, values: Any) -> list[Any]:
    return [int(v) for v in values] if kind == "int32_tensor" else [float(v) for v in values]


def _check_shapes(array: Any, labels: Any) -> tuple[str, str | None]:
    if len(array.shape) != 2:
        raise ConfigurationError.invalid("array", f"shape {array.shape}", "a 2-D matrix")
    label_kind = None
    if labels is not None:
        if len(labels.shape) != 1:
            raise ConfigurationError.invalid("labels", f"shape {labels.shape}", "a 1-D vector")
        if labels.shape[0] not in array.shape:
            raise ConfigurationError.invalid(
                "labels",
                f"shape {labels.shape}",
                f"one label per row of the array (shape {array.shape})",
            )
        label_kind = _tensor_kind(labels.dtype, "labels")
    return _tensor_kind(array.dtype, "array"), label_kind


def _labelled(record: Record, label_kind: str | None, labels: Any, index: int) -> None:
    if label_kind is not None:
        tensor = _TENSORS[label_kind](values=_python_numbers(label_kind, [labels[index]]))
        record.label["values"] = Value(label_kind, tensor)


def write_numpy_to_dense_tensor(file: IO[bytes], array: Any, labels: Any = None) -> None:
    """Write each row of the 2-D NumPy ``array`` as a dense record (``labels[i]`` its label).

    Raises:
        ConfigurationError: ``array`` is not 2-D, ``labels`` not 1-D or of another length,
            or a dtype other than float32, float64 or the platform integer.
    """
    kind, label_kind = _check_shapes(array, labels)
    for index, row in enumerate(array):
        record = Record(
            features={"values": Value(kind, _TENSORS[kind](values=_python_numbers(kind, row)))}
        )
        _labelled(record, label_kind, labels, index)
        write_recordio(file, encode_record(record))


def write_spmatrix_to_sparse_tensor(file: IO[bytes], array: Any, labels: Any = None) -> None:
    """Write each row of the SciPy sparse matrix ``array`` as a sparse record.

    Each record holds the row's non-zero values, their column indices (``keys``) and the
    number of columns (``shape``).

    Raises:
        ConfigurationError: ``array`` is not a SciPy sparse matrix, or as
            :func:`write_numpy_to_dense_tensor`.
    """
    import scipy.sparse  # type: ignore[import-untyped]  # an optional dependency, no stubs

    if not scipy.sparse.issparse(array):
        raise ConfigurationError.invalid("array", type(array).__name__, "a scipy.sparse matrix")
    kind, label_kind = _check_shapes(array, labels)
    csr = array.tocsr()
    rows, columns = csr.shape
    for index in range(rows):
        start, end = csr.indptr[index], csr.indptr[index + 1]
        tensor = _TENSORS[kind](
            values=_python_numbers(kind, csr.data[start:end]),
            keys=[int(k) for k in csr.indices[start:end]],
            shape=[int(columns)],
        )
        record = Record(features={"values": Value(kind, tensor)})
        _labelled(record, label_kind, labels, index)
        write_recordio(file, encode_record(record))


# --------------------------------------------------------------------------- record sets


class RecordSet:
    """Training data in RecordIO-protobuf on S3 (or ``file://`` for local jobs), for ``fit()``.

    Args:
        s3_data: The manifest file's URI (``s3_data_type="ManifestFile"``, what
            ``record_set()`` makes) or a prefix (``"S3Prefix"``).
        num_records: How many records the set holds.
        feature_dim: The length of each record's feature vector.
        s3_data_type: ``"ManifestFile"`` or ``"S3Prefix"``.
        channel: The channel the records feed (``"train"``, ``"validation"``, ``"test"``).
        distribution: ``"ShardedByS3Key"`` (each host reads its own files) or
            ``"FullyReplicated"``.
    """

    def __init__(
        self,
        s3_data: str,
        num_records: int,
        feature_dim: int,
        s3_data_type: str = "ManifestFile",
        channel: str = "train",
        distribution: str = "ShardedByS3Key",
    ) -> None:
        self.s3_data = s3_data
        self.feature_dim = feature_dim
        self.num_records = num_records
        self.s3_data_type = s3_data_type
        self.channel = channel
        self.distribution = distribution

    def __repr__(self) -> str:
        return f"RecordSet({self.__dict__!r})"

    def records_s3_input(self) -> Any:
        """The :class:`~launchbay.inputs.TrainingInput` of this record set's channel."""
        from launchbay.inputs import TrainingInput

        return TrainingInput(
            self.s3_data, distribution=self.distribution, s3_data_type=self.s3_data_type
        )

    def data_channel(self) -> dict[str, Any]:
        """``{channel: TrainingInput}``, what ``fit()`` sends for this record set."""
        return {self.channel: self.records_s3_input()}


class FileSystemRecordSet:
    """Record data on an EFS or FSx for Lustre file system (a ``FileSystemInput`` channel)."""

    def __init__(
        self,
        file_system_id: str,
        file_system_type: str,
        directory_path: str,
        num_records: int,
        feature_dim: int,
        file_system_access_mode: str = "ro",
        channel: str = "train",
    ) -> None:
        from launchbay.inputs import FileSystemInput

        self.file_system_input = FileSystemInput(
            file_system_id, file_system_type, directory_path, file_system_access_mode
        )
        self.feature_dim = feature_dim
        self.num_records = num_records
        self.channel = channel

    def __repr__(self) -> str:
        return f"FileSystemRecordSet({self.__dict__!r})"

    def data_channel(self) -> dict[str, Any]:
        """``{channel: FileSystemInput}``."""
        return {self.channel: self.file_system_input}


def shards(array: Any, count: int) -> list[Any]:
    """``array`` cut into ``count`` row ranges, the last one taking the remainder (v2's split).

    Raises:
        ConfigurationError: fewer rows than shards.
    """
    size = int(array.shape[0] / count)
    if size == 0:
        raise ConfigurationError.invalid(
            "train", f"{array.shape[0]} rows", f"at least one row per instance ({count})"
        )
    return [array[i * size : (i + 1) * size] for i in range(count - 1)] + [
        array[(count - 1) * size :]
    ]


def encode_shards(array: Any, labels: Any, count: int) -> list[tuple[str, bytes]]:
    """``[(file name, RecordIO bytes)]``: ``matrix_<i>.pbr`` per shard, as v2 names them."""
    parts = shards(array, count)
    label_parts: Sequence[Any] = shards(labels, count) if labels is not None else [None] * count
    width = len(str(len(parts)))
    out = []
    for index, (part, label_part) in enumerate(zip(parts, label_parts, strict=True)):
        buffer = io.BytesIO()
        write_numpy_to_dense_tensor(buffer, part, label_part)
        out.append((f"matrix_{str(index).zfill(width)}.pbr", buffer.getvalue()))
    return out


def manifest(prefix_uri: str, names: Sequence[str]) -> bytes:
    """A SageMaker manifest file: ``[{"prefix": uri}, name, ...]``."""
    return json.dumps([{"prefix": prefix_uri}, *names]).encode("utf-8")
