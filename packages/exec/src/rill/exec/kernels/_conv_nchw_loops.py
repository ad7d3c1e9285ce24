"""The compiled loops behind rill.exec.kernels.conv_nchw (import that module).

Arrays are C-contiguous and channels-first. The input of one image is split into its padded
stride phases ([c, sh·sw, hq, wq]: rows and columns by their remainder modulo the stride), so
that every filter tap reads, for a run of output rows, one contiguous run of a phase plane at the
phase's width wq (the wq - ow columns past each output row are computed and dropped).
"""

from __future__ import annotations

import numba

from rill.exec.kernels._conv_loops import _epilogue

# error_model="numpy": IEEE results (inf, NaN) instead of exceptions.
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


@_jit
def phases(x, b, ph, hq, wq, sh, sw, top, left):  # pragma: no cover - compiled
    """ph[ci, (y % sh)·sw + (k % sw), (y // sh)·wq + k // sw] = the zero-padded x[b, ci] at
    padded row y and column k (top rows and left columns of padding before the input)."""
    _, c, h, wd = x.shape
    zero = ph.dtype.type(0)
    for ci in range(c):
        for y in range(hq * sh):
            yy = y - top
            py, qy = y % sh, y // sh
            for pc in range(sw):
                dst = ph[ci, py * sw + pc, qy * wq : (qy + 1) * wq]
                if yy < 0 or yy >= h:
                    for k in range(wq):
                        dst[k] = zero
                    continue
                src = x[b, ci, yy]
                for k in range(wq):
                    kk = k * sw + pc - left
                    dst[k] = src[kk] if 0 <= kk < wd else zero


@_jit
def patches(ph, p, wq, kh, kw, sh, sw, dh, dw, a, length):  # pragma: no cover - compiled
    """p[(i·kw + j)·c + ci, :length] = the run of tap (i, j) of channel ci (the rows of the
    [kh·kw·c, o] filter matrix) from column `a` of the output positions at the phase width: one
    contiguous copy per row of p."""
    c = ph.shape[0]
    for i in range(kh):
        ri = i * dh
        for j in range(kw):
            cj = j * dw
            for ci in range(c):
                plane = ph[ci, (ri % sh) * sw + cj % sw]
                start = (ri // sh) * wq + cj // sw + a
                row = p[(i * kw + j) * c + ci]
                for o in range(length):
                    row[o] = plane[start + o]


@_jit
def crop(e, out, b, bias, act, r0, r1, wq):  # pragma: no cover - compiled
    """out[b, oc, r] for r in [r0, r1) = e[oc, (r - r0)·wq :][:ow] (+ bias[oc] and the
    activation `act`, as _conv_loops' epilogue, when bias has elements)."""
    _, co, _, ow = out.shape
    zero, six = out.dtype.type(0), out.dtype.type(6)
    has_bias = bias.shape[0] > 0
    for oc in range(co):
        src = e[oc]
        bq = bias[oc] if has_bias else zero
        for r in range(r0, r1):
            dst = out[b, oc, r]
            base = (r - r0) * wq
            if has_bias:
                for o in range(ow):
                    dst[o] = _epilogue(src[base + o], bq, act, zero, six)
            else:
                for o in range(ow):
                    dst[o] = src[base + o]
