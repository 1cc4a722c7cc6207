"""``smdistributed.dataparallel.tensorflow``: the library's TensorFlow 2.x API over MPI.

Ranks are MPI processes (launchbay starts them with ``mpirun``, as SageMaker
does); every collective is an MPI collective through mpi4py on numpy copies of
the tensors. Inside a ``tf.function`` a collective is one stateful
``tf.numpy_function`` op: TensorFlow runs stateful ops in program order, so every
rank issues the same collectives in the same order. A call that reduces several
tensors (:class:`DistributedGradientTape`, :func:`broadcast_variables`) is one op
for all of them.

Rank, size and local rank/size are those of the launcher's environment (see
:mod:`smdistributed.dataparallel._world`); MPI's own world must agree.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .. import _world

__all__ = [
    "init",
    "shutdown",
    "is_initialized",
    "size",
    "rank",
    "local_size",
    "local_rank",
    "ReduceOp",
    "Compression",
    "allreduce",
    "oob_allreduce",
    "broadcast",
    "broadcast_variables",
    "broadcast_global_variables",
    "barrier",
    "overlap",
    "DistributedGradientTape",
    "DistributedOptimizer",
    "BroadcastGlobalVariablesHook",
]


class ReduceOp(enum.Enum):
    """Reduction operations (the library's names)."""

    AVERAGE = "average"
    SUM = "sum"
    MIN = "min"
    MAX = "max"


class _NoneCompressor:
    """Send tensors as they are."""

    @staticmethod
    def compress(array: np.ndarray) -> tuple[np.ndarray, Any]:
        return array, None

    @staticmethod
    def decompress(array: np.ndarray, context: Any) -> np.ndarray:
        return array


class _FP16Compressor:
    """Send floating-point tensors as float16 (the reduction is done on the float16 values)."""

    @staticmethod
    def compress(array: np.ndarray) -> tuple[np.ndarray, Any]:
        if np.issubdtype(array.dtype, np.floating):
            return array.astype(np.float16).astype(np.float32), array.dtype
        return array, None

    @staticmethod
    def decompress(array: np.ndarray, context: Any) -> np.ndarray:
        if context is None:
            return array
        return array.astype(np.float16).astype(context)


class Compression:
    """Gradient compression for the collectives: ``none`` or ``fp16``."""

    NoneCompression = _NoneCompressor
    FP16Compression = _FP16Compressor
    none = _NoneCompressor
    fp16 = _FP16Compressor


class _State:
    comm: Any = None


_state = _State()


def init() -> None:
    """Start the library; must be called once, before any other call."""
    if _state.comm is not None:
        raise RuntimeError(
            "init() called more than once: smdistributed.dataparallel is already initialized."
        )
    from mpi4py import MPI  # noqa: PLC0415 - only ranks that use the library need MPI

    comm = MPI.COMM_WORLD.Dup()
    if comm.Get_size() != _world.size() or comm.Get_rank() != _world.rank():
        raise RuntimeError(
            f"smdistributed.dataparallel: MPI sees rank {comm.Get_rank()} of "
            f"{comm.Get_size()}, the launcher's environment rank {_world.rank()} of "
            f"{_world.size()}. Start the script through an smdistributed job (mpirun)."
        )
    _state.comm = comm


def shutdown() -> None:
    """Stop the library (optional at the end of a script)."""
    if _state.comm is not None:
        _state.comm.Barrier()
        _state.comm.Free()
        _state.comm = None


def is_initialized() -> bool:
    """Whether :func:`init` has run (and :func:`shutdown` has not)."""
    return _state.comm is not None


def _comm() -> Any:
    if _state.comm is None:
        raise RuntimeError(
            "smdistributed.dataparallel is not initialized: call "
            "smdistributed.dataparallel.tensorflow.init() first."
        )
    return _state.comm


def size() -> int:
    """Number of processes in the job."""
    _comm()
    return _world.size()


def rank() -> int:
    """Global rank of this process."""
    _comm()
    return _world.rank()


def local_size() -> int:
    """Number of processes on this host."""
    _comm()
    return _world.local_size()


def local_rank() -> int:
    """Rank of this process among the processes of its host."""
    _comm()
    return _world.local_rank()


# --------------------------------------------------------------------------- numpy collectives


def _mpi_op(op: ReduceOp) -> Any:
    from mpi4py import MPI  # noqa: PLC0415

    return {ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX}.get(op, MPI.SUM)


def _reduce_arrays(arrays: Sequence[np.ndarray], op: ReduceOp, compression: Any) -> list:
    comm = _comm()
    out = []
    for array in arrays:
        original = np.asarray(array)
        sent, context = compression.compress(original)
        buffer = np.array(sent, copy=True, order="C")
        if buffer.dtype.kind in "fiu" and buffer.dtype.itemsize in (4, 8):
            comm.Allreduce(_in_place(), buffer, op=_mpi_op(op))
        else:
            buffer = np.asarray(comm.allreduce(buffer, op=_mpi_op(op)))
        if op is ReduceOp.AVERAGE:
            buffer = buffer / comm.Get_size()
        result = compression.decompress(buffer, context).astype(original.dtype)
        out.append(result.reshape(original.shape))
    return out


def _in_place() -> Any:
    from mpi4py import MPI  # noqa: PLC0415

    return MPI.IN_PLACE


def _broadcast_arrays(arrays: Sequence[np.ndarray], root_rank: int) -> list:
    comm = _comm()
    data = [np.asarray(a) for a in arrays] if comm.Get_rank() == root_rank else None
    received = comm.bcast(data, root=root_rank)
    return [
        np.asarray(r).astype(np.asarray(a).dtype) for r, a in zip(received, arrays, strict=True)
    ]


def _run(fn: Any, tensors: list[tf.Tensor]) -> list[tf.Tensor]:
    """``fn`` on numpy copies of ``tensors`` as one stateful op (eager or in a tf.function)."""
    if not tensors:
        return []
    dtypes = [t.dtype for t in tensors]
    results = tf.numpy_function(lambda *a: fn(list(a)), tensors, Tout=dtypes, stateful=True)
    if not isinstance(results, (list, tuple)):
        results = [results]
    return [tf.ensure_shape(r, t.shape) for r, t in zip(results, tensors, strict=True)]


def _as_tensor(value: Any) -> tf.Tensor:
    """A dense tensor (``tf.IndexedSlices`` gradients are densified, as the library does)."""
    return tf.convert_to_tensor(value)


def _reduce_tensors(tensors: list[Any], op: ReduceOp | None, compression: Any) -> list:
    op = ReduceOp.AVERAGE if op is None else ReduceOp(op)
    compression = compression or Compression.none
    values = [_as_tensor(t) for t in tensors]
    _comm()
    return _run(lambda arrays: _reduce_arrays(arrays, op, compression), values)


# --------------------------------------------------------------------------- public collectives


def allreduce(
    tensor: Any,
    param_index: int = 0,
    num_params: int = 1,
    compression: Any = Compression.none,
    op: ReduceOp | None = ReduceOp.AVERAGE,
) -> tf.Tensor:
    """All-reduce ``tensor`` across every process (average by default).

    ``param_index`` / ``num_params`` are the library's bucketing hints; every
    call here is reduced at once, so they do not change the result.
    """
    del param_index, num_params
    return _reduce_tensors([tensor], op, compression)[0]


def oob_allreduce(
    tensor: Any, compression: Any = Compression.none, op: ReduceOp | None = ReduceOp.AVERAGE
) -> tf.Tensor:
    """Out-of-band all-reduce (for metrics such as the loss); averages by default."""
    return _reduce_tensors([tensor], op, compression)[0]


def broadcast(tensor: Any, root_rank: int) -> tf.Tensor:
    """``tensor`` as it is on ``root_rank``, on every process."""
    _comm()
    value = _as_tensor(tensor)
    return _run(lambda arrays: _broadcast_arrays(arrays, root_rank), [value])[0]


def broadcast_variables(variables: Iterable[Any], root_rank: int) -> Any:
    """Assign ``root_rank``'s values to ``variables`` on every process (one collective)."""
    _comm()
    variables = list(variables)
    if not variables:
        return None
    values = [tf.convert_to_tensor(v) for v in variables]
    received = _run(lambda arrays: _broadcast_arrays(arrays, root_rank), values)
    assigns = [v.assign(r) for v, r in zip(variables, received, strict=True)]
    if tf.executing_eagerly():
        return None
    return tf.group(*[a for a in assigns if a is not None])


def broadcast_global_variables(root_rank: int) -> Any:
    """Broadcast every global variable (TF1-style graphs) from ``root_rank``."""
    if tf.executing_eagerly():
        raise RuntimeError(
            "broadcast_global_variables() needs graph mode (tf.compat.v1 sessions, "
            "tf.estimator); in TensorFlow 2 eager code call "
            "broadcast_variables(model.variables, root_rank) instead."
        )
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def barrier() -> None:
    """Wait until every process gets here."""
    _comm().Barrier()


def overlap(tensor: Any) -> Any:
    """Identity (the library uses it to overlap XLA backward passes with all-reduce)."""
    return tf.identity(tensor)


# --------------------------------------------------------------------------- wrappers


def _not_supported(name: str, value: Any, default: Any) -> None:
    if value != default:
        raise ValueError(f"{name}={value!r} is not supported by smdistributed.dataparallel.")


class DistributedGradientTape:
    """Wraps a ``tf.GradientTape``: ``gradient()`` returns gradients all-reduced across ranks."""

    def __init__(
        self,
        gradtape: tf.GradientTape,
        device_dense: str = "",
        device_sparse: str = "",
        compression: Any = Compression.none,
        sparse_as_dense: bool = False,
        op: ReduceOp | None = ReduceOp.AVERAGE,
    ) -> None:
        _not_supported("device_dense", device_dense, "")
        _not_supported("device_sparse", device_sparse, "")
        _not_supported("sparse_as_dense", sparse_as_dense, False)
        self._tape = gradtape
        self._compression = compression
        self._op = op

    def gradient(
        self, target: Any, sources: Any, output_gradients: Any = None, **kwargs: Any
    ) -> Any:
        """The tape's gradients, all-reduced (one collective for all of them)."""
        grads = self._tape.gradient(target, sources, output_gradients=output_gradients, **kwargs)
        flat = tf.nest.flatten(grads, expand_composites=False)
        present = [i for i, g in enumerate(flat) if g is not None]
        reduced = _reduce_tensors([flat[i] for i in present], self._op, self._compression)
        for i, value in zip(present, reduced, strict=True):
            flat[i] = value
        return tf.nest.pack_sequence_as(grads, flat)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tape, name)

    def __enter__(self) -> DistributedGradientTape:
        self._tape.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._tape.__exit__(*exc)


