"""A register-blocked direct convolution over stride phases, for rill.exec.kernels.conv_nchw.

conv_nchw's phases put every filter tap's inputs for a run of output columns in one contiguous
run (`_conv_loops.conv_phases`). `direct_rows` sums the convolution straight from them: for a
block of CO output channels and nv vectors of output columns (VECTOR_BYTES each: 16 float32
with AVX-512, 8 with AVX2) it keeps the vector sums in registers over all the taps, each tap loading its NV input
vectors once and multiplying them into every channel's sums by the tap's weight, broadcast (a
fused multiply-add). That is an implicit GEMM with no patch matrix: the patches and a BLAS call
had cost an RGB stem 1.5–3 times as long. The sums then get the bias and the activation in
registers (_conv_loops' epilogue: the same operations, a NaN kept through every clamp) and go
straight to the output, the columns past the output's width dropped.

The loops are emitted as LLVM IR (numba intrinsics, as in _depthwise_vec), because numba's own
loops cannot keep that many sums in registers. numba caches their callers by this file: edit it
and they are compiled again.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from rill.exec.kernels import _spin
from rill.exec.kernels._sigmoid_loops import sigmoid32_span

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")


def _vector_bytes() -> int:
    """Bytes per vector the loops are emitted with: the widest registers the CPU numba
    compiles for has (64 with AVX-512, 32 with AVX, 16 otherwise: SSE, NEON). Wider vectors
    than the registers are split by LLVM into several, and a block's sums then outgrow the
    register file: with 64-byte vectors on an AVX2 CPU the pointwise products ran at a third
    of OpenBLAS's speed, spilling sums to the stack at every step."""
    import llvmlite.binding as llvm

    features = numba.config.CPU_FEATURES
    if features is not None:  # NUMBA_CPU_FEATURES: "+avx2,-avx512f,..."
        on = {f[1:] for f in features.split(",") if f.startswith("+")}
    elif numba.config.CPU_NAME is not None:  # NUMBA_CPU_NAME alone (e.g. "generic")
        on = set()
    else:
        host = llvm.get_host_cpu_features()
        on = {name for name, enabled in host.items() if enabled}
    if "avx512f" in on:
        return 64
    return 32 if "avx" in on else 16


# Output channels a block keeps in registers, and bytes per vector of output columns.
CO = 8
VECTOR_BYTES = _vector_bytes()
# The vectors of columns a block of _block's can hold: 8 channels × 2 with AVX-512's 32
# registers; 8 × 1 or 4 × 3 (half a block at a time) with AVX2's 16 (Zen 3, one thread:
# MobileNetV3-small's RGB stem 271 -> 241 µs with 4 × 3 against 8 × 1, SqueezeNet's 852 -> 687).
NV = (1, 2) if VECTOR_BYTES == 64 else (1, 3)
# The epilogue codes: RAW stores the sums as they are; 0-4 add the bias, then _conv_loops'
# activation (0 none, 1 Relu, 2 Relu6, 3 HardSigmoid, 4 HardSwish).
RAW = -1


def _epilogue(builder, v, bias, act):
    """v + bias, then the activation `act`, each operation rounded to the dtype as
    _conv_loops._epilogue rounds it."""
    vec = v.type

    def splat(value):
        return ir.Constant(vec, [value] * vec.count)

    def keep_nan(x, clamped):
        return builder.select(builder.fcmp_unordered("uno", x, x), x, clamped)

    zero, one, six = splat(0.0), splat(1.0), splat(6.0)
    v = builder.fadd(v, bias)
    if act >= 3:
        single = vec.element == ir.FloatType()
        sixth = float(np.float32(1) / np.float32(6)) if single else 1.0 / 6.0
        t = builder.fadd(builder.fmul(v, splat(sixth)), splat(0.5))
        t = keep_nan(t, builder.select(builder.fcmp_ordered("<", t, one), t, one))
        t = keep_nan(t, builder.select(builder.fcmp_ordered(">", t, zero), t, zero))
        return t if act == 3 else builder.fmul(v, t)
    if act >= 1:
        v = keep_nan(v, builder.select(builder.fcmp_ordered(">", v, zero), v, zero))
    if act == 2:
        v = keep_nan(v, builder.select(builder.fcmp_ordered("<", v, six), v, six))
    return v


