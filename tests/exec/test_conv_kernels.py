"""CPU kernels of the convolution ops against direct-loop numpy references written here
(float64, one output position at a time), in NHWC and NCHW, with SAME / VALID / EXPLICIT
padding, strides, dilations, groups, empty batches and the kernels' blocked and layout paths.
"""

from __future__ import annotations

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec.kernels import conv_kernels, conv_wide
from rill.exec.testing import run_kernel
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(1234)


def run_op(op_type, inputs, attrs):
    """Builds one op on placeholders of the inputs' dtypes (unknown shapes) and runs its kernel."""
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


# -- references -----------------------------------------------------------------------------------


def out_size(size, k, stride, dilation, padding, explicit=(0, 0)):
    """(output size, pad before, pad after), from TensorFlow's documented rules."""
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2, total - total // 2
    before, after = explicit if padding == "EXPLICIT" else (0, 0)
    return (size + before + after - eff) // stride + 1, before, after


def windows(h, w, kh, kw, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    oh, pt, pb = out_size(h, kh, strides[0], dilations[0], padding, explicit[0])
    ow, pl, pr = out_size(w, kw, strides[1], dilations[1], padding, explicit[1])
    return oh, ow, ((pt, pb), (pl, pr))


def window_slices(a, b, kh, kw, strides, dilations):
    sh, sw = strides
    dh, dw = dilations
    return (
        slice(a * sh, a * sh + (kh - 1) * dh + 1, dh),
        slice(b * sw, b * sw + (kw - 1) * dw + 1, dw),
    )


def ref_conv(x, w, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    """NHWC convolution (cross-correlation), grouped when w's input depth divides x's."""
    n, h, wd, c = x.shape
    kh, kw, ci, o = w.shape
    groups, og = c // ci, o // (c // ci)
    oh, ow, pads = windows(h, wd, kh, kw, strides, dilations, padding, explicit)
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    out = np.zeros((n, oh, ow, o))
    for a in range(oh):
        for b in range(ow):
            sh, sw = window_slices(a, b, kh, kw, strides, dilations)
            win = xp[:, sh, sw, :]
            for g in range(groups):
                out[:, a, b, g * og : (g + 1) * og] = np.tensordot(
                    win[..., g * ci : (g + 1) * ci], w[..., g * og : (g + 1) * og], axes=3
                )
    return out


def ref_conv_grads(x, w, dy, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    """(d input, d filter) of sum(conv(x, w) * dy), accumulated window by window."""
    n, h, wd, c = x.shape
    kh, kw, ci, o = w.shape
    groups, og = c // ci, o // (c // ci)
    oh, ow, pads = windows(h, wd, kh, kw, strides, dilations, padding, explicit)
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape)
    for a in range(oh):
        for b in range(ow):
            sh, sw = window_slices(a, b, kh, kw, strides, dilations)
            for g in range(groups):
                cs, os_ = slice(g * ci, (g + 1) * ci), slice(g * og, (g + 1) * og)
                d = dy[:, a, b, os_].astype(np.float64)
                dxp[:, sh, sw, cs] += np.tensordot(d, w[..., os_], axes=([1], [3]))
                dw[..., os_] += np.tensordot(xp[:, sh, sw, cs], d, axes=([0], [0]))
    (pt, _), (pl, _) = pads
    return dxp[:, pt : pt + h, pl : pl + wd], dw


def ref_depthwise(x, w, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    oh, ow, pads = windows(h, wd, kh, kw, strides, dilations, padding, explicit)
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    out = np.zeros((n, oh, ow, c, m))
    for a in range(oh):
        for b in range(ow):
            sh, sw = window_slices(a, b, kh, kw, strides, dilations)
            out[:, a, b] = np.einsum("nijc,ijcm->ncm", xp[:, sh, sw, :], w)
    return out.reshape(n, oh, ow, c * m)


def ref_depthwise_grads(x, w, dy, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    oh, ow, pads = windows(h, wd, kh, kw, strides, dilations, padding, explicit)
    xp = np.pad(x.astype(np.float64), ((0, 0), pads[0], pads[1], (0, 0)))
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape)
    dy5 = dy.reshape(n, oh, ow, c, m)
    for a in range(oh):
        for b in range(ow):
            sh, sw = window_slices(a, b, kh, kw, strides, dilations)
            dxp[:, sh, sw, :] += np.einsum("ncm,ijcm->nijc", dy5[:, a, b], w)
            dw += np.einsum("nijc,ncm->ijcm", xp[:, sh, sw, :], dy5[:, a, b])
    (pt, _), (pl, _) = pads
    return dxp[:, pt : pt + h, pl : pl + wd], dw


# -- helpers for both layouts ---------------------------------------------------------------------


def to_nchw(a):
    return np.ascontiguousarray(a.transpose(0, 3, 1, 2))


def to_nhwc(a):
    return a.transpose(0, 2, 3, 1)


def conv_attrs(fmt, strides, dilations, padding, explicit=((0, 0), (0, 0))):
    if fmt == "NHWC":
        s, d = [1, *strides, 1], [1, *dilations, 1]
        pads = [0, 0, *explicit[0], *explicit[1], 0, 0]
    else:
        s, d = [1, 1, *strides], [1, 1, *dilations]
        pads = [0, 0, 0, 0, *explicit[0], *explicit[1]]
    return {
        "strides": s,
        "dilations": d,
        "padding": padding,
        "explicit_paddings": pads if padding == "EXPLICIT" else [],
        "data_format": fmt,
    }


def tol(dtype):
    return {"rtol": 1e-10, "atol": 1e-10} if dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-4}


GEOMETRIES = [
    # (x shape NHWC, filter shape, strides, dilations, padding, explicit pads)
    ((2, 7, 6, 3), (3, 2, 3, 4), (1, 1), (1, 1), "SAME", None),
    ((2, 7, 6, 3), (3, 2, 3, 4), (1, 1), (1, 1), "VALID", None),
    ((2, 8, 9, 2), (4, 4, 2, 3), (2, 3), (1, 1), "SAME", None),  # odd SAME padding
    ((1, 9, 8, 3), (3, 3, 3, 2), (2, 1), (1, 1), "VALID", None),
    ((2, 9, 10, 2), (3, 2, 2, 2), (1, 1), (2, 3), "SAME", None),
    ((2, 9, 10, 2), (3, 2, 2, 2), (1, 2), (2, 1), "VALID", None),
    ((2, 6, 7, 3), (3, 3, 3, 2), (2, 1), (1, 2), "EXPLICIT", ((1, 2), (0, 3))),
    ((1, 28, 28, 1), (5, 5, 1, 4), (1, 1), (1, 1), "SAME", None),  # few channels: other layout
    ((3, 5, 5, 4), (1, 1, 4, 6), (1, 1), (1, 1), "VALID", None),  # 1x1: a plain GEMM
    ((3, 5, 5, 4), (1, 1, 4, 6), (2, 2), (1, 1), "SAME", None),
    ((0, 5, 5, 2), (3, 3, 2, 2), (1, 1), (1, 1), "SAME", None),  # empty batch
]


def _geometry_id(g):
    xs, ws, st, dl, pad, _ = g
    return f"x{xs}-w{ws}-s{st}-d{dl}-{pad}"


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=_geometry_id)
def test_conv2d_and_its_gradients(fmt, geom):
    xs, ws, strides, dilations, padding, explicit = geom
    explicit = explicit or ((0, 0), (0, 0))
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    want = ref_conv(x, w, strides, dilations, padding, explicit)
    dy = RNG.standard_normal(want.shape).astype(np.float32)
    want_dx, want_dw = ref_conv_grads(x, w, dy, strides, dilations, padding, explicit)
    attrs = conv_attrs(fmt, strides, dilations, padding, explicit)
    xin, dyin = (x, dy) if fmt == "NHWC" else (to_nchw(x), to_nchw(dy))
    back = (lambda a: a) if fmt == "NHWC" else to_nhwc
    (y,) = run_op("Conv2D", [xin, w], attrs)
    (dx,) = run_op("Conv2DBackpropInput", [np.array(xin.shape, np.int32), w, dyin], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [xin, np.array(ws, np.int32), dyin], attrs)
    assert y.dtype == dx.dtype == dw.dtype == np.float32
    np.testing.assert_allclose(back(y), want, **tol(np.float32))
    np.testing.assert_allclose(back(dx), want_dx, **tol(np.float32))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float32))


