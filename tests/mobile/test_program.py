"""Whole-subgraph float32 programs (rill.mobile.program): every compiled kernel against the
per-operator numpy path on random shapes and awkward values (padding, strides, dilation, fused
activations, broadcasting, NaN and ±inf), the benchmark models against LiteRT's reference
outputs, the transparent fallback, and the switches that turn programs off."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from mobile.kernel_testing import RNG, fconst, fp
from mobile.tflite_builder import OPTIONS, T, build, single_op
from mobile.tflite_builder import Op as BOp

from rill.mobile import program
from rill.mobile.interpreter import Interpreter
from rill.mobile.kernels import jit

pytest.importorskip("numba")

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "fixtures" / "tflite" / "models"
SAME, VALID = 0, 1
OPTIONS.setdefault("GELU", "GeluOptions")
OPTIONS.setdefault("DIV", "DivOptions")


pytestmark = pytest.mark.usefixtures("programs_on")


def _run(model: bytes, feeds, on: bool):
    old = program.set_enabled(on)
    try:
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), feeds):
            it.set_tensor(d["index"], x)
        it.invoke()
        it.invoke()  # a second run on the same arena gives the same result
        return it, [it.get_tensor(d["index"]) for d in it.get_output_details()]
    finally:
        program.set_enabled(old)


def _close(got, want):
    atol = 1e-5 * max(float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)), 1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)


def _check(model: bytes, feeds, compiled: bool = True):
    """The program's outputs agree with the per-operator path's (1e-5 relative, NaN where it
    has NaN); `compiled`: whether the model must have become a program."""
    plain_it, plain = _run(model, feeds, False)
    assert plain_it._main.program is None
    it, got = _run(model, feeds, True)
    assert (it._main.program is not None) == compiled
    for g, w in zip(got, plain):
        assert g.shape == w.shape and g.dtype == w.dtype
        _close(g, w)
    return got


def _single(name, inputs, outputs, options=None, version=1, feeds=None, compiled=True):
    model = single_op(name, inputs, outputs, options, version)
    if feeds is None:
        feeds = [RNG.standard_normal(t.shape).astype(np.float32) * 2
                 for t in inputs if t is not None and t.data is None]  # fmt: skip
    return _check(model, feeds, compiled)


def _w(*shape):
    return fconst(RNG.standard_normal(shape).astype(np.float32))


def _out(n, h, w, k, s, d, pad):
    eff = (k - 1) * d + 1
    return -(-h // s) if pad == SAME else (h - eff) // s + 1


# -- convolutions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,h,w,ci,co,kh,kw,s,d,pad,act,bias",
    [
        (1, 7, 6, 5, 8, 1, 1, 1, 1, SAME, 0, True),  # 1x1: the product path
        (2, 5, 5, 3, 7, 1, 1, 1, 1, VALID, 3, False),  # odd rows and columns, no bias
        (1, 9, 8, 3, 16, 3, 3, 2, 1, SAME, 3, True),  # MobileNet's stem
        (1, 49, 10, 1, 16, 10, 4, 2, 1, SAME, 1, True),  # the keyword-spotting stem
        (1, 8, 9, 4, 6, 3, 3, 1, 2, SAME, 2, True),  # dilation
        (2, 8, 7, 2, 5, 3, 2, 2, 1, VALID, 1, True),
        (1, 4, 4, 3, 4, 1, 1, 2, 1, VALID, 0, True),  # 1x1 with a stride: gathered
        # few input channels, a multiple of 8 output channels: tap by tap, no gathered windows
        (1, 12, 9, 1, 8, 5, 3, 2, 1, SAME, 3, True),  # blocks of 8 channels
        (2, 9, 11, 2, 32, 3, 4, 1, 2, SAME, 2, False),  # blocks of 16, dilation, no bias
        (1, 10, 7, 1, 24, 4, 2, 3, 1, VALID, 0, True),  # 3 blocks of 8, stride 3
        (1, 3, 3, 2, 16, 5, 5, 1, 1, SAME, 1, True),  # windows wider than the input
        # direct tiles: 8 channels then 4 one by one; none in tiles; tiles across batches
        (1, 9, 7, 1, 12, 3, 3, 2, 1, SAME, 3, True),
        (2, 5, 6, 2, 5, 2, 3, 1, 1, SAME, 2, True),
        (3, 5, 3, 1, 40, 3, 2, 1, 1, VALID, 1, False),  # 3 x 3 x 2 = 18 pixels: 4 tiles + 2
    ],
)
def test_conv2d(n, h, w, ci, co, kh, kw, s, d, pad, act, bias):
    oh, ow = _out(n, h, w, kh, s, d, pad), _out(n, w, h, kw, s, d, pad)
    ins = [fp(n, h, w, ci), _w(co, kh, kw, ci), _w(co) if bias else None]
    opts = {"padding": pad, "stride_h": s, "stride_w": s, "dilation_h_factor": d,
            "dilation_w_factor": d, "fused_activation_function": act}  # fmt: skip
    _single("CONV_2D", ins, [fp(n, oh, ow, co)], opts)


@pytest.mark.parametrize("ci,co,code", [(1, 16, program.OP_CONV_TAPS), (2, 8, program.OP_CONV_TAPS),
                                         (3, 16, program.OP_CONV_TAPS), (8, 16, program.OP_CONV_TAPS),
                                         (9, 16, program.OP_CONV),
                                         (1, 12, program.OP_CONV_TAPS)])  # fmt: skip
def test_which_convolutions_run_tap_by_tap(ci, co, code):
    opts = {"padding": SAME, "stride_h": 2, "stride_w": 2, "fused_activation_function": 1}
    model = single_op(
        "CONV_2D", [fp(1, 9, 6, ci), _w(co, 4, 3, ci), _w(co)], [fp(1, 5, 3, co)], opts
    )
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    assert it._main.program.prog[0] == code


@pytest.mark.parametrize(
    "n,h,w,ci,mult,k,s,d,pad,act",
    [
        (1, 9, 9, 16, 1, 3, 1, 1, SAME, 3),  # interior 3x3 pass and borders
        (1, 10, 7, 8, 1, 3, 2, 1, SAME, 1),
        (2, 6, 6, 5, 1, 3, 1, 1, VALID, 0),
        (1, 7, 8, 3, 2, 3, 1, 1, SAME, 0),  # a channel multiplier
        (1, 9, 9, 4, 1, 3, 1, 2, SAME, 2),  # dilation
        (1, 6, 5, 6, 1, 5, 2, 1, SAME, 3),  # a 5x5 window
        (2, 7, 9, 8, 1, 5, 1, 1, SAME, 0),  # 5 taps a row, no bias below
        (1, 5, 14, 16, 1, 3, 1, 1, SAME, 3),  # row passes (12+ columns, < 32 channels)
        (2, 4, 13, 8, 1, 5, 1, 1, SAME, 0),  # row passes, 5 taps a row, no bias below
        (1, 5, 4, 40, 1, 3, 1, 1, SAME, 1),  # 40 channels: per pixel
        (1, 3, 3, 4, 1, 3, 1, 1, SAME, 0),  # no column without padding
        (1, 7, 7, 21, 1, 3, 2, 1, SAME, 3),  # interior tiles: 16 channels, then 5 one by one
        (1, 8, 6, 56, 1, 3, 1, 1, VALID, 0),  # interior tiles: 3 x 16 channels, then 8
        # small inputs copied, padded, then direct tiles of 4 pixels (the last one repeated):
        (1, 25, 5, 32, 1, 3, 1, 1, SAME, 1),  # the keyword-spotting layers: 3x3 tiles
        (2, 5, 3, 24, 1, 3, 1, 1, SAME, 3),  # 16 + 8 channels, 15 pixels a batch
        (1, 6, 7, 20, 1, 3, 2, 2, SAME, 2),  # 16 + 4 one by one, stride and dilation
        (3, 4, 4, 16, 1, 5, 1, 1, SAME, 0),  # a 5x5 window: the general tile
        (1, 5, 6, 8, 1, 4, 1, 1, SAME, 1),  # an even window (padding after > before)
        # in place, in boxes: the inside outputs, then each border row and column on its taps
        (1, 9, 8, 40, 1, 5, 1, 1, SAME, 3),  # 5x5: two border rows a side, other tap ranges
        (2, 10, 9, 48, 1, 3, 2, 1, SAME, 1),  # stride 2: padding below and right only
        (1, 11, 12, 36, 1, 3, 1, 2, SAME, 0),  # dilation 2; 16 + 16 + 4 channels
        (1, 13, 14, 8, 1, 3, 1, 1, SAME, 2),  # wide enough not to be copied: 8-channel tiles
        (1, 4, 12, 33, 1, 5, 1, 1, SAME, 0),  # no row inside: every row a border row
        (1, 4, 4, 40, 1, 7, 1, 1, SAME, 3),  # every window wider than the input
        (1, 3, 3, 40, 1, 3, 1, 1, SAME, 1),  # sides below 4: one by one
    ],
)
def test_depthwise(n, h, w, ci, mult, k, s, d, pad, act):
    co = ci * mult
    oh, ow = _out(n, h, w, k, s, d, pad), _out(n, w, h, k, s, d, pad)
    opts = {"padding": pad, "stride_h": s, "stride_w": s, "depth_multiplier": mult,
            "dilation_h_factor": d, "dilation_w_factor": d, "fused_activation_function": act}  # fmt: skip
    _single("DEPTHWISE_CONV_2D", [fp(n, h, w, ci), _w(1, k, k, co), _w(co) if n == 1 else None],
            [fp(n, oh, ow, co)], opts)  # fmt: skip


@pytest.mark.parametrize(
    "shape,k,pad,copied",
    [((1, 25, 5, 16), 3, SAME, True), ((1, 6, 7, 20), 3, SAME, True), ((1, 25, 5, 40), 3, SAME, False),
     ((1, 14, 14, 16), 3, SAME, False), ((1, 5, 5, 16), 3, VALID, False)],
)  # fmt: skip
def test_which_depthwise_inputs_are_copied_padded(shape, k, pad, copied):
    """Small inputs with few channels and padding are copied, padded, to the scratch area (the
    row's last parameter) and run in direct tiles; the rest run in place."""
    n, h, w, c = shape
    oh, ow = _out(n, h, w, k, 1, 1, pad), _out(n, w, h, k, 1, 1, pad)
    opts = {"padding": pad, "stride_h": 1, "stride_w": 1, "depth_multiplier": 1,
            "fused_activation_function": 0}  # fmt: skip
    model = single_op("DEPTHWISE_CONV_2D", [fp(*shape), _w(1, k, k, c), _w(c)],
                      [fp(n, oh, ow, c)], opts)  # fmt: skip
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    prog = it._main.program.prog
    assert prog[0] == program.OP_DW
    assert (prog[2 + prog[1] - 1] >= 0) == copied


@pytest.mark.parametrize("bias,act,shape,keep", [(True, 0, (3, 20), False), (False, 1, (2, 5, 7), True),
                                                 (True, 3, (1, 1, 1, 32), False)])  # fmt: skip
def test_fully_connected(bias, act, shape, keep):
    k, n = shape[-1], 9
    out = (*shape[:-1], n) if keep else (int(np.prod(shape[:-1])), n)
    opts = {"fused_activation_function": act, "keep_num_dims": keep}
    _single("FULLY_CONNECTED", [fp(*shape), _w(n, k), _w(n) if bias else None], [fp(*out)], opts,
            version=5 if keep else 1)  # fmt: skip


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 9])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 24, 31, 40])
def test_product_tiles_and_their_edges(rows, n):
    """The product's 4x16 and 4x8 register tiles, the single-row tiles and the last N % 8
    columns, on every split of rows and output channels."""
    k = 13
    _single("FULLY_CONNECTED", [fp(rows, k), _w(n, k), _w(n)], [fp(rows, n)],
            {"fused_activation_function": 0})  # fmt: skip