class Vectors:
    """What the register-blocked loops emit with, for `dtype` at the builder: the vector type
    (VECTOR_BYTES wide, `lanes` elements) and a pointer to it, the fused multiply-add intrinsic,
    a zero vector, int64 constants and a scalar broadcast to every lane."""

    def __init__(self, context, builder, dtype):
        self.builder = builder
        self.elem = context.get_value_type(dtype)
        self.lanes = VECTOR_BYTES // (dtype.bitwidth // 8)
        self.vec = ir.VectorType(self.elem, self.lanes)
        self.vptr = self.vec.as_pointer()
        self.fma = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(self.vec, [self.vec] * 3),
            f"llvm.fma.v{self.lanes}f{dtype.bitwidth}",
        )  # fmt: skip
        self.zero = ir.Constant(self.vec, [0.0] * self.lanes)
        self._undef = ir.Constant(self.vec, ir.Undefined)
        self._splat0 = ir.Constant(ir.VectorType(ir.IntType(32), self.lanes), [0] * self.lanes)

    @staticmethod
    def const(v):
        return ir.Constant(ir.IntType(64), v)

    def broadcast(self, scalar):
        one = self.builder.insert_element(self._undef, scalar, ir.Constant(ir.IntType(32), 0))
        return self.builder.shuffle_vector(one, self._undef, self._splat0)


def emit_switch(builder, value, cases: dict) -> None:
    """Emits a switch on `value` (an LLVM integer): case key runs cases[key]() (which emits its
    code at the builder), any other value nothing; the builder ends after the switch."""
    done = builder.append_basic_block("switch.done")
    other = builder.append_basic_block("switch.other")
    switch = builder.switch(value, other)
    for key, emit in cases.items():
        block = builder.append_basic_block(f"switch.case{key}")
        switch.add_case(ir.Constant(value.type, key), block)
        builder.position_at_end(block)
        emit()
        builder.branch(done)
    builder.position_at_end(other)
    builder.branch(done)
    builder.position_at_end(done)


