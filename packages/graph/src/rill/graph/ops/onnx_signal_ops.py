"""rill's own op for ONNX's DFT, which no TensorFlow op computes as ONNX specifies it (any axis,
complex numbers as a last dimension of 2, padding or truncation to dft_length, IRFFT); the name
starts with "_": the ONNX importer builds it (import_signal, also for STFT), users do not.
"""

from __future__ import annotations

from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__: list[str] = []


def dft_axis(axis: int, rank: int) -> int:
    """The non-negative position of ONNX's DFT axis in an input of `rank` dimensions.

    The last dimension holds the real and imaginary parts, so the accepted range is
    [-rank, -2] ∪ [0, rank - 2].

    >>> dft_axis(-2, 4), dft_axis(1, 4)
    (2, 1)
    """
    if not -rank <= axis <= rank - 2 or axis == -1:
        raise ValueError(
            f"axis must be in [{-rank}, -2] or [0, {rank - 2}] for an input of rank {rank} (its "
            f"last dimension holds the real and imaginary parts), got {axis}"
        )
    return axis + rank if axis < 0 else axis


def dft_out_length(n: int | None, dft_length: int | None, inverse: bool, onesided: bool):
    """The output's length on the DFT axis for an input length n there (None: unknown)."""
    irfft = inverse and onesided
    if dft_length is None:
        dft_length = None if n is None else (2 * (n - 1) if irfft else n)
    if dft_length is None or irfft or not onesided:
        return dft_length
    return dft_length // 2 + 1


def _dft_shape(op):
    x = op._inputs[0].shape
    inverse, onesided = op.attrs["inverse"], op.attrs["onesided"]
    if op.attrs["N"] > 1:
        raise ValueError(f"dft_length is one optional scalar, got {op.attrs['N']} of them")
    if x.rank is not None and x.rank < 2:
        raise ValueError(f"input must have rank >= 2 ([signal dims..., 1 or 2]), got shape {x}")
    if x.rank is not None and x[-1] is not None:
        if x[-1] not in (1, 2):
            raise ValueError(
                f"the input's last dimension must be 1 (real) or 2 (complex), got shape {x}"
            )
        if onesided and not inverse and x[-1] == 2:
            raise ValueError(
                f"onesided=1 (RFFT) takes a real input [..., 1], got a complex one of shape {x}"
            )
        if onesided and inverse and x[-1] == 1:
            raise ValueError(
                f"onesided=1 with inverse=1 (IRFFT) takes a complex input [..., 2], got a real "
                f"one of shape {x}"
            )
    if x.rank is None:
        return TensorShape(None)
    last = 1 if inverse and onesided else 2
    axis = constant_value(op._inputs[1])
    if axis is None:
        return TensorShape([None] * (x.rank - 1) + [last])
    a = dft_axis(int(axis), x.rank)
    length = None
    if op.attrs["N"] == 1:
        v = constant_value(op._inputs[2])
        if v is not None:
            length = int(v)
            if length < 1:
                raise ValueError(f"dft_length must be >= 1, got {length}")
    dims = list(x)
    dims[a] = dft_out_length(dims[a], length, inverse, onesided)
    dims[-1] = last
    return TensorShape(dims)


defop(
    "_OnnxDFT",
    inputs=["input: T", "axis: int64", "dft_length: N * int64"],
    outputs=["output: T"],
    attrs=[
        "T: {float16, bfloat16, float32, float64}",
        "N: int >= 0 = 0",
        "inverse: bool = false",
        "onesided: bool = false",
    ],
    shape=_dft_shape,
    doc="ONNX's DFT along axis of input [..., 1 (real) or 2 (complex: real, imaginary)], the "
    "axis padded with zeros or truncated to dft_length when given (N = 1); the inverse divides "
    "by the length. onesided: the forward transform of a real input keeps dft_length // 2 + 1 "
    "bins (RFFT); the inverse one reads those bins of a conjugate-symmetric spectrum and gives "
    "a real signal [..., 1] of dft_length (default 2 · (bins - 1)) samples (IRFFT). Computed "
    "in float64 for float64, else in float32.",
)
