"""import_onnx of DFT, STFT, the windows and MelWeightMatrix, beyond onnx's node cases: complex
inputs, odd lengths, padding and truncation, axes given every way, float64, run-time sizes; checked
against numpy.fft and onnx's ReferenceEvaluator. Bad input is refused naming the node."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator
from onnx_run import run_rill

from rill.graph.errors import InvalidArgumentError
from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(7)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, inits=(), opset=20):
    g = oh.make_graph(nodes, "t", inputs, outputs, list(inits))
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def run_reference(m, feeds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference windows' 0/0 at size 1
        return ReferenceEvaluator(m).run(None, feeds)


def as_complex(y):
    return y[..., 0] + 1j * y[..., 1]


def as_pairs(z, dtype=np.float32):
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def dft_model(shape, elem=TP.FLOAT, *, length=None, axis=None, opset=20, name="dft", **attrs):
    """A DFT node over x (and, when given, dft_length and axis as graph inputs at opset 20 or
    as the attribute before)."""
    ins, vis = ["x"], [vi("x", elem, shape)]
    if length is not None:
        ins.append("n")
        vis.append(vi("n", TP.INT64, []))
    if axis is not None and opset >= 20:
        ins += [""] * (2 - len(ins)) + ["axis"]
        vis.append(vi("axis", TP.INT64, []))
    elif axis is not None:
        attrs["axis"] = axis
    node = oh.make_node("DFT", ins, ["y"], name=name, **attrs)
    return model([node], vis, [vi("y", elem)], opset=opset)


def dft_feeds(x, length=None, axis=None, opset=20):
    feeds = {"x": x}
    if length is not None:
        feeds["n"] = np.int64(length)
    if axis is not None and opset >= 20:
        feeds["axis"] = np.int64(axis)
    return feeds


# -- DFT ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_of_a_complex_input_is_numpys(dtype, inverse):
    z = RNG.standard_normal((3, 6, 5)) + 1j * RNG.standard_normal((3, 6, 5))
    elem = TP.FLOAT if dtype == np.float32 else TP.DOUBLE
    m = dft_model([3, 6, 5, 2], elem, axis=1, inverse=inverse)
    (y,) = run_rill(m, dft_feeds(as_pairs(z, dtype), axis=1))
    want = (np.fft.ifft if inverse else np.fft.fft)(z, axis=1)
    assert y.dtype == dtype and y.shape == (3, 6, 5, 2)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(as_complex(y), want, rtol=tol, atol=tol)


def test_inverse_dft_undoes_the_dft():
    nodes = [oh.make_node("DFT", ["x", "", "axis"], ["f"]),
             oh.make_node("DFT", ["f", "", "axis"], ["y"], inverse=1)]  # fmt: skip
    m = model(nodes, [vi("x", TP.DOUBLE, [2, 9, 2]), vi("axis", TP.INT64, [])],
              [vi("y", TP.DOUBLE)])  # fmt: skip
    x = RNG.standard_normal((2, 9, 2))
    (y,) = run_rill(m, {"x": x, "axis": np.int64(-2)})
    np.testing.assert_allclose(y, x, atol=1e-12)


@pytest.mark.parametrize("n", [5, 7, 8])
def test_onesided_round_trip_with_odd_and_even_lengths(n):
    nodes = [oh.make_node("DFT", ["x", "n", "axis"], ["f"], onesided=1),
             oh.make_node("DFT", ["f", "n", "axis"], ["y"], onesided=1, inverse=1)]  # fmt: skip
    ins = [vi("x", TP.DOUBLE, [3, n, 1]), vi("n", TP.INT64, []), vi("axis", TP.INT64, [])]
    m = model(nodes, ins, [vi("f", TP.DOUBLE), vi("y", TP.DOUBLE)])
    x = RNG.standard_normal((3, n, 1))
    f, y = run_rill(m, {"x": x, "n": np.int64(n), "axis": np.int64(1)})
    assert f.shape == (3, n // 2 + 1, 2) and y.shape == (3, n, 1)
    np.testing.assert_allclose(as_complex(f), np.fft.rfft(x[..., 0], axis=1), atol=1e-12)
    np.testing.assert_allclose(y, x, atol=1e-12)


@pytest.mark.parametrize("length", [3, 6, 11])
@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_length_truncates_or_pads_the_axis(length, onesided):
    x = RNG.standard_normal((2, 6, 1)).astype(np.float32)
    m = dft_model([2, 6, 1], length=length, axis=1, onesided=onesided)
    (y,) = run_rill(m, dft_feeds(x, length, 1))
    fft = np.fft.rfft if onesided else np.fft.fft
    np.testing.assert_allclose(as_complex(y), fft(x[..., 0], n=length, axis=1), atol=1e-5)
    (want,) = run_reference(m, dft_feeds(x, length, 1))
    np.testing.assert_allclose(y, want, atol=1e-5)


@pytest.mark.parametrize("length", [None, 4, 9])
def test_irfft_length_defaults_to_twice_the_bins_less_one(length):
    z = np.fft.rfft(RNG.standard_normal((4, 8)), axis=1)  # [4, 5] bins
    m = dft_model([4, 5, 2], TP.DOUBLE, length=length, axis=1, inverse=1, onesided=1)
    (y,) = run_rill(m, dft_feeds(as_pairs(z, np.float64), length, 1))
    want = np.fft.irfft(z, n=length or 8, axis=1)
    np.testing.assert_allclose(y[..., 0], want, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, 2, -2, -3, -4])
def test_axis_given_as_an_input_at_opset_20(axis):
    x = RNG.standard_normal((3, 4, 5, 1)).astype(np.float32)
    m = dft_model([3, 4, 5, 1], axis=axis)
    (y,) = run_rill(m, dft_feeds(x, axis=axis))
    want = np.fft.fft(x[..., 0], axis=axis if axis >= 0 else axis + 1)
    np.testing.assert_allclose(as_complex(y), want, rtol=1e-5, atol=1e-5)


def test_axis_defaults_to_the_last_signal_axis_at_opset_20_and_1_before():
    x = RNG.standard_normal((3, 4, 5, 1)).astype(np.float32)
    (y20,) = run_rill(dft_model([3, 4, 5, 1]), {"x": x})
    (y17,) = run_rill(dft_model([3, 4, 5, 1], opset=17), {"x": x})
    np.testing.assert_allclose(as_complex(y20), np.fft.fft(x[..., 0], axis=2), atol=1e-5)
    np.testing.assert_allclose(as_complex(y17), np.fft.fft(x[..., 0], axis=1), atol=1e-5)


def test_axis_attribute_before_opset_20():
    x = RNG.standard_normal((2, 3, 4, 2)).astype(np.float32)
    m = dft_model([2, 3, 4, 2], axis=-3, opset=17, inverse=1)
    (y,) = run_rill(m, {"x": x})
    np.testing.assert_allclose(as_complex(y), np.fft.ifft(as_complex(x), axis=1), atol=1e-6)


def test_static_axis_gives_the_static_output_shape():
    g, _, outputs = import_onnx(dft_model([2, 7, 3, 1], opset=17, axis=1, onesided=1))
    assert outputs["y"].shape.as_list() == [2, 4, 3, 2]
    m = model([oh.make_node("DFT", ["x", "n"], ["y"], axis=2, inverse=1, onesided=1)],
              [vi("x", shape=[2, 7, 3, 2])], [vi("y")], [nh.from_array(np.int64(9), "n")],
              opset=17)  # fmt: skip
    assert import_onnx(m)[2]["y"].shape.as_list() == [2, 7, 9, 1]


def test_half_precision_dft():
    x = RNG.standard_normal((2, 8, 1)).astype(np.float16)
    (y,) = run_rill(dft_model([2, 8, 1], TP.FLOAT16, axis=1), dft_feeds(x, axis=1))
    assert y.dtype == np.float16
    want = np.fft.fft(x[..., 0].astype(np.float64), axis=1)
    np.testing.assert_allclose(as_complex(y.astype(np.float64)), want, atol=2e-2)


# -- DFT errors ---------------------------------------------------------------------------------


def test_onesided_forward_dft_of_a_complex_input_is_refused_naming_the_node():
    with pytest.raises(OnnxImportError, match=r"node 'dft' \(DFT.*\(RFFT\) takes a real"):
        import_onnx(dft_model([2, 8, 2], onesided=1))
    # The last dimension known only at run time: the step fails, naming the node's rill op.
    m = dft_model([2, 8, None], onesided=1)
    with pytest.raises(InvalidArgumentError, match=r"(?s)takes a real input.*%dft/DFT"):
        run_rill(m, {"x": np.zeros((2, 8, 2), np.float32)})


def test_irfft_of_a_real_input_is_refused():
    with pytest.raises(OnnxImportError, match=r"node 'dft'.*IRFFT\) takes a complex"):
        import_onnx(dft_model([2, 8, 1], inverse=1, onesided=1))


def test_bad_axis_and_length_are_refused():
    with pytest.raises(OnnxImportError, match=r"node 'dft'.*axis must be in \[-3, -2\] or \[0, 1"):
        import_onnx(dft_model([2, 8, 1], opset=17, axis=-1))
    m = dft_model([2, 8, 1], axis=2)
    with pytest.raises(InvalidArgumentError, match=r"(?s)axis must be in.*got 2.*%dft/DFT"):
        run_rill(m, dft_feeds(np.zeros((2, 8, 1), np.float32), axis=2))
    m = dft_model([2, 8, 1], length=0, axis=1)
    with pytest.raises(InvalidArgumentError, match=r"(?s)dft_length must be >= 1, got 0.*%dft/DFT"):
        run_rill(m, dft_feeds(np.zeros((2, 8, 1), np.float32), 0, 1))
    m = model([oh.make_node("DFT", ["x", "n"], ["y"], name="dft")], [vi("x", shape=[2, 8, 1])],
              [vi("y")], [nh.from_array(np.int64(-3), "n")])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"node 'dft'.*dft_length must be >= 1, got -3"):
        import_onnx(m)


def test_input_without_a_complex_dimension_is_refused():
    with pytest.raises(OnnxImportError, match=r"node 'dft'.*last dimension must be 1 \(real\)"):
        import_onnx(dft_model([2, 8, 3]))
    m = dft_model([2, None, None])
    with pytest.raises(InvalidArgumentError, match=r"(?s)1 \(real\) or 2 \(complex\).*%dft/DFT"):
        run_rill(m, {"x": np.zeros((2, 8, 3), np.float32)})


# -- windows ------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 8, 25])
def test_windows_at_run_time_sizes_match_the_reference(op_type, periodic, size):
    node = oh.make_node(op_type, ["size"], ["w"], periodic=periodic)
    m = model([node], [vi("size", TP.INT64, [])], [vi("w")], opset=17)
    feeds = {"size": np.int64(size)}
    (got,) = run_rill(m, feeds)
    (want,) = run_reference(m, feeds)
    assert got.dtype == np.float32 and got.shape == (size,)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("size", [2, 5, 16])
def test_windows_agree_with_numpys(size):
    windows = {"HannWindow": np.hanning, "HammingWindow": None, "BlackmanWindow": np.blackman}
    for op_type, symmetric in windows.items():
        nodes = [oh.make_node(op_type, ["size"], ["s"], periodic=0, output_datatype=TP.DOUBLE),
                 oh.make_node(op_type, ["size"], ["p"], output_datatype=TP.DOUBLE)]  # fmt: skip
        m = model(nodes, [vi("size", TP.INT32, [])], [vi("s", TP.DOUBLE), vi("p", TP.DOUBLE)],
                  opset=17)  # fmt: skip
        s, p = run_rill(m, {"size": np.int32(size)})
        if symmetric is not None:
            np.testing.assert_allclose(s, symmetric(size), atol=1e-12)
            np.testing.assert_allclose(p, symmetric(size + 1)[:-1], atol=1e-12)
        else:  # ONNX's Hamming: 25/46 - 21/46 cos(2πk/N)
            k = np.arange(size)
            np.testing.assert_allclose(s, 25 / 46 - 21 / 46 * np.cos(2 * np.pi * k / (size - 1)))


def test_symmetric_window_of_size_1_is_nan_as_onnx_defines_it():
    node = oh.make_node("HannWindow", ["size"], ["w"], periodic=0)
    m = model([node], [vi("size", TP.INT64, [])], [vi("w")], opset=17)
    (got,) = run_rill(m, {"size": np.int64(1)})
    assert got.shape == (1,) and np.isnan(got[0])


@pytest.mark.parametrize("elem", [TP.INT32, TP.UINT8, TP.FLOAT16])
def test_window_output_datatype(elem):
    node = oh.make_node("BlackmanWindow", ["size"], ["w"], output_datatype=elem)
    m = model([node], [vi("size", TP.INT32, [])], [vi("w", elem)], opset=17)
    feeds = {"size": np.int32(9)}
    (got,) = run_rill(m, feeds)
    (want,) = run_reference(m, feeds)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=1e-3)


def test_window_output_datatype_that_is_not_a_number_is_refused():
    node = oh.make_node("HannWindow", ["size"], ["w"], output_datatype=TP.BOOL, name="hann")
    m = model([node], [vi("size", TP.INT32, [])], [vi("w", TP.BOOL)], opset=17)
    with pytest.raises(OnnxImportError, match=r"node 'hann'.*output_datatype must be one of"):
        import_onnx(m)


# -- STFT ---------------------------------------------------------------------------------------


def stft_model(signal_shape, *, window=False, frame_length=False, elem=TP.FLOAT, inits=(),
               **attrs):  # fmt: skip
    """An STFT node; inputs named in `inits` (initializers) are constants, not graph inputs."""
    ins = ["signal", "step", "window" if window else "", "length" if frame_length else ""]
    while not ins[-1]:
        ins.pop()
    vis = [vi("signal", elem, signal_shape), vi("step", TP.INT64, [])]
    if window:
        vis.append(vi("window", elem, [None]))
    if frame_length:
        vis.append(vi("length", TP.INT64, []))
    constant = {t.name for t in inits}
    vis = [v for v in vis if v.name not in constant]
    node = oh.make_node("STFT", ins, ["y"], name="stft", **attrs)
    return model([node], vis, [vi("y", elem)], inits, opset=17)


def numpy_stft(x, step, length, window=None, onesided=True):
    z = x[..., 0] + (1j * x[..., 1] if x.shape[-1] == 2 else 0)
    count = (z.shape[1] - length) // step + 1
    frames = np.stack([z[:, f * step : f * step + length] for f in range(count)], axis=1)
    if window is not None:
        frames = frames * window
    return np.fft.rfft(frames.real, axis=2) if onesided else np.fft.fft(frames, axis=2)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("step,length", [(4, 16), (3, 7), (5, 40)])
def test_stft_without_a_window(onesided, step, length):
    x = RNG.standard_normal((2, 40, 1)).astype(np.float32)
    m = stft_model([2, 40, 1], frame_length=True, onesided=onesided)
    feeds = {"signal": x, "step": np.int64(step), "length": np.int64(length)}
    (y,) = run_rill(m, feeds)
    want = numpy_stft(x, step, length, onesided=onesided)
    assert y.shape == (*want.shape, 2)
    np.testing.assert_allclose(as_complex(y), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(y, run_reference(m, feeds)[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_length", [False, True])
def test_stft_with_a_window(onesided, with_length):
    x = RNG.standard_normal((3, 50, 1))
    window = np.hanning(12)
    m = stft_model([3, 50, 1], window=True, frame_length=with_length, elem=TP.DOUBLE,
                   onesided=onesided)  # fmt: skip
    feeds = {"signal": x, "step": np.int64(5), "window": window}
    if with_length:
        feeds["length"] = np.int64(12)
    (y,) = run_rill(m, feeds)
    want = numpy_stft(x, 5, 12, window, onesided=onesided)
    np.testing.assert_allclose(as_complex(y), want, atol=1e-12)


def test_stft_of_a_complex_signal_two_sided():
    x = RNG.standard_normal((1, 30, 2)).astype(np.float32)
    m = stft_model([1, 30, 2], frame_length=True, onesided=0)
    (y,) = run_rill(m, {"signal": x, "step": np.int64(6), "length": np.int64(10)})
    np.testing.assert_allclose(as_complex(y), numpy_stft(x, 6, 10, onesided=False), atol=1e-4)


def test_stft_frame_length_defaults_to_the_signal_length():
    x = RNG.standard_normal((2, 16, 1)).astype(np.float32)
    (y,) = run_rill(stft_model([2, 16, 1]), {"signal": x, "step": np.int64(3)})
    assert y.shape == (2, 1, 9, 2)
    np.testing.assert_allclose(as_complex(y), numpy_stft(x, 3, 16), atol=1e-4)


def test_stft_bad_inputs_are_refused_naming_the_node():
    with pytest.raises(OnnxImportError, match=r"node 'stft'.*onesided=1 takes a real signal"):
        import_onnx(stft_model([1, 30, 2]))
    m = stft_model([1, 30, 1], frame_length=True, inits=[nh.from_array(np.int64(31), "length")])
    with pytest.raises(OnnxImportError, match=r"node 'stft'.*frame_length \(31\) is larger than"):
        import_onnx(m)
    inits = [nh.from_array(np.ones(8, np.float32), "window"), nh.from_array(np.int64(9), "length")]
    m = stft_model([1, 30, 1], window=True, frame_length=True, inits=inits)
    with pytest.raises(OnnxImportError, match=r"node 'stft'.*\(9\) must equal the window's len"):
        import_onnx(m)
    with pytest.raises(OnnxImportError, match=r"node 'stft'.*rank 3"):
        import_onnx(stft_model([30, 1]))


def test_stft_bad_run_time_values_fail_the_step_with_a_message():
    x = np.zeros((1, 30, 1), np.float32)
    m = stft_model([1, None, 1], frame_length=True)
    with pytest.raises(InvalidArgumentError, match=r"(?s)at most the signal's length.*%stft/"):
        run_rill(m, {"signal": x, "step": np.int64(2), "length": np.int64(31)})
    with pytest.raises(InvalidArgumentError, match=r"(?s)frame_step must be >= 1.*%stft/"):
        run_rill(m, {"signal": x, "step": np.int64(0), "length": np.int64(8)})
    m = stft_model([1, 30, 1], window=True, frame_length=True)
    with pytest.raises(InvalidArgumentError, match=r"(?s)window's length must equal.*%stft/"):
        run_rill(m, {"signal": x, "step": np.int64(2), "window": np.ones(8, np.float32),
                     "length": np.int64(9)})  # fmt: skip


# -- MelWeightMatrix ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mels,length,rate,lo,hi",
    [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 8000.0), (5, 31, 22050, 300.0, 6000.0),
     (20, 512, 16000, 0.0, 8000.0)],
)  # fmt: skip
def test_mel_weight_matrix_at_run_time_matches_the_reference(mels, length, rate, lo, hi):
    node = oh.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["w"])
    ins = [vi("m", TP.INT64, []), vi("n", TP.INT64, []), vi("r", TP.INT64, []),
           vi("lo", shape=[]), vi("hi", shape=[])]  # fmt: skip
    m = model([node], ins, [vi("w")], opset=17)
    feeds = {"m": np.int64(mels), "n": np.int64(length), "r": np.int64(rate),
             "lo": np.float32(lo), "hi": np.float32(hi)}  # fmt: skip
    (got,) = run_rill(m, feeds)
    (want,) = run_reference(m, feeds)
    assert got.shape == (length // 2 + 1, mels) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_mel_weight_matrix_output_datatype():
    node = oh.make_node("MelWeightMatrix", ["m", "n", "r", "lo", "hi"], ["w"],
                        output_datatype=TP.DOUBLE)  # fmt: skip
    ins = [vi("m", TP.INT32, []), vi("n", TP.INT32, []), vi("r", TP.INT32, []),
           vi("lo", TP.DOUBLE, []), vi("hi", TP.DOUBLE, [])]  # fmt: skip
    m = model([node], ins, [vi("w", TP.DOUBLE)], opset=17)
    feeds = {"m": np.int32(6), "n": np.int32(32), "r": np.int32(8000),
             "lo": np.float64(100.0), "hi": np.float64(4000.0)}  # fmt: skip
    (got,) = run_rill(m, feeds)
    (want,) = run_reference(m, feeds)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, atol=1e-12)
