"""Kernels for rill.graph.ops.nn_ops: bias, activations, softmax and losses, batch and response
normalization, top-k membership. (Convolution and pooling are in conv_kernels.)

Elementwise kernels are written against `xp` and registered for CPU and GPU; half types
(float16, bfloat16) compute in float32 and round once at the end, as TensorFlow's CPU kernels do
for the transcendental ones.
"""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import intra_op, jit
from rill.exec.kernels.intra_op import parallel_for
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

_BOTH = ("CPU", "GPU")
_HALF = (np.dtype(np.float16), dtypes.bfloat16.np)
# Masked gradients work through chunks of this many elements (the mask is a temporary).
_CHUNK = 1 << 18
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _wide(x):
    """x in a type wide enough to compute in (float32 for half types)."""
    return x.astype(np.float32) if x.dtype in _HALF else x


def _check_same_shape(a, b, what: str) -> None:
    if a.shape != b.shape:
        raise InvalidArgumentError(
            f"{what}: inputs must have the same shape, got {list(a.shape)} and {list(b.shape)}"
        )


# -- bias -----------------------------------------------------------------------------------------


def _channel_axis(ndim: int, data_format: str) -> int:
    if ndim < 2:
        raise InvalidArgumentError(f"the input must be at least 2-D, got {ndim}-D")
    return 1 if data_format == "NCHW" else ndim - 1


def _row_length(shape, min_run: int = 1024) -> int:
    """The length of rows made of whole trailing dimensions, at least min_run long if possible.

    Channels-last bias ops view their input as [rows, row length] with the bias repeated along
    a row: numpy's loops then run over long rows instead of one short channel vector at a time
    (3-4x faster for 32 channels).
    """
    run = 1
    for d in reversed(shape):
        run *= d
        if run >= min_run:
            break
    return run


