"""import_onnx of hand-built models, one op family at a time, against onnxruntime.

Unlike onnx's node suite (whose shapes, axes and pads arrive as graph inputs at run time), these
models hold their weights, shapes and axes in initializers, as exported models do, so they test
the static paths: folded filter layouts, static reshapes, native pooling and dynamic batch sizes.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import import_onnx

RNG = np.random.default_rng(1234)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def init(name, value):
    return nh.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, inits=(), opset=17, value_info=()):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits), value_info=list(value_info))
    ops = [oh.make_opsetid("", opset)]
    m = oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))
    return m


def run_rill(m, feeds):
    g, inputs, outputs = import_onnx(m)
    with Session(graph=g) as s:
        got = s.run([outputs[o.name] for o in m.graph.output],
                    {inputs[k]: v for k, v in feeds.items()})  # fmt: skip
    return g, [np.asarray(v) for v in got]


def run_ort(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def check(m, feeds, rtol=1e-5, atol=1e-6):
    """rill's outputs equal onnxruntime's: same dtypes and shapes, values within tolerance."""
    g, got = run_rill(m, feeds)
    want = run_ort(m, feeds)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return g


def op_types(g) -> list[str]:
    return [o.type for o in g.get_operations()]


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# -- elementwise -----------------------------------------------------------------------------------


def test_broadcasting_arithmetic_and_integer_division_truncates():
    nodes = [
        oh.make_node("Add", ["a", "b"], ["s"]),
        oh.make_node("Sub", ["a", "b"], ["d"]),
        oh.make_node("Mul", ["s", "d"], ["p"]),
        oh.make_node("Div", ["p", "b"], ["q"]),
        oh.make_node("Div", ["i", "j"], ["iq"]),
    ]
    m = model(nodes, [vi("a", shape=[2, 3, 4]), vi("b", shape=[3, 1]),
                      vi("i", TP.INT32, [4]), vi("j", TP.INT32, [1])],
              [vi("q"), vi("iq", TP.INT32)])  # fmt: skip
    feeds = {"a": f32(2, 3, 4), "b": f32(3, 1) + 3, "i": np.array([7, -7, 6, -1], np.int32),
             "j": np.array([-2], np.int32)}  # fmt: skip
    check(m, feeds)
    # C division: -7 / -2 == 3 and 7 / -2 == -3 (truncation, not floor).
    _, (_, iq) = run_rill(m, feeds)
    np.testing.assert_array_equal(iq, [-3, 3, -3, 0])


def test_variadic_max_min_sum_mean_clip_and_pow_with_mixed_types():
    nodes = [
        oh.make_node("Max", ["a", "b", "c"], ["mx"]),
        oh.make_node("Min", ["a", "b"], ["mn"]),
        oh.make_node("Sum", ["a", "b", "c"], ["sm"]),
        oh.make_node("Mean", ["a", "c"], ["me"]),
        oh.make_node("Clip", ["a", "lo", "hi"], ["cl"]),
        oh.make_node("Clip", ["a", "", "hi"], ["cl_hi"]),
        oh.make_node("Pow", ["pos", "e"], ["pw"]),
    ]
    m = model(nodes, [vi("a", shape=[2, 3]), vi("b", shape=[3]), vi("c", shape=[1, 1]),
                      vi("pos", shape=[2, 3])],
              [vi(n) for n in ("mx", "mn", "sm", "me", "cl", "cl_hi", "pw")],
              [init("lo", np.float32(-0.5)), init("hi", np.float32(0.5)),
               init("e", np.array([2, 3, 1], np.int64))])  # fmt: skip
    check(m, {"a": f32(2, 3), "b": f32(3), "c": f32(1, 1), "pos": np.abs(f32(2, 3)) + 0.5})


def test_unary_math_comparisons_logic_where_and_cast():
    nodes = [
        oh.make_node("Abs", ["x"], ["ab"]),
        oh.make_node("Exp", ["ab"], ["ex"]),
        oh.make_node("Log", ["ex"], ["lg"]),
        oh.make_node("Sqrt", ["ab"], ["sq"]),
        oh.make_node("Erf", ["x"], ["er"]),
        oh.make_node("Sign", ["x"], ["sg"]),
        oh.make_node("Round", ["x"], ["rd"]),
        oh.make_node("Greater", ["x", "y"], ["gt"]),
        oh.make_node("LessOrEqual", ["x", "y"], ["le"]),
        oh.make_node("Xor", ["gt", "le"], ["xo"]),
        oh.make_node("Not", ["xo"], ["nx"]),
        oh.make_node("Where", ["gt", "x", "y"], ["wh"]),
        oh.make_node("Cast", ["x"], ["ci"], to=TP.INT32),
        oh.make_node("Cast", ["gt"], ["cf"], to=TP.DOUBLE),
    ]
    outs = [vi(n) for n in ("lg", "sq", "er", "sg", "rd", "wh")]
    outs += [vi("nx", TP.BOOL), vi("ci", TP.INT32), vi("cf", TP.DOUBLE)]
    m = model(nodes, [vi("x", shape=[3, 4]), vi("y", shape=[4])], outs)
    x = f32(3, 4, scale=3)
    x[0, :2] = [2.5, -1.5]  # halves round to even
    check(m, {"x": x, "y": f32(4)})


def test_activations_with_parameters():
    nodes = [
        oh.make_node("LeakyRelu", ["x"], ["lr"], alpha=0.1),
        oh.make_node("Elu", ["x"], ["el"], alpha=0.5),
        oh.make_node("Selu", ["x"], ["se"], alpha=1.5, gamma=1.2),
        oh.make_node("Selu", ["x"], ["se_default"]),
        oh.make_node("HardSigmoid", ["x"], ["hs"], alpha=0.3, beta=0.4),
        oh.make_node("HardSwish", ["x"], ["hw"]),
        oh.make_node("Softplus", ["x"], ["sp"]),
        oh.make_node("Softsign", ["x"], ["ss"]),
        oh.make_node("PRelu", ["x", "slope"], ["pr"]),
        oh.make_node("ThresholdedRelu", ["x"], ["tr"], alpha=0.7),
        oh.make_node("Sigmoid", ["x"], ["sg"]),
        oh.make_node("Tanh", ["x"], ["th"]),
    ]
    names = ["lr", "el", "se", "se_default", "hs", "hw", "sp", "ss", "pr", "tr", "sg", "th"]
    m = model(nodes, [vi("x", shape=[2, 3, 4])], [vi(n) for n in names],
              [init("slope", f32(3, 1))])  # fmt: skip
    check(m, {"x": f32(2, 3, 4, scale=3)})


def test_gelu_both_approximations():
    nodes = [oh.make_node("Gelu", ["x"], ["g"]), oh.make_node("Gelu", ["x"], ["t"],
                                                               approximate="tanh")]  # fmt: skip
    m = model(nodes, [vi("x", shape=[5, 7])], [vi("g"), vi("t")], opset=20)
    check(m, {"x": f32(5, 7, scale=2)})


# -- linear algebra --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((2, 3, 4), (4,)), ((4,), (4,)),
              ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5))],
)  # fmt: skip
def test_matmul_numpy_semantics(sa, sb):
    m = model([oh.make_node("MatMul", ["a", "b"], ["y"])],
              [vi("a", shape=list(sa)), vi("b", shape=list(sb))], [vi("y")])  # fmt: skip
    check(m, {"a": f32(*sa), "b": f32(*sb)}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_a,trans_b,c_shape", [(0, 0, [5]), (1, 1, [3, 5]), (0, 1, [1])])
def test_gemm(trans_a, trans_b, c_shape):
    a = f32(4, 3) if trans_a else f32(3, 4)
    b = f32(5, 4) if trans_b else f32(4, 5)
    node = oh.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transA=trans_a,
                        transB=trans_b)  # fmt: skip
    m = model([node], [vi("a", shape=list(a.shape))], [vi("y")],
              [init("b", b), init("c", f32(*c_shape))])  # fmt: skip
    g = check(m, {"a": a}, atol=1e-5)
    assert "MatMul" in op_types(g)


@pytest.mark.parametrize(
    "eq,shapes",
    [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("ii->", [(4, 4)]),
     ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("i,j->ij", [(3,), (4,)]),
     ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]), ("bii->bi", [(2, 3, 3)]),
     ("ij,ij->i", [(3, 4), (3, 4)]), ("abc,cd->abd", [(2, 3, 4), (4, 5)])],
)  # fmt: skip
def test_einsum_patterns(eq, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    m = model([oh.make_node("Einsum", names, ["y"], equation=eq)],
              [vi(n, shape=list(s)) for n, s in zip(names, shapes)], [vi("y")], opset=13)  # fmt: skip
    check(m, {n: f32(*s) for n, s in zip(names, shapes)}, atol=1e-5)


# -- convolution and pooling -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs,c_in,c_out,k",
    [
        ({}, 3, 4, 3),
        ({"pads": [1, 0, 2, 1], "strides": [2, 1]}, 3, 4, 3),
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, 2, 3, 3),
        ({"auto_pad": "SAME_LOWER"}, 2, 3, 2),
        ({"dilations": [2, 2], "pads": [2, 2, 2, 2]}, 2, 2, 3),
        ({"group": 2, "pads": [1, 1, 1, 1]}, 4, 6, 3),
        ({"group": 4, "pads": [1, 1, 1, 1]}, 4, 8, 3),  # depthwise, multiplier 2
        ({"group": 3, "strides": [2, 2], "auto_pad": "VALID"}, 3, 3, 2),
    ],
)
def test_conv_nchw_without_activation_transposes(attrs, c_in, c_out, k):
    group = attrs.get("group", 1)
    w = f32(c_out, c_in // group, k, k, scale=0.5)
    node = oh.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[k, k], **attrs)
    m = model([node], [vi("x", shape=["N", c_in, 7, 8])], [vi("y")],
              [init("w", w), init("b", f32(c_out))])  # fmt: skip
    g = check(m, {"x": f32(2, c_in, 7, 8)}, atol=1e-5)
    types = op_types(g)
    # The filter's layout change is folded into its constant: no Transpose op at all.
    assert "Transpose" not in types
    assert ("DepthwiseConv2dNative" if group == c_in and group > 1 else "Conv2D") in types


def test_conv_with_runtime_filter_and_1d_conv():
    nodes = [oh.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]),
             oh.make_node("Conv", ["s", "w1", "b1"], ["z"], strides=[2], pads=[1, 2])]  # fmt: skip
    m = model(nodes, [vi("x", shape=[1, 3, 5, 5]), vi("w", shape=[2, 3, 3, 3]),
                      vi("s", shape=[2, 3, 9])], [vi("y"), vi("z")],
              [init("w1", f32(4, 3, 3)), init("b1", f32(4))])  # fmt: skip
    check(m, {"x": f32(1, 3, 5, 5), "w": f32(2, 3, 3, 3), "s": f32(2, 3, 9)}, atol=1e-5)


@pytest.mark.parametrize(
    "kind,attrs,shape,native",
    [
        ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, ["N", 3, 8, 8], "MaxPool"),
        ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, ["N", 2, 6, 7], "MaxPool"),
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, [1, 2, 8, 8],
         "MaxPool"),
        ("MaxPool", {"kernel_shape": [3], "strides": [2]}, [2, 3, 9], "MaxPool"),
        ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}, [1, 2, 7, 7], None),
        ("MaxPool", {"kernel_shape": [2, 2, 2]}, [1, 2, 4, 5, 3], None),
        ("MaxPool", {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
         ["N", 1, 7, 6], "MaxPool"),
        ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, ["N", 3, 8, 8], "AvgPool"),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
         [2, 2, 5, 5], "AvgPool"),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, [2, 2, 5, 5], "AvgPool"),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [0, 0, 2, 2]}, [1, 2, 5, 6], None),
        ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
         [1, 1, 5, 5], None),
        ("AveragePool", {"kernel_shape": [2, 2, 2], "strides": [2, 1, 2]}, [1, 2, 4, 4, 4], None),
    ],
)  # fmt: skip
def test_pooling(kind, attrs, shape, native):
    m = model([oh.make_node(kind, ["x"], ["y"], **attrs)], [vi("x", shape=shape)], [vi("y")])
    concrete = [2 if isinstance(d, str) else d for d in shape]
    g = check(m, {"x": f32(*concrete)})
    types = op_types(g)
    if native:
        assert native in types and "Transpose" not in types
    else:
        assert "StridedSlice" in types  # the slice-per-tap construction


def test_global_pools_and_batchnorm_inference():
    nodes = [
        oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
        oh.make_node("GlobalAveragePool", ["bn"], ["gap"]),
        oh.make_node("GlobalMaxPool", ["bn"], ["gmp"]),
        oh.make_node("BatchNormalization", ["t", "s", "b", "m", "v"], ["bn3"]),
    ]
    c = 3
    inits = [init("s", f32(c)), init("b", f32(c)), init("m", f32(c)),
             init("v", np.abs(f32(c)) + 0.5)]  # fmt: skip
    m = model(nodes, [vi("x", shape=["N", c, 4, 5]), vi("t", shape=[2, c, 6])],
              [vi("gap"), vi("gmp"), vi("bn3")], inits)  # fmt: skip
    g = check(m, {"x": f32(2, c, 4, 5), "t": f32(2, c, 6)}, atol=1e-5)
    assert "FusedBatchNormV3" in op_types(g)


def test_softmax_axes_and_layer_norm():
    nodes = [
        oh.make_node("Softmax", ["x"], ["s0"], axis=0),
        oh.make_node("Softmax", ["x"], ["s1"], axis=1),
        oh.make_node("LogSoftmax", ["x"], ["l2"]),
        oh.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-2),
    ]
    m = model(nodes, [vi("x", shape=[2, 3, 4])], [vi(n) for n in ("s0", "s1", "l2", "ln")],
              [init("g", f32(3, 4)), init("b", f32(3, 4))])  # fmt: skip
    check(m, {"x": f32(2, 3, 4)}, atol=1e-5)


# -- reductions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [13, 18])
def test_reductions_axes_keepdims_and_noop(opset):
    def reduce(kind, out, axes, **kw):
        if opset >= 18 or kind == "ReduceSum":
            ins = ["x", f"{out}_axes"] if axes is not None else ["x"]
            node = oh.make_node(kind, ins, [out], **kw)
            extra = [init(f"{out}_axes", np.array(axes, np.int64))] if axes is not None else []
            return node, extra
        attrs = dict(kw, axes=axes) if axes is not None else kw
        return oh.make_node(kind, ["x"], [out], **attrs), []

    specs = [("ReduceSum", "a", [1], {}), ("ReduceMean", "b", [0, 2], {"keepdims": 0}),
             ("ReduceMax", "c", None, {}), ("ReduceMin", "d", [-1], {"keepdims": 0}),
             ("ReduceProd", "e", [1], {}), ("ReduceSumSquare", "f", [2], {}),
             ("ReduceL2", "h", [0], {}), ("ReduceLogSumExp", "k", [1], {"keepdims": 0})]  # fmt: skip
    nodes, inits = [], []
    for kind, out, axes, kw in specs:
        n, extra = reduce(kind, out, axes, **kw)
        nodes.append(n)
        inits += extra
    nodes.append(oh.make_node("ReduceSum", ["x", "empty"], ["noop"], noop_with_empty_axes=1))
    inits.append(init("empty", np.zeros(0, np.int64)))
    nodes.append(oh.make_node("ArgMax", ["x"], ["am"], axis=1, select_last_index=1))
    nodes.append(oh.make_node("ArgMin", ["x"], ["an"], axis=-1, keepdims=0))
    outs = [vi(s[1]) for s in specs] + [vi("noop"), vi("am", TP.INT64), vi("an", TP.INT64)]
    m = model(nodes, [vi("x", shape=[2, 3, 4])], outs, inits, opset=opset)
    x = np.round(f32(2, 3, 4, scale=2))  # ties for select_last_index
    check(m, {"x": x}, atol=1e-5)


def test_cumsum_topk_onehot_range_nonzero():
    nodes = [
        oh.make_node("CumSum", ["x", "ax"], ["cs"], exclusive=1, reverse=1),
        oh.make_node("TopK", ["x", "k"], ["tv", "ti"], axis=0, largest=0),
        oh.make_node("OneHot", ["idx", "depth", "vals"], ["oh"], axis=0),
        oh.make_node("Range", ["r0", "r1", "r2"], ["rg"]),
        oh.make_node("NonZero", ["x"], ["nz"]),
        oh.make_node(
            "ConstantOfShape", ["shp"], ["co"], value=nh.from_array(np.array([7], np.int32))
        ),
    ]
    inits = [init("ax", np.int32(1)), init("k", np.array([2], np.int64)),
             init("depth", np.array(4, np.int64)), init("vals", np.array([0.0, 5.0], np.float32)),
             init("r0", np.int64(10)), init("r1", np.int64(1)), init("r2", np.int64(-3)),
             init("shp", np.array([2, 3], np.int64))]  # fmt: skip
    outs = [vi("cs"), vi("tv"), vi("ti", TP.INT64), vi("oh"), vi("rg", TP.INT64),
            vi("nz", TP.INT64), vi("co", TP.INT32)]  # fmt: skip
    m = model(nodes, [vi("x", shape=[3, 4]), vi("idx", TP.INT64, [5])], outs, inits)
    x = f32(3, 4)
    x[1, 2] = 0.0
    check(m, {"x": x, "idx": np.array([0, 3, -1, 7, 2], np.int64)})


# -- shapes and data movement ----------------------------------------------------------------------


def test_static_shape_ops_with_dynamic_batch():
    nodes = [
        oh.make_node("Reshape", ["x", "s1"], ["r1"]),  # [0, -1]: keeps the batch dimension
        oh.make_node("Flatten", ["x"], ["fl"], axis=2),
        oh.make_node("Unsqueeze", ["r1", "ax"], ["us"]),
        oh.make_node("Squeeze", ["us", "ax"], ["sq"]),
        oh.make_node("Transpose", ["x"], ["tr"], perm=[0, 2, 3, 1]),
        oh.make_node("Slice", ["x", "st", "en", "sa", "ss"], ["sl"]),
        oh.make_node("Concat", ["x", "x"], ["cc"], axis=-1),
        oh.make_node("Tile", ["x", "rep"], ["ti"]),
        oh.make_node("Expand", ["c", "ex"], ["ep"]),
        oh.make_node("Shape", ["x"], ["sh"], start=1, end=-1),
        oh.make_node("Size", ["x"], ["sz"]),
    ]
    inits = [init("s1", np.array([0, -1], np.int64)), init("ax", np.array([-1, 1], np.int64)),
             init("st", np.array([-1, 0], np.int64)), init("en", np.array([-100, 99], np.int64)),
             init("sa", np.array([3, 1], np.int64)), init("ss", np.array([-2, 2], np.int64)),
             init("rep", np.array([1, 2, 1, 1], np.int64)), init("ex", np.array([2, 1, 3], np.int64))]  # fmt: skip
    outs = [vi(n) for n in ("r1", "fl", "sq", "tr", "sl", "cc", "ti", "ep")]
    outs += [vi("sh", TP.INT64), vi("sz", TP.INT64)]
    m = model(nodes, [vi("x", shape=["N", 3, 4, 5]), vi("c", shape=[4, 1])], outs, inits)
    g, _ = run_rill(m, {"x": f32(2, 3, 4, 5), "c": f32(4, 1)})
    check(m, {"x": f32(2, 3, 4, 5), "c": f32(4, 1)})
    r1 = g.get_tensor_by_name("r1:0")
    assert r1.shape.as_list() == [None, 60]  # the constant shape gives a static inner size


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_with_constant_pads(mode):
    ins = ["x", "p", "cv"] if mode == "constant" else ["x", "p"]
    node = oh.make_node("Pad", ins, ["y"], mode=mode)
    inits = [init("p", np.array([0, 1, 2, 0, 2, 1], np.int64))]
    if mode == "constant":
        inits.append(init("cv", np.float32(1.5)))
    m = model([node], [vi("x", shape=[2, 3, 4])], [vi("y")], inits, opset=19)
    check(m, {"x": f32(2, 3, 4)})


def test_split_variants():
    nodes = [
        oh.make_node("Split", ["x", "sp"], ["a", "b", "c"], axis=1),
        oh.make_node("Split", ["x"], ["d", "e"], axis=0),
    ]
    m13 = model(nodes, [vi("x", shape=[4, 6])], [vi(n) for n in "abcde"],
                [init("sp", np.array([1, 2, 3], np.int64))], opset=13)  # fmt: skip
    check(m13, {"x": f32(4, 6)})
    uneven = oh.make_node("Split", ["x"], ["p", "q", "r"], axis=1, num_outputs=3)
    m18 = model([uneven], [vi("x", shape=[4, 7])], [vi(n) for n in "pqr"], opset=18)
    check(m18, {"x": f32(4, 7)})


def test_gathers_with_negative_indices():
    nodes = [
        oh.make_node("Gather", ["x", "gi"], ["g0"], axis=1),
        oh.make_node("GatherElements", ["x", "ei"], ["ge"], axis=0),
        oh.make_node("GatherND", ["x", "ni"], ["gn"], batch_dims=1),
    ]
    inits = [init("gi", np.array([[-1, 0], [2, -3]], np.int64)),
             init("ei", np.array([[2, 0, -1, 1], [0, 1, 1, -3]], np.int64)),
             init("ni", np.array([[1], [3], [0]], np.int64))]  # fmt: skip
    m = model(nodes, [vi("x", shape=[3, 4])], [vi("g0"), vi("ge"), vi("gn")], inits)
    check(m, {"x": f32(3, 4)})


def test_value_info_shapes_become_static_shapes():
    # Reshape to a run-time shape: rill cannot infer the result; the model's value_info knows it.
    nodes = [oh.make_node("Reshape", ["x", "s"], ["r"]), oh.make_node("Relu", ["r"], ["y"])]
    m = model(nodes, [vi("x", shape=[2, 6]), vi("s", TP.INT64, [2])], [vi("y", shape=[3, 4])],
              value_info=[vi("r", shape=[3, 4])])  # fmt: skip
    values: dict = {}
    import_onnx(m, value_map=values)
    assert values["r"].shape.as_list() == [3, 4]
    assert values["y"].shape.as_list() == [3, 4]


def test_initializer_graph_inputs_are_placeholders_with_defaults():
    node = oh.make_node("Add", ["x", "bias"], ["y"])
    m = model([node], [vi("x", shape=[3]), vi("bias", shape=[3])], [vi("y")],
              [init("bias", np.array([1, 2, 3], np.float32))])  # fmt: skip
    g, inputs, outputs = import_onnx(m)
    assert inputs["bias"].op.type == "PlaceholderWithDefault"
    with Session(graph=g) as s:
        x = np.zeros(3, np.float32)
        np.testing.assert_array_equal(s.run(outputs["y"], {inputs["x"]: x}), [1, 2, 3])
        override = {inputs["x"]: x, inputs["bias"]: np.full(3, 5, np.float32)}
        np.testing.assert_array_equal(s.run(outputs["y"], override), [5, 5, 5])


def test_names_are_kept_and_sanitized():
    node = oh.make_node("Relu", ["input:0"], ["/block/relu_out"], name="/block/Relu")
    m = model([node], [vi("input:0", shape=[2])], [vi("/block/relu_out", shape=[2])])
    g, inputs, outputs = import_onnx(m)
    assert inputs["input:0"].name == "input_0:0"
    assert outputs["/block/relu_out"].name == "block/relu_out:0"
    assert g.get_operation_by_name("block/Relu/Relu").type == "Relu"


def test_constant_subgraphs_fold_at_import():
    # Shape arithmetic on constants (as exporters write it) becomes constants, so that the
    # Reshape gets a static shape.
    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        oh.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
        oh.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        oh.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [init("zero", np.int64(0)), init("zero1", np.array([0], np.int64)),
             init("minus1", np.array([-1], np.int64))]  # fmt: skip
    m = model(nodes, [vi("x", shape=[2, 3, 4])], [vi("y")], inits)
    g = check(m, {"x": f32(2, 3, 4)})
    assert g.get_tensor_by_name("y:0").shape.as_list() == [2, 12]
    assert "Gather" not in op_types(g) and "GatherV2" not in op_types(g)


def test_imported_graph_round_trips_through_graph_def():
    m = model([oh.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
              [vi("x", shape=["N", 2, 5, 5])], [vi("y")], [init("w", f32(3, 2, 3, 3))])  # fmt: skip
    g, _, _ = import_onnx(m)
    g2 = rg.Graph()
    with g2.as_default():
        rg.import_graph_def(g.as_graph_def().SerializeToString(), name="")
    assert [o.type for o in g2.get_operations()] == op_types(g)


def test_backend_module_interface():
    from rill.graph.onnx import backend

    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    node = oh.make_node("Gemm", ["a", "b"], ["y"], transB=1, alpha=2.0)
    a, b = f32(2, 3), f32(4, 3)
    (y,) = backend.run_node(node, [a, b])
    np.testing.assert_allclose(y, 2.0 * a @ b.T, rtol=1e-5)
    m = model([node], [vi("a", shape=[2, 3]), vi("b", shape=[4, 3])], [vi("y", shape=[2, 4])])
    rep = backend.prepare(m)
    by_list = rep.run([a, b])[0]
    by_name = rep.run({"a": a, "b": b})[0]
    np.testing.assert_array_equal(by_list, by_name)
    assert by_list.dtype == np.float32 and by_list.shape == (2, 4)
    np.testing.assert_array_equal(backend.run_model(m, [a, b])[0], by_list)
    with pytest.raises(ValueError, match="2 inputs"):
        rep.run([a])


def _cast_model(to, x, **attrs):
    node = oh.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    return model([node], [vi("x", TP.FLOAT, list(x.shape))], [vi("y", to, list(x.shape))],
                 opset=25)  # fmt: skip


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("to", [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2,
                                TP.FLOAT8E5M2FNUZ])  # fmt: skip
def test_cast_to_float8_saturates_by_the_spec(to, saturate):
    from onnx.reference import ReferenceEvaluator

    x = np.array([0.3, -1e6, 1e6, 300.0, 1e5, np.inf, -np.inf, np.nan, -0.0], np.float32)
    m = _cast_model(to, x, saturate=saturate)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    _, (got,) = run_rill(m, {"x": x})
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    if saturate:  # ±Inf and finite overflow clamp to ±max for every float8 type
        top = rg.as_dtype(got.dtype).max
        assert got.astype(np.float32)[[1, 2, 5, 6]].tolist() == [-top, top, top, -top]


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_cast_to_float8e8m0_rounds_by_round_mode(mode, saturate):
    from onnx.reference import ReferenceEvaluator

    x = np.array([0.124, 0.25, 0.3, 0.375, 1.1, 1.5, 3.0, 5.9, 7.0, 1e-38, 3e38, -2.5, np.nan],
                 np.float32)  # fmt: skip
    m = _cast_model(TP.FLOAT8E8M0, x, saturate=saturate, round_mode=mode)
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    _, (got,) = run_rill(m, {"x": x})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    # Where onnx's reference leaves the spec's table: Inf saturates to the largest power of two;
    # without saturate, 0 has no power of two and is NaN.
    edge = np.array([np.inf, 0.0], np.float32)
    _, (got,) = run_rill(_cast_model(TP.FLOAT8E8M0, edge, saturate=saturate, round_mode=mode),
                         {"x": edge})  # fmt: skip
    got = got.astype(np.float64)
    assert (got[0] == 2.0**127) if saturate else np.isnan(got[0])
    assert (got[1] == 2.0**-127) if saturate else (np.isnan(got[1]) or mode == "up")


@pytest.mark.parametrize(
    "xs, target", [((3, 1), [2, 1, 4]), ((4,), [3, 1]), ((2, 1, 5), [3, 1]), ((), [2, 2])]
)
def test_expand_of_an_input_of_unknown_rank(xs, target):
    # x's rank and the shape's length are known only at run time (as in a Scan body's untyped
    # state): the result's shape is their two-way broadcast.
    m = model([oh.make_node("Expand", ["x", "s"], ["y"])],
              [vi("x"), vi("s", TP.INT64, [None])], [vi("y")])  # fmt: skip
    m.graph.input[0].type.tensor_type.ClearField("shape")
    m.graph.output[0].type.tensor_type.ClearField("shape")
    x = RNG.standard_normal(xs).astype(np.float32)
    check(m, {"x": x, "s": np.array(target, np.int64)})
    g, _, _ = import_onnx(m)
    assert "BroadcastArgs" in {o.type for o in g.get_operations()}