def test_product_tiles_carry_nan_and_infinities():
    x = RNG.standard_normal((6, 12)).astype(np.float32)
    x[0, 3], x[2, 0], x[5, 11] = np.nan, np.inf, -np.inf
    got = _single("FULLY_CONNECTED", [fp(6, 12), _w(24, 12), _w(24)], [fp(6, 24)],
                  {"fused_activation_function": 0}, feeds=[x])  # fmt: skip
    assert np.isnan(got[0][0]).all() and not np.isfinite(got[0][2]).any()
    assert np.isfinite(got[0][[1, 3, 4]]).all()


# -- elementwise ------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE", "MAXIMUM",
                                "MINIMUM"])  # fmt: skip
@pytest.mark.parametrize("a,b", [((2, 3, 4, 5), (2, 3, 4, 5)), ((1, 16, 32), (1, 16, 1)),
                                 ((1, 16, 1), (1, 1, 32)), ((3, 1, 5), ()), ((4,), (3, 1)),
                                 ((1, 1), (2, 6))])  # fmt: skip
def test_binary_broadcasting(op, a, b):
    out = np.broadcast_shapes(a, b)
    opts = {"fused_activation_function": 3} if op in ("ADD", "MUL") else None
    version = 2 if op in ("MAXIMUM", "MINIMUM", "SUB", "DIV") else 1
    feeds = [RNG.standard_normal(a).astype(np.float32) * 4,
             RNG.standard_normal(b).astype(np.float32) * 4]  # fmt: skip
    _single(op, [fp(*a), fp(*b)], [fp(*out)], opts, version, feeds)


