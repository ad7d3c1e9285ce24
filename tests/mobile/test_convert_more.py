"""Converter rules for element-wise math, comparisons, selection, reductions and shape ops: each
graph converts, and the .tflite runs in LiteRT and in rill's interpreter with the results of
rill's own Session."""

from __future__ import annotations

import numpy as np
import pytest
from mobile.test_convert import assert_close_relative, read_model, run_model

import rill.graph as rg
from rill.exec import Session
from rill.mobile.convert import convert

RNG = np.random.default_rng(11)

CASES = {
    "unary": (lambda x: rg.concat([-x, rg.abs(x), rg.exp(x), rg.square(x), rg.floor(x),
                                   rg.elu(x), rg.round(x), rg.log_softmax(x)], 1),
              ["NEG", "ABS", "EXP", "SQUARE", "FLOOR", "ELU", "ROUND", "LOG_SOFTMAX"]),
    "positive": (lambda x: rg.concat([rg.log(rg.abs(x) + 0.5), rg.sqrt(rg.abs(x)),
                                      rg.rsqrt(rg.abs(x) + 0.5)], 1), ["LOG", "SQRT", "RSQRT"]),
    "binary": (lambda x: rg.concat([x / 3.0, rg.maximum(x, 0.2), rg.minimum(x, -0.1),
                                    rg.squared_difference(x, 0.5), rg.floordiv(x, 0.7),
                                    rg.floormod(x, 0.7), rg.pow(rg.abs(x), 1.5)], 1),
               ["DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "FLOOR_DIV", "FLOOR_MOD",
                "POW"]),
    "compare_select": (lambda x: rg.concat([
        rg.where(rg.logical_and(x > 0.0, x <= 1.0), x, x * 2.0),
        rg.where(rg.logical_or(rg.less(x, -1.0), rg.greater_equal(x, 1.5)), x, -x),
        rg.where(rg.logical_not(rg.equal(x, x)), x, x + 1.0),
        rg.where(rg.not_equal(x, 0.0), x, x)], 1),
        ["GREATER", "LESS_EQUAL", "LOGICAL_AND", "LESS", "GREATER_EQUAL", "LOGICAL_OR",
         "EQUAL", "LOGICAL_NOT", "NOT_EQUAL", "SELECT_V2"]),
    "reduce": (lambda x: rg.concat([rg.reduce_sum(x, axis=[1], keepdims=True),
                                    rg.reduce_max(x, axis=[1], keepdims=True),
                                    rg.reduce_min(x, axis=[-1], keepdims=True),
                                    rg.reduce_prod(x, axis=[1], keepdims=True)], 1),
               ["SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]),
    "shape_ops": (lambda x: rg.concat([rg.tile(rg.slice(x, [0, 1], [-1, 2]), [1, 2]),
                                       rg.reverse(x, [1]),
                                       rg.unstack(rg.stack([x, x * 2.0], 1), axis=1)[1],
                                       rg.cast(rg.cast(x * 3.0, rg.int32), rg.float32),
                                       rg.cast(rg.argmax(x, 1), rg.float32)[:, None],
                                       rg.cast(rg.argmin(x, 1), rg.float32)[:, None]], 1),
                  ["TILE", "SLICE", "REVERSE_V2", "PACK", "UNPACK", "CAST", "ARG_MAX",
                   "ARG_MIN"]),
}  # fmt: skip


MORE = {
    "split": lambda x: rg.concat([rg.split(x, 2, axis=1)[1], rg.split(x, [2, 4], axis=1)[0]], 1),
    "gather_nd_topk": lambda x: rg.concat([rg.gather_nd(x, [[0, 1], [2, 3]])[None, :],
                                           rg.top_k(x[:1], 2)[0]], 1),
    "cumsum_pads": lambda x: rg.concat([rg.cumsum(x, 1, exclusive=True, reverse=True),
                                        rg.pad(x, [[0, 0], [1, 1]], mode="REFLECT"),
                                        rg.pad(x, [[0, 0], [2, 0]], mode="SYMMETRIC"),
                                        rg.pad(x, [[0, 0], [1, 0]], constant_values=2.0)], 1),
    "fill_like": lambda x: rg.concat([rg.zeros_like(x) + x, rg.ones_like(x) * x,
                                      x + rg.broadcast_to(x[:1], [3, 6])], 1),
    "one_hot": lambda x: rg.reshape(rg.one_hot(rg.cast(rg.abs(x), rg.int32), 3, axis=-1),
                                    [-1, 18]),
}  # fmt: skip


@pytest.mark.parametrize("runtime", ["litert", "rill"])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_converted_ops_match_session(kind, runtime):
    fn, codes = CASES[kind]
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        y = fn(x)
    feeds = [RNG.uniform(-2, 2, (3, 6)).astype(np.float32)]
    model = convert(g, [x], [y])
    written = {op["code"] for op in read_model(model)["ops"]}
    assert set(codes) <= written, set(codes) - written
    (want,) = Session(graph=g).run([y], {x: feeds[0]})
    (got,) = run_model(model, feeds, runtime)
    assert_close_relative(got, want, rtol=2e-5)


def test_shape_op_converts():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6], name="x")
        y = rg.reshape(x, rg.stack([rg.shape(x)[0], 3, 2]))
    model = convert(g, [x], [y])
    feeds = [RNG.standard_normal((4, 6)).astype(np.float32)]
    for runtime in ("litert", "rill"):
        (got,) = run_model(model, feeds, runtime)
        np.testing.assert_array_equal(got, feeds[0].reshape(4, 3, 2))


