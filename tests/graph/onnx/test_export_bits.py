"""ONNX export of export_bits' ops: shifts, bitwise ops, Cumprod, Expm1, the TensorScatter
reductions, StringJoin and the importer's _OnnxBitCast, _OnnxUnique, _OnnxCol2Im and _OnnxDFT.

Each exported model passes onnx.checker and computes what a rill Session computes, in
onnxruntime (where it loads the opset and has a kernel for the op and type) and in onnx's
ReferenceEvaluator: exactly for integer and string outputs, to a tolerance for float ones.
ONNX's own node test models of these ops go through import, export and both oracles; shifts
and scatters are also built in rill directly, with the cases the node tests miss (signed types,
counts outside [0, bits - 1], repeated indices). Opsets too old for an ONNX op are refused.
"""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.reference import ReferenceEvaluator

import rill.graph as rg
from rill.exec import Session
from rill.graph.onnx import export_onnx, import_onnx
from rill.graph.onnx.versions import runtime_max_opset

NEWEST = onnx.defs.onnx_opset_version()
ORT_MAX = runtime_max_opset() or 0
OPSET = min(NEWEST, ORT_MAX) if ORT_MAX else NEWEST


def _ort_run(model, feeds):
    """onnxruntime's outputs, or None where it has no kernel for an op at this opset or type."""
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - only a missing kernel is tolerated, below
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            return None
        raise
    return sess.run(None, feeds)


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind in "OSU":  # strings: bytes in rill, str or bytes from the oracles
        assert got.dtype.kind in "OSU", f"{what}: dtype {got.dtype}, rill gives strings"
        assert got.shape == want.shape, f"{what}: shape {got.shape}, rill gives {want.shape}"
        decode = np.vectorize(_b, otypes=[object])
        assert decode(got).tolist() == decode(want).tolist(), what
        return
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, rill gives {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, rill gives {want.shape}"
    if want.dtype.kind in "fc":
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _b(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _oracle_feed(v):
    """Strings as str (onnx's reference StringConcat decodes bytes as ASCII)."""
    v = np.asarray(v)
    return np.vectorize(_b, otypes=[object])(v) if v.dtype == object else v


def check(g, inputs, outputs, feeds, opset=OPSET) -> tuple[onnx.ModelProto, list[str]]:
    """Exports at `opset`, runs the model in each oracle that can, compares with rill's Session;
    returns the model and the oracles that ran."""
    model = export_onnx(g, inputs, outputs, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    with Session(graph=g) as sess:
        want = sess.run(list(outputs), dict(zip(inputs, feeds)))
    by_name = {vi.name: _oracle_feed(v) for vi, v in zip(model.graph.input, feeds)}
    ran = []
    results = {"reference": ReferenceEvaluator(model).run(None, by_name)}
    if opset <= ORT_MAX:
        got = _ort_run(model, by_name)
        if got is not None:
            results["ort"] = got
    for oracle, got in results.items():
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            _same(a, b, f"{oracle} output {k} ({outputs[k].name}) at opset {opset}")
        ran.append(oracle)
    return model, ran


def _graph(build, feeds):
    g = rg.Graph()
    with g.as_default():
        phs = [rg.placeholder(rg.as_dtype(np.asarray(v).dtype), np.asarray(v).shape,
                              name=f"x{i}") for i, v in enumerate(feeds)]  # fmt: skip
        out = build(g, *phs)
    return g, phs, list(out) if isinstance(out, (list, tuple)) else [out]


def _op(g, op_type, inputs, **attrs):
    o = g.create_op(op_type, inputs, attrs, name=op_type.lstrip("_"))
    return o.outputs[0] if len(o.outputs) == 1 else list(o.outputs)


# -- shifts ------------------------------------------------------------------------------------

_INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def _shift_feeds(name):
    t = np.dtype(name)
    bits = t.itemsize * 8
    info = np.iinfo(t)
    x = np.array([info.min, info.max, 0, 1, 5, info.min + 3, info.max - 6, 3], t)
    if info.min < 0:
        x[2:5] = [-1, -5, 7]
        y = np.array([-3, 0, 1, bits - 1, bits, bits + 5, 3, 2], t)
    else:
        y = np.array([0, 1, 2, bits - 1, bits, bits + 5, 3, info.max], t)
    return x, y


@pytest.mark.parametrize("opset", [OPSET, NEWEST])
@pytest.mark.parametrize("direction", ["LeftShift", "RightShift"])
@pytest.mark.parametrize("dtype", _INT_TYPES)
def test_shift_clamps_the_count_and_matches_rill(dtype, direction, opset):
    x, y = _shift_feeds(dtype)
    g, phs, outs = _graph(lambda g, a, b: _op(g, direction, [a, b]), [x, y])
    model, ran = check(g, phs, outs, [x, y], opset=opset)
    assert "BitShift" in [n.op_type for n in model.graph.node]
    # A count known at export time and a scalar count broadcast too.
    g, phs, outs = _graph(lambda g, a: _op(g, direction, [a, rg.constant(y[3])]), [x])
    check(g, phs, outs, [x], opset=opset)


def test_shift_is_checked_in_onnxruntime_for_its_kernel_types():
    """onnxruntime has BitShift kernels for uint8, uint32 and uint64: a signed int32 shift
    (cast to uint32 and back) runs there too, not only in the reference evaluator."""
    if not ORT_MAX:
        pytest.skip("onnxruntime loads no opset")
    for dtype in ("uint8", "uint32", "uint64", "int32", "int64"):
        x, y = _shift_feeds(dtype)
        for direction in ("LeftShift", "RightShift"):
            g, phs, outs = _graph(lambda g, a, b, d=direction: _op(g, d, [a, b]), [x, y])
            _, ran = check(g, phs, outs, [x, y])
            assert "ort" in ran, (dtype, direction)


# -- bitwise -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", _INT_TYPES)
def test_bitwise_ops(dtype):
    x, y = _shift_feeds(dtype)
    for op_type in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        g, phs, outs = _graph(lambda g, a, b, t=op_type: _op(g, t, [a, b]), [x, y])
        check(g, phs, outs, [x, y])
    g, phs, outs = _graph(lambda g, a: _op(g, "Invert", [a]), [x])
    model, _ = check(g, phs, outs, [x])
    assert [n.op_type for n in model.graph.node] == ["BitwiseNot"]


# -- math --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod(dtype, exclusive, reverse):
    x = np.arange(1, 13).reshape(3, 4).astype(dtype)
    x[1, 2] = -2
    for axis in (0, 1, -1):
        g, phs, outs = _graph(lambda g, a, k=axis: _op(g, "Cumprod", [a, rg.constant(np.int32(k))],
                                                     exclusive=exclusive, reverse=reverse), [x])  # fmt: skip
        check(g, phs, outs, [x], opset=max(OPSET, 26))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_expm1(dtype):
    x = np.array([[-3.0, -0.5, 0.0], [0.25, 1.0, 4.0]], dtype)
    g, phs, outs = _graph(lambda g, a: _op(g, "Expm1", [a]), [x])
    model, _ = check(g, phs, outs, [x])
    assert [n.op_type for n in model.graph.node] == ["Exp", "Sub"]


# -- scatters ----------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["TensorScatterAdd", "TensorScatterSub", "TensorScatterMax",
                                     "TensorScatterMin"])  # fmt: skip
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64", "uint32"])
def test_tensor_scatter_reductions_with_repeated_indices(op_type, dtype):
    data = np.arange(12).reshape(4, 3).astype(dtype)
    updates = np.array([[5, 1, 9], [2, 8, 0], [7, 7, 3]], dtype)
    indices = np.array([[1], [3], [1]], np.int32)
    g, phs, outs = _graph(lambda g, a, i, u: _op(g, op_type, [a, i, u]), [data, indices, updates])
    check(g, phs, outs, [data, indices, updates])
    # Element indices into a matrix, as int64.
    idx = np.array([[0, 1], [2, 2], [0, 1]], np.int64)
    upd = np.array([4, 6, 1], dtype)
    g, phs, outs = _graph(lambda g, a, i, u: _op(g, op_type, [a, i, u]), [data, idx, upd])
    check(g, phs, outs, [data, idx, upd])


# -- strings -----------------------------------------------------------------------------------


def test_string_join_chains_string_concat():
    a = np.array([b"ab", b"", b"x\xc3\xa9"], object)
    b = np.array([b"1", b"22", b""], object)
    g, phs, outs = _graph(lambda g, x, y: _op(g, "StringJoin", [[x, y]]), [a, b])
    model, _ = check(g, phs, outs, [a, b])
    assert [n.op_type for n in model.graph.node] == ["StringConcat"]
    # Three inputs, a separator and a scalar that broadcasts.
    g, phs, outs = _graph(lambda g, x, y: _op(g, "StringJoin", [[x, rg.constant(b"-"), y]],
                                              separator=", "), [a, b])  # fmt: skip
    model, _ = check(g, phs, outs, [a, b])
    assert [n.op_type for n in model.graph.node].count("StringConcat") == 4


# -- ONNX's node tests, imported and exported back -----------------------------------------------

_PREFIXES = ("test_bitshift", "test_bitwise", "test_cumprod", "test_scatternd", "test_string_concat",
             "test_bitcast", "test_unique", "test_col2im", "test_dft", "test_stft",
             "test_melweightmatrix")  # fmt: skip
_SKIP = {"test_scatternd_multiply": "UnsortedSegmentProd has no export (not an export_bits op)"}


@functools.cache
def _node_cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return {c.name: c for c in cases
            if c.name.startswith(_PREFIXES) and "_expanded" not in c.name}  # fmt: skip


def _case_inputs(c, model):
    if c.data_sets:
        return [np.asarray(v) for v in c.data_sets[0][0]]
    d = os.path.join(c.model_dir, "test_data_set_0")
    feeds = []
    for k in range(len(model.graph.input)):
        t = onnx.TensorProto()
        with open(os.path.join(d, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds.append(numpy_helper.to_array(t))
    return feeds


@pytest.mark.parametrize("name", sorted(_node_cases()))
def test_onnx_node_case_round_trips(name):
    if name in _SKIP:
        pytest.skip(_SKIP[name])
    c = _node_cases()[name]
    m = c.model if c.model is not None else onnx.load(os.path.join(c.model_dir, "model.onnx"))
    g, ins, outs = import_onnx(m)
    inputs, outputs = list(ins.values()), list(outs.values())
    feeds = _case_inputs(c, m)
    refused = False
    try:
        check(g, inputs, outputs, feeds)
    except rg.errors.UnimplementedError as e:
        # Refused at the default opset (a type the op takes only later): the newest has it.
        assert "does not take" in str(e) or "from opset" in str(e), str(e)
        refused = True
    if refused or NEWEST != OPSET:
        check(g, inputs, outputs, feeds, opset=NEWEST)


def _onnx_model(nodes, inputs, outputs, opset):
    graph = helper.make_graph(nodes, "t", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = helper.find_min_ir_version_for(m.opset_import)
    return m


@pytest.mark.parametrize("export_opset", [17, 19, 20, OPSET])
@pytest.mark.parametrize("import_opset", [17, 20])
def test_dft_axis_attribute_before_opset_20_and_input_from_it(import_opset, export_opset):
    x = np.random.default_rng(3).standard_normal((2, 6, 5, 1)).astype(np.float32)
    if import_opset >= 20:
        nodes = [helper.make_node("DFT", ["x", "n", "axis"], ["y"], onesided=1)]
        extra = [numpy_helper.from_array(np.array(8, np.int64), "n"),
                 numpy_helper.from_array(np.array(-3, np.int64), "axis")]  # fmt: skip
    else:
        nodes = [helper.make_node("DFT", ["x", "n"], ["y"], onesided=1, axis=1)]
        extra = [numpy_helper.from_array(np.array(8, np.int64), "n")]
    m = _onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], import_opset)  # fmt: skip
    m.graph.initializer.extend(extra)
    g, ins, outs = import_onnx(m)
    model, _ = check(g, list(ins.values()), list(outs.values()), [x], opset=export_opset)
    (dft,) = [n for n in model.graph.node if n.op_type == "DFT"]
    attrs = {a.name: helper.get_attribute_value(a) for a in dft.attribute}
    if export_opset < 20:
        assert attrs["axis"] == 1 and len(dft.input) == 2
    else:
        assert "axis" not in attrs and len(dft.input) == 3


# -- refusals ----------------------------------------------------------------------------------


def _refused(build, feeds, opset, *words):
    g, phs, outs = _graph(build, feeds)
    with pytest.raises(rg.errors.UnimplementedError) as e:
        export_onnx(g, phs, outs, opset=opset)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_ops_refused_below_the_opset_that_has_them():
    i = np.array([1, 2, 3], np.int32)
    f = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    s = np.array([b"a"], object)
    _refused(lambda g, a: _op(g, "Invert", [a]), [i], 17,
             "cannot export Invert op", "BitwiseNot from opset 18", "opset 17")  # fmt: skip
    _refused(lambda g, a: _op(g, "BitwiseXor", [a, a]), [i], 13,
             "cannot export BitwiseXor op", "from opset 18")  # fmt: skip
    _refused(lambda g, a: _op(g, "Cumprod", [a, rg.constant(np.int32(0))]), [f], 25,
             "cannot export Cumprod op", "CumProd from opset 26")  # fmt: skip
    _refused(lambda g, a: _op(g, "Cumprod", [a, rg.constant(np.int32(0))]), [f.astype(np.int8)], 26,
             "cannot export Cumprod op", "does not take int8")  # fmt: skip
    _refused(lambda g, a: _op(g, "StringJoin", [[a, a]]), [s], 19,
             "cannot export StringJoin op", "StringConcat from opset 20")  # fmt: skip
    idx = np.array([[0]], np.int32)
    _refused(lambda g, a, k: _op(g, "TensorScatterMax", [a, k, a[:1]]), [f, idx], 17,
             "cannot export TensorScatterMax op", "reduction='max' from opset 18")  # fmt: skip
    _refused(lambda g, a, k: _op(g, "TensorScatterSub", [a, k, a[:1]]), [f, idx], 15,
             "cannot export TensorScatterSub op", "reduction='add' from opset 16")  # fmt: skip
    _refused(lambda g, a: _op(g, "_OnnxBitCast", [a], out_type=rg.int32), [f], 25,
             "cannot export _OnnxBitCast op", "BitCast from opset 26")  # fmt: skip
    _refused(lambda g, a: _op(g, "Expm1", [a]), [f.astype(np.complex64)], OPSET,
             "cannot export Expm1 op", "complex")  # fmt: skip


def test_dft_refused_before_17_and_with_a_runtime_axis_before_20():
    x = np.zeros((1, 4, 1), np.float32)
    _refused(lambda g, a: _op(g, "_OnnxDFT", [a, rg.constant(np.int64(1)), []]), [x], 16,
             "cannot export _OnnxDFT op", "DFT from opset 17")  # fmt: skip
    ax = np.array(1, np.int64)
    _refused(lambda g, a, k: _op(g, "_OnnxDFT", [a, k, []]), [x, ax], 19,
             "cannot export _OnnxDFT op", "axis", "known at export time")  # fmt: skip
    g, phs, outs = _graph(lambda g, a, k: _op(g, "_OnnxDFT", [a, k, []]), [x + 1, ax])
    check(g, phs, outs, [x + 1, ax], opset=max(20, OPSET))