@pytest.mark.parametrize("block_bytes", [64, 4096])
@pytest.mark.parametrize("c", [1, 16])
def test_conv_blocks_smaller_than_one_image(monkeypatch, block_bytes, c):
    # Tiny blocks force the row-by-row blocking inside one image, in both patch layouts.
    monkeypatch.setattr(conv_kernels, "_BLOCK_BYTES", block_bytes)
    x = RNG.standard_normal((2, 9, 11, c)).astype(np.float32)
    w = RNG.standard_normal((3, 3, c, 5)).astype(np.float32)
    want = ref_conv(x, w, (2, 1), (1, 1), "SAME")
    dy = RNG.standard_normal(want.shape).astype(np.float32)
    want_dx, want_dw = ref_conv_grads(x, w, dy, (2, 1), (1, 1), "SAME")
    attrs = conv_attrs("NHWC", (2, 1), (1, 1), "SAME")
    np.testing.assert_allclose(run_op("Conv2D", [x, w], attrs)[0], want, **tol(np.float32))
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    np.testing.assert_allclose(dx, want_dx, **tol(np.float32))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float32))


WIDE_GEOMETRIES = [
    # stride-1 convolutions with an even output width and enough channels for the widened paths
    ((2, 6, 8, 5), (3, 3, 5, 6), "SAME", None),
    ((2, 7, 10, 4), (3, 5, 4, 3), "VALID", None),
    ((3, 5, 6, 4), (5, 5, 4, 7), "SAME", None),  # padding wider than the image
    ((2, 6, 7, 4), (3, 3, 4, 5), "EXPLICIT", ((2, 0), (0, 1))),  # asymmetric, width 7 -> 6
    ((2, 6, 8, 4), (3, 3, 4, 5), "EXPLICIT", ((1, 3), (3, 1))),  # pads past the kernel
    ((1, 4, 6, 3), (2, 4, 3, 2), "SAME", None),  # even kernel: SAME pads one more after
    ((2, 5, 6, 3), (2, 2, 3, 4), "EXPLICIT", ((3, 1), (5, 0))),  # whole windows in the padding
    ((1, 3, 4, 2), (3, 3, 2, 3), "EXPLICIT", ((0, 4), (1, 5))),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("geom", WIDE_GEOMETRIES, ids=lambda g: f"x{g[0]}-w{g[1]}-{g[2]}")
def test_widened_stride_one_convolutions(fmt, geom, monkeypatch):
    xs, ws, padding, explicit = geom
    explicit = explicit or ((0, 0), (0, 0))
    taken = []
    for name in ("_wide_forward", "_wide_backprop_filter", "_wide_backprop_input"):
        real = getattr(conv_kernels, name)

        def spy(*a, _real=real, _name=name):
            out = _real(*a)
            taken.append((_name, out is not None))
            return out

        monkeypatch.setattr(conv_kernels, name, spy)
    x = RNG.standard_normal(xs)
    w = RNG.standard_normal(ws)
    want = ref_conv(x, w, (1, 1), (1, 1), padding, explicit)
    dy = RNG.standard_normal(want.shape)
    want_dx, want_dw = ref_conv_grads(x, w, dy, (1, 1), (1, 1), padding, explicit)
    attrs = conv_attrs(fmt, (1, 1), (1, 1), padding, explicit)
    xin, dyin = (x, dy) if fmt == "NHWC" else (to_nchw(x), to_nchw(dy))
    back = (lambda a: a) if fmt == "NHWC" else to_nhwc
    (y,) = run_op("Conv2D", [xin, w], attrs)
    (dx,) = run_op("Conv2DBackpropInput", [np.array(xin.shape, np.int32), w, dyin], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [xin, np.array(ws, np.int32), dyin], attrs)
    np.testing.assert_allclose(back(y), want, **tol(np.float64))
    np.testing.assert_allclose(back(dx), want_dx, **tol(np.float64))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float64))
    # Forward and filter gradient take the widened path for NHWC output widths that are even,
    # the input gradient for even input widths (any padding).
    ow = want.shape[2]
    assert (("_wide_backprop_filter", True) in taken) == (ow % 2 == 0)
    assert (("_wide_forward", True) in taken) == (ow % 2 == 0 and fmt == "NHWC")
    assert (("_wide_backprop_input", True) in taken) == (xs[2] % 2 == 0)


