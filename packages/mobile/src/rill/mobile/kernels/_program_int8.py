"""The compiled loops of fused int8 runs (rill.mobile.program_int8; import that module, not this
one).

A fused run executes consecutive int8 CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and ADD
operators in one call. Each operator reads its int8 input from the tensor arena `q` and writes
its int8 output there, as the per-operator kernels do; in between it works in float32 on the
program's own array `m`:

- `load`: the input, centered (q − zero point, an integer in [−255, 255]), into m;
- the whole-subgraph program's float32 convolution kernels (kernels._program_loops) on those
  integers, without bias: every product and every partial sum is an integer below 2^24 (the
  builder checks 255 · Σ|w| < 2^24 per output channel), so each sum is the reference kernel's
  int32 accumulator exactly, in whatever order the kernels add;
- `requant`: + the int32 bias, then the output stage of common.OutputStage's compiled path —
  the folded float64 arithmetic (one exact product, a floor) where it is exact, else
  MultiplyByQuantizedMultiplier in int64 — into the output's int8 bytes.

ADD uses the kernel's own 65536-entry table of every pair of inputs. So every output is the same
bits as the per-operator path's, which tests/mobile/test_program_int8.py checks.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.mobile.kernels._loops import _requant
from rill.mobile.kernels._program_loops import (
    OP_CONV,
    OP_CONV_TAPS,
    OP_DW,
    OP_GEMM,
    conv,
    conv_taps,
    depthwise,
    gemm,
)

# No fast-math: the output stage's float64 operations must round exactly as common.OutputStage's.
# No reference counting of views (see kernels._program_loops).
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy", _nrt=False)

OP_LOAD, OP_REQUANT, OP_PAIR = 20, 21, 22


@_jit
def load(m, q, p):  # pragma: no cover - compiled
    """m[mo : mo + n] = q[qo : qo + n] − zp as float32. p: qo (bytes), mo (floats), n, zp."""
    qo, mo, n, zp = p[0], p[1], p[2], np.int32(p[3])
    x = q[qo : qo + n]
    y = m[mo : mo + n]
    for i in range(n):
        y[i] = np.float32(np.int32(x[i]) - zp)


@_jit
def requant(m, q, d, ic, p):  # pragma: no cover - compiled
    """q[qo + i] = stage(acc[i] + bias[c]) (c = i mod C) for the exact float32 accumulators acc
    at mo, rows · C of them; when xo >= 0 also m[xo + i] = q[qo + i] − zx (the next operator's
    centered input, so that it needs no load). The per-channel constants are stored tiled to a
    span L (a multiple of C of at least 512 values), so each inner loop is long and contiguous.
    p: mo, qo, n (rows · C), L, folded, do (d: bias · fold + offset, fold, step, each [L],
    then the negative-tie threshold), correct, lo, hi, io (ic: bias, m0, right, add, negfix,
    each [L]; -1 when folded), xo, zx.

    Folded, P = acc · fold + (bias · fold + offset) is _loops.requant_folded_bias's
    (acc + bias) · fold + offset: every term and sum is a multiple of the unit 2^-(31 + r)
    below 2^53 units (OutputStage checks that bound with |acc| + |bias|), so both are the exact
    P and have the same floor."""
    u = np.uint64
    mo, qo, n, span, folded, do = p[0], p[1], p[2], p[3], p[4], p[5]
    correct, lo, hi, io, xo, zx = p[6], p[7], p[8], p[9], p[10], np.float32(p[11])
    acc = m[mo : mo + n]
    out = q[qo : qo + n]
    nxt = m[xo : xo + n] if xo >= 0 else m[0:0]
    if folded:
        c0, fold = d[do : do + span], d[do + span : do + 2 * span]
        step = d[do + 2 * span : do + 3 * span]
        threshold = d[do + 3 * span]
        flo, fhi = np.float64(lo), np.float64(hi)
        for s in range(0, n, span):
            e = u(min(span, n - s))
            s = u(s)
            for j in range(e):
                v = np.float64(acc[s + j]) * fold[j] + c0[j]
                if correct:  # _loops.requant_folded_bias's negative-tie correction
                    v = v - min(max(v * -2147483648.0 + threshold, 0.0), step[j])
                v = np.floor(v)
                v = v if v > flo else flo
                v = v if v < fhi else fhi
                f = np.float32(v)  # an integer in [lo, hi]: exact
                out[s + j] = np.int8(np.int32(f))
                if xo >= 0:
                    nxt[s + j] = f - zx
        return
    bias, m0 = ic[io : io + span], ic[io + span : io + 2 * span]
    right, add = ic[io + 2 * span : io + 3 * span], ic[io + 3 * span : io + 4 * span]
    negfix = ic[io + 4 * span : io + 5 * span]
    for s in range(0, n, span):
        e = u(min(span, n - s))
        s = u(s)
        for j in range(e):
            v = _requant(np.int64(acc[s + j]) + bias[j], m0[j], right[j], add[j], negfix[j],
                         lo, hi)  # fmt: skip
            out[s + j] = np.int8(v)
        if xo >= 0:
            for j in range(e):
                nxt[s + j] = np.float32(out[s + j]) - zx


@_jit
def pair(q, t, p):  # pragma: no cover - compiled
    """q[yo + i] = t[to + (a[i] << 8 | b[i])] over n same-shape int8 inputs (their bits).
    p: ao, bo, yo (bytes), n, to."""
    ao, bo, yo, n, to = p[0], p[1], p[2], p[3], p[4]
    a, b, y = q[ao : ao + n], q[bo : bo + n], q[yo : yo + n]
    table = t[to : to + 65536]
    for i in range(n):
        y[i] = table[((np.int32(a[i]) & 255) << 8) | (np.int32(b[i]) & 255)]


@_jit
def run(prog, m, q, d, ic, t):  # pragma: no cover - compiled
    """Runs a fused int8 program: rows of (operator code, parameter count, parameters...)."""
    pc, n = 0, prog.shape[0]
    while pc < n:
        code, k = prog[pc], prog[pc + 1]
        p = prog[pc + 2 : pc + 2 + k]
        if code == OP_LOAD:
            load(m, q, p)
        elif code == OP_REQUANT:
            requant(m, q, d, ic, p)
        elif code == OP_PAIR:
            pair(q, t, p)
        elif code == OP_GEMM:
            gemm(m, p)
        elif code == OP_CONV:
            conv(m, p)
        elif code == OP_CONV_TAPS:
            conv_taps(m, p)
        elif code == OP_DW:
            depthwise(m, p)
        pc += 2 + k


def compile_run() -> None:
    """Compiles `run` (or loads it from numba's cache) with LLVM's SLP vectoriser on, as
    _program_loops.compile_run does for the float programs (same reasons, same lock)."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        old = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = 1
        try:
            run(np.zeros(0, np.int64), np.zeros(1, np.float32), np.zeros(1, np.int8),
                np.zeros(1, np.float64), np.zeros(1, np.int64), np.zeros(1, np.int8))  # fmt: skip
        finally:
            config.SLP_VECTORIZE = old
