"""Indexing: GATHER_ND, SCATTER_ND, TOP_K_V2, ONE_HOT, WHERE, UNIQUE, EMBEDDING_LOOKUP.

WHERE's and UNIQUE's output sizes depend on the values: with run-time inputs they raise
DynamicShape, and the subgraph runs eagerly (kernels/base.py); prepare then computes them from
the values it is given. Out-of-range indices are errors naming the operator, as in TFLite.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels.base import Kernel, register

__all__ = ["GatherNd", "ScatterNd", "TopKV2", "OneHot", "Where", "Unique", "EmbeddingLookup"]


def _same_quant(kernel, x, out):
    if x.dtype is not None and x.dtype.kind in "iu" and x.quant is not None:
        kernel.expect_same_quant(x, out)


@register("GATHER_ND", max_version=5)
class GatherNd(Kernel):
    def prepare(self, inputs, outputs):
        params, idx = inputs[0], inputs[1]
        self.expect_dtype(idx, [np.int32, np.int64, np.int16], "indices")
        k = idx.shape[-1] if idx.shape else 0
        if k > len(params.shape):
            raise self.fail(f"indices {idx} index {k} dimensions of {params}")
        _same_quant(self, params, outputs[0])
        self.k = k
        self.limits = np.array(params.shape[:k], np.int64)
        return [tuple(idx.shape[:-1]) + tuple(params.shape[k:])]

    def bind(self, inputs, outputs, scratch):
        params, idx, out = inputs[0], inputs[1], outputs[0]
        k, limits, op = self.k, self.limits, self.op

        def run():
            i = idx.reshape(-1, k).astype(np.int64)
            if i.size and (np.any(i < 0) or np.any(i >= limits)):
                raise ValueError(f"operator #{op.index} GATHER_ND: an index is out of range "
                                 f"{list(limits)}")  # fmt: skip
            np.copyto(out.reshape((-1,) + params.shape[k:]), params[tuple(i.T)])

        return run


@register("SCATTER_ND", max_version=1)
class ScatterNd(Kernel):
    def prepare(self, inputs, outputs):
        idx, updates, shape_t = inputs
        shape = [int(v) for v in self.need_value(shape_t, "shape").ravel()]
        k = idx.shape[-1]
        if tuple(updates.shape) != tuple(idx.shape[:-1]) + tuple(shape[k:]):
            raise self.fail(f"updates {updates} do not fit indices {idx} into shape {shape}")
        self.k = k
        self.limits = np.array(shape[:k], np.int64)
        return [tuple(shape)]

    def bind(self, inputs, outputs, scratch):
        idx, updates, out = inputs[0], inputs[1], outputs[0]
        k, limits, op = self.k, self.limits, self.op

        def run():
            i = idx.reshape(-1, k).astype(np.int64)
            if i.size and (np.any(i < 0) or np.any(i >= limits)):
                raise ValueError(f"operator #{op.index} SCATTER_ND: an index is out of range "
                                 f"{list(limits)}")  # fmt: skip
            out.fill(0)
            np.add.at(out, tuple(i.T), updates.reshape((-1,) + out.shape[k:]))

        return run


@register("TOPK_V2", max_version=3)
class TopKV2(Kernel):
    def prepare(self, inputs, outputs):
        x = inputs[0]
        k = int(self.need_value(inputs[1], "k").reshape(-1)[0])
        if not 0 <= k <= x.shape[-1]:
            raise self.fail(f"k = {k} is out of range for {x}")
        _same_quant(self, x, outputs[0])
        self.k = k
        shape = tuple(x.shape[:-1]) + (k,)
        return [shape, shape]

    def bind(self, inputs, outputs, scratch):
        x, (values, indices), k = inputs[0], outputs, self.k

        def run():
            # Largest first; equal values keep their order (the lower index first), as TFLite.
            order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
            np.copyto(indices, order, casting="unsafe")
            np.copyto(values, np.take_along_axis(x, order, axis=-1))

        return run


@register("ONE_HOT", max_version=1)
class OneHot(Kernel):
    def prepare(self, inputs, outputs):
        idx, depth_t, on, off = inputs
        depth = int(self.need_value(depth_t, "depth").reshape(-1)[0])
        if depth < 0:
            raise self.fail(f"depth {depth} must be >= 0")
        rank = len(idx.shape)
        axis = self.options.get("axis", -1)
        axis = rank if axis == -1 else axis
        if not 0 <= axis <= rank:
            raise self.fail(f"axis {axis} is out of range")
        self.depth, self.axis = depth, axis
        shape = list(idx.shape)
        shape.insert(axis, depth)
        return [tuple(shape)]

    def bind(self, inputs, outputs, scratch):
        idx, _, on, off = inputs
        out, depth, axis = outputs[0], self.depth, self.axis

        def run():
            hot = np.expand_dims(idx, axis) == np.arange(depth).reshape(
                (-1,) + (1,) * (idx.ndim - axis))  # fmt: skip
            np.copyto(out, np.where(hot, on.reshape(()), off.reshape(())))

        return run


@register("WHERE", max_version=2)
class Where(Kernel):
    def prepare(self, inputs, outputs):
        cond = self.need_value(inputs[0], "condition")
        value = np.argwhere(cond)
        self.known = [value.astype(outputs[0].dtype)]
        return [value.shape]


@register("UNIQUE", max_version=1)
class Unique(Kernel):
    def prepare(self, inputs, outputs):
        x = self.need_value(inputs[0], "input")
        if x.ndim != 1:
            raise self.fail(f"the input {inputs[0]} must be a vector")
        # Values in order of first appearance, and each element's position among them.
        _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.known = [x[np.sort(first)], rank[inverse.reshape(-1)].astype(outputs[1].dtype)]
        return [(order.size,), x.shape]


@register("EMBEDDING_LOOKUP", max_version=3)
class EmbeddingLookup(Kernel):
    """Rows of a float table (or an int8 one, scaled per row: hybrid)."""

    def prepare(self, inputs, outputs):
        ids, table = inputs[0], inputs[1]
        self.expect_dtype(ids, [np.int32], "ids")
        if len(ids.shape) != 1:
            raise self.fail(f"the ids {ids} must be a vector (as in TFLite)")
        self.expect_dtype(table, [np.float32, np.int8, np.uint8], "table")
        self.hybrid = table.dtype != outputs[0].dtype
        if self.hybrid:
            self.expect_quantized(table, per_channel_ok=True)
            self.row_scale = np.broadcast_to(table.quant.scale.astype(np.float32),
                                             (table.shape[0],)).copy()  # fmt: skip
        self.rows = table.shape[0]
        return [tuple(ids.shape) + tuple(table.shape[1:])]

    def bind(self, inputs, outputs, scratch):
        ids, table, out = inputs[0], inputs[1], outputs[0]
        rows, op, hybrid = self.rows, self.op, self.hybrid
        scale = self.row_scale if hybrid else None

        def run():
            if ids.size and (ids.min() < 0 or ids.max() >= rows):
                raise ValueError(f"operator #{op.index} EMBEDDING_LOOKUP: an id is out of "
                                 f"range [0, {rows})")  # fmt: skip
            got = table[ids]
            if hybrid:
                s = scale[ids].reshape(ids.shape + (1,) * (table.ndim - 1))
                got = got.astype(np.float32) * s
            np.copyto(out, got)

        return run
