"""The compiled loops of fused int8 runs (rill.mobile.program_int8; import that module, not this
one).

A fused run executes consecutive int8 CONV_2D, DEPTHWISE_CONV_2D and ADD operators in one call.
Each operator reads its int8 input from the tensor arena `q` and writes its int8 output there, as
the per-operator kernels do; in between it works in float32 on the program's own array `m`:

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
_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

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
    """q[qo + r·C + c] = stage(acc[r, c] + bias[c]) for the exact float32 accumulators acc at mo.
    p: mo, qo, rows, C, folded, do (d: bias, fold, offset, step, each [C], then the negative
    tie threshold), correct, lo, hi, io (ic: bias, m0, right, add, negfix, each [C]; -1 when
    folded)."""
    mo, qo, rows, c, folded, do = p[0], p[1], p[2], p[3], p[4], p[5]
    correct, lo, hi, io = p[6], p[7], p[8], p[9]
    acc = m[mo : mo + rows * c]
    out = q[qo : qo + rows * c]
    if folded:
        bias, fold = d[do : do + c], d[do + c : do + 2 * c]
        off, step = d[do + 2 * c : do + 3 * c], d[do + 3 * c : do + 4 * c]
        threshold = d[do + 4 * c]
        flo, fhi = np.float64(lo), np.float64(hi)
        # As _loops.requant_folded_bias, operation for operation.
        if correct:
            for r in range(rows):
                a, o = acc[r * c : r * c + c], out[r * c : r * c + c]
                for j in range(c):
                    v = (np.float64(a[j]) + bias[j]) * fold[j] + off[j]
                    t = min(max(v * -2147483648.0 + threshold, 0.0), step[j])
                    v = min(max(np.floor(v - t), flo), fhi)
                    o[j] = np.int8(np.int32(v))
        else:
            for r in range(rows):
                a, o = acc[r * c : r * c + c], out[r * c : r * c + c]
                for j in range(c):
                    v = min(max(np.floor((np.float64(a[j]) + bias[j]) * fold[j] + off[j]), flo),
                            fhi)  # fmt: skip
                    o[j] = np.int8(np.int32(v))
        return
    bias, m0 = ic[io : io + c], ic[io + c : io + 2 * c]
    right, add, negfix = ic[io + 2 * c : io + 3 * c], ic[io + 3 * c : io + 4 * c], \
        ic[io + 4 * c : io + 5 * c]  # fmt: skip
    for r in range(rows):
        a, o = acc[r * c : r * c + c], out[r * c : r * c + c]
        for j in range(c):
            v = _requant(np.int64(a[j]) + bias[j], m0[j], right[j], add[j], negfix[j], lo, hi)
            o[j] = np.int8(v)


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
