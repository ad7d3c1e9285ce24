"""CPU kernels of the pooling ops against direct-loop numpy references written here, in NHWC
and NCHW, SAME / VALID / EXPLICIT padding, overlapping windows, ties and empty batches."""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.testing import run_kernel
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(4321)


def run_op(op_type, inputs, attrs):
    """Builds one op on placeholders of the inputs' dtypes (unknown shapes) and runs its kernel."""
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


def out_size(size, k, stride, padding, explicit=(0, 0)):
    """(output size, pad before, pad after), from TensorFlow's documented rules."""
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + k - size, 0)
        return out, total // 2, total - total // 2
    before, after = explicit if padding == "EXPLICIT" else (0, 0)
    return (size + before + after - k) // stride + 1, before, after


def to_nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def to_nhwc(a):
    return a.transpose(0, 2, 3, 1)


def ref_pool(x, ksize, strides, padding, explicit=((0, 0), (0, 0))):
    """(max, average, max-gradient routing) references on an NHWC float64 input.

    Returns max pool, average pool (over positions inside the input), and for each output the
    (row, col) of the first maximum of its window in row-major order.
    """
    n, h, w, c = x.shape
    oh, pt, _ = out_size(h, ksize[0], strides[0], padding, explicit[0])
    ow, pl, _ = out_size(w, ksize[1], strides[1], padding, explicit[1])
    mx = np.full((n, oh, ow, c), -np.inf)
    avg = np.zeros((n, oh, ow, c))
    arg = np.zeros((n, oh, ow, c, 2), np.int64)
    for a in range(oh):
        for b in range(ow):
            count = 0
            for i in range(ksize[0]):
                for j in range(ksize[1]):
                    r, q = a * strides[0] + i - pt, b * strides[1] + j - pl
                    if not (0 <= r < h and 0 <= q < w):
                        continue
                    count += 1
                    v = x[:, r, q, :]
                    better = v > mx[:, a, b, :]
                    mx[:, a, b, :] = np.where(better, v, mx[:, a, b, :])
                    arg[:, a, b, :, 0] = np.where(better, r, arg[:, a, b, :, 0])
                    arg[:, a, b, :, 1] = np.where(better, q, arg[:, a, b, :, 1])
                    avg[:, a, b, :] += v
            avg[:, a, b, :] /= count
    return mx, avg, arg


def ref_pool_grads(x, ksize, strides, padding, dy, explicit=((0, 0), (0, 0))):
    n, h, w, c = x.shape
    oh, pt, _ = out_size(h, ksize[0], strides[0], padding, explicit[0])
    ow, pl, _ = out_size(w, ksize[1], strides[1], padding, explicit[1])
    _, _, arg = ref_pool(x, ksize, strides, padding, explicit)
    dmax = np.zeros(x.shape)
    davg = np.zeros(x.shape)
    for a in range(oh):
        for b in range(ow):
            cells = [
                (a * strides[0] + i - pt, b * strides[1] + j - pl)
                for i in range(ksize[0])
                for j in range(ksize[1])
            ]
            cells = [(r, q) for r, q in cells if 0 <= r < h and 0 <= q < w]
            for r, q in cells:
                davg[:, r, q, :] += dy[:, a, b, :] / len(cells)
            for bi in range(n):
                for ch in range(c):
                    r, q = arg[bi, a, b, ch]
                    dmax[bi, r, q, ch] += dy[bi, a, b, ch]
    return dmax, davg


POOLS = [
    ((2, 7, 6, 3), (2, 2), (2, 2), "SAME"),
    ((2, 7, 6, 3), (2, 2), (2, 2), "VALID"),
    ((2, 7, 6, 3), (3, 3), (1, 1), "SAME"),  # overlapping windows
    ((1, 8, 9, 2), (3, 2), (2, 3), "SAME"),
    ((1, 8, 9, 2), (3, 2), (2, 3), "VALID"),
    ((1, 4, 4, 2), (1, 1), (1, 1), "VALID"),
    ((0, 4, 4, 2), (2, 2), (2, 2), "SAME"),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", POOLS, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[3]}")
