"""TensorFlow 1.x's array helpers that are compositions of other ops (no op of their own):
boolean_mask, sequence_mask, eye, norm, tensordot, meshgrid, sort, argsort, repeat, tuple_,
saturate_cast, batch_gather, accumulate_n, confusion_matrix, broadcast_static_shape,
dimension_value.

>>> import numpy as np
>>> import rill.graph as rg
>>> from rill.exec import Session
>>> with rg.Graph().as_default():
...     m = sequence_mask([1, 3], 4)
...     Session().run(m)
array([[ True, False, False, False],
       [ True,  True,  True, False]])
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.shapes import TensorShape, as_shape

__all__ = [
    "accumulate_n",
    "argsort",
    "batch_gather",
    "boolean_mask",
    "broadcast_static_shape",
    "confusion_matrix",
    "dimension_at_index",
    "dimension_value",
    "eye",
    "meshgrid",
    "norm",
    "repeat",
    "saturate_cast",
    "sequence_mask",
    "sort",
    "tensordot",
    "tuple_",
    "clip_by_average_norm",
    "trace",
    "random_crop",
    "unsorted_segment_mean",
    "unsorted_segment_sqrt_n",
]


def _rg():
    import rill.graph as rg  # the package's builders (this module is imported by it)

    return rg


def boolean_mask(tensor, mask, name: str = "boolean_mask", axis=None) -> Tensor:
    """The elements (or slices) of `tensor` where the boolean `mask` is true, flattened over the
    mask's dimensions starting at `axis` (default 0)."""
    rg = _rg()
    with get_default_graph().name_scope(name):
        tensor = convert_to_tensor(tensor, name="tensor")
        mask = convert_to_tensor(mask, name="mask")
        if mask.dtype is not dtypes.bool_:
            raise TypeError(f"boolean_mask: mask must be bool, got {mask.dtype.name}")
        k = mask.shape.rank
        if k is None:
            raise ValueError("boolean_mask: the mask's rank must be known")
        if k == 0:
            raise ValueError("boolean_mask: the mask cannot be a scalar")
        axis = 0 if axis is None else int(axis)
        t_rank = tensor.shape.rank
        if t_rank is not None:
            axis = axis % t_rank if axis < 0 else axis
            if not tensor.shape[axis : axis + k].is_compatible_with(mask.shape):
                raise ValueError(
                    f"boolean_mask: mask of shape {mask.shape} does not fit dimensions "
                    f"{axis}..{axis + k - 1} of a tensor of shape {tensor.shape}"
                )
        shape = rg.shape(tensor)
        leading = rg.reduce_prod(shape[axis : axis + k], keepdims=True)
        flat = rg.reshape(tensor, rg.concat([shape[:axis], leading, shape[axis + k :]], 0))
        where = rg.squeeze(rg.where(rg.reshape(mask, [-1])), axis=[1])
        return rg.gather(flat, where, axis=axis)


def sequence_mask(lengths, maxlen=None, dtype=dtypes.bool_, name=None) -> Tensor:
    """mask[i..., j] = j < lengths[i...], with maxlen columns (default: the largest length)."""
    rg = _rg()
    with get_default_graph().name_scope(name or "SequenceMask"):
        lengths = convert_to_tensor(lengths)
        if maxlen is None:
            maxlen = rg.maximum(rg.reduce_max(lengths), rg.zeros([], lengths.dtype))
        else:
            maxlen = rg.cast(convert_to_tensor(maxlen), lengths.dtype)
        row = rg.range(rg.zeros([], lengths.dtype), maxlen, rg.ones([], lengths.dtype))
        mask = rg.less(row, rg.expand_dims(lengths, -1))
        dtype = dtypes.as_dtype(dtype)
        return mask if dtype is dtypes.bool_ else rg.cast(mask, dtype)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32, name=None) -> Tensor:
    """An identity matrix (or a batch of them)."""
    rg = _rg()
    with get_default_graph().name_scope(name or "eye"):
        cols = num_rows if num_columns is None else num_columns
        r = rg.range(num_rows)
        c = rg.range(cols)
        m = rg.cast(rg.equal(rg.expand_dims(r, 1), rg.expand_dims(c, 0)), dtype)
        if batch_shape is not None:
            batch = list(batch_shape)
            m = rg.broadcast_to(m, rg.concat([batch, rg.shape(m)], 0) if batch else rg.shape(m))
        return m


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None) -> Tensor:
    """Vector norms (ord 1, 2/"euclidean", np.inf or a p > 0) over `axis`, and the Frobenius
    norm ("fro"/"euclidean") over a pair of axes."""
    rg = _rg()
    keepdims = bool(keepdims if keepdims is not None else keep_dims)
    with get_default_graph().name_scope(name or "norm"):
        x = convert_to_tensor(tensor)
        if isinstance(axis, (list, tuple)) and len(axis) == 2 and ord not in ("fro", "euclidean"):
            raise ValueError(f"norm: matrix norm ord={ord!r} is not supported (use 'fro')")
        if ord in ("euclidean", "fro", 2, 2.0):
            return rg.sqrt(rg.reduce_sum(x * x, axis=axis, keepdims=keepdims))
        if ord in (1, 1.0):
            return rg.reduce_sum(rg.abs(x), axis=axis, keepdims=keepdims)
        if ord == np.inf:
            return rg.reduce_max(rg.abs(x), axis=axis, keepdims=keepdims)
        if isinstance(ord, (int, float)) and ord > 0:
            p = rg.constant(float(ord), x.dtype)
            s = rg.reduce_sum(rg.pow(rg.abs(x), p), axis=axis, keepdims=keepdims)
            return rg.pow(s, 1.0 / p)
        raise ValueError(f"norm: ord must be 'euclidean', 'fro', 1, 2, np.inf or > 0, got {ord!r}")