@pytest.mark.parametrize("a,b,dims", [((2, 3, 4, 5), (2, 3, 4, 5), [1, 1, 1, 120]),
                                      ((3, 4, 5), (), [1, 1, 1, 60]),
                                      ((1, 16, 32), (1, 16, 1), [1, 1, 16, 32]),
                                      ((2, 3, 4), (2, 1, 4), [1, 2, 3, 4]),
                                      ((2, 3, 4), (1, 3, 4), [1, 2, 1, 12])])  # fmt: skip
def test_binary_rows_join_axes_both_operands_run_through(a, b, dims):
    """Adjacent axes both operands read contiguously (or both broadcast) are one axis of the
    row, so the inner loop is long; an axis one operand broadcasts stays apart."""
    out = np.broadcast_shapes(a, b)
    model = single_op("ADD", [fp(*a), fp(*b)], [fp(*out)])
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    prog = it._main.program.prog
    assert prog[0] == program.OP_BINARY
    assert list(prog[7:11]) == dims
    feeds = [RNG.standard_normal(a).astype(np.float32), RNG.standard_normal(b).astype(np.float32)]
    _single("ADD", [fp(*a), fp(*b)], [fp(*out)], feeds=feeds)


def test_binary_with_a_constant_operand_and_special_values():
    x = np.array([[np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 7.0]], np.float32)
    c = fconst(np.array([[1.0, np.nan, 2.0, -0.0, np.inf, -3.0, 0.0, 0.5]], np.float32))
    for op in ("ADD", "MUL", "MAXIMUM", "MINIMUM", "DIV", "SQUARED_DIFFERENCE"):
        got = _single(op, [fp(1, 8), c], [fp(1, 8)], None, 2 if op == "DIV" else 1, [x])[0]
        assert np.isnan(got[0, 0])  # NaN stays NaN through every operation and maximum