def test_pools_and_their_gradients(fmt, case):
    xs, ksize, strides, padding = case
    # Small integers make ties, which must route to the first maximum.
    x = RNG.integers(-2, 3, xs).astype(np.float32)
    want_max, want_avg, _ = ref_pool(x, ksize, strides, padding)
    dy = RNG.standard_normal(want_max.shape).astype(np.float32)
    want_dmax, want_davg = ref_pool_grads(x, ksize, strides, padding, dy)
    if fmt == "NHWC":
        attrs = {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1]}
        conv, back = (lambda a: a), (lambda a: a)
    else:
        attrs = {"ksize": [1, 1, *ksize], "strides": [1, 1, *strides]}
        conv, back = to_nchw, to_nhwc
    attrs.update(padding=padding, data_format=fmt)
    xin, dyin = conv(x), conv(dy)
    (mx,) = run_op("MaxPool", [xin], attrs)
    (avg,) = run_op("AvgPool", [xin], attrs)
    (dmax,) = run_op("MaxPoolGrad", [xin, mx, dyin], attrs)
    (davg,) = run_op("AvgPoolGrad", [np.array(xin.shape, np.int32), dyin], attrs)
    np.testing.assert_array_equal(back(mx), want_max.astype(np.float32))
    np.testing.assert_allclose(back(avg), want_avg, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(back(dmax), want_dmax, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(back(davg), want_davg, rtol=1e-6, atol=1e-6)


def test_max_pool_explicit_padding_and_integers():
    x = RNG.integers(-50, 50, (2, 5, 6, 3)).astype(np.int32)
    explicit = ((1, 1), (2, 0))
    attrs = {
        "ksize": [1, 3, 3, 1],
        "strides": [1, 2, 2, 1],
        "padding": "EXPLICIT",
        "explicit_paddings": [0, 0, 1, 1, 2, 0, 0, 0],
    }
    want, _, _ = ref_pool(x.astype(np.float64), (3, 3), (2, 2), "EXPLICIT", explicit)
    (got,) = run_op("MaxPool", [x], attrs)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want.astype(np.int32))
    dy = RNG.integers(-5, 5, want.shape).astype(np.int32)
    (dx,) = run_op("MaxPoolGrad", [x, got, dy], attrs)
    want_dx, _ = ref_pool_grads(x.astype(np.float64), (3, 3), (2, 2), "EXPLICIT", dy, explicit)
    np.testing.assert_array_equal(dx, want_dx.astype(np.int32))


def test_max_pool_grad_does_not_spread_nan_to_other_positions():
    x = np.array([[1.0, 5.0], [2.0, 3.0]], np.float32).reshape(1, 2, 2, 1)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    dy = np.full((1, 1, 1, 1), np.nan, np.float32)
    (dx,) = run_op("MaxPoolGrad", [x, np.full_like(dy, 5), dy], attrs)
    assert np.isnan(dx[0, 0, 1, 0])
    assert (dx.reshape(-1)[[0, 2, 3]] == 0).all()


def test_pool_errors():
    x = np.ones((1, 4, 4, 1), np.float32)
    with pytest.raises(InvalidArgumentError, match="batch and depth"):
        run_op("MaxPool", [x], {"ksize": [2, 1, 1, 1], "strides": [1, 1, 1, 1], "padding": "SAME"})
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    with pytest.raises(InvalidArgumentError, match="grad has shape"):
        run_op(
            "MaxPoolGrad",
            [x, np.ones((1, 2, 2, 1), np.float32), np.ones((1, 3, 2, 1), np.float32)],
            attrs,
        )
    with pytest.raises(InvalidArgumentError, match="orig_input_shape"):
        run_op("AvgPoolGrad", [np.array([1, 4, 4], np.int32), np.ones((1, 2, 2, 1))], attrs)


# -- MaxPoolGrad routing, as TensorFlow's CPU kernel chooses --------------------------------------


def ref_max_pool_grad_tf(x, ksize, strides, padding, dy):
    """Direct loops over NHWC: in each window, scanned row-major, the first position is taken
    and a later one replaces it only when strictly greater (so NaN wins only when first)."""
    n, h, w, c = x.shape
    oh, pt, _ = out_size(h, ksize[0], strides[0], padding)
    ow, pl, _ = out_size(w, ksize[1], strides[1], padding)
    dx = np.zeros(x.shape, dy.dtype)
    for b in range(n):
        for a in range(oh):
            for q in range(ow):
                for ch in range(c):
                    best = None
                    for i in range(ksize[0]):
                        for j in range(ksize[1]):
                            r, s = a * strides[0] + i - pt, q * strides[1] + j - pl
                            if (
                                0 <= r < h
                                and 0 <= s < w
                                and (best is None or x[b, best[0], best[1], ch] < x[b, r, s, ch])
                            ):
                                best = (r, s)
                    dx[b, best[0], best[1], ch] += dy[b, a, q, ch]
    return dx


MAX_POOL_GRADS = [
    ((5, 6, 8, 3), (2, 2), (2, 2), "SAME"),  # windows tile the input
    ((5, 7, 9, 3), (2, 2), (2, 2), "VALID"),  # tiles, and a last row and column in no window
    ((3, 6, 6, 2), (3, 2), (3, 2), "VALID"),
    ((3, 7, 6, 2), (2, 2), (2, 2), "SAME"),  # the last row of windows is clipped
    ((3, 6, 6, 2), (3, 3), (1, 1), "SAME"),  # overlapping windows
    ((2, 5, 5, 2), (1, 1), (1, 1), "VALID"),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, np.int32, np.uint8, rg.bfloat16.np]
)
@pytest.mark.parametrize("case", MAX_POOL_GRADS, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[3]}")
def test_max_pool_grad_routes_ties_to_the_first_maximum(case, dtype, fmt):
    xs, ksize, strides, padding = case
    # ReLU-like input: mostly zeros, and small integers, so most windows hold ties.
    x = np.maximum(RNG.integers(-3, 3, xs), 0).astype(dtype)
    oh = out_size(xs[1], ksize[0], strides[0], padding)[0]
    ow = out_size(xs[2], ksize[1], strides[1], padding)[0]
    dy = RNG.integers(1, 4, (xs[0], oh, ow, xs[3])).astype(dtype)  # sums exact in bfloat16
    want = ref_max_pool_grad_tf(x, ksize, strides, padding, dy)
    if fmt == "NHWC":
        attrs = {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1]}
        conv, back = (lambda a: a), (lambda a: a)
    else:
        attrs = {"ksize": [1, 1, *ksize], "strides": [1, 1, *strides]}
        conv, back = to_nchw, to_nhwc
    attrs.update(padding=padding, data_format=fmt)
    # orig_output is not read (TensorFlow recomputes the maxima): a wrong one changes nothing.
    bogus = np.full(conv(dy).shape, 7, dtype)
    (dx,) = run_op("MaxPoolGrad", [conv(x), bogus, conv(dy)], attrs)
    assert dx.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back(dx).astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("case", MAX_POOL_GRADS, ids=lambda c: f"x{c[0]}-k{c[1]}-s{c[2]}-{c[3]}")
