"""A register-blocked product for the pointwise (1×1, NCHW) convolutions: W [o, c] · X [c, p].

`gemm_rows` computes rows [m0, m1) of out = a · b, optionally followed by a bias and an
activation (_conv_vec's epilogue: _conv_loops' operations, a NaN kept through every clamp).
Blocks of ROWS rows × NV vectors of columns (VECTOR_BYTES each: the CPU's widest registers)
keep their vector sums in registers over a chunk of DEPTH steps of the inner dimension: each step
loads the NV vectors of b's row once and multiplies them into every row's sums by a's element,
broadcast (a fused multiply-add). The block's elements of a step are broadcast from one pointer:
in place where a's rows have unit stride (a pointwise convolution's filter is a transposed view),
else from a copy of the block's rows packed step by step (eight pointers into a's rows had
outgrown the integer registers and were reloaded from the stack at every step).

gemm_scaled_rows (and its team and batch forms) multiplies b's rows by a scale, b[t, :] · s[t]
rounded as numpy's multiply rounds it, as it packs b (every block then reads b packed): a
squeeze-excite gate applied to a pointwise convolution's input with no pass over the input of
its own (MobileNetV3-small and EfficientNet-B0 ½ 2-5% faster at batch 1 and 8).

Every element is one chain of fused multiply-adds over the inner dimension in order, from
zero, whatever block it falls in: the result does not depend on how the rows are split over
threads, and a row's last, partial block of columns is computed as the whole block ending at
its last column (overlapping the one before it, which it rewrites with the same values), so
no load or store ever reaches past the operands. b must have at least one vector of columns.

Against OpenBLAS with its Haswell kernels (which the environment can force on AVX-512 CPUs)
it ran 1.5–2 times as fast on the pointwise layers of MobileNet, EfficientNet and SqueezeNet,
whose products are small (a few M multiply-adds) and thin (49–3136 columns). On an AVX2 CPU
(Zen 3), one thread, MobileNetV3-small's pointwise shapes took 1178 µs with 64-byte vectors
(their sums spilled to the stack), 574 with AVX2's 32-byte ones and packed rows of a, 512 with
6 × 2-vector blocks and chunks of 64 steps (a chunk of b's rows stays in L1), against OpenBLAS's
443 in all (ahead on the wider products, behind on [96, 576] · [576, 49]).

The loops are emitted as LLVM IR (numba intrinsics, as in _conv_vec). numba caches their
callers by this file: edit it and they are compiled again.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from rill.exec.kernels._conv_loops import _epilogue
from rill.exec.kernels._conv_vec import CO, RAW, VECTOR_BYTES, Vectors, emit_switch
from rill.exec.kernels._conv_vec import _epilogue as _emit_epilogue
from rill.exec.kernels._sigmoid_loops import _fma
from rill.exec.kernels._spin import PIECE_SIG, address, array_at, polling, team_run

# The most bytes of b a pass over the rows reads (a panel of whole blocks of columns of a chunk
# of DEPTH steps, at least one block), packed: the copy stays in the core's L2 while every
# block of rows multiplies it.
PACKED_B = 1 << 16
# The rows of a block, by the vectors of columns it holds (1 or 2): 8 × 2 vectors of sums fill
# half of AVX-512's 32 registers, but outgrow AVX2's 16.
ROWS = {1: CO, 2: CO if VECTOR_BYTES == 64 else 6}
_ROWS1, _ROWS2 = ROWS[1], ROWS[2]  # (for the compiled functions)
# The steps of the inner dimension a block takes at a time (for a thin b, 64 rows of it stay
# in L1 while every block of columns reads them: [96, 576] · [576, 49] 124 -> 103 µs from 256).
DEPTH = 64
# Bytes of padding after each packed block of b, for chunks of _PAD_FROM steps or more (so a
# panel has at most PACKED_B // VECTOR_BYTES // _PAD_FROM padded blocks). Unpadded, the blocks
# of a 64-step chunk (4 KiB each at 16 float32 columns) fell in the same sets of L1, and
# the packing, which writes one row of b into every block of the panel, ran at about 12 GB/s:
# [64, 256] · [256, 1024] (b's rows 4 KiB apart) took 522 µs on one thread against OpenBLAS's
# 403, 420 padded, with b's rows read in order; a GPT-2-like decoder at batch 1, one thread,
# 10.98 -> 9.73 ms (same process, alternating, 11 of 12 rounds won), SqueezeNet 16.4 -> 14.7
# (its Winograd products' filters: rows of 64-256 channels). Default threads: level.
_PAD_BYTES = 64
_PAD_FROM = 8

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

__all__ = ["CO", "RAW", "VECTOR_BYTES", "gemm_rows", "gemm_team", "gemm_stack", "gemm_stack_team",
           "piece_function", "row_dots", "row_dots_team", "row_dot_piece_function",
           "gemm_batch_team", "gemm_scaled_rows", "gemm_scaled_team",
           "gemm_scaled_batch_team"]  # fmt: skip


@intrinsic
def _gemm(typingctx, a, b, scale, out, bias, sa0, sa1, ldb, ss, ldo, m0, m1, n, k, act, nv):
    """out[i·ldo + j] = epilogue(Σ_t a[i·sa0 + t·sa1] · b'[t, j]) for rows m0 <= i < m1 and
    columns j < n (n >= nv vectors), in blocks of ROWS[nv] rows × nv (1 or 2) vectors of
    columns, where b'[t, j] is b[t·ldb + j], or with ss > 0 b[t·ldb + j] · scale[t·ss] rounded
    (numpy's multiply: a squeeze-excite gate on the input's channels), formed as b is packed
    (every block then reads b packed).
    a, b, out are read and written through their data pointers with these element strides."""
    sig = types.void(a, b, scale, out, bias, *([types.int64] * 11))

    def codegen(context, builder, signature, args):
        aa, ba, sca, oa, bia = (context.make_array(signature.args[i])(context, builder, args[i])
                                for i in range(5))  # fmt: skip
        sa0, sa1, ldb, ss, ldo, m0, m1, n, k, act, nv = args[5:]
        kit = Vectors(context, builder, signature.args[0].dtype)
        lanes, vptr, fma, zero = kit.lanes, kit.vptr, kit.fma, kit.zero
        const, broadcast = kit.const, kit.broadcast

        R = ROWS
        scaled = builder.icmp_signed(">", ss, const(0))
        pack = cgutils.alloca_once(builder, kit.elem, size=DEPTH * max(R.values()))
        itemsize = signature.args[0].dtype.bitwidth // 8
        pad = _PAD_BYTES // itemsize
        bpack = cgutils.alloca_once(
            builder,
            kit.elem,
            size=PACKED_B // itemsize + PACKED_B // VECTOR_BYTES // _PAD_FROM * pad,
        )

        def stride(depth, width):
            # A packed block's elements and the padding after it.
            bs = builder.mul(depth, const(width))
            padded = builder.icmp_signed(">=", depth, const(_PAD_FROM))
            return builder.add(bs, builder.select(padded, const(pad), const(0)))

        def smin(x, y):
            return builder.select(builder.icmp_signed("<", x, y), x, y)

        def smax(x, y):
            return builder.select(builder.icmp_signed(">", x, y), x, y)

        def emit(nv, act):
            width = nv * lanes
            nrb = builder.sdiv(builder.add(builder.sub(m1, m0), const(R[nv] - 1)), const(R[nv]))
            nob = builder.sdiv(builder.add(n, const(width - 1)), const(width))
            # The inner dimension in chunks of DEPTH steps (a block's rows of a stay in L1),
            # the columns in panels of as many blocks as keep a chunk of b in PACKED_B.
            nkc = builder.sdiv(builder.add(k, const(DEPTH - 1)), const(DEPTH))
            per = smax(const(1), builder.sdiv(const(PACKED_B // (nv * VECTOR_BYTES)),
                                              smin(k, const(DEPTH))))  # fmt: skip
            # With two blocks of rows or more, a panel's chunk of b is copied row by row into
            # bpack ([block][step][width], each block padded: _PAD_BYTES) and read from
            # there: b's rows in place, 4 KiB apart (a [64, 256] · [256, 1024] product), fell
            # in one set of L1 and were read from L2 (609 -> 430 µs with rows 1040 floats
            # apart).
            # A scaled b is read packed only (the scaling is the packing's).
            packb = builder.or_(builder.icmp_signed(">", nrb, const(1)), scaled)
            npanels = builder.sdiv(builder.add(nob, builder.sub(per, const(1))), per)
            last = builder.sub(m1, const(1))
            with cgutils.for_range(builder, nkc) as chunks:
                k0 = builder.mul(chunks.index, const(DEPTH))
                depth = smin(const(DEPTH), builder.sub(k, k0))
                first_k = builder.icmp_signed("==", chunks.index, const(0))
                last_k = builder.icmp_signed("==", chunks.index, builder.sub(nkc, const(1)))
                with cgutils.for_range(builder, npanels) as panels:
                    first = builder.mul(panels.index, per)
                    count = smin(per, builder.sub(nob, first))
                    with builder.if_then(packb):
                        emit_pack_b(nv, first, count, width, k0, depth)
                    with cgutils.for_range(builder, nrb) as blocks:
                        emit_block(nv, act, blocks.index, first, count, width, last, k0, depth,
                                   first_k, last_k, nob, packb)  # fmt: skip

        def column(index, width):
            # A block's first column, the last, partial one ending at n.
            return smin(builder.mul(index, const(width)), builder.sub(n, const(width)))

        def emit_pack_b(nv, first, count, width, k0, depth):
            bs = stride(depth, width)
            with cgutils.for_range(builder, depth) as steps:
                t = builder.add(steps.index, k0)
                row = builder.mul(t, ldb)
                # The step's scale (with ss 0 the read stays at scale[0] and goes unused).
                factor = broadcast(builder.load(builder.gep(sca.data, [builder.mul(t, ss)])))
                with cgutils.for_range(builder, count) as cols:
                    col = column(builder.add(first, cols.index), width)
                    at = builder.add(row, col)
                    dst = builder.add(builder.mul(cols.index, bs),
                                      builder.mul(steps.index, const(width)))  # fmt: skip
                    for v in range(nv):
                        src = builder.gep(ba.data, [builder.add(at, const(v * lanes))])
                        value = builder.load(builder.bitcast(src, vptr), align=1)
                        value = builder.select(scaled, builder.fmul(value, factor), value)
                        ptr = builder.gep(bpack, [builder.add(dst, const(v * lanes))])
                        builder.store(value, builder.bitcast(ptr, vptr), align=1)

        def emit_block(nv, act, block, first, count, width, last, k0, depth, first_k, last_k, nob,
                       packb):  # fmt: skip
            r0 = builder.add(m0, builder.mul(block, const(R[nv])))
            # Each row's offset into a and out, rows past m1 at m1 - 1's (their sums unused).
            rows = [smin(builder.add(r0, const(c)), last) for c in range(R[nv])]
            arow = [builder.mul(r, sa0) for r in rows]
            # A row's last block of columns, where partial, overlaps the one before it: it runs
            # alone over the whole inner dimension in the last chunk (the one before it has
            # then left its final values, which it rewrites with the same), its sums held in
            # registers from chunk to chunk.
            ragged = builder.icmp_signed("!=", builder.srem(n, const(width)), const(0))
            # A whole block of a's rows with unit stride (a pointwise convolution's [c, o]
            # filter seen transposed) is read in place: its CO elements of a step are
            # consecutive. Other blocks are packed chunk by chunk.
            direct = builder.and_(
                builder.icmp_signed("==", sa0, const(1)),
                builder.icmp_signed("<=", builder.add(r0, const(R[nv])), m1),
            )
            chunk_src = source(nv, direct, arow, r0, k0, depth)
            with cgutils.for_range(builder, count) as cols:
                index = builder.add(first, cols.index)
                col = column(index, width)
                at_end = builder.icmp_signed("==", index, builder.sub(nob, const(1)))
                tail = builder.and_(ragged, at_end)
                with builder.if_else(tail) as (whole, chunk):
                    with whole:
                        with builder.if_then(last_k):
                            sums = emit_sums(nv, rows, col, None)
                            nkc = builder.sdiv(builder.add(k, const(DEPTH - 1)), const(DEPTH))
                            with cgutils.for_range(builder, nkc) as chunks:
                                start = builder.mul(chunks.index, const(DEPTH))
                                steps = smin(const(DEPTH), builder.sub(k, start))
                                src = source(nv, direct, arow, r0, start, steps)
                                at = builder.add(builder.mul(start, ldb), col)
                                bsrc = (builder.gep(ba.data, [at]), ldb)
                                emit_steps(nv, sums, steps, src, bsrc)
                            emit_store(nv, act, r0, sums, col, last_k)
                    with chunk:
                        sums = emit_sums(nv, rows, col, first_k)
                        packed = builder.gep(bpack, [builder.mul(cols.index,
                                                                 stride(depth, width))])  # fmt: skip
                        in_place = builder.gep(ba.data, [builder.add(builder.mul(k0, ldb), col)])
                        bsrc = (builder.select(packb, packed, in_place),
                                builder.select(packb, const(width), ldb))  # fmt: skip
                        emit_steps(nv, sums, depth, chunk_src, bsrc)
                        emit_store(nv, act, r0, sums, col, last_k)

        def source(nv, direct, arow, r0, k0, depth):
            # (pointer, stride): step t's CO elements of the block's rows of a from k0 at
            # pointer + t·stride, in place or packed.
            with builder.if_then(builder.not_(direct)):
                emit_pack(nv, arow, k0, depth)
            at = builder.gep(aa.data, [builder.add(r0, builder.mul(k0, sa1))])
            return builder.select(direct, at, pack), builder.select(direct, sa1, const(R[nv]))

        def emit_pack(nv, arow, k0, depth):
            # The block's rows of a over the chunk, step by step: pack[t·R[nv] + c] = a[row c, k0
            # + t], so that the product loop broadcasts them from one pointer (eight pointers
            # into a's rows had outgrown the integer registers).
            with cgutils.for_range(builder, depth) as steps:
                t = steps.index
                ta = builder.mul(builder.add(t, k0), sa1)
                at = builder.mul(t, const(R[nv]))
                for c in range(R[nv]):
                    value = builder.load(builder.gep(aa.data, [builder.add(arow[c], ta)]))
                    builder.store(value, builder.gep(pack, [builder.add(at, const(c))]))

        def emit_sums(nv, rows, col, from_zero):
            # The sums start from zero (from_zero None: always), or from where the last chunk
            # left them in out.
            sums = []
            for c in range(R[nv]):
                base = builder.add(builder.mul(rows[c], ldo), col)
                sums.append([])
                for v in range(nv):
                    if from_zero is None:
                        start = zero
                    else:
                        ptr = builder.gep(oa.data, [builder.add(base, const(v * lanes))])
                        held = builder.load(builder.bitcast(ptr, vptr), align=1)
                        start = builder.select(from_zero, zero, held)
                    sums[c].append(cgutils.alloca_once_value(builder, start))
            return sums

        def emit_steps(nv, sums, depth, src, bsrc):
            # depth steps: each loads nv vectors of b's row (step t's at bsrc[0] + t·bsrc[1])
            # and multiplies them into every row's sums by the row's element of a (step t's at
            # src[0] + t·src[1]), broadcast.
            with cgutils.for_range(builder, depth) as steps:
                at = builder.mul(steps.index, bsrc[1])
                xs = []
                for v in range(nv):
                    ptr = builder.gep(bsrc[0], [builder.add(at, const(v * lanes))])
                    xs.append(builder.load(builder.bitcast(ptr, vptr), align=1))
                tp = builder.mul(steps.index, src[1])
                for c in range(R[nv]):
                    wv = broadcast(builder.load(builder.gep(src[0], [builder.add(tp, const(c))])))
                    for v in range(nv):
                        acc = builder.load(sums[c][v])
                        builder.store(builder.call(fma, [xs[v], wv, acc]), sums[c][v])

        def emit_store(nv, act, r0, sums, col, last_k):
            for c in range(R[nv]):
                row = builder.add(r0, const(c))
                with builder.if_then(builder.icmp_signed("<", row, m1), likely=True):
                    vals = [builder.load(sums[c][v]) for v in range(nv)]
                    if act != RAW:
                        bv = broadcast(builder.load(builder.gep(bia.data, [row])))
                        vals = [builder.select(last_k, _emit_epilogue(builder, x, bv, act), x)
                                for x in vals]  # fmt: skip
                    base = builder.add(builder.mul(row, ldo), col)
                    for v, value in enumerate(vals):
                        ptr = builder.gep(oa.data, [builder.add(base, const(v * lanes))])
                        builder.store(value, builder.bitcast(ptr, vptr), align=1)

        emit_switch(builder, builder.add(builder.mul(builder.add(act, const(1)), const(4)), nv),
                    {(a + 1) * 4 + w: (lambda w=w, a=a: emit(w, a)) for w in (1, 2)
                     for a in (RAW, 0, 1, 2, 3, 4)})  # fmt: skip
        return context.get_dummy_value()

    return sig, codegen


@_jit
def gemm_rows(a, b, out, bias, m0, m1, act):  # pragma: no cover - compiled
    """Rows [m0, m1) of out = a · b (a [m, k] any strides; b [k, n] and out [m, n] with
    contiguous rows, n at least one vector), then `act`: RAW, or an epilogue code with bias
    [m]. m0 a multiple of CO where the rows are split."""
    _rows(a, b, bias, 0, out, bias, m0, m1, act)


@_jit
def gemm_scaled_rows(a, b, s, out, bias, m0, m1, act):  # pragma: no cover - compiled
    """gemm_rows of a and b's rows scaled, b[t, :] · s[t] (s [k], b's dtype): the bits of
    gemm_rows on numpy's b · s[:, None], without that pass over b (a squeeze-excite gate
    applied to a pointwise convolution's input as the product packs it)."""
    _scale_check(b, s)
    _rows(a, b, s, 1, out, bias, m0, m1, act)


