"""Data movement: RESHAPE, SQUEEZE, EXPAND_DIMS, CONCATENATION, PAD, TRANSPOSE, STRIDED_SLICE and
GATHER, for any numeric type (int8 tensors keep their quantization: these kernels move bytes).

Shape-defining inputs (the new shape, paddings, permutation, slice bounds, axes) must be
constants: the output shape is fixed in prepare, where the arena is planned.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rill.mobile.kernels.base import Kernel, TensorSpec, register

__all__ = ["Reshape", "Squeeze", "ExpandDims", "Concatenation", "Pad", "Transpose",
           "StridedSlice", "Gather"]  # fmt: skip


def _int_vector(kernel: Kernel, spec: TensorSpec | None, what: str) -> list[int]:
    data = kernel.expect_const(spec, what)
    if data.dtype.kind not in "iu":
        raise kernel.fail(f"the {what} {spec} must be an integer tensor")
    return [int(v) for v in np.ravel(data)]


def _axis(kernel: Kernel, axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise kernel.fail(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


class _Copy(Kernel):
    """Kernels whose output is a reshaped copy of the input's bytes (run in place, by
    aliasing, where the interpreter can)."""

    aliases_input = True

    def bind(self, inputs, outputs, scratch):
        x, out = inputs[0], outputs[0]
        src = x.reshape(out.shape)

        def run():
            np.copyto(out, src)

        return run


@register("RESHAPE", max_version=1)
class Reshape(_Copy):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        if x is None:
            raise self.fail("needs an input")
        shape_in = inputs[1] if len(inputs) > 1 else None
        if shape_in is not None:
            if shape_in.data is None:
                raise self.fail(f"the new shape {shape_in} is computed at run time; only "
                                "constant shapes are supported")  # fmt: skip
            new = _int_vector(self, shape_in, "shape")
            if shape_in.shape == (1,) and new == [-1] and len(x.shape) == 0:
                new = [1]
        else:
            new = list(self.options.get("new_shape", ()))
        size = int(np.prod(x.shape, dtype=np.int64))
        if new.count(-1) > 1:
            raise self.fail(f"the new shape {new} has more than one -1")
        known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
        if -1 in new:
            if known == 0 or size % known:
                raise self.fail(f"cannot reshape {x} ({size} elements) to {new}")
            new[new.index(-1)] = size // known
        elif known != size:
            raise self.fail(f"cannot reshape {x} ({size} elements) to {new} ({known} elements)")
        if any(d < 0 for d in new):
            raise self.fail(f"the new shape {new} has negative dimensions")
        return [tuple(new)]


@register("SQUEEZE", max_version=2)
class Squeeze(_Copy):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        rank = len(x.shape)
        dims = self.options.get("squeeze_dims", ())
        if dims:
            axes = {_axis(self, d, rank, "squeeze dimension") for d in dims}
            for a in axes:
                if x.shape[a] != 1:
                    raise self.fail(f"cannot squeeze dimension {a} of {x}: its size is not 1")
        else:
            axes = {a for a, d in enumerate(x.shape) if d == 1}
        return [tuple(d for a, d in enumerate(x.shape) if a not in axes)]


@register("EXPAND_DIMS", max_version=1)
class ExpandDims(_Copy):
    def prepare(self, inputs, outputs):
        x, axis_t = inputs[0], inputs[1] if len(inputs) > 1 else None
        axis = _int_vector(self, axis_t, "axis")
        if len(axis) != 1:
            raise self.fail(f"the axis {axis_t} must hold one value")
        rank = len(x.shape)
        a = _axis(self, axis[0], rank + 1)
        return [tuple(x.shape[:a]) + (1,) + tuple(x.shape[a:])]


@register("CONCATENATION", max_version=4)
class Concatenation(Kernel):
    def prepare(self, inputs, outputs):
        if not inputs or None in inputs:
            raise self.fail("needs at least one input")
        first, out = inputs[0], outputs[0]
        rank = len(first.shape)
        axis = _axis(self, self.options.get("axis", 0), rank)
        for t in inputs[1:]:
            self.expect_same_dtype(first, t)
            if len(t.shape) != rank or any(t.shape[d] != first.shape[d]
                                           for d in range(rank) if d != axis):  # fmt: skip
                raise self.fail(f"inputs {first} and {t} differ outside the axis {axis}")
        self.expect_same_dtype(first, out)
        if self.options.get("fused_activation_function", 0):
            # TFLite's kernel rejects them too, whatever the type.
            raise self.fail("a fused activation on CONCATENATION is not supported")
        if first.dtype == np.int8:
            for t in inputs:
                self.expect_same_quant(t, out)
        self.axis = axis
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in inputs)
        return [tuple(shape)]

    def bind(self, inputs, outputs, scratch):
        xs, out, axis = tuple(inputs), outputs[0], self.axis
        return lambda: np.concatenate(xs, axis=axis, out=out)


@register("PAD", max_version=4)
class Pad(Kernel):
    def prepare(self, inputs, outputs):
        x, p = inputs[0], inputs[1] if len(inputs) > 1 else None
        pads = _int_vector(self, p, "paddings")
        rank = len(x.shape)
        if len(pads) != 2 * rank:
            raise self.fail(f"paddings {p} must have shape [{rank}, 2]")
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(rank)]
        if any(a < 0 or b < 0 for a, b in pairs):
            raise self.fail(f"paddings {pairs} must be >= 0")
        out = outputs[0]
        self.expect_same_dtype(x, out)
        if x.dtype == np.int8:
            self.expect_same_quant(x, out)
            self.value = out.zero_point  # real 0 in the output's quantization
        else:
            self.value = 0
        self.inner = tuple(slice(a, a + d) for (a, _), d in zip(pairs, x.shape))
        return [tuple(d + a + b for d, (a, b) in zip(x.shape, pairs))]

    def bind(self, inputs, outputs, scratch):
        x, out, value = inputs[0], outputs[0], self.value
        inner = out[self.inner]

        def run():
            out.fill(value)
            np.copyto(inner, x)

        return run


@register("TRANSPOSE", max_version=6)
class Transpose(Kernel):
    def prepare(self, inputs, outputs):
        x, p = inputs[0], inputs[1] if len(inputs) > 1 else None
        perm = _int_vector(self, p, "permutation")
        rank = len(x.shape)
        perm = [_axis(self, a, rank, "permutation entry") for a in perm]
        if sorted(perm) != list(range(rank)):
            raise self.fail(f"{perm} is not a permutation of {rank} axes")
        self.perm = perm
        return [tuple(x.shape[a] for a in perm)]

    def bind(self, inputs, outputs, scratch):
        src, out = inputs[0].transpose(self.perm), outputs[0]
        return lambda: np.copyto(out, src)


@register("STRIDED_SLICE", max_version=8)
class StridedSlice(Kernel):
    """TensorFlow's strided slice: begin/end/strides with the five masks, and `offset`
    (end counted from begin)."""

    def prepare(self, inputs, outputs):
        x = inputs[0]
        if len(inputs) < 4:
            raise self.fail("needs input, begin, end and strides")
        begin = _int_vector(self, inputs[1], "begin")
        end = _int_vector(self, inputs[2], "end")
        strides = _int_vector(self, inputs[3], "strides")
        if not len(begin) == len(end) == len(strides):
            raise self.fail(f"begin {begin}, end {end} and strides {strides} differ in length")
        o = self.options
        bm, em = o.get("begin_mask", 0), o.get("end_mask", 0)
        ellipsis, new_axis, shrink = (o.get("ellipsis_mask", 0), o.get("new_axis_mask", 0),
                                      o.get("shrink_axis_mask", 0))  # fmt: skip
        offset = bool(o.get("offset", False))
        rank = len(x.shape)
        # Dimensions consumed by the spec entries (ellipsis and new axes consume none).
        consumed = sum(1 for i in range(len(begin)) if not (ellipsis >> i & 1 or new_axis >> i & 1))
        idx: list = []
        dim = 0
        for i, (b, e, s) in enumerate(zip(begin, end, strides)):
            if ellipsis >> i & 1:
                span = rank - consumed - dim
                idx.extend([slice(None)] * max(span, 0))
                dim += max(span, 0)
                continue
            if new_axis >> i & 1:
                idx.append(None)
                continue
            if dim >= rank:
                raise self.fail(f"the slice spec has more dimensions than the input {x}")
            if s == 0:
                raise self.fail("strides must be non-zero")
            size = x.shape[dim]
            if offset:
                e = b + e
            if shrink >> i & 1:
                k = b + size if b < 0 else b
                if not 0 <= k < size:
                    raise self.fail(f"index {b} is out of range for dimension {dim} of {x}")
                idx.append(k)
            else:
                idx.append(slice(None if bm >> i & 1 else b, None if em >> i & 1 else e, s))
            dim += 1
        self.index = tuple(idx)
        probe = as_strided(np.zeros(1, np.int8), tuple(x.shape), (0,) * rank, writeable=False)
        return [probe[self.index].shape]

    def bind(self, inputs, outputs, scratch):
        src, out = inputs[0][self.index], outputs[0]
        src = src.reshape(out.shape)
        return lambda: np.copyto(out, src)


@register("GATHER", max_version=7)
class Gather(Kernel):
    def prepare(self, inputs, outputs):
        params, indices = inputs[0], inputs[1] if len(inputs) > 1 else None
        if params is None or indices is None:
            raise self.fail("needs params and indices")
        self.expect_dtype(indices, [np.int32, np.int64, np.int16], "indices")
        rank = len(params.shape)
        axis = _axis(self, self.options.get("axis", 0), rank)
        batch_dims = self.options.get("batch_dims", 0)
        if batch_dims < 0:
            batch_dims += len(indices.shape)
        if batch_dims != 0:
            raise self.fail("batch_dims other than 0 is not supported")
        if params.dtype is not None and params.dtype == outputs[0].dtype == np.int8:
            self.expect_same_quant(params, outputs[0])
        self.axis, self.limit = axis, params.shape[axis]
        return [tuple(params.shape[:axis]) + tuple(indices.shape) + tuple(params.shape[axis + 1 :])]

    def bind(self, inputs, outputs, scratch):
        params, indices, out = inputs[0], inputs[1], outputs[0]
        axis, limit, op = self.axis, self.limit, self.op

        def run():
            if indices.size and (indices.min() < 0 or indices.max() >= limit):
                bad = indices[(indices < 0) | (indices >= limit)].ravel()[0]
                raise ValueError(f"operator #{op.index} GATHER: index {int(bad)} is out of "
                                 f"range [0, {limit}) along axis {axis}")  # fmt: skip
            np.take(params, indices, axis=axis, out=out)

        return run