def test_widened_convolutions_in_row_blocks(monkeypatch):
    """Patch blocks of a few rows of one image, and partial sums in blocks of a few rows."""
    monkeypatch.setattr(conv_wide, "_BLOCK_BYTES", 4096)
    monkeypatch.setattr(conv_wide, "_ROW_BLOCK", 5)
    x = RNG.standard_normal((2, 9, 12, 8)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 8, 6)).astype(np.float32)
    want = ref_conv(x, w, (1, 1), (1, 1), "SAME")
    dy = RNG.standard_normal(want.shape).astype(np.float32)
    want_dx, want_dw = ref_conv_grads(x, w, dy, (1, 1), (1, 1), "SAME")
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "SAME")
    np.testing.assert_allclose(run_op("Conv2D", [x, w], attrs)[0], want, **tol(np.float32))
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    np.testing.assert_allclose(dx, want_dx, **tol(np.float32))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(25, 1000, 32), (7, 500, 3), (3, 50, 2), (70, 400, 64)])
def test_long_product(monkeypatch, dtype, shape):
    """The filter gradient's product over pieces of its inner dimension (with a remainder, too
    few pieces to split, and a result too large to split) equals one matmul."""
    monkeypatch.setattr(conv_kernels, "_PIECE_MACS", 2000)
    k, m, o = shape
    a = RNG.standard_normal((m, k)).astype(dtype).T  # a transposed view, as patches give
    b = RNG.standard_normal((m, o)).astype(dtype)
    out = np.full((k, o), np.nan, dtype)
    conv_kernels._long_product(a, b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, **tol(dtype))
    out[...] = np.nan
    conv_kernels._long_product(np.ascontiguousarray(a), b, out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, **tol(dtype))


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "geom",
    [
        ((3, 13, 11, 1), (5, 5, 1, 6), (1, 1), "SAME"),  # channels-first patches, odd width
        ((2, 12, 9, 3), (3, 3, 3, 4), (2, 1), "VALID"),  # row-major patches
        ((2, 10, 10, 2), (3, 2, 2, 5), (1, 2), "SAME"),
    ],
    ids=str,
)
def test_small_filter_matrices_in_small_blocks(monkeypatch, fmt, dtype, geom):
    """Few-channel convolutions take small patch blocks and split filter-gradient products;
    tiny sizes here make several blocks of whole images and of rows, and pieces with a rest."""
    monkeypatch.setattr(conv_kernels, "_SMALL_BLOCK_BYTES", 3000)
    monkeypatch.setattr(conv_kernels, "_PIECE_MACS", 500)
    xs, ws, strides, padding = geom
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    want = ref_conv(x, w, strides, (1, 1), padding)
    dy = RNG.standard_normal(want.shape).astype(dtype)
    want_dx, want_dw = ref_conv_grads(x, w, dy, strides, (1, 1), padding)
    attrs = conv_attrs(fmt, strides, (1, 1), padding)
    xin, dyin = (x, dy) if fmt == "NHWC" else (to_nchw(x), to_nchw(dy))
    back = (lambda a: a) if fmt == "NHWC" else to_nhwc
    (y,) = run_op("Conv2D", [xin, w], attrs)
    (dx,) = run_op("Conv2DBackpropInput", [np.array(xin.shape, np.int32), w, dyin], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [xin, np.array(ws, np.int32), dyin], attrs)
    assert y.dtype == dx.dtype == dw.dtype == dtype
    np.testing.assert_allclose(back(y), want, **tol(dtype))
    np.testing.assert_allclose(back(dx), want_dx, **tol(dtype))
    np.testing.assert_allclose(dw, want_dw, **tol(dtype))