def tensordot(a, b, axes, name=None) -> Tensor:
    """Sums a's last axes against b's first (axes an int), or the listed axis pairs."""
    rg = _rg()
    with get_default_graph().name_scope(name or "Tensordot"):
        a = convert_to_tensor(a, name="a")
        b = convert_to_tensor(b, name="b")
        ra, rb = a.shape.rank, b.shape.rank
        if ra is None or rb is None:
            raise ValueError("tensordot: the ranks of a and b must be known")
        if isinstance(axes, int):
            if axes < 0 or axes > min(ra, rb):
                raise ValueError(f"tensordot: axes={axes} is out of range for ranks {ra}, {rb}")
            a_axes, b_axes = list(range(ra - axes, ra)), list(range(axes))
        else:
            a_axes, b_axes = axes
            a_axes = [a_axes] if isinstance(a_axes, int) else list(a_axes)
            b_axes = [b_axes] if isinstance(b_axes, int) else list(b_axes)
            if len(a_axes) != len(b_axes):
                raise ValueError("tensordot: the axis lists of a and b differ in length")
            a_axes = [x % ra for x in a_axes]
            b_axes = [x % rb for x in b_axes]
        free_a = [i for i in range(ra) if i not in a_axes]
        free_b = [i for i in range(rb) if i not in b_axes]
        sa, sb = rg.shape(a), rg.shape(b)

        def prod(shape, idx):
            if not idx:
                return rg.constant(1)
            return rg.reduce_prod(rg.gather(shape, idx))

        a2 = rg.reshape(
            rg.transpose(a, free_a + a_axes), rg.stack([prod(sa, free_a), prod(sa, a_axes)])
        )
        b2 = rg.reshape(
            rg.transpose(b, b_axes + free_b), rg.stack([prod(sb, b_axes), prod(sb, free_b)])
        )
        out_shape = rg.concat([rg.gather(sa, free_a), rg.gather(sb, free_b)], 0) if (
            free_a or free_b
        ) else rg.constant([], dtypes.int32)  # fmt: skip
        out = rg.reshape(rg.matmul(a2, b2), out_shape)
        out.set_shape(TensorShape([a.shape[i] for i in free_a] + [b.shape[i] for i in free_b]))
        return out


def meshgrid(*args, **kwargs) -> list[Tensor]:
    """Coordinate matrices from coordinate vectors ("xy" or "ij" indexing)."""
    rg = _rg()
    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"meshgrid got unexpected arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    with get_default_graph().name_scope(name):
        xs = [rg.reshape(convert_to_tensor(x), [-1]) for x in args]
        n = len(xs)
        sizes = [rg.size(x) for x in xs]
        outs = []
        for i, x in enumerate(xs):  # "ij": output i varies along axis i
            shape = [1] * n
            shape[i] = -1
            outs.append(rg.broadcast_to(rg.reshape(x, shape), rg.stack(sizes)))
        if indexing == "xy" and n >= 2:  # the first two axes swapped (matrix convention)
            outs = [rg.transpose(o, [1, 0] + list(range(2, n))) for o in outs]
        return outs


def _along_last(values, axis, fn):
    rg = _rg()
    values = convert_to_tensor(values)
    r = values.shape.rank
    if r is None:
        raise ValueError("sort/argsort: the rank of values must be known")
    axis = axis % r if r else 0
    if axis == r - 1:
        return fn(values)
    perm = list(range(r))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return rg.transpose(fn(rg.transpose(values, perm)), perm)


def _order(values, direction: str, want_indices: bool, name: str):
    rg = _rg()
    if direction not in ("ASCENDING", "DESCENDING"):
        raise ValueError(f"direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}")

    def fn(v):
        k = rg.shape(v)[-1]
        key = v if direction == "DESCENDING" else -v
        top = rg.top_k(key, k=k, sorted=True)
        if want_indices:
            return top.indices
        return top.values if direction == "DESCENDING" else -top.values

    return fn


