"""CPU kernel for rill.graph.ops.onnx_signal_ops: ONNX's DFT, by numpy.fft in the input's
precision (complex128 for float64, complex64 for float32 and the narrower floats, which round to
their dtype once at the end), as onnxruntime computes it and onnx's expected data holds it."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops.onnx_signal_ops import dft_axis


def _scalar(name: str, v) -> int:
    v = np.asarray(v)
    if v.size != 1:
        raise InvalidArgumentError(f"DFT: {name} must be a scalar, got shape {list(v.shape)}")
    return int(v.reshape(()))


@register_kernel("_OnnxDFT", expensive=True)
def onnx_dft(T, N, inverse, onesided):
    irfft, rfft = inverse and onesided, onesided and not inverse

    def compute(x, axis, *dft_length):
        if x.ndim < 2 or x.shape[-1] not in (1, 2):
            raise InvalidArgumentError(
                f"DFT: input must be [signal dims..., 1 (real) or 2 (complex)], got shape "
                f"{list(x.shape)}"
            )
        try:
            a = dft_axis(_scalar("axis", axis), x.ndim)
        except ValueError as e:
            raise InvalidArgumentError(f"DFT: {e}") from None
        complex_in = x.shape[-1] == 2
        if rfft and complex_in:
            raise InvalidArgumentError(
                f"DFT: onesided=1 (RFFT) takes a real input [..., 1], got a complex one of shape "
                f"{list(x.shape)}"
            )
        if irfft and not complex_in:
            raise InvalidArgumentError(
                f"DFT: onesided=1 with inverse=1 (IRFFT) takes a complex input [..., 2], got a "
                f"real one of shape {list(x.shape)}"
            )
        given = _scalar("dft_length", dft_length[0]) if dft_length else None
        n = given if given is not None else (2 * (x.shape[a] - 1) if irfft else x.shape[a])
        if n < 1:
            what = "dft_length" if given is not None else f"the default length for axis {a}"
            raise InvalidArgumentError(
                f"DFT: {what} must be >= 1, got {n} (input shape {list(x.shape)})"
            )
        real = np.float64 if x.dtype == np.float64 else np.float32
        z = x[..., 0].astype(real)
        if complex_in:
            z = z + np.complex64(1j) * x[..., 1].astype(real)
        if irfft:
            return np.fft.irfft(z, n=n, axis=a)[..., None].astype(T.np)
        if rfft:
            y = np.fft.rfft(z, n=n, axis=a)
        elif inverse:
            y = np.fft.ifft(z, n=n, axis=a)
        else:
            y = np.fft.fft(z, n=n, axis=a)
        return np.stack([y.real, y.imag], axis=-1).astype(T.np)

    return compute