def test_max_pool_grad_nan_and_infinite_inputs(case):
    xs, ksize, strides, padding = case
    x = RNG.integers(-2, 3, xs).astype(np.float32)
    x[RNG.random(xs) < 0.3] = np.nan
    x[RNG.random(xs) < 0.1] = -np.inf
    x[0] = np.nan  # whole windows of NaN
    oh = out_size(xs[1], ksize[0], strides[0], padding)[0]
    ow = out_size(xs[2], ksize[1], strides[1], padding)[0]
    dy = RNG.standard_normal((xs[0], oh, ow, xs[3])).astype(np.float32)
    dy[RNG.random(dy.shape) < 0.2] = np.inf  # an infinite gradient goes only where it is routed
    want = ref_max_pool_grad_tf(x, ksize, strides, padding, dy)
    attrs = {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1], "padding": padding}
    (dx,) = run_op("MaxPoolGrad", [x, np.zeros_like(dy), dy], attrs)
    # Overlapping windows add in another order than the loops: equal up to float32 rounding,
    # with NaN and infinities in the same places.
    np.testing.assert_allclose(dx, want, rtol=1e-6, atol=0)


def test_max_pool_grad_nan_cases_tensorflow_gives():
    """Outputs TensorFlow 2.21's CPU kernel gives for one 2×2 window with gradient 5."""
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    nan, inf = np.nan, np.inf
    cases = [
        ([nan, 1, 3, 2], [5, 0, 0, 0]),
        ([1, nan, 3, 2], [0, 0, 5, 0]),
        ([nan, nan, nan, nan], [5, 0, 0, 0]),
        ([-inf, -inf, -inf, -inf], [5, 0, 0, 0]),
        ([-inf, nan, -5, -inf], [0, 0, 5, 0]),
        ([2, 2, 3, 3], [0, 0, 5, 0]),
    ]
    for window, want in cases:
        x = np.array(window, np.float32).reshape(1, 2, 2, 1)
        dy = np.full((1, 1, 1, 1), 5, np.float32)
        (dx,) = run_op("MaxPoolGrad", [x, np.zeros_like(dy), dy], attrs)
        np.testing.assert_array_equal(dx.reshape(-1), want, err_msg=str(window))


def test_max_pool_grad_of_a_large_batch_matches_the_reference():
    """Enough images for the batch to be split between threads."""
    xs = (16, 8, 8, 4)
    x = np.maximum(RNG.integers(-2, 2, xs), 0).astype(np.float32)
    dy = RNG.standard_normal((16, 4, 4, 4)).astype(np.float32)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    (dx,) = run_op("MaxPoolGrad", [x, np.zeros_like(dy), dy], attrs)
    np.testing.assert_array_equal(dx, ref_max_pool_grad_tf(x, (2, 2), (2, 2), "SAME", dy))


