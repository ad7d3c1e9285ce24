"""import_onnx of the rules in import_more_math, beyond onnx's node suite: other dtypes,
attributes and shapes, static inputs (initializers) as exported models have them, the deprecated
Upsample and Scatter at the opsets where they survive the version converter, and bad input.

Expected values come from onnx's ReferenceEvaluator or from numpy."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from rill.exec import Session
from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(77)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def init(name, value):
    return nh.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def one_node(op_type, feeds, out_elem, inits=(), opset=18, **attrs):
    """A model of one `op_type` node over graph inputs `feeds` (shapes as fed) and `inits`."""
    names = [*feeds, *(t.name for t in inits)]
    node = oh.make_node(op_type, names, ["y"], name="n1", **attrs)
    ins = [vi(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
    return model([node], ins, [vi("y", out_elem)], inits, opset)


def run_rill(m, feeds):
    g, inputs, outputs = import_onnx(m)
    with Session(graph=g) as s:
        (y,) = s.run([outputs["y"]], {inputs[k]: v for k, v in feeds.items()})
    return np.asarray(y)


def check_reference(m, feeds, rtol=1e-6, atol=0.0):
    """rill's output equals onnx's ReferenceEvaluator's: dtype, shape and values."""
    got = run_rill(m, feeds)
    (want,) = ReferenceEvaluator(m).run(None, feeds)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


# -- trigonometric and hyperbolic -----------------------------------------------------------------

_TRIG = {
    "Sin": (np.sin, (-4, 4)),
    "Tan": (np.tan, (-1.2, 1.2)),
    "Asin": (np.arcsin, (-0.99, 0.99)),
    "Acos": (np.arccos, (-0.99, 0.99)),
    "Atan": (np.arctan, (-9, 9)),
    "Sinh": (np.sinh, (-3, 3)),
    "Cosh": (np.cosh, (-3, 3)),
    "Asinh": (np.arcsinh, (-9, 9)),
    "Acosh": (np.arccosh, (1, 9)),
    "Atanh": (np.arctanh, (-0.99, 0.99)),
}


@pytest.mark.parametrize("op_type", sorted(_TRIG))
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_trig_and_hyperbolic_in_float64_and_float16(op_type, dtype):
    fn, (lo, hi) = _TRIG[op_type]
    x = RNG.uniform(lo, hi, (2, 3, 4)).astype(dtype)
    m = one_node(op_type, {"x": x}, oh.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    got = run_rill(m, {"x": x})
    assert got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(got, fn(x.astype(np.float64)).astype(dtype), rtol=tol)


def test_trig_on_an_integer_input_is_refused_naming_the_node():
    m = one_node("Sin", {"x": np.arange(3, dtype=np.int32)}, TP.INT32, opset=18)
    with pytest.raises(OnnxImportError, match=r"node 'n1' \(Sin, opset 18\)"):
        import_onnx(m)


# -- bitwise ops and shifts ----------------------------------------------------------------------

_INTS = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


def _ints(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("dtype", _INTS)
def test_bitwise_ops_every_integer_type_with_broadcasting(dtype):
    a, b = _ints(dtype, (2, 3, 4)), _ints(dtype, (3, 1))
    elem = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    for op_type, fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                        ("BitwiseXor", np.bitwise_xor)):  # fmt: skip
        got = run_rill(one_node(op_type, {"a": a, "b": b}, elem), {"a": a, "b": b})
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, fn(a, b))
    got = run_rill(one_node("BitwiseNot", {"a": a}, elem), {"a": a})
    np.testing.assert_array_equal(got, np.invert(a))


def _spec_shift(x, y, direction):
    """BitShift as its spec reads, element by element in Python integers."""
    bits = x.dtype.itemsize * 8
    out = np.zeros(np.broadcast_shapes(x.shape, y.shape), x.dtype)
    for i in np.ndindex(out.shape):
        xv, yv = int(np.broadcast_to(x, out.shape)[i]), int(np.broadcast_to(y, out.shape)[i])
        if yv < 0 or yv >= bits:
            v = -1 if direction == "RIGHT" and xv < 0 else 0
        elif direction == "LEFT":
            v = xv << yv
        else:
            v = xv >> yv
        # Wrap to the type (a left shift drops the bits past the top).
        v &= (1 << bits) - 1
        out[i] = v - (1 << bits) if np.iinfo(x.dtype).min < 0 and v >> (bits - 1) else v
    return out


