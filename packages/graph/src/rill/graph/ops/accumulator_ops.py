"""Conditional accumulators: where synchronous replicas meet (paper §4.4, Figure 5).

An accumulator holds the sum of the gradients applied to it since the last take, a count, and a
global step. `apply_grad(g, local_step)` adds `g` unless `local_step` is older than the
accumulator's global step (a stale gradient, computed from parameters that have changed since):
stale gradients are dropped and counted. `take_grad(n)` waits until at least `n` gradients have
arrived, returns their mean (or sum), resets the sum and count, and advances the global step by
one. `set_global_step(s)` moves the global step (the chief sets it from the real global step).

The ops follow TensorFlow's: `ConditionalAccumulator` / `SparseConditionalAccumulator` produce a
TF1 reference handle (a 2-element string vector: container and name), and
`ResourceConditionalAccumulator` a resource handle, each with its apply/take/set/num ops.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     acc = ConditionalAccumulator(rg.float32, shape=[2], shared_name="w_accum")
...     acc.take_grad(3)
<Tensor 'conditional_accumulator_TakeGradient:0' f32[2]>
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.errors import GraphTypeError
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.ops.state_ops import resource_producer
from rill.graph.shapes import TensorShape, as_shape, scalar, unknown_shape

__all__ = ["ConditionalAccumulator", "SparseConditionalAccumulator"]

_NUMBER_TYPES = (
    "{float32, float64, int32, uint8, int16, int8, complex64, int64, bfloat16, uint16, "
    "complex128, float16, uint32, uint64}"
)
_CREATOR_ATTRS = [
    f"dtype: {_NUMBER_TYPES}",
    "shape: shape",
    "container: string = ''",
    "shared_name: string = ''",
    "reduction_type: {'MEAN', 'SUM'} = 'MEAN'",
]
_DENSE_CREATORS = ("ConditionalAccumulator", "ResourceConditionalAccumulator")
_SPARSE_CREATORS = ("SparseConditionalAccumulator",)


# -- shape functions ----------------------------------------------------------------------------


def _int64_step(value, name: str):
    """A step as int64, whatever integer type it comes in (a TF1 program's global step is often
    an int32 Variable; TensorFlow casts it the same way)."""
    step = convert_to_tensor(value, name=name)
    if step.dtype is dtypes.int64:
        return step
    if not step.dtype.is_integer:
        raise GraphTypeError(f"{name} must be an integer tensor, got {step.dtype.name}")
    from rill.graph.ops.math_ops import cast

    return cast(step, dtypes.int64, name=f"{name}_int64")


def _creator_of(handle: Tensor, kinds) -> Operation | None:
    op = resource_producer(handle)
    return op if op is not None and op.type in kinds else None


def _check_handle(op, resource: bool) -> None:
    h = op._inputs[0].shape
    want = 0 if resource else 1
    if h.rank is not None and h.rank != want:
        kind = "a scalar resource handle" if resource else "a reference handle (2 strings)"
        raise ValueError(f"handle must be {kind}, got shape {h}")


def _check_scalar(op, index: int, what: str) -> None:
    s = op._inputs[index].shape
    if s.rank not in (None, 0):
        raise ValueError(f"{what} must be a scalar, got shape {s}")


def _accumulator_shape(op, kinds) -> TensorShape:
    creator = _creator_of(op._inputs[0], kinds)
    if creator is None:
        return unknown_shape()
    if creator.attrs["dtype"] is not op.attrs.get("dtype", creator.attrs["dtype"]):
        raise ValueError(
            f"the accumulator {creator.name} holds {creator.attrs['dtype'].name} but the op "
            f"says {op.attrs['dtype'].name}"
        )
    return as_shape(creator.attrs["shape"])


def _apply_shape(op, resource: bool):
    _check_handle(op, resource)
    _check_scalar(op, 1, "local_step")
    want = _accumulator_shape(op, _DENSE_CREATORS)
    got = op._inputs[2].shape
    if not got.is_compatible_with(want):
        raise ValueError(f"the gradient has shape {got}; the accumulator holds {want}")
    return []


def _take_shape(op, resource: bool):
    _check_handle(op, resource)
    _check_scalar(op, 1, "num_required")
    return [_accumulator_shape(op, _DENSE_CREATORS)]


def _set_step_shape(op, resource: bool):
    _check_handle(op, resource)
    _check_scalar(op, 1, "new_global_step")
    return []


def _num_shape(op, resource: bool):
    _check_handle(op, resource)
    return [scalar()]


def _sparse_apply_shape(op):
    _check_handle(op, False)
    _check_scalar(op, 1, "local_step")
    idx, vals, shp = (op._inputs[i].shape for i in (2, 3, 4))
    idx.with_rank(1)
    vals.with_rank_at_least(1)
    if idx.dims[0] is not None and vals.dims and vals.dims[0] not in (None, idx.dims[0]):
        raise ValueError(
            f"gradient_values has {vals.dims[0]} rows but gradient_indices has {idx.dims[0]}"
        )
    shp.with_rank(1)
    return []


def _sparse_take_shape(op):
    _check_handle(op, False)
    _check_scalar(op, 1, "num_required")
    acc = _accumulator_shape(op, _SPARSE_CREATORS)
    rows = TensorShape([None])
    values = rows.concatenate(acc[1:]) if acc.rank is not None else unknown_shape()
    return [rows, values, TensorShape([acc.rank])]


# -- declarations -------------------------------------------------------------------------------

defop(
    "ConditionalAccumulator",
    outputs=["handle: Ref(string)"],
    attrs=_CREATOR_ATTRS,
    shape=lambda op: TensorShape([2]),
    stateful=True,
    doc="A dense gradient accumulator (a TF1 reference handle) that drops stale gradients.",
)
defop(
    "ResourceConditionalAccumulator",
    outputs=["handle: resource"],
    attrs=_CREATOR_ATTRS,
    shape=lambda op: scalar(),
    stateful=True,
    doc="A dense gradient accumulator (a resource handle) that drops stale gradients.",
)
defop(
    "SparseConditionalAccumulator",
    outputs=["handle: Ref(string)"],
    attrs=_CREATOR_ATTRS,
    shape=lambda op: TensorShape([2]),
    stateful=True,
    doc="An accumulator of sparse (IndexedSlices) gradients that drops stale ones.",
)

for _prefix, _handle, _resource in (("", "Ref(string)", False), ("Resource", "resource", True)):
    defop(
        f"{_prefix}AccumulatorApplyGradient",
        inputs=[f"handle: {_handle}", "local_step: int64", "gradient: dtype"],
        attrs=[f"dtype: {_NUMBER_TYPES}"],
        shape=lambda op, r=_resource: _apply_shape(op, r),
        stateful=_resource,
        doc="Adds a gradient unless local_step is older than the accumulator's global step.",
    )
    defop(
        f"{_prefix}AccumulatorTakeGradient",
        inputs=[f"handle: {_handle}", "num_required: int32"],
        outputs=["average: dtype"],
        attrs=[f"dtype: {_NUMBER_TYPES}"],
        shape=lambda op, r=_resource: _take_shape(op, r),
        stateful=_resource,
        doc="Waits for num_required gradients, returns their mean (or sum), resets, steps.",
    )
    defop(
        f"{_prefix}AccumulatorSetGlobalStep",
        inputs=[f"handle: {_handle}", "new_global_step: int64"],
        shape=lambda op, r=_resource: _set_step_shape(op, r),
        stateful=_resource,
        doc="Sets the accumulator's global step (gradients older than it are dropped).",
    )
    defop(
        f"{_prefix}AccumulatorNumAccumulated",
        inputs=[f"handle: {_handle}"],
        outputs=["num_accumulated: int32"],
        shape=lambda op, r=_resource: _num_shape(op, r),
        stateful=_resource,
        doc="The number of gradients accumulated since the last take.",
    )

defop(
    "SparseAccumulatorApplyGradient",
    inputs=[
        "handle: Ref(string)",
        "local_step: int64",
        "gradient_indices: int64",
        "gradient_values: dtype",
        "gradient_shape: int64",
    ],
    attrs=[f"dtype: {_NUMBER_TYPES}", "has_known_shape: bool"],
    shape=_sparse_apply_shape,
    doc="Adds a sparse gradient (indices, values, dense shape) unless it is stale.",
)
defop(
    "SparseAccumulatorTakeGradient",
    inputs=["handle: Ref(string)", "num_required: int32"],
    outputs=["indices: int64", "values: dtype", "shape: int64"],
    attrs=[f"dtype: {_NUMBER_TYPES}"],
    shape=_sparse_take_shape,
    doc="Waits for num_required sparse gradients; returns the per-row mean (or sum).",
)
defop(
    "_AccumulatorNumDropped",
    inputs=["handle: resource"],
    outputs=["num_dropped: int64"],
    shape=lambda op: _num_shape(op, True),
    stateful=True,
    doc="rill's own: how many stale gradients the accumulator has dropped since it was made.",
)


# -- builders -----------------------------------------------------------------------------------


class _AccumulatorBase:
    def __init__(self, op_type: str, dtype, shape, shared_name, name, reduction_type):
        if reduction_type not in ("MEAN", "SUM"):
            raise ValueError(f"reduction_type must be 'MEAN' or 'SUM', got {reduction_type!r}")
        self._dtype = dtypes.as_dtype(dtype)
        self._shape = unknown_shape() if shape is None else as_shape(shape)
        attrs = {
            "dtype": self._dtype,
            "shape": self._shape,
            "reduction_type": reduction_type,
            "shared_name": shared_name or "",
        }
        self._ref = get_default_graph().create_op(op_type, [], attrs, name=name).outputs[0]
        self._resource = op_type.startswith("Resource")
        self._prefix = "Resource" if self._resource else ""
        self._name = self._ref.op.name

    @property
    def accumulator_ref(self) -> Tensor:
        return self._ref

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    def _op(self, kind: str, inputs, name, attrs=None, prefix=None):
        prefix = self._prefix if prefix is None else prefix
        return get_default_graph().create_op(
            f"{prefix}{kind}", [self._ref, *inputs], attrs or {}, name=name
        )

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """The number of gradients accumulated since the last take (an int32 scalar)."""
        return self._op(
            "AccumulatorNumAccumulated", [], name or f"{self._name}_NumAccumulated"
        ).outputs[0]

    def set_global_step(self, new_global_step, name: str | None = None) -> Operation:
        """Sets the global step; later gradients with an older local step are dropped."""
        step = _int64_step(new_global_step, "new_global_step")
        return self._op("AccumulatorSetGlobalStep", [step], name or f"{self._name}_SetGlobalStep")


class ConditionalAccumulator(_AccumulatorBase):
    """An accumulator of dense gradients of one dtype and shape (TensorFlow's
    `tf.compat.v1.ConditionalAccumulator`). With `resource=True` (rill's default for new graphs
    is the TF1 reference form, as TensorFlow's) it is a ResourceConditionalAccumulator."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name: str | None = None,
        name: str = "conditional_accumulator",
        reduction_type: str = "MEAN",
        resource: bool = False,
    ):
        op_type = "ResourceConditionalAccumulator" if resource else "ConditionalAccumulator"
        super().__init__(op_type, dtype, shape, shared_name, name, reduction_type)

    def apply_grad(self, grad, local_step=0, name: str | None = None) -> Operation:
        """Adds `grad` unless `local_step` is older than the accumulator's global step."""
        grad = convert_to_tensor(grad, self._dtype, name="grad")
        step = _int64_step(local_step, "local_step")
        return self._op(
            "AccumulatorApplyGradient",
            [step, grad],
            name or f"{self._name}_ApplyGradient",
            {"dtype": self._dtype},
        )

    def take_grad(self, num_required, name: str | None = None) -> Tensor:
        """Waits for `num_required` gradients and returns their mean (or sum)."""
        n = convert_to_tensor(num_required, dtypes.int32, name="num_required")
        return self._op(
            "AccumulatorTakeGradient", [n], name or f"{self._name}_TakeGradient",
            {"dtype": self._dtype},
        ).outputs[0]  # fmt: skip

    def num_dropped(self, name: str | None = None) -> Tensor:
        """rill's own: the number of stale gradients dropped so far (resource form only)."""
        if not self._resource:
            raise ValueError("num_dropped needs a resource accumulator (resource=True)")
        return self._op(
            "_AccumulatorNumDropped", [], name or f"{self._name}_NumDropped", prefix=""
        ).outputs[0]