@pytest.mark.parametrize("kind", sorted(CASES) + sorted(MORE))
def test_int8_quantized_ops_match_litert_reference_exactly(kind):
    """Full-integer quantization of the same graphs: data movement, MAXIMUM/MINIMUM, SELECT,
    REDUCE_MAX/MIN, comparisons and EXP/LOG/SQRT/RSQRT/ABS/SQUARED_DIFFERENCE run in int8;
    ops without an exact int8 kernel (NEG, SQUARE, DIV, SUM, ...) stay float between
    DEQUANTIZE and QUANTIZE. rill's interpreter gives LiteRT's reference result exactly."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    from rill.mobile.convert import Optimize, TFLiteConverter
    from rill.mobile.interpreter import Interpreter

    fn = CASES[kind][0] if kind in CASES else MORE[kind]
    rows = 4 if kind in CASES else 3
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None if kind in CASES else 3, 6], name="x")
        y = fn(x)
    data = [RNG.uniform(-2, 2, (rows, 6)).astype(np.float32) for _ in range(8)]
    conv = TFLiteConverter.from_graph(g, [x], [y])
    conv.optimizations = [Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([d] for d in data)
    model = conv.convert()
    codes = [op["code"] for op in read_model(model)["ops"]]
    assert "QUANTIZE" in codes and "DEQUANTIZE" in codes
    feed = RNG.uniform(-2, 2, (rows, 6)).astype(np.float32)
    exact = True
    try:
        ref = LiteRT(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    except ValueError:
        # BUILTIN_REF lacks a few kernels (ELU, int8 TILE v3): LiteRT's optimized kernels then,
        # whose DEQUANTIZE computes q·s − zp·s (one float rounding apart from the reference's
        # (q − zp)·s), which a later QUANTIZE can turn into one quantum.
        exact = False
        ref = LiteRT(model_content=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)  # fmt: skip
    outs = []
    for it in (ref, Interpreter(model_content=model)):
        d = it.get_input_details()[0]
        it.resize_tensor_input(d["index"], feed.shape)
        it.allocate_tensors()
        it.set_tensor(d["index"], feed)
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    if exact:
        np.testing.assert_array_equal(outs[1], outs[0])
    else:
        # one quantum of the output's int8 tensor (the one DEQUANTIZE reads)
        scale = max(d["quantization"][0] for d in ref.get_tensor_details())
        assert np.abs(outs[1] - outs[0]).max() <= scale * 1.0001


@pytest.mark.parametrize("runtime", ["litert", "rill"])
@pytest.mark.parametrize("kind", sorted(MORE))
def test_more_converted_ops_match_session(kind, runtime):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3, 6], name="x")
        y = MORE[kind](x)
    feeds = [RNG.uniform(-2, 2, (3, 6)).astype(np.float32)]
    model = convert(g, [x], [y])
    (want,) = Session(graph=g).run([y], {x: feeds[0]})
    (got,) = run_model(model, feeds, runtime)
    assert_close_relative(got, want, rtol=2e-5)


@pytest.mark.parametrize("runtime", ["litert", "rill"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv2d_transpose_converts(padding, runtime):
    from rill.graph.ops.conv_ops import conv2d_backprop_input

    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 4, 5, 3], name="x")
        size = [1, 8, 10, 2] if padding == "SAME" else [1, 9, 11, 2]
        w = RNG.standard_normal((3, 3, 2, 3)).astype(np.float32)
        y = rg.relu(conv2d_backprop_input(size, w, x, [1, 2, 2, 1], padding))
    feeds = [RNG.standard_normal((1, 4, 5, 3)).astype(np.float32)]
    model = convert(g, [x], [y])
    assert "TRANSPOSE_CONV" in {op["code"] for op in read_model(model)["ops"]}
    (want,) = Session(graph=g).run([y], {x: feeds[0]})
    (got,) = run_model(model, feeds, runtime)
    assert_close_relative(got, want, rtol=2e-5)