def test_grouped_conv2d():
    x = RNG.standard_normal((2, 5, 6, 4))
    w = RNG.standard_normal((3, 3, 2, 6))  # 2 groups of 3 output channels
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "SAME")
    want = ref_conv(x, w, (1, 1), (1, 1), "SAME")
    dy = RNG.standard_normal(want.shape)
    want_dx, want_dw = ref_conv_grads(x, w, dy, (1, 1), (1, 1), "SAME")
    np.testing.assert_allclose(run_op("Conv2D", [x, w], attrs)[0], want, **tol(np.float64))
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    np.testing.assert_allclose(dx, want_dx, **tol(np.float64))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float64))


@pytest.mark.parametrize("width", [5, 6])  # the general and the widened path
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32])
def test_conv2d_dtypes(dtype, width):
    x = RNG.integers(-3, 4, (2, 5, width, 2)).astype(dtype)
    w = RNG.integers(-3, 4, (3, 3, 2, 3)).astype(dtype)
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "SAME")
    (y,) = run_op("Conv2D", [x, w], attrs)
    assert y.dtype == dtype
    # Small integers: every dtype represents the exact result.
    np.testing.assert_array_equal(y.astype(np.float64), ref_conv(x, w, (1, 1), (1, 1), "SAME"))
    if dtype == np.int32:
        return  # the gradient ops are for floating types only
    dy = RNG.integers(-3, 4, y.shape).astype(dtype)
    want_dx, want_dw = ref_conv_grads(x, w, dy, (1, 1), (1, 1), "SAME")
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    assert dx.dtype == dw.dtype == dtype
    np.testing.assert_array_equal(dx.astype(np.float64), want_dx)
    np.testing.assert_array_equal(dw.astype(np.float64), want_dw)