@register_kernel("BiasAdd", devices=_BOTH)
def bias_add(data_format, xp):
    def compute(value, bias):
        axis = _channel_axis(value.ndim, data_format)
        c = value.shape[axis]
        if bias.ndim != 1 or bias.shape[0] != c:
            raise InvalidArgumentError(
                f"bias has shape {list(bias.shape)}; it must be a vector as long as the "
                f"channel dimension {axis} of value {list(value.shape)}"
            )
        if axis == value.ndim - 1 and value.size and value.flags.c_contiguous:
            run = _row_length(value.shape)
            tiled = xp.tile(bias, run // c)
            out = xp.add(value.reshape(-1, run), tiled).reshape(value.shape)
            return out.astype(value.dtype, copy=False)
        shape = [1] * value.ndim
        shape[axis] = c
        return (value + bias.reshape(shape)).astype(value.dtype, copy=False)

    return compute


# BiasAddGrad sums a large gradient in 2 or 4 (_SUM_BLOCKS) blocks of rows of at least
# _SUM_BLOCK_ELEMS elements each, fixed by the shape: the blocks run on the intra-op threads and
# their column sums are added in order, so the bits never depend on the thread count. (The sum is
# memory-bound: on the MNIST CNN's first layer, 6.4 MB, one thread took 0.5-0.6 ms.)
_SUM_BLOCKS = 4
_SUM_BLOCK_ELEMS = 1 << 18


def _column_sums(rows: np.ndarray) -> np.ndarray:
    """rows [r, run] summed over r: each block of rows in order, then the blocks in order."""
    r, run = rows.shape
    most = min(_SUM_BLOCKS, r, rows.size // _SUM_BLOCK_ELEMS)
    blocks = 4 if most >= 4 else (2 if most >= 2 else 1)  # even over 2 or 4 threads
    if blocks == 1:
        return rows.sum(axis=0, dtype=rows.dtype)
    bounds = [r * i // blocks for i in range(blocks + 1)]
    parts = np.empty((blocks, run), rows.dtype)

    def part(lo, hi):
        for b in range(lo, hi):
            np.sum(rows[bounds[b] : bounds[b + 1]], axis=0, dtype=rows.dtype, out=parts[b])

    parallel_for(blocks, part)
    acc = parts[0]
    for b in range(1, blocks):
        acc += parts[b]
    return acc


@register_kernel("BiasAddGrad", devices=_BOTH)
def bias_add_grad(data_format):
    def compute(out_backprop):
        g = out_backprop
        axis = _channel_axis(g.ndim, data_format)
        c = g.shape[axis]
        if axis == g.ndim - 1 and g.size and g.flags.c_contiguous:
            # Column sums of [rows, row length], then the row's repeats of the channels.
            run = _row_length(g.shape)
            rows = g.reshape(-1, run)
            if isinstance(g, np.ndarray):
                partial = _column_sums(rows)
            else:
                partial = rows.sum(axis=0, dtype=g.dtype)
            return partial.reshape(-1, c).sum(axis=0, dtype=g.dtype)
        axes = tuple(a for a in range(g.ndim) if a != axis)
        return g.sum(axis=axes, dtype=g.dtype)

    return compute


# -- activations ----------------------------------------------------------------------------------


def _unary(fn):
    def factory(xp):
        def compute(x):
            return fn(xp, _wide(x)).astype(x.dtype, copy=False)

        return compute

    return factory


def _relu(xp, x):
    return xp.maximum(x, 0)


register_kernel("Relu", devices=_BOTH)(_unary(_relu))
register_kernel("Relu6", devices=_BOTH)(_unary(lambda xp, x: xp.minimum(xp.maximum(x, 0), 6)))
register_kernel("Elu", devices=_BOTH)(
    _unary(lambda xp, x: xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0))))
)
register_kernel("Selu", devices=_BOTH)(
    _unary(lambda xp, x: _SELU_SCALE * xp.where(x > 0, x, _SELU_ALPHA * xp.expm1(xp.minimum(x, 0))))
)
register_kernel("Softplus", devices=_BOTH)(_unary(lambda xp, x: xp.logaddexp(x, 0)))
register_kernel("Softsign", devices=_BOTH)(_unary(lambda xp, x: x / (xp.abs(x) + 1)))


@register_kernel("LeakyRelu", devices=_BOTH)
def leaky_relu(alpha, xp):
    def compute(x):
        w = _wide(x)
        return xp.where(w > 0, w, w * alpha).astype(x.dtype, copy=False)

    return compute


def _binary_grad(name, fn):
    def factory(xp):
        def compute(g, y):
            _check_same_shape(g, y, name)
            return fn(xp, _wide(g), _wide(y)).astype(g.dtype, copy=False)

        return compute

    return register_kernel(name, devices=_BOTH)(factory)


# ReluGrad and Relu6Grad multiply by the mask, as TensorFlow does: a NaN or infinite gradient
# where the feature is not positive gives NaN, and a negative one gives -0.
def _relu_mask(xp, x):
    return x > 0


def _relu6_mask(xp, x):
    return (x > 0) & (x < 6)


def _masked_grad(name, mask):
    def gpu(xp):
        def compute(g, x):
            _check_same_shape(g, x, name)
            return xp.multiply(_wide(g), mask(xp, _wide(x))).astype(g.dtype, copy=False)

        return compute

    def cpu():
        def compute(g, x):
            _check_same_shape(g, x, name)
            if g.dtype in _HALF or not (g.flags.c_contiguous and x.flags.c_contiguous):
                return np.multiply(_wide(g), mask(np, _wide(x))).astype(g.dtype, copy=False)
            out = np.empty(g.shape, g.dtype)
            gf, xf, of = g.reshape(-1), x.reshape(-1), out.reshape(-1)
            for a in range(0, of.size, _CHUNK):  # chunks bound the mask's size
                b = a + _CHUNK
                np.multiply(gf[a:b], mask(np, xf[a:b]), out=of[a:b])
            return out

        return compute

    register_kernel(name, devices=("GPU",))(gpu)
    register_kernel(name, devices=("CPU",))(cpu)