@pytest.mark.parametrize("op", ["NEG", "RSQRT", "SQRT", "EXP", "LOG", "ABS", "SQUARE", "TANH",
                                "LOGISTIC", "RELU", "RELU6", "GELU"])  # fmt: skip
def test_unary(op):
    x = RNG.standard_normal((3, 5, 7)).astype(np.float32) * 3
    x.flat[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30]
    if op in ("RSQRT", "SQRT", "LOG"):
        x = np.abs(x) + np.float32(0.01)
        x.flat[:3] = [np.nan, np.inf, 0.0]
    got = _single(op, [fp(3, 5, 7)], [fp(3, 5, 7)], feeds=[x])[0]
    assert np.isnan(got.flat[0])


def test_gelu_approximate():
    x = RNG.standard_normal((2, 64)).astype(np.float32) * 3
    _single("GELU", [fp(2, 64)], [fp(2, 64)], {"approximate": True}, feeds=[x])


def test_relu_keeps_nan_and_clamps_infinities():
    x = np.array([[np.nan, np.inf, -np.inf, -1.0, 7.0]], np.float32)
    got = _single("RELU6", [fp(1, 5)], [fp(1, 5)], feeds=[x])[0]
    np.testing.assert_array_equal(got, [[np.nan, 6.0, 0.0, 0.0, 6.0]])


