"""ONNX import rule: ConvTranspose, as TensorFlow's Conv2DBackpropInput in NCHW.

A transposed convolution is the gradient of a convolution with respect to its input, so a 2-D
ConvTranspose is Conv2DBackpropInput with the ONNX filter [C, M/group, kh, kw] as HWIO
[kh, kw, M/group, C] (groups run as the kernel's grouped path) and `input_sizes` the ONNX output
size. The output size follows ONNX: output_shape when given, else
stride·(in − 1) + output_padding + (k − 1)·dilation + 1 − pad_begin − pad_end, with SAME_UPPER /
SAME_LOWER padding split as ONNX splits it for ConvTranspose (the odd unit at the end for
SAME_UPPER). Output positions no input reaches (output_padding, a larger output_shape) are zero
before the bias, as in ONNX. 1-D runs as 2-D over a unit height; 3-D is the sum, over the depth
taps, of 2-D transposed convolutions placed at their strided depth offsets.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op


def _ints(v, n: int, default: int) -> list[int]:
    return [default] * n if not v else [int(a) for a in v]


def _dim(x, axis: int):
    d = x.shape[axis]
    if d is not None:
        return const(d, dtypes.int32)
    shp = op("Shape", [x], {"out_type": dtypes.int32})
    return op("StridedSlice", [shp, const([axis], dtypes.int32), const([axis + 1], dtypes.int32),
                               const([1], dtypes.int32)], {"shrink_axis_mask": 1})  # fmt: skip


def _geometry(what, in_sizes, kernel, strides, dilations, pads, auto_pad, output_padding,
              output_shape):  # fmt: skip
    """(begin pads, output sizes, end pads as the forward convolution sees them)."""
    nd = len(kernel)
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    out_pad = _ints(output_padding, nd, 0)
    if len(out_pad) == 2 * nd:  # an old form listed begin and end; ONNX uses one per axis
        out_pad = out_pad[:nd]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and not pads:
        if output_shape is None:
            out = [i * s for i, s in zip(in_sizes, strides)]
        else:
            out = [int(o) for o in output_shape][-nd:]
        total = [s * (i - 1) + op_ + e - o
                 for s, i, op_, e, o in zip(strides, in_sizes, out_pad, eff, out)]  # fmt: skip
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
    else:
        if auto_pad not in ("NOTSET", "", "VALID", "SAME_UPPER", "SAME_LOWER"):
            raise OnnxImportError(f"unknown auto_pad {auto_pad!r}")
        p = _ints(pads, 2 * nd, 0) if auto_pad != "VALID" else [0] * (2 * nd)
        begin, end = p[:nd], p[nd:]
        if output_shape is not None:
            out = [int(o) for o in output_shape][-nd:]
        else:
            out = [s * (i - 1) + op_ + e - b - en
                   for s, i, op_, e, b, en in zip(strides, in_sizes, out_pad, eff, begin, end)]  # fmt: skip
    if any(b < 0 for b in begin) or any(o <= 0 for o in out):
        raise OnnxImportError(
            f"{what}: the output size {out} and padding {begin} do not fit the input {in_sizes}"
        )
    # The padding at the end that makes the forward convolution map `out` back to `in_sizes`;
    # negative where the output reaches past every input's footprint (those positions are 0).
    end_eff = [s * (i - 1) + e - b - o for s, i, e, b, o in zip(strides, in_sizes, eff, begin, out)]
    return begin, out, end_eff


def _transpose2d(x, filt, out_hw, strides, dilations, begin, end_eff, group: int, m: int):
    """Conv2DBackpropInput for one 2-D transposed convolution; x NCHW, filt HWIO."""
    grow = [max(0, -e) for e in end_eff]
    end = [max(0, e) for e in end_eff]
    size = [o - g for o, g in zip(out_hw, grow)]
    sizes = op("Pack", [[_dim(x, 0), const(m, dtypes.int32), const(size[0], dtypes.int32),
                         const(size[1], dtypes.int32)]], {"axis": 0})  # fmt: skip
    attrs = {"strides": [1, 1, *strides], "dilations": [1, 1, *dilations], "data_format": "NCHW",
             "padding": "EXPLICIT",
             "explicit_paddings": [0, 0, 0, 0, begin[0], end[0], begin[1], end[1]]}  # fmt: skip
    del group  # the kernel reads the groups off the filter's and input's channel counts
    y = op("Conv2DBackpropInput", [sizes, filt, x], attrs)
    if any(grow):
        y = op("Pad", [y, const([[0, 0], [0, 0], [0, grow[0]], [0, grow[1]]], dtypes.int32)])
    return y


def _filter(w, nd: int):
    """ONNX [C, M/g, k...] → HWIO-like [k..., M/g, C] (a Const when w is one)."""
    perm = [*range(2, 2 + nd), 1, 0]
    if w.op.type == "Const":
        v = np.asarray(w.op.attrs["value"])
        return const(np.ascontiguousarray(v.transpose(perm)))
    return op("Transpose", [w, const(perm, dtypes.int32)])


@register_onnx_import("ConvTranspose")
def conv_transpose(n, x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1,
                   kernel_shape=None, output_padding=None, output_shape=None, pads=None,
                   strides=None):  # fmt: skip
    what = n.where() if n is not None else "ConvTranspose"
    r = x.shape.rank
    if r is None or r < 3 or r > 5:
        raise OnnxImportError(f"{what}: rill imports 1-D to 3-D ConvTranspose, input {x.shape}")
    nd = r - 2
    in_sizes = x.shape.as_list()[2:]
    if any(s is None for s in in_sizes):
        raise OnnxImportError(
            f"{what}: needs the input's spatial sizes statically known, got {x.shape}"
        )
    if w.shape.rank != r or any(d is None for d in w.shape.as_list()[1:]):
        raise OnnxImportError(f"{what}: needs a filter of known shape, got {w.shape}")
    group = int(group)
    kernel = [int(k) for k in (kernel_shape or w.shape.as_list()[2:])]
    if kernel != w.shape.as_list()[2:]:
        raise OnnxImportError(f"{what}: kernel_shape {kernel} disagrees with W {w.shape}")
    m = w.shape[1] * group
    if x.shape[1] is not None and w.shape[0] is not None and x.shape[1] != w.shape[0]:
        raise OnnxImportError(
            f"{what}: X has {x.shape[1]} channels but W {w.shape} expects {w.shape[0]}"
        )
    strides = _ints(strides, nd, 1)
    dilations = _ints(dilations, nd, 1)
    begin, out, end_eff = _geometry(what, in_sizes, kernel, strides, dilations, pads,
                                    auto_pad or "NOTSET", output_padding, output_shape)  # fmt: skip
    filt = _filter(w, nd)
    if nd == 1:
        x2 = op("ExpandDims", [x, const(2, dtypes.int32)])
        f2 = op("ExpandDims", [filt, const(0, dtypes.int32)])
        y = _transpose2d(x2, f2, [1, out[0]], [1, strides[0]], [1, dilations[0]],
                         [0, begin[0]], [0, end_eff[0]], group, m)  # fmt: skip
        y = op("Squeeze", [y], {"squeeze_dims": [2]})
    elif nd == 2:
        y = _transpose2d(x, filt, out, strides, dilations, begin, end_eff, group, m)
    else:
        y = _transpose3d(x, filt, out, strides, dilations, begin, group, m, in_sizes, kernel)
    if b is not None:
        shape = [1, -1] + [1] * nd
        y = op("AddV2", [y, op("Reshape", [b, const(shape, dtypes.int32)])])
    return y


def _transpose3d(x, filt, out, strides, dilations, begin, group, m, in_sizes, kernel):
    """Σ over depth taps kd: the 2-D transposed convolution of every input depth slice with
    filt[kd], its slices landing at depths s·i + d·kd − begin (those inside the output)."""
    d_in, (kd_n, kh, kw) = in_sizes[0], kernel
    c = x.shape[1]
    # [N, C, D, H, W] → [N·D, C, H, W]
    xt = op("Transpose", [x, const([0, 2, 1, 3, 4], dtypes.int32)])
    x4 = op("Reshape", [xt, const([-1, c, in_sizes[1], in_sizes[2]], dtypes.int32)])
    _, out_hw, end_hw = _geometry("ConvTranspose", in_sizes[1:], [kh, kw], strides[1:],
                                  dilations[1:], [begin[1], begin[2], 0, 0], "NOTSET", None,
                                  out[1:])  # fmt: skip
    total = None
    for kd in range(kd_n):
        fk = op("GatherV2", [filt, const(kd, dtypes.int32), const(0, dtypes.int32)])
        y4 = _transpose2d(x4, fk, out_hw, strides[1:], dilations[1:], begin[1:], end_hw, group, m)
        hwm = m * out_hw[0] * out_hw[1]
        y3 = op("Reshape", [y4, const([-1, d_in, hwm], dtypes.int32)])
        # Depth i lands at s·i + d·kd − begin: a one-hot [D_out, D_in] matrix places it.
        place = np.zeros((out[0], d_in), x.dtype.np)
        for i in range(d_in):
            o = strides[0] * i + dilations[0] * kd - begin[0]
            if 0 <= o < out[0]:
                place[o, i] = 1
        placed = op("BatchMatMulV2", [const(place), y3])
        total = placed if total is None else op("AddV2", [total, placed])
    y5 = op("Reshape", [total, const([-1, out[0], m, out_hw[0], out_hw[1]], dtypes.int32)])
    return op("Transpose", [y5, const([0, 2, 1, 3, 4], dtypes.int32)])