@pytest.mark.parametrize("dtype", _INTS)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_every_type_counts_out_of_range_and_broadcasting(dtype, direction):
    bits = np.dtype(dtype).itemsize * 8
    x = _ints(dtype, (3, 5))
    counts = [0, 1, bits - 1, bits, bits + 3]
    if np.iinfo(dtype).min < 0:
        counts[-1] = -2  # a negative count
    y = np.array(counts, dtype)
    m = one_node("BitShift", {"x": x, "y": y}, oh.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                 direction=direction)  # fmt: skip
    got = run_rill(m, {"x": x, "y": y})
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _spec_shift(x, y, direction))


def test_bitshift_with_a_static_count():
    x = np.array([[1, -8, 100], [-1, 7, -128]], np.int8)
    m = one_node("BitShift", {"x": x}, TP.INT8, [init("y", np.array([1, 3, 9], np.int8))],
                 direction="RIGHT")  # fmt: skip
    np.testing.assert_array_equal(run_rill(m, {"x": x}), [[0, -1, 0], [-1, 0, -1]])


def test_bitshift_bad_direction_names_the_node():
    x = np.arange(4, dtype=np.uint8)
    m = one_node("BitShift", {"x": x, "y": x}, TP.UINT8, direction="UP")
    with pytest.raises(OnnxImportError, match=r"node 'n1' \(BitShift.*'LEFT' or 'RIGHT'.*'UP'"):
        import_onnx(m)


# -- CumProd -------------------------------------------------------------------------------------


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_cumprod_exclusive_reverse_and_axes(exclusive, reverse, axis):
    x = RNG.uniform(0.5, 1.5, (3, 4, 2)).astype(np.float32)
    a = np.array(axis, np.int64)
    m = one_node("CumProd", {"x": x, "axis": a}, TP.FLOAT, exclusive=exclusive, reverse=reverse)
    check_reference(m, {"x": x, "axis": a}, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint32, np.uint64, np.int32])
def test_cumprod_types_and_a_static_axis(dtype):
    x = RNG.integers(1, 5, (4, 3)).astype(dtype)
    m = one_node("CumProd", {"x": x}, oh.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                 [init("axis", np.array(0, np.int32))], reverse=1)  # fmt: skip
    got = check_reference(m, {"x": x})
    np.testing.assert_array_equal(got, np.flip(np.cumprod(np.flip(x, 0), 0), 0))


# -- ReverseSequence -----------------------------------------------------------------------------


@pytest.mark.parametrize(("batch_axis", "time_axis"), [(0, 1), (1, 0)])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint8, np.bool_])
def test_reverse_sequence_batch_and_time_axes_on_rank_3(batch_axis, time_axis, dtype):
    shape = [0, 0, 3]
    shape[batch_axis], shape[time_axis] = 4, 5
    x = RNG.integers(0, 9, shape) > 4 if dtype == np.bool_ else RNG.integers(0, 99, shape)
    x = x.astype(dtype)
    lens = np.array([5, 0, 1, 3], np.int64)
    m = one_node("ReverseSequence", {"x": x, "lens": lens},
                 oh.np_dtype_to_tensor_dtype(np.dtype(dtype)), batch_axis=batch_axis,
                 time_axis=time_axis)  # fmt: skip
    got = check_reference(m, {"x": x, "lens": lens})
    # With the batch axis first, each entry's time axis is its first.
    xb, gb = np.moveaxis(x, batch_axis, 0), np.moveaxis(got, batch_axis, 0)
    for b, n in enumerate(lens):
        np.testing.assert_array_equal(gb[b][:n], xb[b][:n][::-1])
        np.testing.assert_array_equal(gb[b][n:], xb[b][n:])


def test_reverse_sequence_lengths_of_the_wrong_shape_name_the_node():
    x = np.zeros((4, 3), np.float32)
    m = one_node("ReverseSequence", {"x": x, "lens": np.ones((4, 1), np.int64)}, TP.FLOAT,
                 batch_axis=0, time_axis=1)  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"node 'n1' \(ReverseSequence.*must be a vector"):
        import_onnx(m)
    m = one_node("ReverseSequence", {"x": x, "lens": np.ones(3, np.int64)}, TP.FLOAT,
                 batch_axis=0, time_axis=1)  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"'n1'.*3 entries.*4 along batch_axis 0"):
        import_onnx(m)


def test_reverse_sequence_same_axes_are_refused():
    x = np.zeros((4, 3), np.float32)
    m = one_node("ReverseSequence", {"x": x, "lens": np.ones(4, np.int64)}, TP.FLOAT,
                 batch_axis=0, time_axis=0)  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"'n1'.*batch_axis 0 and time_axis 0"):
        import_onnx(m)