_masked_grad("ReluGrad", _relu_mask)
_masked_grad("Relu6Grad", _relu6_mask)
_binary_grad("EluGrad", lambda xp, g, y: xp.where(y < 0, g * (y + 1), g))
_binary_grad(
    "SeluGrad",
    lambda xp, g, y: xp.where(y < 0, g * (y + _SELU_SCALE * _SELU_ALPHA), g * _SELU_SCALE),
)
_binary_grad("SoftplusGrad", lambda xp, g, x: g * xp.exp(x - xp.logaddexp(x, 0)))
_binary_grad("SoftsignGrad", lambda xp, g, x: g / xp.square(1 + xp.abs(x)))


@register_kernel("LeakyReluGrad", devices=_BOTH)
def leaky_relu_grad(alpha, xp):
    def compute(g, x):
        _check_same_shape(g, x, "LeakyReluGrad")
        gw = _wide(g)
        return xp.where(_wide(x) > 0, gw, gw * alpha).astype(g.dtype, copy=False)

    return compute


# -- softmax and losses ---------------------------------------------------------------------------


def _log_softmax(xp, x):
    """log softmax over the last axis (x already wide)."""
    if x.shape[-1] == 0:
        return x
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))


def _check_rank_at_least_1(x, what: str) -> None:
    if x.ndim < 1:
        raise InvalidArgumentError(f"{what} must be at least 1-D, got a scalar")


# Elements per piece of the compiled softmax (256 KiB of float32): its three passes over a
# piece's rows run while they are in cache.
_SOFTMAX_PIECE = 1 << 16
# The fewest elements of a float32 softmax split over the pool's team (about 10 µs of rows;
# the hand-off is a microsecond or so): a GPT-2-like block's attention, [4, 64, 64], took
# 25-50 µs on one thread, under the Python pool's grain.
_SOFTMAX_TEAM = 1 << 13


