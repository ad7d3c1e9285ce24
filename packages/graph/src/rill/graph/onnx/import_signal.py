"""ONNX import rules: signal processing (DFT, STFT, the Blackman, Hamming and Hann windows,
MelWeightMatrix).

DFT imports as rill's own _OnnxDFT (rill.graph.ops.onnx_signal_ops; numpy.fft computes it, any
length, O(n log n)). STFT gathers the frames [batch, frames, frame_length, 1 or 2] with a
GatherV2, weights them by the window and transforms them with _OnnxDFT along the frame axis.
The windows and MelWeightMatrix are compositions of TensorFlow's ops (Range, Cos, Floor,
SelectV2...) computed in float64 and cast to output_datatype once, so that their size may be a
run-time value; with every input constant the importer folds them to a Const anyway.
"""

from __future__ import annotations

import math

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, rill_dtype, static
from rill.graph.onnx.import_util import i64 as _i64
from rill.graph.ops.logging_ops import assert_op

F64, I64 = dtypes.float64, dtypes.int64


def _f64(v):
    return const(np.asarray(v, np.float64), F64)


def _cast(t, dtype):
    return t if t.dtype == dtype else op("Cast", [t], {"DstT": dtype})


def _scalar_i64(n, t, what: str):
    """t, a scalar of an integer type, as int64; refused at import when it is not a scalar."""
    if t.shape.rank not in (None, 0) and t.shape.num_elements() != 1:
        raise OnnxImportError(f"{n.where()}: {what} must be a scalar, got shape {t.shape}")
    if t.shape.rank not in (None, 0):
        t = op("Reshape", [t, _i64([])])
    return _cast(t, I64)


def _checked(t, condition, message: str):
    """t, after a run-time check that fails the step with `message` when condition is false."""
    g = t.graph
    check = assert_op(condition, [message], name="Check")
    with g.control_dependencies([check]):
        return op("Identity", [t])


def _dim(t, axis: int):
    """The size of t's axis `axis`, a scalar int64 (a Const when static)."""
    d = t.shape[axis] if t.shape.rank is not None else None
    if d is not None:
        return _i64(d)
    shape = op("Shape", [t], {"out_type": I64})
    return op("StridedSlice", [shape, _i64([axis]), _i64([axis + 1]), _i64([1])],
              {"shrink_axis_mask": 1})  # fmt: skip


def _float_input(n, x, what: str):
    if not x.dtype.is_floating:
        raise OnnxImportError(
            f"{n.where()}: {what} must be float16, bfloat16, float32 or float64, got {x.dtype.name}"
        )


_OUTPUT_DTYPES = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64, dtypes.int8,
                  dtypes.int16, dtypes.int32, dtypes.int64, dtypes.float16, dtypes.float32,
                  dtypes.float64, dtypes.bfloat16)  # fmt: skip


def _output_dtype(n, output_datatype: int):
    out = rill_dtype(output_datatype, f"{n.where()}: output_datatype: ")
    if out not in _OUTPUT_DTYPES:
        raise OnnxImportError(
            f"{n.where()}: output_datatype must be one of "
            f"{', '.join(d.name for d in _OUTPUT_DTYPES)}, got {out.name}"
        )
    return out


# -- DFT ----------------------------------------------------------------------------------------


def _dft(x, axis, dft_length, inverse: bool, onesided: bool):
    lengths = [] if dft_length is None else [dft_length]
    attrs = {"inverse": bool(inverse), "onesided": bool(onesided)}
    return op("_OnnxDFT", [x, axis, lengths], attrs, name="DFT")


@register_onnx_import("DFT")
def dft(n, x, dft_length=None, axis_input=None, *, axis=1, inverse=0, onesided=0):
    """_OnnxDFT. The axis is an attribute (default 1) before opset 20, an optional input
    (default -2) from opset 20 on."""
    _float_input(n, x, "DFT's input")
    for name, v in (("inverse", inverse), ("onesided", onesided)):
        if v not in (0, 1):
            raise OnnxImportError(f"{n.where()}: {name} must be 0 or 1, got {v}")
    if n.opset >= 20:
        axis_t = _i64(-2) if axis_input is None else _scalar_i64(n, axis_input, "axis")
    else:
        axis_t = _i64(axis)
    if dft_length is not None:
        dft_length = _scalar_i64(n, dft_length, "dft_length")
        v = static(dft_length)
        if v is not None and int(v) < 1:
            raise OnnxImportError(f"{n.where()}: dft_length must be >= 1, got {int(v)}")
    return _dft(x, axis_t, dft_length, inverse, onesided)


# -- STFT ---------------------------------------------------------------------------------------