def DistributedOptimizer(  # noqa: N802 - the library's name
    optimizer: Any,
    name: str | None = None,
    use_locking: bool = False,
    device_dense: str = "",
    device_sparse: str = "",
    compression: Any = Compression.none,
    sparse_as_dense: bool = False,
    op: ReduceOp | None = ReduceOp.AVERAGE,
    bucket_cap_mb: int | None = None,
) -> Any:
    """``optimizer`` (the same object) with its gradients all-reduced before they are applied.

    TF1 optimizers (``tf.compat.v1.train.Optimizer``): ``compute_gradients`` returns
    reduced gradients (so ``minimize`` and estimator training reduce once). Keras 3
    optimizers: ``apply`` (where ``apply_gradients`` and ``model.fit`` end) reduces
    the gradients first; older Keras optimizers: ``apply_gradients`` does.
    """
    del name, use_locking, bucket_cap_mb
    _not_supported("device_dense", device_dense, "")
    _not_supported("device_sparse", device_sparse, "")
    _not_supported("sparse_as_dense", sparse_as_dense, False)
    base = type(optimizer)

    def reduce_pairs(pairs: Iterable[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        pairs = list(pairs)
        present = [i for i, (g, _) in enumerate(pairs) if g is not None]
        reduced = _reduce_tensors([pairs[i][0] for i in present], op, compression)
        for i, value in zip(present, reduced, strict=True):
            pairs[i] = (value, pairs[i][1])
        return pairs

    if isinstance(optimizer, tf.compat.v1.train.Optimizer):

        def compute_gradients(self: Any, *args: Any, **kwargs: Any) -> Any:
            return reduce_pairs(base.compute_gradients(self, *args, **kwargs))

        methods = {"compute_gradients": compute_gradients}
    elif _is_keras3(optimizer):
        # Keras 3: apply_gradients() and model.fit() both end in apply().

        def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
            grads = list(grads)
            present = [i for i, g in enumerate(grads) if g is not None]
            reduced = _reduce_tensors([grads[i] for i in present], op, compression)
            for i, value in zip(present, reduced, strict=True):
                grads[i] = value
            return base.apply(self, grads, trainable_variables)

        methods = {"apply": apply}
    else:

        def apply_gradients(self: Any, grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            return base.apply_gradients(self, reduce_pairs(grads_and_vars), *args, **kwargs)

        methods = {"apply_gradients": apply_gradients}
    optimizer.__class__ = type(f"Distributed{base.__name__}", (base,), methods)
    return optimizer


def _is_keras3(optimizer: Any) -> bool:
    try:
        import keras  # noqa: PLC0415 - only for Keras optimizers
    except ImportError:
        return False
    major = str(getattr(keras, "__version__", "0")).split(".", 1)[0]
    return major.isdigit() and int(major) >= 3 and isinstance(optimizer, keras.optimizers.Optimizer)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Session hook that broadcasts every global variable from ``root_rank`` once a session starts."""

    def __init__(self, root_rank: int, device: str = "") -> None:
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self._op: Any = None

    def begin(self) -> None:
        """Build the broadcast op in the session's graph."""
        if self._op is None or self._op.graph is not tf.compat.v1.get_default_graph():
            self._op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Run the broadcast."""
        if self._op is not None:
            session.run(self._op)