def test_conv2d_backprop_input_two_sizes():
    # input_sizes may give only the spatial size; batch and depth come from the other inputs.
    w = RNG.standard_normal((3, 3, 2, 4))
    dy = RNG.standard_normal((2, 3, 3, 4))
    attrs = conv_attrs("NHWC", (2, 2), (1, 1), "SAME")
    (dx,) = run_op("Conv2DBackpropInput", [np.array([6, 5], np.int32), w, dy], attrs)
    x = np.zeros((2, 6, 5, 2))
    np.testing.assert_allclose(
        dx, ref_conv_grads(x, w, dy, (2, 2), (1, 1), "SAME")[0], **tol(np.float64)
    )


def test_conv2d_run_time_errors():
    x = np.ones((1, 5, 5, 2), np.float32)
    attrs = conv_attrs("NHWC", (1, 1), (1, 1), "VALID")
    with pytest.raises(InvalidArgumentError, match="multiple of the filter's input depth"):
        run_op("Conv2D", [x, np.ones((3, 3, 3, 2), np.float32)], attrs)
    with pytest.raises(InvalidArgumentError, match="negative"):
        run_op("Conv2D", [x, np.ones((7, 7, 2, 2), np.float32)], attrs)
    bad = dict(attrs, strides=[2, 1, 1, 1])
    with pytest.raises(InvalidArgumentError, match="batch and depth"):
        run_op("Conv2D", [x, np.ones((3, 3, 2, 2), np.float32)], bad)
    w = np.ones((3, 3, 2, 4), np.float32)
    dy = np.ones((1, 2, 3, 4), np.float32)  # VALID on 5x5 gives 3x3
    with pytest.raises(InvalidArgumentError, match="out_backprop"):
        run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    with pytest.raises(InvalidArgumentError, match="out_backprop"):
        run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    with pytest.raises(InvalidArgumentError, match="filter_sizes"):
        run_op("Conv2DBackpropFilter", [x, np.array([3, 3, 2], np.int32), dy], attrs)