def _softmax_rows(loops, x):
    """The softmax of a C-contiguous float32/float64 x over its last axis (n <=
    _loops.NORM_ROW_MAX). float32: _exp_tanh_loops.softmax32_rows, a row at a time (exp32's
    exp, the row's sum in vector lanes: ViT-small's [1182, 197] 365 -> ... µs on Zen 3, where
    numpy's exp is scalar). float64: the numpy kernel's operations in its order, so its bits:
    the compiled x - max, numpy's exp in place, the compiled division by the row's pairwise
    sum; piece by piece."""
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    out = np.empty(x.shape, x.dtype)
    flat = out.reshape(-1, n)
    step = max(1, _SOFTMAX_PIECE // n)
    mod = jit.exp_tanh() if x.dtype == np.float32 else None
    if mod is not None:
        team = intra_op.team() if rows.size >= _SOFTMAX_TEAM and rows.shape[0] > 1 else None
        if team is not None:  # runs of rows over the team (each row its unsplit bits)
            mod.softmax32_team(rows, flat, 4, team, mod.softmax_piece_function())
            return out
        parallel_for(rows.shape[0], lambda lo, hi: mod.softmax32_rows(rows, flat, lo, hi),
                     grain=step)  # fmt: skip
        return out

    def pieces(lo, hi):
        for r0 in range(lo, hi, step):
            r1 = min(hi, r0 + step)
            loops.softmax_shift(rows, flat, r0, r1)
            np.exp(flat[r0:r1], out=flat[r0:r1])
            loops.softmax_scale(flat, r0, r1)

    parallel_for(rows.shape[0], pieces, grain=step)
    return out


@register_kernel("Softmax", devices=_BOTH)
def softmax(xp):
    def compute(logits):
        _check_rank_at_least_1(logits, "logits")
        x = _wide(logits)
        if x.shape[-1] == 0:
            return logits.copy()
        if xp is np and x.dtype in jit.FLOATS and x.flags.c_contiguous and x.size:
            loops = jit.loops()
            if loops is not None and x.shape[-1] <= loops.NORM_ROW_MAX:
                return _softmax_rows(loops, x).astype(logits.dtype, copy=False)
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(logits.dtype, copy=False)

    return compute


@register_kernel("LogSoftmax", devices=_BOTH)
def log_softmax(xp):
    def compute(logits):
        _check_rank_at_least_1(logits, "logits")
        return _log_softmax(xp, _wide(logits)).astype(logits.dtype, copy=False)

    return compute


@register_kernel("SoftmaxCrossEntropyWithLogits", devices=_BOTH)
def softmax_cross_entropy_with_logits(xp):
    def compute(features, labels):
        fs = features.shape
        if fs == labels.shape and len(fs) == 2 and fs[1] and features.dtype not in _HALF:
            # The common case, in the inputs' own dtype with few temporaries.
            shifted = features - features.max(axis=1, keepdims=True)
            e = xp.exp(shifted)
            s = e.sum(axis=1, keepdims=True)
            logp = shifted - xp.log(s)
            if xp is np:
                loss = -np.einsum("ij,ij->i", labels, logp)
            else:  # (cupy's einsum may call cuBLAS, which a CUDA graph capture refuses)
                loss = -(labels * logp).sum(axis=1)
            e /= s
            e -= labels
            return loss, e
        try:
            shape = np.broadcast_shapes(features.shape, labels.shape)
        except ValueError:
            raise InvalidArgumentError(
                f"logits and labels must be broadcastable: logits {list(features.shape)}, "
                f"labels {list(labels.shape)}"
            ) from None
        if len(shape) != 2:
            raise InvalidArgumentError(f"logits and labels must be 2-D, got {list(shape)}")
        f = xp.broadcast_to(_wide(features), shape)
        lab = xp.broadcast_to(_wide(labels), shape)
        if shape[1] == 0:
            loss = xp.zeros(shape[0], f.dtype)
            return loss.astype(features.dtype), xp.zeros(shape, features.dtype)
        logp = _log_softmax(xp, f)
        loss = -(lab * logp).sum(axis=1)
        backprop = xp.exp(logp) - lab
        return loss.astype(features.dtype), backprop.astype(features.dtype)

    return compute


@register_kernel("SparseSoftmaxCrossEntropyWithLogits")
def sparse_softmax_cross_entropy_with_logits():
    def compute(features, labels):
        if features.ndim != 2 or labels.ndim != 1:
            raise InvalidArgumentError(
                f"logits must be 2-D and labels 1-D, got shapes {list(features.shape)} and "
                f"{list(labels.shape)}"
            )
        n, classes = features.shape
        if labels.shape[0] != n:
            raise InvalidArgumentError(
                f"logits and labels must have the same first dimension, got logits shape "
                f"{list(features.shape)} and labels shape {list(labels.shape)}"
            )
        if n and classes == 0:
            raise InvalidArgumentError(
                f"Must have at least one class, but got logits shape {list(features.shape)}"
            )
        bad = (labels < 0) | (labels >= classes)
        if bad.any():
            first = int(labels[np.argmax(bad)])
            shown = " ".join(str(int(v)) for v in labels[:64])
            raise InvalidArgumentError(
                f"Received a label value of {first} which is outside the valid range of "
                f"[0, {classes}).  Label values: {shown}"
            )
        logp = _log_softmax(np, _wide(features))
        rows = np.arange(n)
        loss = -logp[rows, labels]
        backprop = np.exp(logp)
        backprop[rows, labels] -= 1
        return loss.astype(features.dtype), backprop.astype(features.dtype)

    return compute


@register_kernel("L2Loss", devices=_BOTH)
def l2_loss(xp):
    def compute(t):
        w = _wide(t)
        return (xp.sum(w * w) / 2).astype(t.dtype)

    return compute


# -- batch normalization --------------------------------------------------------------------------


def _bn_layout(x, data_format: str):
    """(channel axis, reduction axes, broadcast shape of a per-channel vector)."""
    want = 5 if data_format in ("NDHWC", "NCDHW") else 4
    if x.ndim != want:
        raise InvalidArgumentError(f"x must be {want}-D for {data_format}, got shape {x.shape}")
    axis = 1 if data_format.startswith("NC") else x.ndim - 1
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return axis, tuple(a for a in range(x.ndim) if a != axis), tuple(shape)


def _check_vectors(depth: int, **vectors) -> None:
    for name, v in vectors.items():
        if v.ndim != 1 or v.shape[0] != depth:
            raise InvalidArgumentError(
                f"{name} must be a vector of length {depth} (the channel depth), got shape "
                f"{list(v.shape)}"
            )


@register_kernel("FusedBatchNormV3", expensive=True)
def fused_batch_norm_v3(epsilon, exponential_avg_factor, data_format, is_training):
    factor = float(exponential_avg_factor)

    def compute(x, scale, offset, mean, variance):
        axis, axes, vshape = _bn_layout(x, data_format)
        depth = x.shape[axis]
        u = scale.dtype
        _check_vectors(depth, scale=scale, offset=offset)
        xw = x.astype(np.float32, copy=False)
        sc = scale.astype(np.float32).reshape(vshape)
        off = offset.astype(np.float32).reshape(vshape)
        empty = np.zeros([0], u)
        if not is_training:
            _check_vectors(depth, mean=mean, variance=variance)
            m = mean.astype(np.float32)
            v = variance.astype(np.float32)
            inv = 1 / np.sqrt(v + epsilon)
            y = (xw - m.reshape(vshape)) * (sc * inv.reshape(vshape)) + off
            return y.astype(x.dtype), mean, variance, mean, variance, empty
        if factor != 1.0:
            _check_vectors(depth, mean=mean, variance=variance)
        count = x.size // depth if depth else 0
        if count == 0:
            nan = np.full(depth, np.nan, u)
            zeros = np.zeros(depth, u)
            return x.copy(), nan, nan.copy(), zeros, zeros.copy(), empty
        bm = xw.mean(axis=axes, dtype=np.float32)
        centered = xw - bm.reshape(vshape)
        bv = np.square(centered).mean(axis=axes, dtype=np.float32)
        inv = 1 / np.sqrt(bv + epsilon)
        y = centered * (sc * inv.reshape(vshape)) + off
        # The running variance is the unbiased one; normalization used the biased one.
        unbiased = bv * (count / max(count - 1, 1))
        if factor == 1.0:
            run_m, run_v = bm, unbiased
        else:
            run_m = (1 - factor) * mean.astype(np.float32) + factor * bm
            run_v = (1 - factor) * variance.astype(np.float32) + factor * unbiased
        return (
            y.astype(x.dtype),
            run_m.astype(u),
            run_v.astype(u),
            bm.astype(u),
            bv.astype(u),
            empty,
        )

    return compute


@register_kernel("FusedBatchNormGradV3", expensive=True)
def fused_batch_norm_grad_v3(epsilon, data_format, is_training):
    def compute(y_backprop, x, scale, reserve_space_1, reserve_space_2, reserve_space_3):
        _check_same_shape(y_backprop, x, "FusedBatchNormGradV3")
        axis, axes, vshape = _bn_layout(x, data_format)
        depth = x.shape[axis]
        _check_vectors(depth, scale=scale, mean=reserve_space_1, variance=reserve_space_2)
        u = reserve_space_1.dtype
        empty = np.zeros([0], u)
        dy = y_backprop.astype(np.float32, copy=False)
        xw = x.astype(np.float32, copy=False)
        inv = (1 / np.sqrt(reserve_space_2.astype(np.float32) + epsilon)).reshape(vshape)
        xhat = (xw - reserve_space_1.astype(np.float32).reshape(vshape)) * inv
        d_offset = dy.sum(axis=axes, dtype=np.float32)
        d_scale = (dy * xhat).sum(axis=axes, dtype=np.float32)
        sc = scale.astype(np.float32).reshape(vshape)
        if is_training:
            count = x.size // depth if depth else 0
            if count == 0:
                dx = np.zeros(x.shape, np.float32)
            else:
                dx = (sc * inv / count) * (
                    count * dy - d_offset.reshape(vshape) - xhat * d_scale.reshape(vshape)
                )
        else:
            dx = dy * (sc * inv)
        return dx.astype(x.dtype), d_scale.astype(u), d_offset.astype(u), empty, empty.copy()

    return compute


# -- local response normalization ----------------------------------------------------------------


def _depth_window_sum(a: np.ndarray, radius: int) -> np.ndarray:
    """Sum of a[..., d - radius : d + radius + 1] for every depth d (clipped at the edges)."""
    depth = a.shape[-1]
    out = a.copy()
    for k in range(1, min(radius, depth - 1) + 1):
        out[..., k:] += a[..., :-k]
        out[..., :-k] += a[..., k:]
    return out


def _check_lrn(x, depth_radius: int) -> None:
    if x.ndim != 4:
        raise InvalidArgumentError(f"input must be 4-D, got shape {list(x.shape)}")
    if depth_radius < 0:
        raise InvalidArgumentError(f"depth_radius must be non-negative, got {depth_radius}")


@register_kernel("LRN")
def lrn(depth_radius, bias, alpha, beta):
    def compute(x):
        _check_lrn(x, depth_radius)
        xw = x.astype(np.float32)
        norm = bias + alpha * _depth_window_sum(xw * xw, depth_radius)
        return (xw * norm ** (-beta)).astype(x.dtype)

    return compute


@register_kernel("LRNGrad")
def lrn_grad(depth_radius, bias, alpha, beta):
    def compute(input_grads, input_image, output_image):
        _check_lrn(input_image, depth_radius)
        _check_same_shape(input_grads, input_image, "LRNGrad")
        _check_same_shape(output_image, input_image, "LRNGrad")
        g = input_grads.astype(np.float32)
        x = input_image.astype(np.float32)
        y = output_image.astype(np.float32)
        norm = bias + alpha * _depth_window_sum(x * x, depth_radius)
        # y_d = x_d * norm_d**-beta; each norm_d depends on the x_k within depth_radius of d.
        through_norm = _depth_window_sum(g * y / norm, depth_radius)
        dx = g * norm ** (-beta) - (2 * alpha * beta) * x * through_norm
        return dx.astype(input_grads.dtype)

    return compute


# -- top k ----------------------------------------------------------------------------------------


@register_kernel("InTopKV2")
def in_top_k_v2():
    def compute(predictions, targets, k):
        if predictions.ndim != 2:
            raise InvalidArgumentError(
                f"predictions must be 2-D, got shape {list(predictions.shape)}"
            )
        if targets.ndim != 1 or targets.shape[0] != predictions.shape[0]:
            raise InvalidArgumentError(
                f"First dimension of predictions {predictions.shape[0]} must match length of "
                f"targets {targets.shape[0] if targets.ndim else 'scalar'}"
            )
        if np.ndim(k) != 0:
            raise InvalidArgumentError(f"k must be 0-D, got shape {list(np.shape(k))}")
        n, classes = predictions.shape
        valid = (targets >= 0) & (targets < classes)
        safe = np.where(valid, targets, 0)
        if classes == 0:
            return np.zeros(n, np.bool_)
        target_pred = predictions[np.arange(n), safe]
        finite = np.isfinite(predictions).all(axis=1)
        larger = (predictions > target_pred[:, None]).sum(axis=1)
        return valid & finite & (larger < int(k))

    return compute
