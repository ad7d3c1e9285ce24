"""CPU kernels of the nn ops against independent numpy references written here (float64
formulas, loops over depth, finite differences for the gradient ops without a closed form here).
"""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.testing import run_kernel
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(99)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def run_op(op_type, inputs, attrs=None):
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs or {}))
        return run_kernel(op, *inputs)


def close(got, want, dtype=None):
    dtype = np.dtype(dtype or got.dtype)
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-12}.get(dtype.type, 0)
    assert got.dtype == dtype, (got.dtype, dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


# -- bias -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 3, 4, 5), (2, 3, 2, 2, 4), (0, 3)])
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_bias_add_and_grad(shape, fmt):
    x = RNG.standard_normal(shape).astype(np.float32)
    axis = 1 if fmt == "NCHW" else len(shape) - 1
    b = RNG.standard_normal(shape[axis]).astype(np.float32)
    want = x.astype(np.float64) + np.expand_dims(
        b, tuple(a for a in range(len(shape)) if a != axis)
    )
    (got,) = run_op("BiasAdd", [x, b], {"data_format": fmt})
    close(got, want)
    (grad,) = run_op("BiasAddGrad", [x], {"data_format": fmt})
    close(grad, x.astype(np.float64).sum(axis=tuple(a for a in range(len(shape)) if a != axis)))


@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_bias_add_and_grad_of_large_channels_last_tensors(layout):
    """Many rows of the repeated-bias layout (and the general path for a strided input)."""
    x = RNG.standard_normal((5, 30, 30, 8)).astype(np.float32)
    if layout == "strided":
        x = x[:, ::2]
    b = RNG.standard_normal(8).astype(np.float32)
    (got,) = run_op("BiasAdd", [x, b])
    close(got, x.astype(np.float64) + b)
    (grad,) = run_op("BiasAddGrad", [x])
    np.testing.assert_allclose(grad, x.astype(np.float64).sum(axis=(0, 1, 2)), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_bias_grad_of_a_large_gradient_sums_fixed_blocks_on_any_thread_count(monkeypatch, dtype):
    """Blocks of rows fixed by the shape, summed in order: the same bits on 1 and 3 threads."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op, nn_kernels

    rng = np.random.default_rng(21)
    x = (rng.standard_normal((40, 28, 28, 32)) * 100).astype(dtype)  # 1 M elements
    calls = []
    real = intra_op.parallel_for

    def watch(n, fn, *args, **kwargs):
        calls.append(n)
        return real(n, fn, *args, **kwargs)

    monkeypatch.setattr(nn_kernels, "parallel_for", watch)
    monkeypatch.setattr(intra_op, "_THREADS", 3)
    monkeypatch.setattr(threads, "_BUDGET", 3)
    got = []
    for free in (1, 3):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        (g,) = run_op("BiasAddGrad", [x])
        got.append(g)
    assert calls == [2, 2]  # 2 or 4 blocks of rows of at least 2^18 elements
    np.testing.assert_array_equal(got[0], got[1])
    rows = x.reshape(-1, nn_kernels._row_length(x.shape))
    bounds = [len(rows) * i // calls[0] for i in range(calls[0] + 1)]
    want = rows[bounds[0] : bounds[1]].sum(axis=0, dtype=dtype)
    for b in range(1, calls[0]):
        want = want + rows[bounds[b] : bounds[b + 1]].sum(axis=0, dtype=dtype)
    np.testing.assert_array_equal(got[0], want.reshape(-1, 32).sum(axis=0, dtype=dtype))
    # Against the exact sum: a float32 sum of n terms is off by a few eps times the sum of their
    # magnitudes (a column whose terms cancel has a small sum and a large rounding error).
    exact = x.astype(np.float64).sum(axis=(0, 1, 2))
    scale = np.abs(x.astype(np.float64)).sum(axis=(0, 1, 2))
    assert np.all(np.abs(got[0] - exact) <= 8 * np.finfo(np.float32).eps * scale)


def test_bias_add_integers_wrap_and_keep_their_dtype():
    x = np.full((300, 2), 100, np.int8)
    (y,) = run_op("BiasAdd", [x, np.array([100, 1], np.int8)])
    assert y.dtype == np.int8 and y[0, 0] == np.int8(-56) and y[0, 1] == 101
    (g,) = run_op("BiasAddGrad", [x])
    assert g.dtype == np.int8
    np.testing.assert_array_equal(g, np.array([300 * 100] * 2).astype(np.int8))


def test_bias_add_errors():
    with pytest.raises(InvalidArgumentError, match="bias"):
        run_op("BiasAdd", [np.ones((2, 3), np.float32), np.ones(4, np.float32)])
    with pytest.raises(InvalidArgumentError, match="at least 2-D"):
        run_op("BiasAddGrad", [np.ones(3, np.float32)])


# -- activations ----------------------------------------------------------------------------------


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = {
    "Relu": lambda x: np.where(x > 0, x, 0.0),
    "Relu6": lambda x: np.clip(x, 0, 6),
    "Elu": lambda x: np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1),
    "Selu": lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * (np.exp(np.minimum(x, 0)) - 1)),
    "Softplus": lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0),
    "Softsign": lambda x: x / (1 + np.abs(x)),
}


def _features(dtype):
    x = (RNG.standard_normal(40) * 4).astype(np.float64)
    x[:5] = [0.0, 6.0, -0.0, 6.5, -30.0]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations(name, dtype):
    x = _features(dtype)
    (got,) = run_op(name, [x])
    close(got, ACTIVATIONS[name](x.astype(np.float64)), dtype)


def test_softplus_extremes_do_not_overflow():
    x = np.array([-80, -20, 0, 20, 100], np.float32)
    (got,) = run_op("Softplus", [x])
    np.testing.assert_allclose(got, [np.exp(-80.0), np.exp(-20.0), np.log(2), 20, 100], rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.int8])
def test_integer_relus(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, min(-3, info.min), 0, 5, 9, info.max]).astype(dtype)
    (r,) = run_op("Relu", [x])
    (r6,) = run_op("Relu6", [x])
    assert r.dtype == r6.dtype == dtype
    np.testing.assert_array_equal(r, np.array([max(int(v), 0) for v in x], dtype))
    np.testing.assert_array_equal(r6, np.array([min(max(int(v), 0), 6) for v in x], dtype))


@pytest.mark.parametrize("alpha", [0.2, 2.0])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_leaky_relu_and_grad(alpha, dtype):
    x = _features(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    alpha = float(np.float32(alpha))  # a float attr holds a float32, as in TensorFlow
    (y,) = run_op("LeakyRelu", [x], {"alpha": alpha})
    close(y, np.where(x64 > 0, x64, alpha * x64), dtype)
    (dx,) = run_op("LeakyReluGrad", [g, x], {"alpha": alpha})
    close(dx, np.where(x64 > 0, g64, alpha * g64), dtype)


GRADS = {
    # op: (second input from features, reference gradient)
    "ReluGrad": (lambda x: x, lambda g, x: np.where(x > 0, g, 0.0)),
    "Relu6Grad": (lambda x: x, lambda g, x: np.where((x > 0) & (x < 6), g, 0.0)),
    "EluGrad": (ACTIVATIONS["Elu"], lambda g, y: np.where(y < 0, g * (y + 1), g)),
    "SeluGrad": (
        ACTIVATIONS["Selu"],
        lambda g, y: np.where(y < 0, g * (y + SELU_SCALE * SELU_ALPHA), g * SELU_SCALE),
    ),
    "SoftplusGrad": (lambda x: x, lambda g, x: g * _sigmoid(x)),
    "SoftsignGrad": (lambda x: x, lambda g, x: g / (1 + np.abs(x)) ** 2),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(GRADS))
def test_activation_grads(name, dtype):
    x = _features(np.float64)
    second = GRADS[name][0](x).astype(dtype)
    g = RNG.standard_normal(x.shape).astype(dtype)
    (got,) = run_op(name, [g, second])
    close(got, GRADS[name][1](g.astype(np.float64), second.astype(np.float64)), dtype)


@pytest.mark.parametrize("name", ["ReluGrad", "Relu6Grad"])
def test_relu_grads_multiply_by_the_mask_as_tensorflow_does(name):
    """TensorFlow computes g * (mask): NaN or infinite gradients where the mask is 0 give NaN,
    negative ones give -0 (values TensorFlow 2.21 gives for these inputs)."""
    g = np.array([np.nan, np.inf, -2.0, np.nan, 3.0, -1.0], np.float32)
    x = np.array([-1.0, 7.0, 0.0, 2.0, 6.0, np.nan], np.float32)
    with np.errstate(invalid="ignore"):  # as in a step: inf * 0 is NaN, silently
        (got,) = run_op(name, [g, x])
    if name == "ReluGrad":
        want = np.array([np.nan, np.inf, -0.0, np.nan, 3.0, -0.0])
    else:
        want = np.array([np.nan, np.nan, -0.0, np.nan, 0.0, -0.0])
    np.testing.assert_array_equal(got, want)
    signed = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got)[signed], np.signbit(want)[signed])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.float16])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_relu_grad_of_large_tensors(dtype, layout):
    """Large enough to be split into chunks; strided inputs too."""
    x = RNG.integers(-5, 6, (3, 100_003)).astype(dtype)
    g = RNG.integers(-9, 10, x.shape).astype(dtype)
    if layout == "strided":
        x, g = x[:, ::2], g.T.copy().T[:, ::2]
    (got,) = run_op("ReluGrad", [g, x])
    assert got.dtype == np.dtype(dtype) and got.shape == g.shape
    want = np.where(x.astype(np.float64) > 0, g.astype(np.float64), 0.0)
    np.testing.assert_array_equal(got.astype(np.float64), want)


def test_relu_grad_integers_and_shape_mismatch():
    (got,) = run_op("ReluGrad", [np.array([1, 2, 3], np.int32), np.array([-1, 0, 1], np.int32)])
    np.testing.assert_array_equal(got, np.array([0, 0, 3], np.int32))
    with pytest.raises(InvalidArgumentError, match="same shape"):
        run_op("ReluGrad", [np.ones(3, np.float32), np.ones(2, np.float32)])


# -- softmax and losses ---------------------------------------------------------------------------


def ref_log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5), (6,), (3, 1)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_and_log_softmax(shape, dtype):
    x = (RNG.standard_normal(shape) * 5).astype(dtype)
    x.reshape(-1)[0] = 80  # exp would overflow without the shift by the maximum
    (sm,) = run_op("Softmax", [x])
    (lsm,) = run_op("LogSoftmax", [x])
    close(sm, np.exp(ref_log_softmax(x)), dtype)
    close(lsm, ref_log_softmax(x), dtype)


def test_softmax_empty_and_scalar():
    x = np.zeros((2, 0), np.float32)
    assert run_op("Softmax", [x])[0].shape == (2, 0)
    assert run_op("LogSoftmax", [x])[0].shape == (2, 0)
    with pytest.raises(InvalidArgumentError, match="at least 1-D"):
        run_op("Softmax", [np.float32(1)])


@pytest.mark.parametrize("labels_rows", [4, 1])
def test_softmax_cross_entropy(labels_rows):
    logits = (RNG.standard_normal((4, 7)) * 3).astype(np.float32)
    labels = RNG.random((labels_rows, 7)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    loss, backprop = run_op("SoftmaxCrossEntropyWithLogits", [logits, labels])
    lab = np.broadcast_to(labels.astype(np.float64), logits.shape)
    logp = ref_log_softmax(logits)
    close(loss, -(lab * logp).sum(axis=1))
    close(backprop, np.exp(logp) - lab)
    with pytest.raises(InvalidArgumentError, match="broadcastable"):
        run_op("SoftmaxCrossEntropyWithLogits", [logits, labels[:, :5]])


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sparse_softmax_cross_entropy(label_dtype, dtype):
    logits = (RNG.standard_normal((5, 7)) * 3).astype(dtype)
    labels = np.array([0, 6, 3, 2, 6], label_dtype)
    loss, backprop = run_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels])
    logp = ref_log_softmax(logits)
    onehot = np.eye(7)[labels]
    close(loss, -(onehot * logp).sum(axis=1), dtype)
    close(backprop, np.exp(logp) - onehot, dtype)


def test_sparse_softmax_cross_entropy_errors_and_empty_batch():
    logits = np.zeros((2, 3), np.float32)
    for bad in ([0, 3], [-1, 0]):
        with pytest.raises(InvalidArgumentError, match=r"outside the valid range of \[0, 3\)"):
            run_op("SparseSoftmaxCrossEntropyWithLogits", [logits, np.array(bad, np.int32)])
    with pytest.raises(InvalidArgumentError, match="at least one class"):
        run_op(
            "SparseSoftmaxCrossEntropyWithLogits",
            [np.zeros((2, 0), np.float32), np.zeros(2, np.int64)],
        )
    loss, backprop = run_op(
        "SparseSoftmaxCrossEntropyWithLogits", [np.zeros((0, 3), np.float32), np.zeros(0, np.int64)]
    )
    assert loss.shape == (0,) and backprop.shape == (0, 3)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_l2_loss(dtype):
    t = RNG.standard_normal((3, 4)).astype(dtype)
    (got,) = run_op("L2Loss", [t])
    assert got.shape == ()
    close(got, (t.astype(np.float64) ** 2).sum() / 2, dtype)
    assert run_op("L2Loss", [np.zeros((0,), dtype)])[0] == 0


# -- batch normalization --------------------------------------------------------------------------

BN_LAYOUTS = [("NHWC", (2, 3, 4, 5), 3), ("NCHW", (2, 5, 3, 4), 1), ("NDHWC", (2, 2, 3, 2, 5), 4),
              ("NCDHW", (2, 5, 2, 3, 2), 1)]  # fmt: skip


def _bn_inputs(shape, axis):
    c = shape[axis]
    x = (RNG.standard_normal(shape) * 2 + 1).astype(np.float32)
    scale = (RNG.random(c) + 0.5).astype(np.float32)
    offset = RNG.standard_normal(c).astype(np.float32)
    mean = RNG.standard_normal(c).astype(np.float32)
    var = (RNG.random(c) + 0.2).astype(np.float32)
    return x, scale, offset, mean, var


def _per_channel(v, ndim, axis):
    return np.expand_dims(v.astype(np.float64), tuple(a for a in range(ndim) if a != axis))


@pytest.mark.parametrize("fmt,shape,axis", BN_LAYOUTS)
@pytest.mark.parametrize("factor", [1.0, 0.3])
def test_fused_batch_norm_training(fmt, shape, axis, factor):
    x, scale, offset, mean, var = _bn_inputs(shape, axis)
    empty = np.zeros(0, np.float32)
    ins = [x, scale, offset, mean if factor != 1 else empty, var if factor != 1 else empty]
    attrs = {"epsilon": 1e-3, "data_format": fmt, "exponential_avg_factor": factor}
    y, run_mean, run_var, r1, r2, r3 = run_op("FusedBatchNormV3", ins, attrs)
    axes = tuple(a for a in range(x.ndim) if a != axis)
    x64 = x.astype(np.float64)
    bm, bv = x64.mean(axis=axes), x64.var(axis=axes)
    n = x.size // shape[axis]

    def pc(v):
        return _per_channel(v, x.ndim, axis)

    want_y = (x64 - pc(bm)) / np.sqrt(pc(bv) + 1e-3) * pc(scale) + pc(offset)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-5)
    unbiased = bv * n / (n - 1)
    want_m = bm if factor == 1 else (1 - factor) * mean + factor * bm
    want_v = unbiased if factor == 1 else (1 - factor) * var + factor * unbiased
    np.testing.assert_allclose(run_mean, want_m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_var, want_v, rtol=1e-5, atol=1e-6)
    # Reserve spaces: the batch mean and the biased variance used to normalize; 3 is empty.
    np.testing.assert_allclose(r1, bm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r2, bv, rtol=1e-5, atol=1e-6)
    assert r3.shape == (0,)


@pytest.mark.parametrize("fmt,shape,axis", BN_LAYOUTS)
def test_fused_batch_norm_inference(fmt, shape, axis):
    x, scale, offset, mean, var = _bn_inputs(shape, axis)
    for xt in (np.float32, np.float16):
        xin = x.astype(xt)
        attrs = {"epsilon": 1e-3, "data_format": fmt, "is_training": False}
        y, m, v, r1, r2, r3 = run_op("FusedBatchNormV3", [xin, scale, offset, mean, var], attrs)
        assert y.dtype == xt

        def pc(a):
            return _per_channel(a, x.ndim, axis)

        want = (xin.astype(np.float64) - pc(mean)) / np.sqrt(pc(var) + 1e-3) * pc(scale) + pc(
            offset
        )
        tol = 1e-5 if xt == np.float32 else 5e-3
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)
        for got, ref in ((m, mean), (v, var), (r1, mean), (r2, var)):
            np.testing.assert_array_equal(got, ref)
        assert r3.shape == (0,)


def test_fused_batch_norm_single_value_and_empty_batch():
    x = np.array([[[[1.0, 2.0]]]], np.float32)
    ones, zeros, empty = np.ones(2, np.float32), np.zeros(2, np.float32), np.zeros(0, np.float32)
    y, m, v, r1, r2, _ = run_op("FusedBatchNormV3", [x, ones, zeros, empty, empty])
    np.testing.assert_array_equal(y, np.zeros_like(x))
    np.testing.assert_array_equal(m, [1, 2])
    np.testing.assert_array_equal(v, [0, 0])  # one value: no n/(n-1) correction
    y, m, v, r1, r2, _ = run_op(
        "FusedBatchNormV3", [np.zeros((0, 2, 2, 2), np.float32), ones, zeros, empty, empty]
    )
    assert y.shape == (0, 2, 2, 2) and np.isnan(m).all() and np.isnan(v).all()
    np.testing.assert_array_equal(r1, [0, 0])


def _bn_loss(x, scale, offset, dy, axis, mean=None, var=None, eps=1e-3):
    """sum(dy * batch_norm(x)) in float64; the batch's statistics when mean is None."""
    axes = tuple(a for a in range(x.ndim) if a != axis)
    m = x.mean(axis=axes) if mean is None else mean
    v = x.var(axis=axes) if var is None else var

    def pc(a):
        return _per_channel(a, x.ndim, axis)

    y = (x - pc(m)) / np.sqrt(pc(v) + eps) * pc(scale) + pc(offset)
    return float((y * dy).sum())


def _numeric_grad(f, a, h=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + h
        up = f()
        a[i] = old - h
        down = f()
        a[i] = old
        g[i] = (up - down) / (2 * h)
    return g


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("fmt,shape,axis", BN_LAYOUTS[:2])
def test_fused_batch_norm_grad_against_finite_differences(fmt, shape, axis, training):
    x, scale, offset, mean, var = _bn_inputs(shape, axis)
    dy = RNG.standard_normal(shape).astype(np.float32)
    attrs = {"epsilon": 1e-3, "data_format": fmt, "is_training": training}
    if training:
        _, _, _, r1, r2, r3 = run_op(
            "FusedBatchNormV3", [x, scale, offset, np.zeros(0, np.float32), np.zeros(0, np.float32)],
            {"epsilon": 1e-3, "data_format": fmt},
        )  # fmt: skip
        stats = {}
    else:
        r1, r2, r3 = mean, var, np.zeros(0, np.float32)
        stats = {"mean": mean.astype(np.float64), "var": var.astype(np.float64)}
    dx, dscale, doffset, r4, r5 = run_op("FusedBatchNormGradV3", [dy, x, scale, r1, r2, r3], attrs)
    xs, ss, os_, d = (a.astype(np.float64) for a in (x, scale, offset, dy))

    def loss():
        return _bn_loss(xs, ss, os_, d, axis, **stats)

    np.testing.assert_allclose(dx, _numeric_grad(loss, xs), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(dscale, _numeric_grad(loss, ss), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(doffset, _numeric_grad(loss, os_), rtol=1e-3, atol=1e-4)
    assert r4.shape == r5.shape == (0,)


# -- local response normalization ----------------------------------------------------------------


def ref_lrn(x, radius, bias, alpha, beta):
    x = x.astype(np.float64)
    depth = x.shape[-1]
    out = np.empty_like(x)
    for d in range(depth):
        lo, hi = max(0, d - radius), min(depth, d + radius + 1)
        sqr = (x[..., lo:hi] ** 2).sum(axis=-1)
        out[..., d] = x[..., d] / (bias + alpha * sqr) ** beta
    return out


LRN_PARAMS = [(5, 1.0, 1.0, 0.5), (2, 2.0, 0.01, 0.75), (0, 1.0, 0.5, 1.0), (20, 1.0, 0.1, 0.5)]


@pytest.mark.parametrize("radius,bias,alpha,beta", LRN_PARAMS)
def test_lrn_and_grad(radius, bias, alpha, beta):
    x = RNG.standard_normal((2, 3, 2, 9)).astype(np.float32)
    attrs = {"depth_radius": radius, "bias": bias, "alpha": alpha, "beta": beta}
    (y,) = run_op("LRN", [x], attrs)
    np.testing.assert_allclose(y, ref_lrn(x, radius, bias, alpha, beta), rtol=1e-5, atol=1e-6)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    (dx,) = run_op("LRNGrad", [g, x, y], attrs)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    num = _numeric_grad(lambda: float((ref_lrn(x64, radius, bias, alpha, beta) * g64).sum()), x64)
    np.testing.assert_allclose(dx, num, rtol=1e-3, atol=1e-4)


def test_lrn_rejects_other_ranks():
    with pytest.raises(InvalidArgumentError, match="4-D"):
        run_op("LRN", [np.ones((2, 3), np.float32)])


# -- in_top_k -------------------------------------------------------------------------------------


def ref_in_top_k(pred, targets, k):
    out = []
    for row, t in zip(pred, targets):
        if not 0 <= t < len(row) or not np.isfinite(row).all():
            out.append(False)
            continue
        out.append(int((row > row[t]).sum()) < k)
    return np.array(out, bool)


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("tdtype", [np.int32, np.int64])
def test_in_top_k(k, tdtype):
    pred = np.array(
        [[1, 2, 2, 3], [1, np.nan, 2, 3], [1, 2, np.inf, 0], [5, 5, 5, 5], [0, 1, 2, 3]],
        np.float32,
    )
    targets = np.array([2, 0, 0, 3, 4], tdtype)  # ties count as in; 4 is out of range
    (got,) = run_op("InTopKV2", [pred, targets, np.array(k, tdtype)])
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ref_in_top_k(pred, targets, k))


def test_in_top_k_errors():
    pred = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match="must match"):
        run_op("InTopKV2", [pred, np.zeros(3, np.int32), np.int32(1)])
    with pytest.raises(InvalidArgumentError, match="k must be 0-D"):
        run_op("InTopKV2", [pred, np.zeros(2, np.int32), np.array([1], np.int32)])