# -- reductions, shapes, products, pools --------------------------------------------------------------


@pytest.mark.parametrize("shape,axes,keep", [((1, 3, 3, 40), (1, 2), False), ((1, 16, 32), (2,), True),
                                             ((2, 3, 4), (-1,), False), ((2, 3, 4), (0, 1), True)])  # fmt: skip
def test_mean(shape, axes, keep):
    out = tuple(1 if i in {a % len(shape) for a in axes} else d for i, d in enumerate(shape))
    if not keep:
        out = tuple(d for i, d in enumerate(shape) if i not in {a % len(shape) for a in axes})
    axes_t = T((len(axes),), np.int32, np.array(axes, np.int32))
    _single("MEAN", [fp(*shape), axes_t], [fp(*out)], {"keep_dims": keep})


def test_mean_over_axes_apart_falls_back():
    axes_t = T((2,), np.int32, np.array([0, 2], np.int32))
    _single("MEAN", [fp(2, 3, 4), axes_t], [fp(3)], {"keep_dims": False}, compiled=False)


@pytest.mark.parametrize("beta,shape", [(1.0, (2, 16, 16)), (0.5, (3, 10)), (2.0, (1, 1, 130))])
def test_softmax(beta, shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 5
    got = _single("SOFTMAX", [fp(*shape)], [fp(*shape)], {"beta": beta}, feeds=[x])[0]
    np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-5)


def test_softmax_special_values():
    x = np.array([[np.inf, 1.0, 2.0], [np.nan, 1.0, 0.0], [-np.inf, 0.0, 0.0],
                  [1.0, np.nan, 0.0], [0.0, 2.0, np.nan]], np.float32)  # fmt: skip
    got = _single("SOFTMAX", [fp(5, 3)], [fp(5, 3)], {"beta": 1.0}, feeds=[x])[0]
    assert np.isnan(got[1:2]).all() and np.isnan(got[3:]).all()  # a NaN anywhere: a NaN row


@pytest.mark.parametrize("shape,perm", [((1, 16, 2, 16), (0, 2, 1, 3)), ((3, 4, 5), (2, 0, 1)),
                                        ((6, 7), (1, 0)), ((2, 3, 4, 5), (3, 2, 1, 0))])  # fmt: skip
def test_transpose(shape, perm):
    out = tuple(shape[p] for p in perm)
    perm_t = T((len(perm),), np.int32, np.array(perm, np.int32))
    _single("TRANSPOSE", [fp(*shape), perm_t], [fp(*out)])


@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
@pytest.mark.parametrize(
    "batch_a,batch_b", [((2,), (2,)), ((1, 2), (1, 2)), ((3,), ()), ((), (3,))]
)
def test_batch_matmul(adj_x, adj_y, batch_a, batch_b):
    r, k, c = 5, 7, 6
    a = (*batch_a, *((k, r) if adj_x else (r, k)))
    b = (*batch_b, *((c, k) if adj_y else (k, c)))
    out = (*np.broadcast_shapes(batch_a, batch_b), r, c)
    _single("BATCH_MATMUL", [fp(*a), fp(*b)], [fp(*out)], {"adj_x": adj_x, "adj_y": adj_y})


