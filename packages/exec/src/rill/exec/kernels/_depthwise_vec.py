"""Register-blocked depthwise tap loops for rill.exec.kernels._conv_loops (import that module).

depthwise_nchw_by_channel sums small planes channels-last: one output position's taps over a
run of channels. Written as numba loops, that reloads the whole filter for every position, and
the channels' partial sums of several positions cannot share a filter load (LLVM will not
vectorize a loop that stores to one array at a distance it cannot prove). Here the loops are
emitted as LLVM IR directly (numba intrinsics, as rill.exec.kernels._spin's atomics are): one
vector of channels (64 bytes: 16 float32, 8 float64) at a time, each filter tap's vector loaded
once and multiplied into the sums of up to MAX_COLUMNS output positions of a row, which stay in
registers over all the taps; the rows of the plane follow one another for the same channels, so
the filter vectors and the input's window stay in cache.

The arithmetic is the generic loops': each sum 0 + x·w(tap 0) + x·w(tap 1) + ... in row-major
tap order, a separate multiply and add (no fused multiply-add, no reassociation), so the results
are bit for bit the numpy kernel's (tests/exec/test_conv_nchw_depthwise.py).

numba caches _conv_loops' compiled code by that file alone: after editing this one, touch
_conv_loops.py (or clear its cache) so that the loops are compiled again.
"""

from __future__ import annotations

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from rill.exec.kernels._conv_vec import VECTOR_BYTES  # bytes per vector of channels

# Output positions a call keeps in registers (a row of a 7×7 plane; with a 5×5 filter, 7 sums,
# a filter vector and the input's make 9 of the 16-32 vector registers).
MAX_COLUMNS = 7


def _columns(k: int, cols: int):
    """The intrinsic for a k×k filter and `cols` output positions a row."""

    @intrinsic
    def taps(typingctx, xf, wf, yf, xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c):
        """yf[ybase + r·yrow + p·c + q] for r < nrows, p < cols, q < nvec·lanes = the k×k sum
        whose first tap reads xf[xbase + r·xrow + p·step + q] (tap (i, j) + i·row + j·col) and
        the filter wf[t·c + q] (t = i·k + j): xf [positions·c], wf [k·k·c], yf [positions·c]
        flat, channels-last, c a multiple of the lanes."""
        sig = types.void(xf, wf, yf, *([types.int64] * 10))

        def codegen(context, builder, signature, args):
            xa, wa, ya = (context.make_array(signature.args[n])(context, builder, args[n])
                          for n in range(3))  # fmt: skip
            xbase, xrow, row, col, step, ybase, yrow, nrows, nvec, c = args[3:]
            dtype = signature.args[0].dtype
            elem = context.get_value_type(dtype)
            lanes = VECTOR_BYTES // (dtype.bitwidth // 8)
            vec = ir.VectorType(elem, lanes)
            vptr = vec.as_pointer()
            i64 = ir.IntType(64)

            def const(v):
                return ir.Constant(i64, v)

            def load(base, at):
                return builder.load(builder.bitcast(builder.gep(base, [at]), vptr), align=1)

            zero = ir.Constant(vec, [0.0] * lanes)
            with cgutils.for_range(builder, nvec) as channels:
                q = builder.mul(channels.index, const(lanes))
                with cgutils.for_range(builder, nrows) as rows:
                    r = rows.index
                    first = builder.add(builder.add(xbase, builder.mul(r, xrow)), q)
                    sums = [zero] * cols
                    for i in range(k):
                        for j in range(k):
                            wv = load(wa.data, builder.add(builder.mul(const(i * k + j), c), q))
                            tap = builder.add(builder.add(first, builder.mul(const(i), row)),
                                              builder.mul(const(j), col))  # fmt: skip
                            for p in range(cols):
                                xv = load(xa.data, builder.add(tap, builder.mul(const(p), step)))
                                sums[p] = builder.fadd(sums[p], builder.fmul(xv, wv))
                    out = builder.add(builder.add(ybase, builder.mul(r, yrow)), q)
                    for p in range(cols):
                        at = builder.add(out, builder.mul(const(p), c))
                        ptr = builder.bitcast(builder.gep(ya.data, [at]), vptr)
                        builder.store(sums[p], ptr, align=1)
            return context.get_dummy_value()

        return sig, codegen

    return taps


_TAPS = {(k, cols): _columns(k, cols) for k in (3, 5) for cols in range(1, MAX_COLUMNS + 1)}
(t3_1, t3_2, t3_3, t3_4, t3_5, t3_6, t3_7) = (_TAPS[3, n] for n in range(1, 8))
(t5_1, t5_2, t5_3, t5_4, t5_5, t5_6, t5_7) = (_TAPS[5, n] for n in range(1, 8))
