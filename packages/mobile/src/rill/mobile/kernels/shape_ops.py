"""Shapes and data movement, part 2: SHAPE, PACK, UNPACK, SPLIT, SPLIT_V, SLICE, TILE, CAST,
FILL, ZEROS_LIKE, RANGE (TFLite has no ONES_LIKE builtin: converters write FILL), BROADCAST_TO, BROADCAST_ARGS, REVERSE_V2 — any numeric type
(int8/int16 tensors keep their quantization: these kernels move bytes).

SHAPE's output is known in prepare (it depends on shapes only), so what follows it (the
STRIDED_SLICE and PACK of a dynamic-batch RESHAPE) folds into constants. An output whose shape
depends on a value computed at run time raises DynamicShape and the subgraph runs eagerly.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.array_ops import _axis, _int_vector
from rill.mobile.kernels.base import Kernel, register

__all__ = ["Shape", "Pack", "Unpack", "Split", "SplitV", "Slice", "Tile", "Cast", "Fill",
           "ZerosLike", "Range", "BroadcastTo", "BroadcastArgs", "ReverseV2"]  # fmt: skip

_NUMPY_OUT_TYPES = {"int32": np.int32, "int64": np.int64}


def _same_quant_or_none(kernel: Kernel, a, b) -> None:
    if a.dtype is not None and a.dtype.kind in "iu" and a.quant is not None and b.quant is not None:
        kernel.expect_same_quant(a, b)


def _values(kernel: Kernel, spec, what: str) -> list[int]:
    data = kernel.need_value(spec, what)
    if data.dtype.kind not in "iu":
        raise kernel.fail(f"the {what} {spec} must be an integer tensor")
    return [int(v) for v in np.ravel(data)]


@register("SHAPE", max_version=1)
class Shape(Kernel):
    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        self.expect_dtype(out, [np.int32, np.int64], "output")
        self.known = [np.array(x.shape, out.dtype)]
        return [(len(x.shape),)]


@register("PACK", max_version=4)
class Pack(Kernel):
    def prepare(self, inputs, outputs):
        if not inputs or None in inputs:
            raise self.fail("needs at least one input")
        first, out = inputs[0], outputs[0]
        for t in inputs[1:]:
            self.expect_same_dtype(first, t)
            if tuple(t.shape) != tuple(first.shape):
                raise self.fail(f"inputs {first} and {t} differ in shape")
        rank = len(first.shape)
        self.axis = _axis(self, self.options.get("axis", 0), rank + 1)
        n = self.options.get("values_count", len(inputs))
        if n != len(inputs):
            raise self.fail(f"values_count is {n} but the operator has {len(inputs)} inputs")
        for t in inputs:
            _same_quant_or_none(self, t, out)
        shape = list(first.shape)
        shape.insert(self.axis, len(inputs))
        return [tuple(shape)]

    def bind(self, inputs, outputs, scratch):
        xs, out, axis = tuple(inputs), outputs[0], self.axis
        return lambda: np.stack(xs, axis=axis, out=out)


@register("UNPACK", max_version=4)
class Unpack(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        rank = len(x.shape)
        self.axis = _axis(self, self.options.get("axis", 0), rank)
        n = x.shape[self.axis]
        if self.options.get("num", n) != n or len(outputs) != n:
            raise self.fail(f"cannot unpack {x} along axis {self.axis} into {len(outputs)} "
                            "outputs")  # fmt: skip
        for o in outputs:
            _same_quant_or_none(self, x, o)
        shape = tuple(d for a, d in enumerate(x.shape) if a != self.axis)
        return [shape] * n

    def bind(self, inputs, outputs, scratch):
        x, axis = inputs[0], self.axis
        pairs = [(out, x[(slice(None),) * axis + (k,)]) for k, out in enumerate(outputs)]

        def run():
            for out, src in pairs:
                np.copyto(out, src)

        return run


class _SplitBase(Kernel):
    def finish(self, x, axis, sizes, outputs):
        if len(outputs) != len(sizes):
            raise self.fail(f"splits {x} into {len(sizes)} parts but has {len(outputs)} outputs")
        for o in outputs:
            _same_quant_or_none(self, x, o)
        self.axis = axis
        self.bounds = np.cumsum([0, *sizes]).tolist()
        shapes = []
        for s in sizes:
            shape = list(x.shape)
            shape[axis] = s
            shapes.append(tuple(shape))
        return shapes

    def bind(self, inputs, outputs, scratch):
        x, axis, b = inputs[self.data_input], self.axis, self.bounds
        pairs = []
        for k, out in enumerate(outputs):
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(b[k], b[k + 1])
            pairs.append((out, x[tuple(idx)]))

        def run():
            for out, src in pairs:
                np.copyto(out, src)

        return run


@register("SPLIT", max_version=4)
class Split(_SplitBase):
    data_input = 1

    def prepare(self, inputs, outputs):
        axis_t, x = inputs[0], inputs[1]
        axis = _axis(self, _int_vector(self, axis_t, "axis")[0], len(x.shape))
        n = self.options.get("num_splits", len(outputs))
        if n <= 0 or x.shape[axis] % n:
            raise self.fail(f"cannot split dimension {axis} of {x} into {n} equal parts")
        return self.finish(x, axis, [x.shape[axis] // n] * n, outputs)


@register("SPLIT_V", max_version=2)
class SplitV(_SplitBase):
    data_input = 0

    def prepare(self, inputs, outputs):
        x, sizes_t, axis_t = inputs[0], inputs[1], inputs[2]
        axis = _axis(self, _int_vector(self, axis_t, "axis")[0], len(x.shape))
        sizes = _int_vector(self, sizes_t, "size_splits")
        if sizes.count(-1) > 1:
            raise self.fail(f"size_splits {sizes} has more than one -1")
        if -1 in sizes:
            sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
        if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
            raise self.fail(f"size_splits {sizes} do not add up to dimension {axis} of {x}")
        return self.finish(x, axis, sizes, outputs)


@register("SLICE", max_version=6)
class Slice(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        begin = _values(self, inputs[1], "begin")
        size = _values(self, inputs[2], "size")
        rank = len(x.shape)
        if len(begin) != rank or len(size) != rank:
            raise self.fail(f"begin {begin} and size {size} must have {rank} entries")
        idx, shape = [], []
        for d, (b, s) in enumerate(zip(begin, size)):
            if s == -1:
                s = x.shape[d] - b
            if b < 0 or s < 0 or b + s > x.shape[d]:
                raise self.fail(f"slice begin {b} size {s} is out of range for dimension {d} "
                                f"of {x}")  # fmt: skip
            idx.append(slice(b, b + s))
            shape.append(s)
        _same_quant_or_none(self, x, outputs[0])
        self.index = tuple(idx)
        return [tuple(shape)]

    def bind(self, inputs, outputs, scratch):
        src, out = inputs[0][self.index], outputs[0]
        return lambda: np.copyto(out, src)


@register("TILE", max_version=3)
class Tile(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        reps = _values(self, inputs[1], "multiples")
        if len(reps) != len(x.shape) or any(r < 0 for r in reps):
            raise self.fail(f"multiples {reps} must be {len(x.shape)} non-negative values")
        _same_quant_or_none(self, x, outputs[0])
        self.reps = tuple(reps)
        return [tuple(d * r for d, r in zip(x.shape, reps))]

    def bind(self, inputs, outputs, scratch):
        x, out, reps = inputs[0], outputs[0], self.reps
        # out viewed as [r0, d0, r1, d1, ...]: every (r0, r1, ...) block is x.
        blocked = out.reshape(tuple(v for r, d in zip(reps, x.shape) for v in (r, d)))
        src = x.reshape(tuple(v for d in x.shape for v in (1, d)))
        return lambda: np.copyto(blocked, src) if out.size else None


@register("CAST", max_version=6)
class Cast(Kernel):
    def prepare(self, inputs, outputs):
        x, out = inputs[0], outputs[0]
        if x.dtype is None or out.dtype is None:
            raise self.fail(f"cannot cast {x} to {out}")
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        if out.dtype.kind in "iu" and x.dtype.kind == "f":
            # C++ static_cast truncates toward zero, as numpy's unsafe cast does.
            return lambda: np.copyto(out, x, casting="unsafe")
        return lambda: np.copyto(out, x, casting="unsafe")


@register("FILL", max_version=4)
class Fill(Kernel):
    def prepare(self, inputs, outputs):
        dims = _values(self, inputs[0], "dims")
        value = inputs[1]
        if value.shape not in ((), (1,)):
            raise self.fail(f"the value {value} must be a scalar")
        self.expect_same_dtype(value, outputs[0])
        if any(d < 0 for d in dims):
            raise self.fail(f"dims {dims} must be >= 0")
        return [tuple(dims)]

    def bind(self, inputs, outputs, scratch):
        value, out = inputs[1].reshape(()), outputs[0]
        return lambda: np.copyto(out, value)


class _Like(Kernel):
    fill = 0

    def prepare(self, inputs, outputs):
        self.expect_same_dtype(inputs[0], outputs[0])
        return [tuple(inputs[0].shape)]

    def bind(self, inputs, outputs, scratch):
        out, v = outputs[0], self.fill
        return lambda: out.fill(v)


@register("ZEROS_LIKE", max_version=1)
class ZerosLike(_Like):
    fill = 0


@register("RANGE", max_version=2)
class Range(Kernel):
    def prepare(self, inputs, outputs):
        start, limit, delta = (self.need_value(t, w).reshape(()).item()
                               for t, w in zip(inputs, ("start", "limit", "delta")))  # fmt: skip
        if delta == 0:
            raise self.fail("delta must not be 0")
        if (limit - start) * delta < 0:
            raise self.fail(f"the range from {start} to {limit} by {delta} is empty the wrong way")
        out = outputs[0]
        if out.dtype.kind in "iu":
            n = (abs(limit - start) + abs(delta) - 1) // abs(delta)
            value = start + delta * np.arange(n, dtype=np.int64)
        else:
            n = int(np.ceil(abs((limit - start) / delta)))
            value = start + delta * np.arange(n, dtype=np.float64)
        self.known = [value.astype(out.dtype)]
        return [(int(n),)]


@register("BROADCAST_TO", max_version=3)
class BroadcastTo(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        shape = tuple(_values(self, inputs[1], "shape"))
        try:
            np.broadcast_shapes(tuple(x.shape), shape)
        except ValueError:
            raise self.fail(f"{x} does not broadcast to {list(shape)}") from None
        if len(shape) < len(x.shape) or np.broadcast_shapes(tuple(x.shape), shape) != shape:
            raise self.fail(f"{x} does not broadcast to {list(shape)}")
        _same_quant_or_none(self, x, outputs[0])
        return [shape]

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        return lambda: np.copyto(out, x)


@register("BROADCAST_ARGS", max_version=1)
class BroadcastArgs(Kernel):
    def prepare(self, inputs, outputs):
        a = _values(self, inputs[0], "first shape")
        b = _values(self, inputs[1], "second shape")
        try:
            shape = np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise self.fail(f"shapes {a} and {b} do not broadcast") from None
        self.known = [np.array(shape, outputs[0].dtype)]
        return [(len(shape),)]


@register("REVERSE_V2", max_version=3)
class ReverseV2(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        axes = [_axis(self, a, len(x.shape)) for a in _int_vector(self, inputs[1], "axis")]
        _same_quant_or_none(self, x, outputs[0])
        self.axes = tuple(axes)
        return [tuple(x.shape)]

    def bind(self, inputs, outputs, scratch):
        src, out = np.flip(inputs[0], axis=self.axes), outputs[0]
        return lambda: np.copyto(out, src)