# -- Compress ------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -3])
@pytest.mark.parametrize("short", [False, True])
def test_compress_with_and_without_axis_and_short_conditions(axis, short):
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    size = x.size if axis is None else x.shape[axis]
    cond = RNG.integers(0, 2, size - 2 if short else size).astype(bool)
    cond[0] = True
    attrs = {} if axis is None else {"axis": axis}
    m = one_node("Compress", {"x": x, "c": cond}, TP.FLOAT, **attrs)
    got = check_reference(m, {"x": x, "c": cond})
    np.testing.assert_array_equal(got, np.compress(cond, x, axis=axis))


def test_compress_static_condition_strings_and_none_selected():
    x = np.array([["a", "bb"], ["ccc", "d"], ["e", "f"]], object)
    m = one_node("Compress", {"x": x}, TP.STRING, [init("c", np.array([True, False, True]))],
                 axis=0)  # fmt: skip
    np.testing.assert_array_equal(run_rill(m, {"x": x}).astype(str), x[[0, 2]].astype(str))
    y = np.arange(6, dtype=np.int64).reshape(2, 3)
    m = one_node("Compress", {"y": y}, TP.INT64, [init("c", np.zeros(3, bool))], axis=1)
    got = run_rill(m, {"y": y})
    assert got.shape == (2, 0) and got.dtype == np.int64


def test_compress_condition_longer_than_the_axis_names_the_node():
    x = np.zeros((2, 3), np.float32)
    m = one_node("Compress", {"x": x, "c": np.ones(4, bool)}, TP.FLOAT, axis=1)
    with pytest.raises(OnnxImportError, match=r"node 'n1' \(Compress.*4 entries.*the 3"):
        import_onnx(m)
    m = one_node("Compress", {"x": x, "c": np.ones(7, bool)}, TP.FLOAT)
    with pytest.raises(OnnxImportError, match=r"'n1'.*7 entries.*the 6"):
        import_onnx(m)
    m = one_node("Compress", {"x": x, "c": np.ones(2, bool)}, TP.FLOAT, axis=2)
    with pytest.raises(OnnxImportError, match=r"'n1'.*axis 2 is out of range for rank 2"):
        import_onnx(m)