@pytest.mark.parametrize("kind", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("h,w,k,s,pad,act", [(25, 5, 25, 25, VALID, 0), (7, 8, 3, 2, SAME, 3),
                                             (6, 6, 2, 2, VALID, 1), (5, 7, 3, 1, SAME, 0)])  # fmt: skip
def test_pool(kind, h, w, k, s, pad, act):
    oh, ow = _out(1, h, w, k, s, 1, pad), _out(1, w, h, k, s, 1, pad)
    opts = {"padding": pad, "stride_h": s, "stride_w": s if k != 25 else 5, "filter_height": k,
            "filter_width": k if k != 25 else 5, "fused_activation_function": act}  # fmt: skip
    if k == 25:
        ow = 1
    x = RNG.standard_normal((2, h, w, 6)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    _single(kind, [fp(2, h, w, 6)], [fp(2, oh, ow, 6)], opts, feeds=[x])


# -- whole models, fallback, switches ------------------------------------------------------------------


def _chain_model(extra: str | None) -> bytes:
    """conv 1x1 → reshape → (extra operator) → softmax: a chain of supported operators, with
    one unsupported operator in it when `extra` names one."""
    ts = [fp(1, 4, 4, 3), _w(8, 1, 1, 3), _w(8), fp(1, 4, 4, 8),
          T((2,), np.int32, np.array([16, 8], np.int32)), fp(16, 8), fp(16, 8), fp(16, 8)]  # fmt: skip
    ops = [BOp("CONV_2D", [0, 1, 2], [3], {"padding": SAME, "stride_h": 1, "stride_w": 1,
                                           "fused_activation_function": 1}),  # fmt: skip
           BOp("RESHAPE", [3, 4], [5], {"new_shape": [16, 8]})]  # fmt: skip
    if extra:
        ops.append(BOp(extra, [5], [6]))
    else:
        ops.append(BOp("RELU", [5], [6]))
    ops.append(BOp("SOFTMAX", [6], [7], {"beta": 1.0}))
    return build(ts, ops, [0], [7])


def test_a_chain_of_operators_compiles():
    x = RNG.standard_normal((1, 4, 4, 3)).astype(np.float32)
    _check(_chain_model(None), [x])


def test_an_unsupported_operator_falls_back_transparently():
    assert "FLOOR" not in program.SUPPORTED
    x = RNG.standard_normal((1, 4, 4, 3)).astype(np.float32)
    _check(_chain_model("FLOOR"), [x], compiled=False)


def test_non_float_model_falls_back():
    x = T((2, 3), np.int32)
    model = single_op("ADD", [x, T((2, 3), np.int32)], [T((2, 3), np.int32)])
    it, got = _run(model, [np.ones((2, 3), np.int32), np.full((2, 3), 2, np.int32)], True)
    assert it._main.program is None
    np.testing.assert_array_equal(got[0], 3)


@pytest.mark.parametrize("name", ["mobilenet_v2_float", "kws_cnn_float", "transformer_block_float"])
def test_benchmark_models_agree_with_litert(name):
    data = np.load(MODELS / f"{name}.npz")
    it = Interpreter(model_path=str(MODELS / f"{name}.tflite"))
    it.allocate_tensors()
    assert it._main.program is not None
    it.set_tensor(it.get_input_details()[0]["index"], data["input_0"])
    it.invoke()
    want = data["ref_output_0"]
    got = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    for key in data.files:  # every intermediate LiteRT recorded that the arena still holds
        if key.startswith("ref_tensor_"):
            i = int(key.rsplit("_", 1)[1])
            if i in it._main.clobbered:
                continue
            w = data[key]
            np.testing.assert_allclose(it.get_tensor(i), w, rtol=1e-5,
                                       atol=1e-5 * float(np.abs(w).max()), err_msg=key)  # fmt: skip


def test_program_switch_and_compiled_loops_switch_turn_it_off():
    path = str(MODELS / "kws_cnn_float.tflite")
    old = program.set_enabled(False)
    try:
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        assert it._main.program is None
    finally:
        program.set_enabled(old)
    old = jit.set_enabled(False)
    try:
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        assert it._main.program is None
    finally:
        jit.set_enabled(old)


@pytest.mark.parametrize("var", ["RILL_JIT", "RILL_JIT_PROGRAM"])
def test_environment_turns_programs_off(var):
    code = ("from rill.mobile.interpreter import Interpreter\n"
            f"it = Interpreter(model_path={str(MODELS / 'kws_cnn_float.tflite')!r})\n"
            "it.allocate_tensors()\nprint(it._main.program is None)\n")  # fmt: skip
    # Both switches on but the one under test, whatever the environment the tests run in.
    env = {**os.environ, "RILL_JIT": "1", "RILL_JIT_PROGRAM": "1"}
    for value, want in (("0", "True"), ("1", "False")):
        env[var] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300, check=True)  # fmt: skip
        assert out.stdout.strip() == want, out.stderr