@register_onnx_import("STFT")
def stft(n, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """frames[b, f, i] = signal[b, f · frame_step + i] (GatherV2 along the signal axis), times
    the window, transformed by _OnnxDFT along the frame axis (one-sided by default)."""
    _float_input(n, signal, "STFT's signal")
    if onesided not in (0, 1):
        raise OnnxImportError(f"{n.where()}: onesided must be 0 or 1, got {onesided}")
    s = signal.shape
    if s.rank is not None and s.rank != 3:
        raise OnnxImportError(
            f"{n.where()}: signal must be [batch, signal_length, 1 or 2] (rank 3), got shape {s}"
        )
    if s.rank == 3 and s[2] not in (None, 1, 2):
        raise OnnxImportError(
            f"{n.where()}: signal's last dimension must be 1 (real) or 2 (complex), got shape {s}"
        )
    if onesided and s.rank == 3 and s[2] == 2:
        raise OnnxImportError(
            f"{n.where()}: onesided=1 takes a real signal [batch, signal_length, 1], got a "
            f"complex one of shape {s}; set onesided=0 for a complex signal"
        )
    if window is not None:
        if window.shape.rank not in (None, 1):
            raise OnnxImportError(f"{n.where()}: window must be 1-D, got shape {window.shape}")
        if window.dtype != signal.dtype:
            raise OnnxImportError(
                f"{n.where()}: window ({window.dtype.name}) must have the signal's type "
                f"({signal.dtype.name})"
            )
    step = _scalar_i64(n, frame_step, "frame_step")
    signal_length = _dim(signal, 1)
    if frame_length is not None:
        length = _scalar_i64(n, frame_length, "frame_length")
    elif window is not None:
        length = _dim(window, 0)
    else:
        length = signal_length
    step_v, length_v, signal_v = static(step), static(length), static(signal_length)
    window_v = window.shape[0] if window is not None and window.shape.rank == 1 else None
    if step_v is not None and int(step_v) < 1:
        raise OnnxImportError(f"{n.where()}: frame_step must be >= 1, got {int(step_v)}")
    if length_v is not None and int(length_v) < 1:
        raise OnnxImportError(f"{n.where()}: frame_length must be >= 1, got {int(length_v)}")
    if length_v is not None and window_v is not None and int(length_v) != window_v:
        raise OnnxImportError(
            f"{n.where()}: frame_length ({int(length_v)}) must equal the window's length "
            f"({window_v})"
        )
    if length_v is not None and signal_v is not None and int(length_v) > int(signal_v):
        raise OnnxImportError(
            f"{n.where()}: frame_length ({int(length_v)}) is larger than the signal "
            f"({int(signal_v)} samples); no frame fits"
        )
    if step_v is None:
        step = _checked(step, op("GreaterEqual", [step, _i64(1)]), "STFT: frame_step must be >= 1")
    if length_v is None or signal_v is None:
        fits = op("LogicalAnd", [op("GreaterEqual", [length, _i64(1)]),
                                 op("LessEqual", [length, signal_length])])  # fmt: skip
        length = _checked(
            length, fits, "STFT: frame_length must be >= 1 and at most the signal's length"
        )
    frames = op("AddV2", [op("FloorDiv", [op("Sub", [signal_length, length]), step]), _i64(1)])
    starts = op("Mul", [op("Range", [_i64(0), frames, _i64(1)]), step])
    offsets = op("Range", [_i64(0), length, _i64(1)])
    index = op("AddV2", [op("ExpandDims", [starts, _i64(1)]), op("ExpandDims", [offsets, _i64(0)])])
    framed = op("GatherV2", [signal, index, _i64(1)], {"batch_dims": 0})
    if window is not None:
        if window_v is None or length_v is None:
            same = op("Equal", [_dim(window, 0), length])
            window = _checked(window, same, "STFT: the window's length must equal frame_length")
        framed = op("Mul", [framed, op("ExpandDims", [window, _i64(-1)])])
    return _dft(framed, _i64(2), None, False, bool(onesided))


# -- windows ------------------------------------------------------------------------------------


def _window(n, size, periodic: int, output_datatype: int, coefficients):
    """w[k] = a0 - a1 cos(2πk/N) + a2 cos(4πk/N), k < size, N = size (periodic) or size - 1;
    computed in float64 (a symmetric window of size 1 divides 0 by 0 and is NaN, as ONNX's
    function body for these ops computes it)."""
    if periodic not in (0, 1):
        raise OnnxImportError(f"{n.where()}: periodic must be 0 or 1, got {periodic}")
    out = _output_dtype(n, output_datatype)
    count = op("Maximum", [_scalar_i64(n, size, "size"), _i64(0)])
    k = _cast(op("Range", [_i64(0), count, _i64(1)]), F64)
    period = _cast(count, F64) if periodic else op("Sub", [_cast(count, F64), _f64(1.0)])
    angle = op("Mul", [k, op("RealDiv", [_f64(2 * math.pi), period])])
    a0, a1, a2 = coefficients
    w = op("Sub", [_f64(a0), op("Mul", [_f64(a1), op("Cos", [angle])])])
    if a2:
        w = op("AddV2", [w, op("Mul", [_f64(a2), op("Cos", [op("Mul", [angle, _f64(2.0)])])])])
    return _cast(w, out)


@register_onnx_import("HannWindow")
def hann_window(n, size, *, periodic=1, output_datatype=1):
    return _window(n, size, periodic, output_datatype, (0.5, 0.5, 0.0))


@register_onnx_import("HammingWindow")
def hamming_window(n, size, *, periodic=1, output_datatype=1):
    return _window(n, size, periodic, output_datatype, (25 / 46, 21 / 46, 0.0))


@register_onnx_import("BlackmanWindow")
def blackman_window(n, size, *, periodic=1, output_datatype=1):
    return _window(n, size, periodic, output_datatype, (0.42, 0.5, 0.08))


# -- MelWeightMatrix ----------------------------------------------------------------------------


@register_onnx_import("MelWeightMatrix")
def mel_weight_matrix(n, num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                      upper_edge_hertz, *, output_datatype=1):  # fmt: skip
    """[dft_length // 2 + 1, num_mel_bins] triangles, in float64. The num_mel_bins + 2 edges
    are evenly spaced in mel (mel(f) = 2595 log10(1 + f/700)) from mel(lower_edge_hertz) in
    steps of (mel(upper) - mel(lower)) / (num_mel_bins + 2), as ONNX's definition spaces them,
    and land on spectrogram bins floor((dft_length + 1) · f / sample_rate). Band i rises from
    0 at its left edge l to 1 at its centre c and falls to 0 at its right edge r (exclusive):
    w[j, i] = (j - l)/(c - l) for l ≤ j < c, 1 at j = c, (r - j)/(r - c) for c < j < r."""
    out = _output_dtype(n, output_datatype)
    mels = _scalar_i64(n, num_mel_bins, "num_mel_bins")
    length = _scalar_i64(n, dft_length, "dft_length")
    rate = _cast(_scalar_i64(n, sample_rate, "sample_rate"), F64)
    for name, t in (("lower_edge_hertz", lower_edge_hertz), ("upper_edge_hertz", upper_edge_hertz)):
        _float_input(n, t, name)
        if t.shape.rank not in (None, 0) and t.shape.num_elements() != 1:
            raise OnnxImportError(f"{n.where()}: {name} must be a scalar, got shape {t.shape}")
    lo = op("Reshape", [_cast(lower_edge_hertz, F64), _i64([])])
    hi = op("Reshape", [_cast(upper_edge_hertz, F64), _i64([])])

    def mel(hz):
        return op("Mul", [_f64(2595 / math.log(10)), op("Log1p", [op("RealDiv", [hz, _f64(700)])])])

    lo_mel = mel(lo)
    edges_n = op("AddV2", [mels, _i64(2)])
    step = op("RealDiv", [op("Sub", [mel(hi), lo_mel]), _cast(edges_n, F64)])
    k = _cast(op("Range", [_i64(0), edges_n, _i64(1)]), F64)
    edge_mel = op("AddV2", [op("Mul", [k, step]), lo_mel])
    edge_hz = op(
        "Mul", [_f64(700), op("Expm1", [op("Mul", [edge_mel, _f64(math.log(10) / 2595)])])]
    )
    scale = _cast(op("AddV2", [length, _i64(1)]), F64)
    edge_bin = op("Floor", [op("RealDiv", [op("Mul", [scale, edge_hz]), rate])])

    def band_edge(first: int):
        # edge_bin[first : first + num_mel_bins] as a row [1, num_mel_bins]
        end = op("AddV2", [mels, _i64(first)])
        part = op("StridedSlice", [edge_bin, op("Reshape", [_i64(first), _i64([1])]),
                                   op("Reshape", [end, _i64([1])]), _i64([1])])  # fmt: skip
        return op("ExpandDims", [part, _i64(0)])

    left, centre, right = band_edge(0), band_edge(1), band_edge(2)
    bins = op("AddV2", [op("FloorDiv", [length, _i64(2)]), _i64(1)])
    j = op("ExpandDims", [_cast(op("Range", [_i64(0), bins, _i64(1)]), F64), _i64(1)])
    one = _f64(1.0)
    rise = op("RealDiv", [op("Sub", [j, left]), op("Maximum", [op("Sub", [centre, left]), one])])
    fall = op("RealDiv", [op("Sub", [right, j]), op("Maximum", [op("Sub", [right, centre]), one])])
    rising = op("LogicalAnd", [op("GreaterEqual", [j, left]), op("Less", [j, centre])])
    falling = op("LogicalAnd", [op("Greater", [j, centre]), op("Less", [j, right])])
    # The centre is 1 unless the band is reversed (edges decreasing: ONNX's loops write nothing).
    peak = op("LogicalAnd", [op("Equal", [j, centre]),
                             op("LogicalOr", [op("GreaterEqual", [centre, left]),
                                              op("Greater", [right, centre])])])  # fmt: skip
    zero = op("ZerosLike", [rise])
    w = op("SelectV2", [rising, rise, op("SelectV2", [falling, fall, zero])])
    w = op("SelectV2", [peak, op("OnesLike", [w]), w])
    return _cast(w, out)
