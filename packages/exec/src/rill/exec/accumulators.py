"""Conditional accumulators: the resources behind rill.graph.ops.accumulator_ops.

An accumulator is shared by the steps of every replica (it lives in the ResourceMgr of the device
that holds its variable). Semantics follow TensorFlow's ConditionalAccumulator:

- `apply(local_step, grad)`: a gradient whose local step is older than the accumulator's global
  step is stale and dropped (counted in `num_dropped`, logged); otherwise it is added to the sum
  and the count goes up by one. Its shape must match the accumulator's (or the first gradient's,
  when the accumulator was declared with an unknown shape).
- `take(num_required, ctx)`: waits until `num_required` gradients have arrived (takes are served
  in arrival order), returns their mean (MEAN) or sum (SUM), resets the sum and count and
  advances the global step by one. The wait checks the step's cancellation and deadline between
  short slices, and fails at once with CancelledError once the accumulator is closed.
- `set_global_step(step)`: moves the global step (a move backwards is logged, as in TensorFlow).

The sparse form sums rows per index; MEAN divides each row by the number of gradients that had
that row. All methods are thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

import numpy as np

from rill.graph.dtypes import DType
from rill.graph.errors import CancelledError, InvalidArgumentError
from rill.graph.shapes import TensorShape

__all__ = ["AccumulatorBase", "ConditionalAccumulator", "SparseConditionalAccumulator"]

_log = logging.getLogger("rill.exec.accumulators")

# Waiting takes sleep at most this long between checks for cancellation or the step's deadline.
_WAIT_SLICE_S = 0.05


class AccumulatorBase:
    kind = "Accumulator"

    def __init__(self, name: str, dtype: DType, shape: TensorShape, reduction_type: str):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.reduction_type = reduction_type
        self.global_step = 0
        self.count = 0
        self.num_dropped = 0
        self._cond = threading.Condition(threading.Lock())
        self._takers: deque = deque()
        self._closed = False

    def signature(self) -> tuple:
        """What a second creation of this shared accumulator must agree with."""
        return (type(self).__name__, self.dtype, self.shape, self.reduction_type)

    def _stale(self, local_step: int) -> bool:
        """With the lock held: drops (and counts) a gradient older than the global step."""
        if local_step < self.global_step:
            self.num_dropped += 1
            _log.info(
                "%s %r dropped a stale gradient: local step %d < global step %d (%d dropped so far)",
                self.kind,
                self.name,
                local_step,
                self.global_step,
                self.num_dropped,
            )
            return True
        return False

    def set_global_step(self, step: int) -> None:
        with self._cond:
            if step < self.global_step:
                _log.warning(
                    "%s %r: global step set back from %d to %d",
                    self.kind,
                    self.name,
                    self.global_step,
                    step,
                )
            self.global_step = step

    def num_accumulated(self) -> int:
        with self._cond:
            return self.count

    def close(self, cancel_pending_enqueues: bool = True) -> None:
        """Fails every waiting and later take with CancelledError (training is over, or the
        session is closing). Called like a queue's close by ResourceMgr.clear()."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _check_num_required(self, n: int) -> None:
        if n < 1:
            raise InvalidArgumentError(
                f"{self.kind} {self.name!r}: num_required must be >= 1, got {n}"
            )

    def _wait_for(self, n: int, ctx) -> None:
        """With the lock held: waits until this taker is first in line and n gradients are in."""
        token = object()
        self._takers.append(token)
        try:
            while True:
                if self._closed:
                    raise CancelledError(f"{self.kind} {self.name!r} was closed")
                if self._takers[0] is token and self.count >= n:
                    return
                self._cond.wait(_WAIT_SLICE_S)
                if ctx is not None:
                    ctx.check_cancelled()
        finally:
            self._takers.remove(token)
            self._cond.notify_all()

    def _advance(self) -> None:
        self.count = 0
        self.global_step += 1

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, {self.dtype.name}{self.shape}, "
            f"count={self.count}, global_step={self.global_step})"
        )


class ConditionalAccumulator(AccumulatorBase):
    def __init__(self, name, dtype, shape, reduction_type="MEAN"):
        super().__init__(name, dtype, shape, reduction_type)
        self._sum: np.ndarray | None = None
        self._known: TensorShape = shape

    def apply(self, local_step: int, grad: np.ndarray) -> bool:
        """Adds grad unless stale; returns whether it was added."""
        grad = np.asarray(grad)
        if grad.dtype != self.dtype.np:
            raise InvalidArgumentError(
                f"accumulator {self.name!r} holds {self.dtype.name}, got a gradient of {grad.dtype}"
            )
        with self._cond:
            if not self._known.is_compatible_with(TensorShape(grad.shape)):
                raise InvalidArgumentError(
                    f"accumulator {self.name!r}: the gradient has shape {TensorShape(grad.shape)}"
                    f", the accumulator holds {self._known}"
                )
            if self._stale(local_step):
                return False
            if self._sum is None or self.count == 0:
                self._sum = np.array(grad, copy=True)
            else:
                np.add(self._sum, grad, out=self._sum)
            # Later gradients must have the shape of the first, as in TensorFlow.
            self._known = TensorShape(grad.shape)
            self.count += 1
            self._cond.notify_all()
            return True

    def take(self, num_required: int, ctx=None) -> np.ndarray:
        self._check_num_required(num_required)
        with self._cond:
            self._wait_for(num_required, ctx)
            out = self._sum
            if self.reduction_type == "MEAN":
                out = (out / self.count).astype(self.dtype.np, copy=False)
            self._sum = None
            self._advance()
            self._known = self.shape
            return out