@_jit
def _scale_check(b, s):  # pragma: no cover - compiled
    if s.shape[0] != b.shape[0] or s.strides[0] != s.itemsize:
        raise ValueError("gemm: a scale must be contiguous with one element per row of b")


@_jit
def _rows(a, b, s, ss, out, bias, m0, m1, act):  # pragma: no cover - compiled
    # (what gemm_rows does, for the compiled callers: a test may wrap gemm_rows in Python)
    k, n, nv = _shapes(a, b, out, bias, act)
    m0, m1 = max(m0, 0), min(m1, out.shape[0])
    if m1 <= m0:
        return
    isz = out.itemsize
    _columns(address(a), address(b), address(s), address(out), address(bias),
             a.strides[0] // isz, a.strides[1] // isz, b.strides[0] // isz, ss,
             out.strides[0] // isz, m0, m1, n, k, act, nv, out[0, 0])  # fmt: skip


@_jit
def _columns(
    ap, bp, sp, op, biasp, sa0, sa1, ldb, ss, ldo, m0, m1, n, k, act, nv, like
):  # pragma: no cover
    """_gemm over columns [0, n) (n at least one vector; operands at these addresses, `like` a
    scalar of their type; b's rows scaled by the scale at sp where ss > 0) as whole blocks of
    nv vectors, then, where n is not a multiple of their width, one more whole block ending at
    n (one vector where the rest fits in one), a product of its own run after the first: it
    rewrites the columns it shares with the last block with the same values. (A block
    overlapping the one before it inside _gemm is computed over the whole inner dimension at
    once, from b and a in place: [96, 576] · [576, 49] took 91 µs on Zen 3, against 63 for 48
    columns; in two products, 83.) So _gemm always gets whole blocks, which a scaled b needs
    (it is scaled as packed). Up to half a vector of columns left over, where a's rows have
    unit stride, are _thin_columns' instead (68 µs; about 4 µs a column there, a block of one
    vector 15)."""
    isz = array_at(ap, 1, like).itemsize
    lanes = VECTOR_BYTES // isz
    whole = n - n % (nv * lanes)
    thin = whole < n and sa0 == 1 and 2 * (n - whole) <= lanes
    a, bias = array_at(ap, 1, like), array_at(biasp, 1, like)
    scale = array_at(sp, 1, like)
    # One call site of _gemm for both products (each emits the whole kernel).
    for part in range(1 if whole == n or thin else 2):
        cols, vecs, shift = whole, nv, 0
        if part == 1:
            vecs = 1 if n - whole <= lanes else nv
            cols = vecs * lanes
            shift = (n - cols) * isz
        _gemm(a, array_at(bp + shift, 1, like), scale, array_at(op + shift, 1, like), bias, sa0,
              sa1, ldb, ss, ldo, m0, m1, cols, k, act, vecs)  # fmt: skip
    if thin:
        _thin_columns(ap, bp, sp, op, biasp, sa1, ldb, ss, ldo, m0, m1, whole, n, k, act, like)


@_jit
def _thin_columns(
    ap, bp, sp, op, biasp, sa1, ldb, ss, ldo, m0, m1, c0, c1, k, act, like
):  # pragma: no cover
    """Columns [c0, c1) (fewer than a vector) of rows [m0, m1) of out = a · b (b's rows scaled
    by the scale at sp where ss > 0), then `act`, for a with unit row stride (a pointwise
    convolution's filter seen transposed): vectorized over the rows, each element the same
    chain of fused multiply-adds over the inner dimension in order, from zero, as a block
    computes it, and the same epilogue (_conv_loops._epilogue's operations); the sums held in a
    buffer of the columns' rows, which stays in L1."""
    rows, cols = m1 - m0, c1 - c0
    a = array_at(ap + m0 * array_at(ap, 1, like).itemsize, (k - 1) * sa1 + rows, like)
    b = array_at(bp, (k - 1) * ldb + c1, like)
    scale = array_at(sp, (k - 1) * ss + 1, like)
    acc = np.zeros((cols, rows), a.dtype)
    for t in range(k):
        at = a[t * sa1 : t * sa1 + rows]
        for j in range(cols):
            bj = b[t * ldb + c0 + j]
            if ss > 0:
                bj = bj * scale[t * ss]
            sums = acc[j]
            for i in range(rows):
                sums[i] = _fma(at[i], bj, sums[i])  # _gemm's fma(b, a, sum)
    out = array_at(op, (m1 - 1) * ldo + c1, like)
    bias = array_at(biasp, m1, like)
    zero = a.dtype.type(0)
    six = a.dtype.type(6)
    for j in range(cols):
        for i in range(rows):
            v = acc[j, i]
            if act != RAW:
                v = _epilogue(v, bias[m0 + i], act, zero, six)
            out[(m0 + i) * ldo + c0 + j] = v


@_jit
def _shapes(a, b, out, bias, act):  # pragma: no cover - compiled
    """(k, n, nv) of out [m, n] = a [m, k] · b [k, n], nv the vectors of columns a block
    holds; ValueError where the shapes disagree, n is under a vector or (act not RAW) the
    bias is shorter than the rows."""
    k, n = b.shape
    if a.shape[1] != k or a.shape[0] != out.shape[0] or out.shape[1] != n:
        raise ValueError("gemm: operands of mismatched shapes")
    if act != RAW and bias.shape[0] < out.shape[0]:
        raise ValueError("gemm: a bias shorter than the rows")
    lanes = VECTOR_BYTES // out.itemsize
    if n < lanes:
        raise ValueError("gemm: fewer columns than one vector")
    return k, n, 2 if n >= 2 * lanes else 1


# A team piece's arguments (int64 cells): the operands' addresses, _gemm's strides and sizes,
# the blocks of rows and the pieces each product is cut in, then the products (a stack of them,
# each piece one product's rows or columns) and the bytes from one product's operands to the
# next's; then the width of the blocks of columns where the pieces are runs of them (0: runs
# of rows) and the element size; then the scale of b's rows (its address, its element stride,
# 0 for none, and the bytes from one product's scale to the next's).
_A, _B, _OUT, _BIAS, _SA0, _SA1, _LDB, _LDO, _M, _N, _K, _ACT, _NV, _BLOCKS, _PIECES = range(15)
_STACK, _SPA, _SPB, _SPO, _COLUMNS, _ISZ = range(15, 21)
_SCALE, _SS, _SPS = range(21, 24)
_NARGS = 24


@_jit
def _piece(v, p, like):  # pragma: no cover - compiled
    s, q = divmod(p, v[_PIECES])
    m0, m1, c0, n = 0, v[_M], 0, v[_N]
    if v[_COLUMNS]:
        # A run of whole blocks of columns, the last piece's to n: a product of its own, with
        # b and out from column c0 (each element the same chain of multiply-adds).
        w = v[_COLUMNS]
        c0 = v[_BLOCKS] * q // v[_PIECES] * w
        if q < v[_PIECES] - 1:
            n = v[_BLOCKS] * (q + 1) // v[_PIECES] * w
        n -= c0
    else:
        rows = _ROWS2 if v[_NV] == 2 else _ROWS1
        m0 = v[_BLOCKS] * q // v[_PIECES] * rows
        m1 = min(v[_M], v[_BLOCKS] * (q + 1) // v[_PIECES] * rows)
    shift = c0 * v[_ISZ]
    _columns(v[_A] + s * v[_SPA], v[_B] + s * v[_SPB] + shift, v[_SCALE] + s * v[_SPS],
             v[_OUT] + s * v[_SPO] + shift, v[_BIAS], v[_SA0], v[_SA1], v[_LDB], v[_SS],
             v[_LDO], m0, m1, n, v[_K], v[_ACT], v[_NV], like)  # fmt: skip


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _piece32(argp, p):  # pragma: no cover - compiled
    _piece(numba.carray(argp, _NARGS), p, np.float32(0))


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _piece64(argp, p):  # pragma: no cover - compiled
    _piece(numba.carray(argp, _NARGS), p, np.float64(0))


def piece_function(dtype) -> int:
    """The address of the team piece function for `dtype` (float32 or float64)."""
    return (_piece32 if dtype.itemsize == 4 else _piece64).address


@_jit
def gemm_team(a, b, out, bias, act, pieces, team, fn):  # pragma: no cover - compiled
    """gemm_rows over all rows in `pieces` pieces, run by the caller and the intra-op pool's
    polling workers (_spin.team_run; fn: piece_function(dtype)): the same bits as one
    gemm_rows call. The pieces are runs of whole blocks of columns where a has no more rows
    than b has columns (and there are `pieces` blocks of them), else of whole blocks of rows:
    a piece of rows reads all of b, and packed it again; a GPT-2-like MLP's [64, 256] ·
    [256, 1024] took 483 µs on one thread, 458-496 in four pieces of rows over two threads and
    264-273 in four of columns (Zen 3). Runs of rows are no more than the threads that may
    take them (the caller and the workers polling): each packs all of b again, and one more
    than a thread's share costs a thread another copy of b (MobileNetV3-small's [96, 576] ·
    [576, 49], two threads: 70 µs in four runs of rows, 62 in two; the whole model at batch 1
    2% faster, same process, alternating)."""
    v = _team_args(a, b, out, bias, act, pieces)
    _team_product(v, team, fn)


@_jit
def gemm_scaled_team(a, b, s, out, bias, act, pieces, team, fn):  # pragma: no cover - compiled
    """gemm_team of a and b's rows scaled by s (gemm_scaled_rows): the same bits as one
    gemm_scaled_rows call."""
    _scale_check(b, s)
    v = _team_args(a, b, out, bias, act, pieces)
    v[_SCALE], v[_SS] = address(s), 1
    _team_product(v, team, fn)


@_jit
def _team_product(v, team, fn):  # pragma: no cover - compiled
    if v[_COLUMNS] == 0:
        v[_PIECES] = max(1, min(v[_PIECES], 1 + polling(team)))
    team_run(team, fn, v, v[_PIECES])


@_jit
def _team_args(a, b, out, bias, act, pieces):  # pragma: no cover - compiled
    k, n, nv = _shapes(a, b, out, bias, act)
    m = out.shape[0]
    isz = out.itemsize
    v = np.zeros(_NARGS, np.int64)
    v[_A], v[_B], v[_OUT], v[_BIAS] = address(a), address(b), address(out), address(bias)
    v[_SCALE] = v[_BIAS]  # (unread: no scale)
    v[_SA0], v[_SA1] = a.strides[0] // isz, a.strides[1] // isz
    v[_LDB], v[_LDO] = b.strides[0] // isz, out.strides[0] // isz
    v[_M], v[_N], v[_K], v[_ACT] = m, n, k, act
    v[_NV] = nv
    v[_ISZ] = isz
    v[_STACK] = 1
    # Runs of whole blocks of columns where a is the smaller operand and there are a piece's
    # worth of them (every piece then reads its own part of b, packing it once, and all of a);
    # else runs of whole blocks of rows (every piece reads all of b).
    width = nv * (VECTOR_BYTES // isz)
    if m <= n and n // width >= pieces:
        v[_COLUMNS] = width
        v[_BLOCKS] = n // width
    else:
        rows = _ROWS2 if nv == 2 else _ROWS1
        v[_BLOCKS] = (m + rows - 1) // rows
    v[_PIECES] = max(1, min(pieces, v[_BLOCKS]))
    return v


@_jit
def _stack_args(a, b, out):  # pragma: no cover - compiled
    if a.shape[0] != b.shape[0] or a.shape[0] != out.shape[0]:
        raise ValueError("gemm: stacks of different lengths")
    if b.strides[2] != b.itemsize or out.strides[2] != out.itemsize:
        raise ValueError("gemm: a stack's b and out need contiguous rows")


@_jit
def gemm_stack(a, b, out, s0, s1):  # pragma: no cover - compiled
    """out[s] = a[s] · b[s] for s0 <= s < s1 (stacks of matrices, each as gemm_rows takes
    them), each product the same bits as its own gemm_rows call."""
    _stack_args(a, b, out)
    bias = np.zeros(1, out.dtype)
    for s in range(max(s0, 0), min(s1, out.shape[0])):
        _rows(a[s], b[s], bias, 0, out[s], bias, 0, out.shape[1], RAW)


@_jit
def gemm_batch_team(a, b, out, bias, act, pieces, team, fn):  # pragma: no cover - compiled
    """out[s] = a · b[s], then `act` (RAW, or an epilogue code with bias [rows]), for each
    product s of the stacks b and out (one matrix a for all: a batch's pointwise convolution)
    through the team, each product's rows in `pieces` pieces of whole row blocks (fn:
    piece_function(dtype)): the same bits as gemm_rows on each product."""
    if out.shape[0] == 0:
        return
    v = _batch_args(a, b, out, bias, act, pieces)
    team_run(team, fn, v, v[_PIECES] * v[_STACK])


@_jit
def gemm_scaled_batch_team(a, b, s, out, bias, act, pieces, team, fn):  # pragma: no cover
    """gemm_batch_team with each product's b scaled by its row of s [stack, k] (b[i]'s rows
    by s[i], as gemm_scaled_rows): the same bits as gemm_scaled_rows on each product."""
    if s.shape[0] != b.shape[0]:
        raise ValueError("gemm: a scale per product of the stack")
    if out.shape[0] == 0:
        return
    _scale_check(b[0], s[0])
    v = _batch_args(a, b, out, bias, act, pieces)
    v[_SCALE], v[_SS], v[_SPS] = address(s), 1, s.strides[0]
    team_run(team, fn, v, v[_PIECES] * v[_STACK])


@_jit
def _batch_args(a, b, out, bias, act, pieces):  # pragma: no cover - compiled
    if b.shape[0] != out.shape[0]:
        raise ValueError("gemm: stacks of different lengths")
    if b.strides[2] != b.itemsize or out.strides[2] != out.itemsize:
        raise ValueError("gemm: a stack's b and out need contiguous rows")
    v = _team_args(a, b[0], out[0], bias, act, pieces)
    v[_STACK] = out.shape[0]
    v[_SPA], v[_SPB], v[_SPO] = 0, b.strides[0], out.strides[0]
    return v


@_jit
def gemm_stack_team(a, b, out, pieces, team, fn):  # pragma: no cover - compiled
    """gemm_stack over the whole stack through the team, each product's rows in `pieces`
    pieces of whole row blocks (fn: piece_function(dtype)): the same bits as gemm_stack."""
    _stack_args(a, b, out)
    if out.shape[0] == 0:
        return
    bias = np.zeros(1, out.dtype)
    v = _team_args(a[0], b[0], out[0], bias, RAW, pieces)
    v[_STACK] = out.shape[0]
    v[_SPA], v[_SPB], v[_SPO] = a.strides[0], b.strides[0], out.strides[0]
    team_run(team, fn, v, v[_PIECES] * v[_STACK])


# -- A few rows times a transposed matrix: out [m, n] = x [m, k] · wᵀ, w [n, k] row-major (a
# classifier head's Linear / Gemm with transB at batch 1-4, whose weight, 2-4 MB, is read from
# memory at every step). OpenBLAS's kernel runs it on one thread; here the rows of w split over
# the team, each row read once, in order (one stream). Each element is x[i] · w[j] summed in
# DOT_CHAINS vectors of lanes (chain u takes the vectors u, u + DOT_CHAINS, ... of the row's
# whole runs of DOT_CHAINS vectors, with fused multiply-adds from zero), the chains added
# ((0 + 1) + (2 + 3)), the lanes in halves (lanes/2 pairs, then lanes/4, ...), then the rest of
# the row in order: the same arithmetic whichever piece, block of rows of x or number of rows
# the element falls in.

DOT_CHAINS = 4
DOT_BLOCK = 4  # rows of x a loaded vector of w is multiplied into


@intrinsic
def _row_dots(typingctx, x, w, out, ldx, ldo, m, ldw, j0, j1, k):
    """out[i·ldo + j] = x[i·ldx :][:k] · w[j·ldw :][:k] for i < m, j0 <= j < j1, as above (x,
    w, out flat): for each row of w, the rows of x DOT_BLOCK at a time (each vector of w loaded
    once for them), then the rest one at a time."""
    sig = types.void(x, w, out, *([types.int64] * 7))

    def codegen(context, builder, signature, args):
        xa, wa, oa = (context.make_array(signature.args[i])(context, builder, args[i])
                      for i in range(3))  # fmt: skip
        ldx, ldo, m, ldw, j0, j1, k = args[3:]
        kit = Vectors(context, builder, signature.args[0].dtype)
        lanes, vptr, fma, const = kit.lanes, kit.vptr, kit.fma, kit.const
        scalar_fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(kit.elem, [kit.elem] * 3),
            f"llvm.fma.f{signature.args[0].dtype.bitwidth}",
        )  # fmt: skip
        step = DOT_CHAINS * lanes
        runs = builder.sdiv(k, const(step))
        body = builder.mul(runs, const(step))

        def halves(v, width):
            idx = ir.VectorType(ir.IntType(32), width)
            lo = builder.shuffle_vector(v, v, ir.Constant(idx, list(range(width))))
            hi = builder.shuffle_vector(v, v, ir.Constant(idx, list(range(width, 2 * width))))
            return builder.fadd(lo, hi)

        def emit(j, row, i0, count):  # rows i0 .. i0 + count - 1 of x times row j of w
            xrows = [builder.mul(builder.add(i0, const(r)), ldx) for r in range(count)]
            chains = [[cgutils.alloca_once_value(builder, kit.zero) for _ in range(DOT_CHAINS)]
                      for _ in range(count)]  # fmt: skip
            with cgutils.for_range(builder, runs) as run:
                t = builder.mul(run.index, const(step))
                for u in range(DOT_CHAINS):
                    tu = builder.add(t, const(u * lanes))
                    ptr = builder.gep(wa.data, [builder.add(row, tu)])
                    wv = builder.load(builder.bitcast(ptr, vptr), align=1)
                    for r in range(count):
                        ptr = builder.gep(xa.data, [builder.add(xrows[r], tu)])
                        xv = builder.load(builder.bitcast(ptr, vptr), align=1)
                        chain = chains[r][u]
                        builder.store(builder.call(fma, [xv, wv, builder.load(chain)]), chain)
            for r in range(count):
                v = [builder.load(c) for c in chains[r]]
                s = builder.fadd(builder.fadd(v[0], v[1]), builder.fadd(v[2], v[3]))
                width = lanes
                while width > 1:
                    width //= 2
                    s = halves(s, width)
                total = cgutils.alloca_once_value(
                    builder, builder.extract_element(s, ir.Constant(ir.IntType(32), 0))
                )
                with cgutils.for_range(builder, builder.sub(k, body)) as tail:
                    tt = builder.add(body, tail.index)
                    xs = builder.load(builder.gep(xa.data, [builder.add(xrows[r], tt)]))
                    ws = builder.load(builder.gep(wa.data, [builder.add(row, tt)]))
                    builder.store(builder.call(scalar_fma, [xs, ws, builder.load(total)]), total)
                at = builder.add(builder.mul(builder.add(i0, const(r)), ldo), j)
                builder.store(builder.load(total), builder.gep(oa.data, [at]))

        blocks = builder.sdiv(m, const(DOT_BLOCK))
        rest = builder.mul(blocks, const(DOT_BLOCK))
        with cgutils.for_range(builder, builder.sub(j1, j0)) as rows:
            j = builder.add(j0, rows.index)
            row = builder.mul(j, ldw)
            with cgutils.for_range(builder, blocks) as block:
                emit(j, row, builder.mul(block.index, const(DOT_BLOCK)), DOT_BLOCK)
            with cgutils.for_range(builder, builder.sub(m, rest)) as one:
                emit(j, row, builder.add(rest, one.index), 1)
        return context.get_dummy_value()

    return sig, codegen


@_jit
def _dot_args(x, w, out):  # pragma: no cover - compiled
    if w.shape[1] != x.shape[1] or out.shape[1] != w.shape[0] or out.shape[0] != x.shape[0]:
        raise ValueError("row_dots: operands of mismatched shapes")
    if x.strides[1] != x.itemsize or w.strides[1] != w.itemsize or out.strides[1] != out.itemsize:
        raise ValueError("row_dots: the rows of x, w and out must be contiguous")


@_jit
def row_dots(x, w, out, j0, j1):  # pragma: no cover - compiled
    """Columns [j0, j1) of out = x · wᵀ (x [m, k], w [n, k], out [m, n], each with contiguous
    rows): each element's bits the same whatever columns a call covers and however many rows
    x has."""
    _dot_args(x, w, out)
    j0, j1 = max(j0, 0), min(j1, out.shape[1])
    if j1 > j0 and x.shape[0] > 0:
        isz = x.itemsize
        _row_dots(x, w, out, x.strides[0] // isz, out.strides[0] // isz, x.shape[0],
                  w.strides[0] // isz, j0, j1, x.shape[1])  # fmt: skip


# A team piece of row_dots: a run of w's rows (out's columns). Arguments (int64 cells):
_RX, _RW, _ROUT, _RLDX, _RLDO, _RM, _RLDW, _RN, _RK, _RPIECES = range(10)
_RNARGS = 10


@_jit
def _row_dot_piece(v, p, like):  # pragma: no cover - compiled
    j0 = v[_RN] * p // v[_RPIECES]
    j1 = v[_RN] * (p + 1) // v[_RPIECES]
    if j1 > j0:
        _row_dots(array_at(v[_RX], 1, like), array_at(v[_RW], 1, like),
                  array_at(v[_ROUT], 1, like), v[_RLDX], v[_RLDO], v[_RM], v[_RLDW], j0, j1,
                  v[_RK])  # fmt: skip


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _row_dot_piece32(argp, p):  # pragma: no cover - compiled
    _row_dot_piece(numba.carray(argp, _RNARGS), p, np.float32(0))


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _row_dot_piece64(argp, p):  # pragma: no cover - compiled
    _row_dot_piece(numba.carray(argp, _RNARGS), p, np.float64(0))


def row_dot_piece_function(dtype) -> int:
    """The address of row_dots_team's piece function for `dtype` (float32 or float64)."""
    return (_row_dot_piece32 if dtype.itemsize == 4 else _row_dot_piece64).address


@_jit
def row_dots_team(x, w, out, pieces, team, fn):  # pragma: no cover - compiled
    """row_dots over all of out's columns in `pieces` runs of them (rows of w) through the team
    (fn: row_dot_piece_function(dtype)): the same bits as one row_dots call."""
    _dot_args(x, w, out)
    if out.shape[0] == 0 or out.shape[1] == 0:
        return
    isz = x.itemsize
    v = np.zeros(_RNARGS, np.int64)
    v[_RX], v[_RW], v[_ROUT] = address(x), address(w), address(out)
    v[_RLDX], v[_RLDO], v[_RM] = x.strides[0] // isz, out.strides[0] // isz, x.shape[0]
    v[_RLDW], v[_RN], v[_RK] = w.strides[0] // isz, out.shape[1], x.shape[1]
    v[_RPIECES] = max(1, min(pieces, out.shape[1]))
    team_run(team, fn, v, v[_RPIECES])