# Stride-2 NCHW max pooling (the compiled loop's even/odd column path, 2- and 3-column windows)
# against the numpy path (RILL_JIT=0) bit for bit: odd and even widths, every padding, both
# float types, NaN, infinities and signed zeros.
NCHW_STRIDE_2 = [
    ((1, 3, 111, 111), (3, 3), "VALID", None),  # SqueezeNet's pools
    # 3×3 rows of 16 whole windows or more (a vector of float32 outputs at a time, the last
    # vector overlapping), with windows partly outside the rows and rows partly outside x
    ((1, 2, 40, 37), (3, 3), "EXPLICIT", ((1, 1), (1, 1))),
    ((1, 2, 35, 55), (3, 3), "SAME", None),
    ((2, 2, 20, 41), (3, 3), "VALID", None),
    ((2, 2, 12, 13), (3, 3), "SAME", None),
    ((1, 2, 10, 9), (3, 3), "EXPLICIT", ((1, 1), (1, 1))),  # ResNet's stem pool
    ((1, 2, 9, 12), (3, 3), "EXPLICIT", ((0, 1), (1, 0))),
    ((2, 2, 9, 10), (2, 2), "VALID", None),
    ((1, 2, 7, 11), (2, 2), "SAME", None),
    ((1, 2, 8, 9), (2, 3), "EXPLICIT", ((1, 0), (0, 1))),
    ((1, 1, 5, 3), (3, 3), "EXPLICIT", ((1, 1), (2, 2))),  # no interior window in a row
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", NCHW_STRIDE_2, ids=lambda c: f"x{c[0]}-k{c[1]}-{c[2]}")
def test_nchw_stride_2_max_pool_matches_the_numpy_path_bit_for_bit(case, dtype):
    pytest.importorskip("numba")
    from rill.exec.kernels import jit

    xs, ksize, padding, pads = case
    x = RNG.standard_normal(xs).astype(dtype)
    x[RNG.random(xs) < 0.05] = np.nan
    x[RNG.random(xs) < 0.05] = np.inf
    x[RNG.random(xs) < 0.05] = -np.inf
    x[RNG.random(xs) < 0.1] = 0.0
    x[RNG.random(xs) < 0.1] = -0.0
    attrs = {"ksize": [1, 1, *ksize], "strides": [1, 1, 2, 2], "padding": padding,
             "data_format": "NCHW"}  # fmt: skip
    if pads is not None:
        attrs["explicit_paddings"] = [0, 0, 0, 0, *pads[0], *pads[1]]
    (got,) = run_op("MaxPool", [x], attrs)
    old = jit.set_enabled(False)
    try:
        (want,) = run_op("MaxPool", [x], attrs)
    finally:
        jit.set_enabled(old)
    assert got.dtype == want.dtype and got.shape == want.shape
    # The values bit for bit; where a window holds zeros of both signs the sign kept may
    # differ (max_pool_nchw's documented exception), so zeros compare by value.
    zero = want == 0
    np.testing.assert_array_equal(got[~zero].view(np.uint8), want[~zero].view(np.uint8))
    assert np.array_equal(got[zero], want[zero])


@pytest.mark.parametrize("batch, pieces", [(1, 1), (2, 2)])
def test_nchw_max_pool_splits_from_batch_2(monkeypatch, batch, pieces):
    """Over the Python pool (no team: test_team_kernels covers the team's split at batch 1) a
    batch-1 NCHW max pooling of a few hundred KB stays on the calling thread (a split lost more
    than it saved); at batch 2 it splits over the threads; the values are the same."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op, jit, pool_kernels

    if jit.loops() is None:
        pytest.skip("compiled loops off (RILL_JIT=0)")
    x = RNG.standard_normal((batch, 32, 112, 112)).astype(np.float32)
    attrs = {"ksize": [1, 1, 3, 3], "strides": [1, 1, 2, 2], "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, 0, 0, 1, 1, 1, 1], "data_format": "NCHW"}  # fmt: skip
    (one,) = run_op("MaxPool", [x], attrs)
    made = []
    real = pool_kernels.parallel_for

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        made.append(min(2, max(1, n // grain)))  # the pieces it makes on two threads
        return real(n, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(pool_kernels, "parallel_for", watch)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(intra_op, "team", lambda: None)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    (got,) = run_op("MaxPool", [x], attrs)
    assert made == [pieces]
    assert np.array_equal(got, one)