class SparseConditionalAccumulator(AccumulatorBase):
    kind = "SparseAccumulator"

    def __init__(self, name, dtype, shape, reduction_type="MEAN"):
        super().__init__(name, dtype, shape, reduction_type)
        self._rows: dict[int, np.ndarray] = {}
        self._row_counts: dict[int, int] = {}
        self._dense_shape: tuple | None = None
        self._row_shape: tuple | None = None

    def apply(self, local_step: int, indices, values, dense_shape=None) -> bool:
        indices = np.asarray(indices).reshape(-1)
        values = np.asarray(values)
        if values.dtype != self.dtype.np:
            raise InvalidArgumentError(
                f"sparse accumulator {self.name!r} holds {self.dtype.name}, got values of "
                f"{values.dtype}"
            )
        if values.ndim < 1 or values.shape[0] != indices.shape[0]:
            raise InvalidArgumentError(
                f"sparse accumulator {self.name!r}: {indices.shape[0]} indices but values of "
                f"shape {values.shape}"
            )
        row_shape = values.shape[1:]
        with self._cond:
            want = self.shape
            if want.rank is not None and not TensorShape([None, *row_shape]).is_compatible_with(
                want
            ):
                raise InvalidArgumentError(
                    f"sparse accumulator {self.name!r}: rows of shape {TensorShape(row_shape)} "
                    f"do not fit the accumulator's shape {want}"
                )
            if dense_shape is not None and len(dense_shape):
                dense_shape = tuple(int(d) for d in dense_shape)
                if dense_shape[1:] != row_shape or (
                    want.rank is not None and not want.is_compatible_with(TensorShape(dense_shape))
                ):
                    raise InvalidArgumentError(
                        f"sparse accumulator {self.name!r}: gradient_shape {list(dense_shape)} "
                        f"disagrees with values of shape {values.shape} or the accumulator's "
                        f"shape {want}"
                    )
                if np.any(indices < 0) or np.any(indices >= dense_shape[0]):
                    bad = indices[(indices < 0) | (indices >= dense_shape[0])][0]
                    raise InvalidArgumentError(
                        f"sparse accumulator {self.name!r}: index {int(bad)} is out of range "
                        f"[0, {dense_shape[0]})"
                    )
            if self.count and self._row_shape is not None and row_shape != self._row_shape:
                raise InvalidArgumentError(
                    f"sparse accumulator {self.name!r}: rows of shape {TensorShape(row_shape)}, "
                    f"earlier gradients had {TensorShape(self._row_shape)}"
                )
            if self._stale(local_step):
                return False
            self._row_shape = row_shape
            if dense_shape:
                self._dense_shape = dense_shape
            # Duplicate indices within one gradient are summed and count once for that row.
            uniq, inverse = np.unique(indices, return_inverse=True)
            summed = np.zeros((len(uniq), *row_shape), values.dtype)
            np.add.at(summed, inverse, values)
            for i, row in zip(uniq.tolist(), summed):
                if i in self._rows:
                    self._rows[i] += row
                    self._row_counts[i] += 1
                else:
                    self._rows[i] = row.copy()
                    self._row_counts[i] = 1
            self.count += 1
            self._cond.notify_all()
            return True

    def take(self, num_required: int, ctx=None):
        """(indices ascending, values, dense shape) of the accumulated gradient."""
        self._check_num_required(num_required)
        with self._cond:
            self._wait_for(num_required, ctx)
            order = sorted(self._rows)
            row_shape = self._row_shape or ()
            values = np.zeros((len(order), *row_shape), self.dtype.np)
            for k, i in enumerate(order):
                row = self._rows[i]
                if self.reduction_type == "MEAN":
                    row = row / self._row_counts[i]
                values[k] = row
            if self._dense_shape is not None:
                shape = np.array(self._dense_shape, np.int64)
            elif self.shape.rank is not None and self.shape.dims[0] is not None:
                shape = np.array([-1 if d is None else d for d in self.shape.dims], np.int64)
            else:
                shape = np.array([-1, *row_shape], np.int64)
            self._rows.clear()
            self._row_counts.clear()
            self._dense_shape = None
            self._advance()
            return np.array(order, np.int64), values, shape