def sort(values, axis=-1, direction="ASCENDING", name=None) -> Tensor:
    """`values` sorted along `axis`."""
    with get_default_graph().name_scope(name or "sort"):
        return _along_last(values, axis, _order(values, direction, False, "sort"))


def argsort(values, axis=-1, direction="ASCENDING", stable=False, name=None) -> Tensor:
    """The indices that sort `values` along `axis` (ties in index order, so also stable)."""
    with get_default_graph().name_scope(name or "argsort"):
        return _along_last(values, axis, _order(values, direction, True, "argsort"))


def repeat(input, repeats, axis=None, name=None) -> Tensor:  # noqa: A002 - TF's name
    """Each element (or slice along `axis`) repeated `repeats` times (a scalar or one count per
    element); the input is flattened when axis is None."""
    rg = _rg()
    with get_default_graph().name_scope(name or "Repeat"):
        x = convert_to_tensor(input)
        if axis is None:
            x = rg.reshape(x, [-1])
            axis = 0
        repeats = rg.cast(convert_to_tensor(repeats), dtypes.int32)
        n = rg.shape(x)[axis]
        counts = rg.broadcast_to(repeats, rg.reshape(n, [1]))
        ends = rg.cumsum(counts)
        total = rg.reduce_sum(counts)
        from rill.graph.ops.set_search_ops import searchsorted

        idx = searchsorted(ends, rg.range(total), side="right")
        return rg.gather(x, idx, axis=axis)


def tuple_(tensors, name=None, control_inputs=None) -> list:
    """TensorFlow's tf.tuple (rill.compat.v1 exports it under that name): the tensors, each
    passed on only once all of them (and control_inputs) are computed."""
    rg = _rg()
    with get_default_graph().name_scope(name or "tuple"):
        real = [t for t in tensors if t is not None]
        gate = rg.group(*real, *(control_inputs or []))
        out = []
        for t in tensors:
            if t is None:
                out.append(None)
                continue
            with get_default_graph().control_dependencies([gate]):
                out.append(rg.identity(t))
        return out


def saturate_cast(value, dtype, name=None) -> Tensor:
    """`value` cast to `dtype`, clamped to its range first (no wrap-around)."""
    rg = _rg()
    dtype = dtypes.as_dtype(dtype)
    with get_default_graph().name_scope(name or "saturate_cast"):
        value = convert_to_tensor(value)
        if value.dtype.is_integer or value.dtype.is_floating:
            if dtype.is_integer:
                info = np.iinfo(dtype.np)
                lo, hi = info.min, info.max
            else:
                info = np.finfo(dtype.np)
                lo, hi = float(info.min), float(info.max)
            src = np.iinfo(value.dtype.np) if value.dtype.is_integer else np.finfo(value.dtype.np)
            if lo > src.min:
                value = rg.maximum(value, rg.cast(rg.constant(lo), value.dtype))
            if hi < src.max:
                value = rg.minimum(value, rg.cast(rg.constant(hi), value.dtype))
        return rg.cast(value, dtype)


def batch_gather(params, indices, name=None) -> Tensor:
    """Gathers along the first axis after the batch dimensions shared by params and indices."""
    rg = _rg()
    with get_default_graph().name_scope(name or "batch_gather"):
        indices = convert_to_tensor(indices)
        r = indices.shape.rank
        if r is None:
            raise ValueError("batch_gather: the rank of indices must be known")
        return rg.gather(params, indices, axis=max(r - 1, 0), batch_dims=max(r - 1, 0))


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None) -> Tensor:
    """The sum of the tensors (TensorFlow's add_n with a shape check)."""
    rg = _rg()
    inputs = [convert_to_tensor(x) for x in inputs]
    if not inputs:
        raise ValueError("accumulate_n: inputs must be a non-empty list of tensors")
    if shape is not None:
        for t in inputs:
            if not t.shape.is_compatible_with(as_shape(shape)):
                raise ValueError(f"accumulate_n: an input of shape {t.shape} is not {shape}")
    if tensor_dtype is not None and any(
        t.dtype is not dtypes.as_dtype(tensor_dtype) for t in inputs
    ):
        raise TypeError("accumulate_n: an input's dtype differs from tensor_dtype")
    return rg.add_n(inputs, name=name)