# -- Det -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.float32])
@pytest.mark.parametrize("shape", [(3, 3), (2, 1, 4, 4), (5, 1, 1)])
def test_det_batches_and_types(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)
    m = one_node("Det", {"x": x}, oh.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    got = run_rill(m, {"x": x})
    assert got.dtype == dtype and got.shape == shape[:-2]
    tol = 1e-10 if dtype == np.float64 else (1e-5 if dtype == np.float32 else 1e-2)
    want = np.linalg.det(x.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_det_bfloat16_computes_in_float32():
    x = np.array([[[2, 1], [1, 3]], [[0.5, 4], [1, 1]]], np.float32)
    nodes = [
        oh.make_node("Cast", ["x"], ["xb"], to=TP.BFLOAT16),
        oh.make_node("Det", ["xb"], ["y"]),
    ]
    m = model(nodes, [vi("x", TP.FLOAT, [2, 2, 2])], [vi("y", TP.BFLOAT16)])
    got = run_rill(m, {"x": x})
    assert got.shape == (2,)
    np.testing.assert_array_equal(got.astype(np.float32), [5, -3.5])


# -- CenterCropPad -------------------------------------------------------------------------------

_CROP_CASES = [
    ([5, 6, 3], None, [3, 9, 3]),  # crop odd, pad odd, keep
    ([6, 4, 3], None, [1, 4, 8]),
    ([7, 5, 2], [0, 1], [2, 8]),
    ([7, 5, 2], [-1, -3], [5, 3]),
    ([4, 4, 4], [2], [1]),
]


@pytest.mark.parametrize(("shape", "axes", "target"), _CROP_CASES)
@pytest.mark.parametrize("static", [True, False])
def test_center_crop_pad_static_and_dynamic_targets(shape, axes, target, static):
    x = RNG.standard_normal(shape).astype(np.float32)
    t = np.array(target, np.int64)
    attrs = {} if axes is None else {"axes": axes}
    if static:
        m = one_node("CenterCropPad", {"x": x}, TP.FLOAT, [init("t", t)], **attrs)
        feeds = {"x": x}
    else:
        m = one_node("CenterCropPad", {"x": x, "t": t}, TP.FLOAT, **attrs)
        feeds = {"x": x, "t": t}
    got = check_reference(m, feeds)
    axes_n = [a % len(shape) for a in (axes or range(len(shape)))]
    want_shape = list(shape)
    for a, s in zip(axes_n, target):
        want_shape[a] = s
    assert list(got.shape) == want_shape


def test_center_crop_pad_unknown_input_dims_int32_target_and_int_data():
    x = np.arange(2 * 7 * 3, dtype=np.int32).reshape(2, 7, 3)
    t = np.array([4, 6], np.int32)
    node = oh.make_node("CenterCropPad", ["x", "t"], ["y"], axes=[1, 2])
    m = model([node], [vi("x", TP.INT32, ["n", None, None])], [vi("y", TP.INT32)],
              [init("t", t)])  # fmt: skip
    got = check_reference(m, {"x": x})
    np.testing.assert_array_equal(got[:, :, 1:4], x[:, 1:5, :])
    assert not got[:, :, [0, 4, 5]].any()


def test_center_crop_pad_shape_of_the_wrong_length_names_the_node():
    x = np.zeros((4, 4, 3), np.float32)
    m = one_node("CenterCropPad", {"x": x}, TP.FLOAT, [init("t", np.array([2, 2], np.int64))])
    with pytest.raises(OnnxImportError, match=r"node 'n1' \(CenterCropPad.*one size per axis"):
        import_onnx(m)


# -- Upsample and Scatter, deprecated ------------------------------------------------------------


def _upsample_nearest(x, scales):
    idx = [np.floor(np.arange(int(d * s)) / s).astype(int) for d, s in zip(x.shape, scales)]
    return x[np.ix_(*idx)]


@pytest.mark.parametrize("static", [True, False])
def test_upsample_opset_10_survives_the_converter_and_imports(static):
    # The converter leaves an opset-10 Upsample as it is (Scatter at 11 too): the rules see them.
    x = RNG.standard_normal((1, 2, 3, 2)).astype(np.float32)
    scales = np.array([1, 1, 2, 2.5], np.float32)
    if static:
        m = one_node("Upsample", {"x": x}, TP.FLOAT, [init("s", scales)], opset=10)
        feeds = {"x": x}
    else:
        m = one_node("Upsample", {"x": x, "s": scales}, TP.FLOAT, opset=10)
        feeds = {"x": x, "s": scales}
    got = run_rill(m, feeds)
    np.testing.assert_array_equal(got, _upsample_nearest(x, scales))


@pytest.mark.parametrize("opset", [9, 10, 13])
def test_upsample_linear_samples_at_x_over_scale(opset):
    # Opset 9 reaches Resize through the converter, 10 and 13 the Upsample rule: all agree.
    x = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    m = one_node("Upsample", {"x": x}, TP.FLOAT, [init("s", np.array([1, 1, 2, 2], np.float32))],
                 opset=opset, mode="linear")  # fmt: skip
    # Asymmetric: output i samples input i / 2, clamped at the last input.
    row = np.array([1, 1.5, 2, 2])
    want = (row[None, :] + np.array([0, 1, 2, 2])[:, None]).reshape(1, 1, 4, 4)
    np.testing.assert_allclose(run_rill(m, {"x": x}), want)


@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_older_opsets_import_through_resize(opset):
    x = RNG.integers(0, 9, (1, 1, 2, 3)).astype(np.int32)
    scales = [1.0, 1.0, 3.0, 2.0]
    if opset == 7:
        m = one_node("Upsample", {"x": x}, TP.INT32, opset=7, scales=scales)
    else:
        s = init("s", np.array(scales, np.float32))
        m = one_node("Upsample", {"x": x}, TP.INT32, [s], opset=9)
    np.testing.assert_array_equal(run_rill(m, {"x": x}), _upsample_nearest(x, scales))


def test_upsample_unknown_mode_names_the_node():
    x = np.zeros((1, 1, 2, 2), np.float32)
    m = one_node("Upsample", {"x": x}, TP.FLOAT, [init("s", np.ones(4, np.float32))], opset=10,
                 mode="cubic")  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"'n1' \(Upsample.*'nearest' or 'linear'"):
        import_onnx(m)


@pytest.mark.parametrize("opset", [9, 10, 11])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_deprecated_opsets(opset, axis):
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    indices = np.array([[1, 0, 2], [2, 1, 0]], np.int64)
    if axis == 0:
        indices = indices.T[:2]  # two rows of positions along axis 0 (< 3)
    updates = RNG.standard_normal(indices.shape).astype(np.float32)
    feeds = {"data": data, "indices": indices, "updates": updates}
    m = one_node("Scatter", feeds, TP.FLOAT, opset=opset, axis=axis)
    want = data.copy()
    a = axis % 2
    for i in np.ndindex(indices.shape):
        target = list(i)
        target[a] = indices[i]
        want[tuple(target)] = updates[i]
    np.testing.assert_array_equal(run_rill(m, feeds), want)