class SparseConditionalAccumulator(_AccumulatorBase):
    """An accumulator of sparse gradients (TensorFlow's
    `tf.compat.v1.SparseConditionalAccumulator`): rows are summed per index, and MEAN divides
    each row by the number of gradients that had that row."""

    def __init__(
        self,
        dtype,
        shape=None,
        shared_name: str | None = None,
        name: str = "sparse_conditional_accumulator",
        reduction_type: str = "MEAN",
    ):
        super().__init__(
            "SparseConditionalAccumulator", dtype, shape, shared_name, name, reduction_type
        )

    def apply_grad(
        self, grad_indices, grad_values, grad_shape=None, local_step=0, name: str | None = None
    ) -> Operation:
        """Adds the sparse gradient (rows `grad_indices` of a tensor of shape `grad_shape`)."""
        indices = convert_to_tensor(grad_indices, dtypes.int64, name="gradient_indices")
        values = convert_to_tensor(grad_values, self._dtype, name="gradient_values")
        known = grad_shape is not None
        shape = convert_to_tensor(grad_shape if known else [], dtypes.int64, name="gradient_shape")
        step = _int64_step(local_step, "local_step")
        return self._op(
            "SparseAccumulatorApplyGradient",
            [step, indices, values, shape],
            name or f"{self._name}_ApplyGradient",
            {"dtype": self._dtype, "has_known_shape": known},
            prefix="",
        )

    def apply_indexed_slices_grad(self, grad, local_step=0, name: str | None = None):
        """Adds an IndexedSlices-like gradient (anything with indices, values, dense_shape)."""
        return self.apply_grad(
            grad.indices, grad.values, grad.dense_shape, local_step=local_step, name=name
        )

    def take_grad(self, num_required, name: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Waits for `num_required` gradients; returns (indices, values, dense shape)."""
        n = convert_to_tensor(num_required, dtypes.int32, name="num_required")
        op = self._op(
            "SparseAccumulatorTakeGradient",
            [n],
            name or f"{self._name}_TakeGradient",
            {"dtype": self._dtype},
            prefix="",
        )
        return tuple(op.outputs)