def test_conv2d_window_larger_than_input_gives_an_empty_output():
    # The kernels' rule (TensorFlow's): (in - window + stride) / stride, truncated toward zero.
    x = np.ones((1, 4, 4, 1), np.float32)
    (y,) = run_op(
        "Conv2D",
        [x, np.ones((5, 5, 1, 1), np.float32)],
        conv_attrs("NHWC", (1, 1), (1, 1), "VALID"),
    )
    assert y.shape == (1, 0, 0, 1)


# -- depthwise ------------------------------------------------------------------------------------

DEPTHWISE = [
    ((2, 7, 6, 3), (3, 2, 3, 2), (1, 1), (1, 1), "SAME", None),
    ((2, 8, 9, 2), (4, 4, 2, 1), (2, 3), (1, 1), "VALID", None),
    ((2, 9, 10, 2), (3, 2, 2, 3), (1, 1), (2, 3), "SAME", None),
    ((2, 6, 7, 3), (3, 3, 3, 2), (2, 1), (1, 1), "EXPLICIT", ((1, 2), (0, 3))),
    ((0, 5, 5, 2), (3, 3, 2, 2), (1, 1), (1, 1), "SAME", None),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("geom", DEPTHWISE, ids=_geometry_id)
def test_depthwise_conv2d_and_its_gradients(fmt, geom):
    xs, ws, strides, dilations, padding, explicit = geom
    explicit = explicit or ((0, 0), (0, 0))
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    want = ref_depthwise(x, w, strides, dilations, padding, explicit)
    dy = RNG.standard_normal(want.shape).astype(np.float32)
    want_dx, want_dw = ref_depthwise_grads(x, w, dy, strides, dilations, padding, explicit)
    attrs = conv_attrs(fmt, strides, dilations, padding, explicit)
    xin, dyin = (x, dy) if fmt == "NHWC" else (to_nchw(x), to_nchw(dy))
    back = (lambda a: a) if fmt == "NHWC" else to_nhwc
    (y,) = run_op("DepthwiseConv2dNative", [xin, w], attrs)
    sizes = np.array(xin.shape, np.int32)
    (dx,) = run_op("DepthwiseConv2dNativeBackpropInput", [sizes, w, dyin], attrs)
    (dw,) = run_op(
        "DepthwiseConv2dNativeBackpropFilter", [xin, np.array(ws, np.int32), dyin], attrs
    )
    np.testing.assert_allclose(back(y), want, **tol(np.float32))
    np.testing.assert_allclose(back(dx), want_dx, **tol(np.float32))
    np.testing.assert_allclose(dw, want_dw, **tol(np.float32))


def test_depthwise_depth_mismatch():
    with pytest.raises(InvalidArgumentError, match="depth"):
        run_op(
            "DepthwiseConv2dNative",
            [np.ones((1, 4, 4, 3), np.float32), np.ones((2, 2, 2, 1), np.float32)],
            conv_attrs("NHWC", (1, 1), (1, 1), "SAME"),
        )