@intrinsic
def _block(typingctx, ph, wk, bias, out, toff, xbase, wq, nrows, nob, ncb, obase, orow, ostride,
           ow, o, act, nv):  # fmt: skip
    """Output rows r < nrows of channels ch < o: out[obase + ch·ostride + r·orow + col] for
    col < ow = the epilogue `act` (RAW or a code, with bias [o]) of Σ_t ph[xbase + r·wq + col +
    toff[t]] · wk[ch // CO, t, ch % CO] over the k taps t (wk [ncb, k, CO]: a block's CO
    weights of a tap consecutive, broadcast from one pointer; its channels from o on zero), in
    blocks of CO channels × nv (one of NV) vectors of columns (nob a row; the last
    block's sums past ow dropped, its reads up to nv·lanes past the last window). Every
    (act, nv)'s loops are compiled in, the call's picked at run time."""
    sig = types.void(ph, wk, bias, out, toff, *([types.int64] * 12))

    def codegen(context, builder, signature, args):
        pa, wa, ba, oa, ta = (context.make_array(signature.args[n])(context, builder, args[n])
                              for n in range(5))  # fmt: skip
        xbase, wq, nrows, nob, ncb, obase, orow, ostride, ow, o, act, nv = args[5:]
        k = builder.extract_value(ta.shape, 0)
        kit = Vectors(context, builder, signature.args[0].dtype)
        lanes, vptr, fma, zero = kit.lanes, kit.vptr, kit.fma, kit.zero
        const, broadcast = kit.const, kit.broadcast
        # Where a partial block's sums wait while its columns inside ow are copied out.
        spill = cgutils.alloca_once(builder, kit.elem, size=3 * lanes)

        def emit(nv, act):
            width = nv * lanes
            # With 3 vectors of columns a block of CO channels goes in CO / 2 halves (AVX2: 12
            # sums, a vector of inputs and a weight fill 14 of its 16 registers).
            part = CO if nv < 3 else CO // 2
            with cgutils.for_range(builder, nrows) as rows:
                r = rows.index
                row_in = builder.add(xbase, builder.mul(r, wq))
                row_out = builder.add(obase, builder.mul(r, orow))
                with cgutils.for_range(builder, builder.mul(ncb, const(CO // part))) as parts:
                    ch0 = builder.mul(parts.index, const(part))
                    block = builder.sdiv(ch0, const(CO))
                    # The block's [k, CO] slab, from this part's first channel.
                    w0 = builder.add(builder.mul(builder.mul(block, k), const(CO)),
                                     builder.srem(ch0, const(CO)))  # fmt: skip
                    with cgutils.for_range(builder, nob) as cols:
                        col = builder.mul(cols.index, const(width))
                        # The sums, in stack slots that LLVM promotes to registers.
                        sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(nv)]
                                for _ in range(part)]  # fmt: skip
                        start = builder.add(row_in, col)
                        with cgutils.for_range(builder, k) as taps:
                            t = taps.index
                            at = builder.add(start, builder.load(builder.gep(ta.data, [t])))
                            xs = []
                            for v in range(nv):
                                ptr = builder.gep(pa.data, [builder.add(at, const(v * lanes))])
                                xs.append(builder.load(builder.bitcast(ptr, vptr), align=1))
                            wt = builder.add(w0, builder.mul(t, const(CO)))
                            for c in range(part):
                                wat = builder.add(wt, const(c))
                                wv = broadcast(builder.load(builder.gep(wa.data, [wat])))
                                for v in range(nv):
                                    acc = builder.load(sums[c][v])
                                    builder.store(builder.call(fma, [xs[v], wv, acc]), sums[c][v])
                        left = builder.sub(ow, col)  # the block's columns inside the output
                        # A block past the row's end is stored whole all the same (the band's
                        # next row, computed after it by this thread, overwrites the excess)
                        # unless it would reach past the band: then only its columns inside
                        # the row, through the spill buffer.
                        inside = builder.add(builder.add(builder.mul(r, orow), col), const(width))
                        full = builder.icmp_signed("<=", inside, builder.mul(nrows, orow))
                        for c in range(part):
                            ch = builder.add(ch0, const(c))
                            with builder.if_then(builder.icmp_signed("<", ch, o), likely=True):
                                vals = [builder.load(sums[c][v]) for v in range(nv)]
                                if act != RAW:
                                    bv = broadcast(builder.load(builder.gep(ba.data, [ch])))
                                    vals = [_epilogue(builder, x, bv, act) for x in vals]
                                base = builder.add(builder.add(row_out, builder.mul(ch, ostride)),
                                                   col)  # fmt: skip
                                _store(builder, oa.data, base, vals, full, left, spill, lanes,
                                       vptr)  # fmt: skip

        emit_switch(builder, builder.add(builder.mul(builder.add(act, const(1)), const(4)), nv),
                    {(a + 1) * 4 + n: (lambda n=n, a=a: emit(n, a)) for n in NV
                     for a in (RAW, 0, 1, 2, 3, 4)})  # fmt: skip
        return context.get_dummy_value()

    return sig, codegen


def vectors_for(ow: int, itemsize: int) -> int:
    """The vectors of columns (one of NV) a block of direct_rows takes for rows of ow outputs:
    AVX-512, 2 past one vector's width; AVX2, the fewest columns computed, counting a 4 × 3
    block's as three quarters of an 8 × 1's (it loads 7 values for 12 multiply-adds where the
    other loads 9 for 8)."""
    lanes = VECTOR_BYTES // itemsize
    if NV == (1, 2):
        return 2 if ow > lanes else 1
    padded = [-(-ow // (nv * lanes)) * nv * lanes for nv in (1, 3)]
    return 3 if padded[1] * 0.75 < padded[0] else 1


def _store(builder, data, base, vals, full, left, spill, lanes, vptr) -> None:
    """vals (vectors) at data[base:] whole where `full`, else their first `left` elements
    through the spill buffer."""
    i64 = ir.IntType(64)
    with builder.if_else(full, likely=True) as (whole, part):
        with whole:
            for v, value in enumerate(vals):
                at = builder.add(base, ir.Constant(i64, v * lanes))
                builder.store(value, builder.bitcast(builder.gep(data, [at]), vptr), align=1)
        with part:
            for v, value in enumerate(vals):
                ptr = builder.gep(spill, [ir.Constant(i64, v * lanes)])
                builder.store(value, builder.bitcast(ptr, vptr), align=1)
            with cgutils.for_range(builder, left) as copy:
                j = copy.index
                builder.store(builder.load(builder.gep(spill, [j])),
                              builder.gep(data, [builder.add(base, j)]))  # fmt: skip


@_jit
def direct_rows(ph, wk, bias, out, toff, xbase, wq, nrows, obase, act, nv):  # pragma: no cover
    """Output rows [r0, r0 + nrows) of one image (r0's first input at xbase in the flat phases
    ph, rows wq apart; its output at obase in out, flat [.., o, oh, ow]) from the filter wk
    [ncb, k, CO] (see _block) and the taps' offsets toff [k]; `act` RAW or an epilogue code with bias [o];
    nv (one of NV: vectors_for(ow)) vectors of columns a block."""
    _, o, oh, ow = out.shape
    of = out.reshape(-1)
    lanes = VECTOR_BYTES // out.itemsize
    nob = (ow + nv * lanes - 1) // (nv * lanes)
    ncb = wk.shape[0]
    _block(ph, wk, bias, of, toff, xbase, wq, nrows, nob, ncb, obase, ow, oh * ow, ow, o, act, nv)


# One image's bands of output rows over the intra-op pool's team (_spin.team_run): a piece is
# a run of whole bands, each summed exactly as direct_rows sums it alone. Its arguments:
(_TPH, _TWK, _TBIAS, _TOUT, _TOFF, _TNPH, _TOP, _TK, _TNB, _TO, _TOH, _TOW, _TWQ, _TROWS, _TBANDS,
 _TACT, _TNV, _TSWISH, _TPIECES) = range(19)  # fmt: skip
_TNARGS = 19


@_jit
def _bands_piece(v, p, like):  # pragma: no cover - compiled
    """Piece p of the team's bands (operands at v's addresses, elements of like's type): its
    bands summed; the output and the piece's flat positions [lo, hi) in each channel."""
    o, oh, ow, rows, k = v[_TO], v[_TOH], v[_TOW], v[_TROWS], v[_TK]
    out = _spin.array_at(v[_TOUT], o * oh * ow, like).reshape((1, o, oh, ow))
    ph = _spin.array_at(v[_TPH], v[_TNPH], like)
    wk = _spin.array_at(v[_TWK], v[_TOP] * k * CO, like).reshape((v[_TOP], k, CO))
    bias = _spin.array_at(v[_TBIAS], v[_TNB], like)
    toff = _spin.array_at(v[_TOFF], k, np.int64(0))
    j0 = v[_TBANDS] * p // v[_TPIECES]
    j1 = v[_TBANDS] * (p + 1) // v[_TPIECES]
    for j in range(j0, j1):
        r0 = j * rows
        r1 = min(oh, r0 + rows)
        direct_rows(ph, wk, bias, out, toff, r0 * v[_TWQ], v[_TWQ], r1 - r0, r0 * ow, v[_TACT],
                    v[_TNV])  # fmt: skip
    return out, j0 * rows * ow, min(oh, j1 * rows) * ow


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _bands32(argp, p):  # pragma: no cover - compiled
    v = numba.carray(argp, _TNARGS)
    out, lo, hi = _bands_piece(v, p, np.float32(0))
    if v[_TSWISH] >= 0 and hi > lo:  # float32 Sigmoid / Swish over the piece's rows
        sigmoid32_span(out, 0, v[_TSWISH] == 1, lo, hi)


@numba.cfunc(_spin.PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _bands64(argp, p):  # pragma: no cover - compiled
    _bands_piece(numba.carray(argp, _TNARGS), p, np.float64(0))


def bands_piece_function(dtype) -> int:
    """The address of the team's band piece function for `dtype`."""
    return (_bands32 if dtype.itemsize == 4 else _bands64).address


@_jit
def direct_team(
    ph, wk, bias, out, toff, wq, rows, act, nv, swish, pieces, team, fn
):  # pragma: no cover
    """direct_rows over one image's bands of `rows` output rows (ph, wk, bias, out, toff as
    direct_rows takes them, out [1, o, oh, ow] C-contiguous) in `pieces` runs of bands over the
    team (fn: bands_piece_function(dtype)); with swish 0 or 1 (float32), sigmoid32_span over
    each piece's rows after its bands. The bits of the bands run one by one."""
    _, o, oh, ow = out.shape
    v = np.empty(_TNARGS, np.int64)
    v[_TPH], v[_TWK], v[_TBIAS], v[_TOUT] = (_spin.address(ph), _spin.address(wk),
                                             _spin.address(bias), _spin.address(out))  # fmt: skip
    v[_TOFF], v[_TNPH], v[_TOP], v[_TK] = _spin.address(toff), ph.shape[0], wk.shape[0], wk.shape[1]
    v[_TNB], v[_TO], v[_TOH], v[_TOW], v[_TWQ] = bias.shape[0], o, oh, ow, wq
    v[_TROWS], v[_TBANDS] = rows, (oh + rows - 1) // rows
    v[_TACT], v[_TNV], v[_TSWISH] = act, nv, swish
    v[_TPIECES] = max(1, min(pieces, v[_TBANDS]))
    _spin.team_run(team, fn, v, v[_TPIECES])