def confusion_matrix(labels, predictions, num_classes=None, weights=None, dtype=dtypes.int32,
                     name=None) -> Tensor:  # fmt: skip
    """m[i, j] = how many (or what weight of) examples of label i were predicted j."""
    rg = _rg()
    with get_default_graph().name_scope(name or "confusion_matrix"):
        labels = rg.cast(convert_to_tensor(labels), dtypes.int64)
        predictions = rg.cast(convert_to_tensor(predictions), dtypes.int64)
        if num_classes is None:
            n = rg.maximum(rg.reduce_max(labels), rg.reduce_max(predictions)) + 1
        else:
            n = rg.cast(convert_to_tensor(num_classes), dtypes.int64)
        idx = rg.stack([labels, predictions], axis=1)
        dtype = dtypes.as_dtype(dtype)
        w = rg.ones_like(labels, dtype=dtype) if weights is None else rg.cast(weights, dtype)
        return rg.scatter_nd(idx, w, rg.stack([n, n]))


def broadcast_static_shape(shape_x, shape_y) -> TensorShape:
    """The broadcast of two static shapes (ValueError when they do not broadcast)."""
    x, y = as_shape(shape_x), as_shape(shape_y)
    if x.rank is None or y.rank is None:
        return TensorShape(None)
    dx, dy = x.as_list(), y.as_list()
    n = max(len(dx), len(dy))
    dx = [1] * (n - len(dx)) + dx
    dy = [1] * (n - len(dy)) + dy
    out = []
    for a, b in zip(dx, dy):
        if a == 1:
            out.append(b)
        elif b == 1 or a == b:
            out.append(a)
        elif a is None or b is None:
            out.append(a if b is None else b)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {x} and {y}")
    return TensorShape(out)


def dimension_value(dimension):
    """The int (or None) of a dimension (rill's shapes hold ints already; a TensorFlow-style
    object with `.value` is unwrapped)."""
    return getattr(dimension, "value", dimension)


def dimension_at_index(shape, index):
    """Dimension `index` of a shape: an int, or None when it (or the rank) is unknown."""
    shape = as_shape(shape)
    if shape.rank is None:
        return None
    return shape.as_list()[index]


def clip_by_average_norm(t, clip_norm, name=None) -> Tensor:
    """t scaled so that its L2 norm divided by its element count is at most clip_norm."""
    rg = _rg()
    with get_default_graph().name_scope(name or "clip_by_average_norm"):
        t = convert_to_tensor(t)
        n = rg.cast(rg.size(t), t.dtype)
        inv = rg.rsqrt(rg.reduce_sum(t * t))
        clip = rg.cast(convert_to_tensor(clip_norm), t.dtype)
        return t * clip * rg.minimum(inv * n, 1.0 / clip)


def trace(x, name=None) -> Tensor:
    """The sum of each innermost matrix's diagonal."""
    rg = _rg()
    from rill.graph.ops.diag_ops import matrix_diag_part

    with get_default_graph().name_scope(name or "Trace"):
        return rg.reduce_sum(matrix_diag_part(convert_to_tensor(x)), axis=-1)


def random_crop(value, size, seed=None, name=None) -> Tensor:
    """A random slice of `value` of shape `size` (a uniformly drawn offset per dimension)."""
    rg = _rg()
    with get_default_graph().name_scope(name or "random_crop"):
        value = convert_to_tensor(value)
        size = rg.cast(convert_to_tensor(size), dtypes.int32)
        shape = rg.shape(value)
        limit = shape - size + 1
        check = rg.assert_op(
            rg.reduce_all(rg.greater_equal(limit, 1)),
            ["Need value.shape >= size, got ", shape, size],
            name="size_fits",
        )
        with get_default_graph().control_dependencies([check]):
            draw = rg.random_uniform(
                rg.shape(size), maxval=2**31 - 1, dtype=dtypes.int32, seed=seed
            )
        offset = rg.floormod(draw, limit)
        return rg.slice(value, offset, size)


def unsorted_segment_mean(data, segment_ids, num_segments, name=None) -> Tensor:
    """The mean of data's rows per segment (0 for an empty segment)."""
    return _segment_scaled(data, segment_ids, num_segments, name or "UnsortedSegmentMean", False)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None) -> Tensor:
    """The sum of data's rows per segment divided by the square root of their count."""
    return _segment_scaled(data, segment_ids, num_segments, name or "UnsortedSegmentSqrtN", True)


def _segment_scaled(data, segment_ids, num_segments, name, sqrt_n: bool) -> Tensor:
    rg = _rg()
    from rill.graph.ops.grad_ops import unsorted_segment_sum

    with get_default_graph().name_scope(name):
        data = convert_to_tensor(data)
        ids = convert_to_tensor(segment_ids)
        total = unsorted_segment_sum(data, ids, num_segments)
        counts = unsorted_segment_sum(rg.ones_like(ids, dtype=data.dtype), ids, num_segments)
        counts = rg.maximum(counts, rg.ones_like(counts))
        if sqrt_n:
            counts = rg.sqrt(counts)
        extra = data.shape.rank - ids.shape.rank if data.shape.rank is not None else 0
        counts = rg.reshape(counts, rg.concat([rg.shape(counts), [1] * extra], 0))
        return total / counts
