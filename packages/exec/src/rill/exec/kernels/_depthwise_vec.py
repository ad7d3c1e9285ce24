"""Register-blocked depthwise tap loops for rill.exec.kernels._conv_loops (import that module).

depthwise_nchw_by_channel sums small planes channels-last: one output position's taps over a
run of channels. Written as numba loops, that reloads the whole filter for every position, and
the channels' partial sums of several positions cannot share a filter load (LLVM will not
vectorize a loop that stores to one array at a distance it cannot prove). Here the loops are
emitted as LLVM IR directly (numba intrinsics, as rill.exec.kernels._spin's atomics are): one
vector of channels (_conv_vec.VECTOR_BYTES: 16 float32 with AVX-512, 8 with AVX2) at a time, each filter tap's vector loaded
once and multiplied into the sums of up to MAX_COLUMNS output positions of a row, which stay in
registers over all the taps; the rows of the plane follow one another for the same channels, so
the filter vectors and the input's window stay in cache.

The arithmetic is the generic loops': each sum 0 + x·w(tap 0) + x·w(tap 1) + ... in row-major
tap order, a separate multiply and add (no fused multiply-add, no reassociation), so the results
are bit for bit the numpy kernel's (tests/exec/test_conv_nchw_depthwise.py).

numba caches _conv_loops' compiled code by that file's contents alone: after editing this one,
clear its cache (__pycache__/_conv_loops.*.nbi and .nbc) so that the loops are compiled again.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from rill.exec.kernels._conv_vec import RAW, VECTOR_BYTES, Vectors, _epilogue, emit_switch

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


# -- Large planes (depthwise_nchw): blocks of output rows × vectors of columns, summed straight
# from the padded phase planes and stored with their bias and activation. The written-out
# loops (_depthwise_loops) summed a plane's span into a buffer, one position a step and its 9 or
# 25 additions one chain, then copied the buffer into the output rows through the epilogue:
# short rows spent their time in the vector loops' scalar remainders, and a 5×5 chain on its
# own kept the adder waiting. Here a block's ROW_BLOCK × COLUMN_BLOCK vectors of sums are
# independent chains, an input vector loaded once serves every row of the block that reads it
# (stride 1: tap row i of output row r is tap row i + 1 of row r - 1), and the last block of a
# row or of the plane ends at its edge, overlapping the one before it (writing the same
# values again). Zen 3, one thread, the fused kernel with the plane copies included, same
# process, alternating: 88 channels of 28×28, 3×3, Relu 167 -> 110 µs; 72 of 56×56 at
# stride 2, 204 -> 163; 16 of 112×112, Swish 350 -> 328 (the Swish pass unchanged);
# MobileNetV3-small b1 about 1.5% faster. 5×5 filters on planes of up to 1024 outputs stay
# channels-innermost (depthwise_nchw_by_channel): at 28×28 the two were level.

ROW_BLOCK = 2
COLUMN_BLOCK = 2


def _plane_rows(k: int, s: int):
    """The intrinsic for k×k filters at stride s (dilation 1) over phase planes."""

    @intrinsic
    def rows(typingctx, ph, wv, out, xbase, wq, plane, nrows, obase, ow, bq, act):
        """out[obase + r·ow + col] for r < nrows, col < ow (ow at least one vector) = the
        epilogue `act` (_conv_vec: RAW, or + bq then code 0-4) of 0 + x·w(tap 0) + x·w(tap 1)
        + ... in row-major tap order, a separate multiply and add each (the numpy kernel's
        operations), tap (i, j) of output (r, col) being ph[xbase + ((i % s)·s + j % s)·plane
        + (r + i // s)·wq + col + j // s] and wv[i·k + j] (ph flat phases, rows wq long)."""
        sig = types.void(ph, wv, out, *([types.int64] * 6), bq, types.int64)

        def codegen(context, builder, signature, args):
            pa, wa, oa = (context.make_array(signature.args[n])(context, builder, args[n])
                          for n in range(3))  # fmt: skip
            xbase, wq, plane, nrows, obase, ow, bq, act = args[3:]
            kit = Vectors(context, builder, signature.args[0].dtype)
            lanes, vptr, const = kit.lanes, kit.vptr, kit.const
            bias = kit.broadcast(bq)

            def last_at(index, size, end):
                """index·size, or end - size where that block would reach past end."""
                at = builder.mul(index, const(size))
                past = builder.icmp_signed(">", builder.add(at, const(size)), end)
                return builder.select(past, builder.sub(end, const(size)), at)

            def emit(nr, nv, act):
                width = nv * lanes
                blocks = builder.sdiv(builder.add(nrows, const(nr - 1)), const(nr))
                cols = builder.sdiv(builder.add(ow, const(width - 1)), const(width))
                with cgutils.for_range(builder, blocks) as rb:
                    r = last_at(rb.index, nr, nrows)
                    with cgutils.for_range(builder, cols) as cb:
                        col = last_at(cb.index, width, ow)
                        start = builder.add(builder.add(xbase, builder.mul(r, wq)), col)
                        phase = {}
                        loaded = {}
                        sums = [[kit.zero] * nv for _ in range(nr)]
                        for t in range(k * k):
                            i, j = divmod(t, k)
                            p = (i % s) * s + j % s
                            if p not in phase:
                                phase[p] = builder.add(start, builder.mul(plane, const(p)))
                            w = kit.broadcast(builder.load(builder.gep(wa.data, [const(t)])))
                            for a in range(nr):
                                for v in range(nv):
                                    key = (p, a + i // s, j // s + v * lanes)
                                    x = loaded.get(key)
                                    if x is None:
                                        at = builder.add(
                                            phase[p],
                                            builder.add(
                                                builder.mul(wq, const(key[1])), const(key[2])
                                            ),
                                        )
                                        ptr = builder.bitcast(builder.gep(pa.data, [at]), vptr)
                                        x = loaded[key] = builder.load(ptr, align=1)
                                    sums[a][v] = builder.fadd(sums[a][v], builder.fmul(x, w))
                        base = builder.add(builder.add(obase, builder.mul(r, ow)), col)
                        for a in range(nr):
                            for v in range(nv):
                                value = sums[a][v]
                                if act != RAW:
                                    value = _epilogue(builder, value, bias, act)
                                at = builder.add(base, const(v * lanes))
                                at = builder.add(at, builder.mul(ow, const(a)))
                                ptr = builder.bitcast(builder.gep(oa.data, [at]), vptr)
                                builder.store(value, ptr, align=1)

            shapes = ((ROW_BLOCK, COLUMN_BLOCK), (ROW_BLOCK, 1), (1, 1))
            tall = builder.icmp_signed(">=", nrows, const(ROW_BLOCK))
            wide = builder.icmp_signed(">=", ow, const(COLUMN_BLOCK * lanes))
            shape = builder.select(tall, builder.select(wide, const(0), const(1)), const(2))
            key = builder.add(builder.mul(builder.add(act, const(1)), const(4)), shape)
            emit_switch(builder, key, {(a + 1) * 4 + n: (lambda n=n, a=a: emit(*shapes[n], a))
                                       for n in range(3) for a in (RAW, 0, 1, 2, 3, 4)})  # fmt: skip
            return context.get_dummy_value()

        return sig, codegen

    return rows


(rows_3s1, rows_3s2, rows_5s1, rows_5s2) = (_plane_rows(k, s) for k in (3, 5) for s in (1, 2))


# -- Blocks of 8 channels × 8 positions, transposed in registers: the copies into and
# out of the channels-last buffers of depthwise_nchw_by_channel. Copied one element at a time,
# each element of one side was a strided access on the other, and the copies took as long as the
# sums. Here a block is 8 vector loads, 24 shuffles and 8 vector stores.

BLOCK = 8  # channels and positions of a block


def _mask(*lanes):
    return ir.Constant(ir.VectorType(ir.IntType(32), BLOCK), list(lanes))


def _vector_pointer(context, array_type):
    """The pointer type of a vector of BLOCK elements of the array's dtype."""
    return ir.VectorType(context.get_value_type(array_type.dtype), BLOCK).as_pointer()


def _transposed(builder, rows):
    """The 8 vectors of 8 lanes `rows` transposed: result j holds lane j of every row."""
    shuffle = builder.shuffle_vector
    low, high = _mask(0, 8, 1, 9, 4, 12, 5, 13), _mask(2, 10, 3, 11, 6, 14, 7, 15)
    pairs = []  # lanes of rows 2k and 2k+1 interleaved: low (0, 1, 4, 5), high (2, 3, 6, 7)
    for k in range(0, BLOCK, 2):
        pairs += [shuffle(rows[k], rows[k + 1], low), shuffle(rows[k], rows[k + 1], high)]
    even, odd = _mask(0, 1, 8, 9, 4, 5, 12, 13), _mask(2, 3, 10, 11, 6, 7, 14, 15)
    quads = []  # rows 0-3 (first four) and 4-7: lanes (0, 4), (1, 5), (2, 6), (3, 7)
    for base in (0, 4):
        a, b, c, d = pairs[base : base + 4]  # lo(r, r+1), hi(r, r+1), lo(r+2, r+3), hi(r+2, r+3)
        quads += [shuffle(a, c, even), shuffle(a, c, odd), shuffle(b, d, even), shuffle(b, d, odd)]
    first, second = _mask(0, 1, 2, 3, 8, 9, 10, 11), _mask(4, 5, 6, 7, 12, 13, 14, 15)
    out = [None] * BLOCK
    for j in range(4):
        out[j] = shuffle(quads[j], quads[4 + j], first)
        out[j + 4] = shuffle(quads[j], quads[4 + j], second)
    return out


@intrinsic
def block_in(typingctx, xf, s0, ss, dst, doff, p0, q0):
    """dst[doff[p0 + j] + q0 + i] = xf[s0 + i·ss + j] for i, j < 8 (xf, dst flat, of one float
    dtype; doff int64): 8 channels' runs of 8 positions (channel i's at s0 + i·ss) to the channels-last
    places of those positions."""
    sig = types.void(xf, types.int64, types.int64, dst, doff, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        xa, da, oa = (context.make_array(signature.args[n])(context, builder, args[n])
                      for n in (0, 3, 4))  # fmt: skip
        s0, ss, p0, q0 = args[1], args[2], args[5], args[6]
        vptr = _vector_pointer(context, signature.args[0])
        i64 = ir.IntType(64)
        rows = []
        for i in range(BLOCK):
            at = builder.add(s0, builder.mul(ss, ir.Constant(i64, i)))
            rows.append(builder.load(builder.bitcast(builder.gep(xa.data, [at]), vptr), align=4))
        for j, v in enumerate(_transposed(builder, rows)):
            place = builder.load(builder.gep(oa.data, [builder.add(p0, ir.Constant(i64, j))]))
            at = builder.add(place, q0)
            builder.store(v, builder.bitcast(builder.gep(da.data, [at]), vptr), align=4)
        return context.get_dummy_value()

    return sig, codegen


def _activation(builder, v, act, dtype):
    """_conv_loops._epilogue's activation `act` (1-4) on a vector of `dtype` (numpy's), the
    same operations in the same order, each rounded to the dtype; each clamp keeps a NaN."""
    vec = v.type

    def const(x):
        return ir.Constant(vec, [float(x)] * BLOCK)

    def clamp(t, op, bound):  # t op bound ? t : bound, but NaN stays
        m = builder.select(builder.fcmp_ordered(op, t, const(bound)), t, const(bound))
        return builder.select(builder.fcmp_unordered("uno", t, t), t, m)

    if act >= 3:
        t = builder.fmul(v, const(dtype.type(1) / dtype.type(6)))  # 1/6 rounded to the dtype
        t = builder.fadd(t, const(0.5))
        t = clamp(clamp(t, "<", 1), ">", 0)
        return t if act == 3 else builder.fmul(v, t)
    v = clamp(v, ">", 0)
    return clamp(v, "<", 6) if act == 2 else v


def _block_out(act):
    """block_out for `act` (-1: the sums as they are; 0-4: + bias, then the activation)."""

    @intrinsic
    def block_out(typingctx, yf, s0, ss, bias, q0, dst, d0, ds):
        """dst[d0 + j·ds + i] = f(yf[s0 + i·ss + j]) for i, j < 8 (float32, flat): 8
        positions' runs of 8 channels (channels q0 + j) to those channels' planes, f being
        + bias[q0 + j] and the activation (_conv_loops._epilogue's), or nothing (yf, bias,
        dst flat, of one float dtype)."""
        sig = types.void(yf, types.int64, types.int64, bias, types.int64, dst, types.int64,
                         types.int64)  # fmt: skip

        def codegen(context, builder, signature, args):
            ya, ba, da = (context.make_array(signature.args[n])(context, builder, args[n])
                          for n in (0, 3, 5))  # fmt: skip
            s0, ss, q0, d0, ds = args[1], args[2], args[4], args[6], args[7]
            vptr = _vector_pointer(context, signature.args[0])
            dtype = np.dtype(str(signature.args[0].dtype))
            i64 = ir.IntType(64)
            bv = None
            if act >= 0:
                bv = builder.load(builder.bitcast(builder.gep(ba.data, [q0]), vptr), align=4)
            rows = []
            for i in range(BLOCK):
                at = builder.add(s0, builder.mul(ss, ir.Constant(i64, i)))
                v = builder.load(builder.bitcast(builder.gep(ya.data, [at]), vptr), align=4)
                if act >= 0:
                    v = builder.fadd(v, bv)
                    if act > 0:
                        v = _activation(builder, v, act, dtype)
                rows.append(v)
            for j, v in enumerate(_transposed(builder, rows)):
                at = builder.add(d0, builder.mul(ds, ir.Constant(i64, j)))
                builder.store(v, builder.bitcast(builder.gep(da.data, [at]), vptr), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return block_out


(out_sums, out_0, out_1, out_2, out_3, out_4) = (_block_out(a) for a in range(-1, 5))


# -- Max pooling, 3×3 windows at stride 2 (SqueezeNet's): a row of outputs in vectors. The
# compiled loop over short rows (55, 27, 13 outputs) spent most of its time in the scalar
# remainders of its vector loops. Here one call computes a vector of outputs (VECTOR_BYTES: 16
# float32 with AVX-512) from 4 loads of each of the 3 input rows.


def _maximum(builder, a, v):
    """_loops._max on vectors: a NaN in a gives a, else a where a > v, else v."""
    m = builder.select(builder.fcmp_ordered(">", a, v), a, v)
    return builder.select(builder.fcmp_unordered("uno", a, a), a, m)


@intrinsic
def pool_3x3s2(typingctx, xf, first, row, of, at):
    """of[at + j] for j < lanes = the maximum of xf's 3×3 window whose first tap is
    xf[first + 2j] (rows `row` apart): each column's rows taken first, in order, then the
    window's three columns, left to right, with _loops._max's operations (max_pool_nchw's
    order, so its bits). Reads xf[first + r·row + c] for r < 3, c <= 2·lanes only."""
    sig = types.void(xf, types.int64, types.int64, of, types.int64)

    def codegen(context, builder, signature, args):
        xa, oa = (context.make_array(signature.args[n])(context, builder, args[n]) for n in (0, 3))
        first, row, at = args[1], args[2], args[4]
        dtype = signature.args[0].dtype
        lanes = VECTOR_BYTES // (dtype.bitwidth // 8)
        vptr = ir.VectorType(context.get_value_type(dtype), lanes).as_pointer()
        i64 = ir.IntType(64)

        def column_max(offset):  # the 3 rows' maximum of the vector at `offset` columns
            acc = None
            for r in range(3):
                at_r = builder.add(builder.add(first, builder.mul(row, ir.Constant(i64, r))),
                                   ir.Constant(i64, offset))  # fmt: skip
                v = builder.load(builder.bitcast(builder.gep(xa.data, [at_r]), vptr), align=1)
                acc = v if acc is None else _maximum(builder, acc, v)
            return acc

        # columns [0, L), [L, 2L) give the windows' first and second columns (even, odd);
        # [2, L + 2) and [L + 1, 2L + 1) their third (2, 4, ..., 2L).
        a, b = column_max(0), column_max(lanes)
        c, d = column_max(2), column_max(lanes + 1)

        def pick(u, v, idx):
            return builder.shuffle_vector(
                u, v, ir.Constant(ir.VectorType(ir.IntType(32), lanes), idx)
            )

        even = pick(a, b, [2 * j for j in range(lanes)])
        odd = pick(a, b, [2 * j + 1 for j in range(lanes)])
        third = pick(c, d, [2 * j if 2 * j < lanes else 2 * j + 1 for j in range(lanes)])
        out = _maximum(builder, _maximum(builder, even, odd), third)
        ptr = builder.bitcast(builder.gep(oa.data, [at]), vptr)
        builder.store(out, ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


# -- numpy's pairwise sums of rows (Sum and Mean over trailing axes: a global average pool).
# numpy sums a run of at most 128 values as 8 running sums (r[j] += x[i + j] over the whole
# blocks of 8), combines them ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) and adds the
# rest one at a time; a longer run is split (rolling_leaves' program) and its halves added. The
# 8 running sums are one vector here, and 4 rows' leaves run side by side: 4 independent chains
# of additions where numpy's single chain waited on each add's latency.

LEAF_ROWS = 4


@intrinsic
def leaf_rows(typingctx, xf, base, stride, s, n, sums, at):
    """sums[at + q] = numpy's pairwise leaf sum (n <= 128 values, as above) of xf[base +
    q·stride + s :][:n] for q < LEAF_ROWS, the same additions in the same order (below 8
    values: 0 + each in order)."""
    sig = types.void(xf, types.int64, types.int64, types.int64, types.int64, sums, types.int64)

    def codegen(context, builder, signature, args):
        xa, sa = (context.make_array(signature.args[n_])(context, builder, args[n_])
                  for n_ in (0, 5))  # fmt: skip
        base, stride, s, n, at = args[1], args[2], args[3], args[4], args[6]
        dtype = signature.args[0].dtype
        elem = context.get_value_type(dtype)
        vec = ir.VectorType(elem, 8)
        vptr = vec.as_pointer()
        i64 = ir.IntType(64)

        def const(v):
            return ir.Constant(i64, v)

        starts = [builder.add(builder.add(base, builder.mul(stride, const(q))), s)
                  for q in range(LEAF_ROWS)]  # fmt: skip
        results = [cgutils.alloca_once(builder, elem) for _ in range(LEAF_ROWS)]
        short = builder.icmp_signed("<", n, const(8))
        with builder.if_else(short) as (few, many):
            with few:
                for q in range(LEAF_ROWS):
                    builder.store(ir.Constant(elem, 0.0), results[q])
                    with cgutils.for_range(builder, n) as loop:
                        v = builder.load(builder.gep(xa.data, [builder.add(starts[q], loop.index)]))
                        builder.store(builder.fadd(builder.load(results[q]), v), results[q])
            with many:
                accs = [cgutils.alloca_once_value(
                    builder, builder.load(builder.bitcast(builder.gep(xa.data, [st]), vptr),
                                          align=1)) for st in starts]  # fmt: skip
                blocks = builder.sdiv(n, const(8))
                with cgutils.for_range(builder, builder.sub(blocks, const(1))) as loop:
                    off = builder.mul(builder.add(loop.index, const(1)), const(8))
                    for q in range(LEAF_ROWS):
                        ptr = builder.gep(xa.data, [builder.add(starts[q], off)])
                        v = builder.load(builder.bitcast(ptr, vptr), align=1)
                        builder.store(builder.fadd(builder.load(accs[q]), v), accs[q])
                end = builder.mul(blocks, const(8))
                for q in range(LEAF_ROWS):
                    r = builder.load(accs[q])
                    lane = [builder.extract_element(r, ir.Constant(ir.IntType(32), j))
                            for j in range(8)]  # fmt: skip
                    add = builder.fadd
                    total = add(add(add(lane[0], lane[1]), add(lane[2], lane[3])),
                                add(add(lane[4], lane[5]), add(lane[6], lane[7])))  # fmt: skip
                    builder.store(total, results[q])
                    with cgutils.for_range(builder, builder.sub(n, end)) as loop:
                        at_q = builder.add(starts[q], builder.add(end, loop.index))
                        v = builder.load(builder.gep(xa.data, [at_q]))
                        builder.store(builder.fadd(builder.load(results[q]), v), results[q])
        for q in range(LEAF_ROWS):
            builder.store(builder.load(results[q]),
                          builder.gep(sa.data, [builder.add(at, const(q))]))  # fmt: skip
        return context.get_dummy_value()

    return sig, codegen
