"""Fused int8 runs: consecutive int8 convolutions, fully-connected layers and additions in one
compiled call.

When the compiled loops and programs are on (rill.mobile.kernels.jit, rill.mobile.program) and a
subgraph is not a whole float32 program, allocate_tensors replaces every run of consecutive
int8 CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED and ADD operators on the per-operator path (one
with at least one product) by one call of kernels._program_int8.run — a single
FULLY_CONNECTED too: one call instead of a copy, a BLAS call and the output stage. Each
operator still reads and writes its int8 tensors in the arena, so the operators around a run,
get_tensor and the arena plan see exactly what the per-operator kernels give; inside, the
products run on the float32 program kernels over centered integers (exact: see
kernels._program_int8) and the output stage is common.OutputStage's compiled one (for
FULLY_CONNECTED its single-rounding one, folded only). Every output has the per-operator path's
bits (tests/mobile/test_program_int8.py).

An operator joins a run only when its arithmetic is covered: int8 input, filter and output (not
16x8, not hybrid), every output channel's 255 · Σ|w| below 2^24, an output stage the compiled
path handles; ADD with two same-shape inputs (its pair table). Anything else stays per-operator.
`RILL_JIT=0` or `RILL_JIT_PROGRAM=0` (or program.set_enabled(False)) turns fused runs off.
"""

from __future__ import annotations

import numpy as np

from rill.mobile import program
from rill.mobile.kernels.base import TensorSpec
from rill.mobile.kernels.common import OutputStage, quantized_activation
from rill.mobile.kernels.conv import _per_channel_multipliers

__all__ = ["FusedRun", "fuse"]

_I8 = np.dtype(np.int8)
_PRODUCTS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")  # a run has at least one


class _Unsupported(Exception):
    pass


class _NoScratch:
    """OutputStage's kernel argument: the compiled stage asks for no scratch; asking fails."""

    def scratch(self, shape, dtype):
        raise _Unsupported("output stage needs scratch")


_loops = program.CompiledKernels("_program_int8")


class FusedRun:
    """One run of fused operators: call it to execute them (the arena `q` in and out)."""

    def __init__(self, prog, m, q, d, ic, t, loops, ops):
        self.args = (prog, m, q, d, ic, t)
        self.ops = ops  # the operator indices, in order
        self._run = loops.run

    def __call__(self) -> None:
        self._run(*self.args)


class _Builder:
    def __init__(self, sg, loops):
        self.sg, self.loops = sg, loops
        self.rows: list[int] = []
        self.fconsts: list[np.ndarray] = []
        self.fsize = 0  # floats of constants so far (placed after the work areas)
        self.dconsts: list[np.ndarray] = [np.zeros(1)]
        self.dsize = 1
        self.iconsts: list[np.ndarray] = [np.zeros(1, np.int64)]
        self.isize = 1
        self.tables: list[np.ndarray] = [np.zeros(1, np.int8)]
        self.tsize = 1
        self.x_need = self.y_need = self.g_need = 0
        self.fix: list[tuple[int, str]] = []  # (row position, area) to patch with an offset
        # (position of the last requant row's parameters, its output tensor): the next
        # convolution reading that tensor takes its centered floats from the requant instead of
        # a load.
        self.last: tuple[int, int] | None = None

    # -- constants and areas -----------------------------------------------------------------

    def fconst(self, a) -> int:
        a = np.ascontiguousarray(a, np.float32).ravel()
        off = self.fsize
        pad = (-a.size) % 16
        self.fconsts.append(a)
        if pad:
            self.fconsts.append(np.zeros(pad, np.float32))
        self.fsize += a.size + pad
        return off  # relative: the constants' base is added when the areas are known

    def dconst(self, a) -> int:
        a = np.ascontiguousarray(a, np.float64).ravel()
        off = self.dsize
        self.dconsts.append(a)
        self.dsize += a.size
        return off

    def iconst(self, a) -> int:
        a = np.ascontiguousarray(a, np.int64).ravel()
        off = self.isize
        self.iconsts.append(a)
        self.isize += a.size
        return off

    def table(self, a) -> int:
        off = self.tsize
        self.tables.append(np.ascontiguousarray(a, np.int8).ravel())
        self.tsize += a.size
        return off

    def emit(self, code: int, params, fix=()) -> None:
        """A row; `fix`: (parameter index, area name) of offsets to relocate later ('x', 'y',
        'g': the work areas, 'c': relative to the constants)."""
        start = len(self.rows) + 2
        self.rows += [code, len(params), *[int(v) for v in params]]
        for i, area in fix:
            self.fix.append((start + i, area))

    def spec(self, i: int) -> TensorSpec:
        return TensorSpec.of(self.sg.tensors[i], self.sg.shapes[i])

    def byte_at(self, i: int) -> int:
        t = self.sg.tensors[i]
        if t.dtype != _I8 or self.sg._value(i) is not None:
            raise _Unsupported(f"tensor #{i}")
        key = ("t", self.sg.aliased.get(i, i))
        if key not in self.sg.plan.offsets:
            raise _Unsupported(f"tensor #{i} has no arena bytes")
        off = self.sg.plan.offsets[key]
        if off + int(np.prod(self.sg.shapes[i], dtype=np.int64)) > self.sg.plan.arena_size:
            raise _Unsupported("outside the arena")
        return off

    # -- operators -----------------------------------------------------------------------------

    def op(self, kernel, op) -> None:
        name = op.name
        if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            if not getattr(kernel, "int8", False) or getattr(kernel, "i16", None) is not None:
                raise _Unsupported("not int8")
            self._conv(kernel, op, name == "DEPTHWISE_CONV_2D")
        elif name == "FULLY_CONNECTED":
            if not getattr(kernel, "int8", False) or getattr(kernel, "i16", None) is not None:
                raise _Unsupported("not int8")
            self._fully_connected(kernel, op)
        elif name == "ADD":
            if getattr(kernel, "kind", None) != _I8 or getattr(kernel, "pair", None) is None:
                raise _Unsupported("not int8")
            a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
            n = int(np.prod(self.sg.shapes[y], dtype=np.int64))
            if not (self.sg.shapes[a] == self.sg.shapes[b] == self.sg.shapes[y]):
                raise _Unsupported("broadcast")
            self.emit(self.loops.OP_PAIR, [self.byte_at(a), self.byte_at(b), self.byte_at(y), n,
                                           self.table(kernel.pair)])  # fmt: skip
            self.last = None
        else:
            raise _Unsupported(name)

    def _conv(self, kernel, op, depthwise: bool) -> None:
        ins = list(op.inputs) + [-1]
        xi, wi, bi, yi = ins[0], ins[1], ins[2], op.outputs[0]
        x, w, y = self.spec(xi), self.spec(wi), self.spec(yi)
        wv = self.sg._value(wi)
        if wv is None or wv.dtype != _I8:
            raise _Unsupported("filter")
        n, h, w_, ci, oh, ow, kh, kw, sh, sw, dh, dw = kernel.geom
        (pt, _), (pl, _) = kernel.pads
        co = y.shape[3]
        if depthwise:
            w3 = wv.reshape(kh, kw, co).astype(np.int64)
            wsum = np.abs(w3).sum(axis=(0, 1))
        else:
            wsum = np.abs(wv.reshape(co, -1).astype(np.int64)).sum(axis=1)
        bias = self._bias(bi, co, wsum)
        rows = n * oh * ow
        # The reference output stage, as the per-operator kernels set it up, for |acc| at
        # most 255 · Σ|w| + |bias| (its compiled path: folded where exact, else int64).
        stage = self._output_stage(kernel, op, _per_channel_multipliers(x, w, y, co), wsum, bias,
                                   y, rows, co, False)  # fmt: skip
        self._input(xi, x, n * h * w_ * ci, yi, rows * co)
        if depthwise:
            mult = co // ci
            wo = self.fconst(wv.reshape(kh, kw, co))
            padded = program.depthwise_padded(h, w_, co, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
            params = [0, wo, -1, 0, n, h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl,
                      mult, 0, -1, -1, 0 if padded else -1]  # fmt: skip
            fix = [(0, "x"), (1, "c"), (3, "y")]
            if padded:  # the padded input goes to the gather area
                self.g_need = max(self.g_need, n * padded * ci)
                fix.append((23, "g"))
            self.emit(self.loops.OP_DW, params, fix)
        elif kh == kw == 1 and sh == sw == 1 and oh == h and ow == w_:
            wo = self.fconst(wv.reshape(co, ci).T)
            self.emit(self.loops.OP_GEMM, [0, wo, -1, 0, rows, ci, co, 0],
                      [(0, "x"), (1, "c"), (3, "y")])  # fmt: skip
        else:
            wo = self.fconst(wv.transpose(1, 2, 3, 0))
            geo = [n, h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl, 0]
            if ci <= program.TAPS_MAX_CI:
                padded = program.conv_padded(h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt,
                                             pl)  # fmt: skip
                fix = [(0, "x"), (1, "c"), (3, "y")]
                if padded:  # the padded input goes to the gather area
                    self.g_need = max(self.g_need, n * padded * ci)
                    fix.append((20, "g"))
                self.emit(self.loops.OP_CONV_TAPS, [0, wo, -1, 0, *geo, 0 if padded else -1], fix)
            else:
                self.g_need = max(self.g_need, rows * kh * kw * ci)
                self.emit(self.loops.OP_CONV, [0, wo, -1, 0, *geo, 0],
                          [(0, "x"), (1, "c"), (3, "y"), (20, "g")])  # fmt: skip
        self._requant(stage, bias, self.byte_at(yi), yi, rows, co)

    def _fully_connected(self, kernel, op) -> None:
        """An int8 FULLY_CONNECTED: the product of the centered rows and the weights (the
        programs' GEMM), then the kernel's single-rounding output stage (folded only)."""
        ins = list(op.inputs) + [-1]
        xi, wi, bi, yi = ins[0], ins[1], ins[2], op.outputs[0]
        x, y = self.spec(xi), self.spec(yi)
        wv = self.sg._value(wi)
        if wv is None or wv.dtype != _I8 or wv.ndim != 2:
            raise _Unsupported("weights")
        co, k = wv.shape
        rows = kernel.rows
        wsum = np.abs(wv.astype(np.int64)).sum(axis=1)
        bias = self._bias(bi, co, wsum)
        mults = np.broadcast_to(np.asarray(kernel.multipliers, np.float64), (co,))
        stage = self._output_stage(kernel, op, mults, wsum, bias, y, rows, co, True)
        if stage.cfold is None:  # the int64 stage below is the double-rounding one
            raise _Unsupported("single-rounding stage not folded")
        self._input(xi, x, rows * k, yi, rows * co)
        wo = self.fconst(wv.T)
        self.emit(self.loops.OP_GEMM, [0, wo, -1, 0, rows, k, co, 0],
                  [(0, "x"), (1, "c"), (3, "y")])  # fmt: skip
        self._requant(stage, bias, self.byte_at(yi), yi, rows, co)

    def _bias(self, bi, co, wsum) -> np.ndarray:
        """The int32 bias as int64 (zeros without one), once every float32 sum is known exact."""
        if np.max(255 * wsum, initial=0) >= 2**24:
            raise _Unsupported("float32 sums could round")
        if bi < 0:
            return np.zeros(co, np.int64)
        bv = self.sg._value(bi)
        if bv is None or bv.dtype != np.int32:
            raise _Unsupported("bias")
        return bv.astype(np.int64)

    def _output_stage(self, kernel, op, mults, wsum, bias, y, rows, co, single) -> OutputStage:
        act = op.options.get("fused_activation_function", 0)
        lo, hi = quantized_activation(kernel, act, y)
        stage = OutputStage(_NoScratch(), mults, 255 * wsum + np.abs(bias), y.zero_point, lo, hi,
                            (rows, co), single)  # fmt: skip
        if stage.compiled is None:
            raise _Unsupported("output stage")
        return stage

    def _input(self, xi, x, nx, yi, ny) -> None:
        """The operator's centered input in the x area: loaded, or written by the previous
        requant."""
        xq = self.byte_at(xi)
        self.byte_at(yi)
        self.x_need = max(self.x_need, nx)
        self.y_need = max(self.y_need, ny)
        if self.last is not None and self.last[1] == xi:  # the previous requant writes it
            at = self.last[0]
            self.rows[at + 10], self.rows[at + 11] = 0, x.zero_point
            self.fix.append((at + 10, "x"))
        else:
            self.emit(self.loops.OP_LOAD, [xq, 0, nx, x.zero_point], [(1, "x")])

    def _requant(self, stage, bias, yo, yi, rows, co) -> None:
        """The output stage's row: the exact float32 accumulators in the y area → y's bytes."""
        lo, hi = stage.ilo, stage.ihi
        # Per-channel constants tiled to a span of at least 512 values (whole rows): long
        # inner loops (at 64, the loop's set-up cost ~20% more).
        span = co * max(1, -(-512 // co))
        reps = span // co

        def tiled(v):
            return np.tile(np.asarray(v), reps)

        if stage.cfold is not None:
            fold, offset, step, threshold, correct = stage.cfold
            c0 = bias.astype(np.float64) * fold + offset  # exact: see _program_int8.requant
            do = self.dconst(np.concatenate([tiled(c0), tiled(fold), tiled(step),
                                             [threshold]]))  # fmt: skip
            params = [0, yo, rows * co, span, 1, do, int(correct), lo, hi, -1, -1, 0]
        else:
            m0, right, add, negfix = stage.consts
            io = self.iconst(np.concatenate([tiled(v) for v in (bias, m0, right, add, negfix)]))
            params = [0, yo, rows * co, span, 0, 0, 0, lo, hi, io, -1, 0]
        self.emit(self.loops.OP_REQUANT, params, [(0, "y")])
        self.last = (len(self.rows) - len(params), yi)

    def finish(self, q, ops) -> FusedRun:
        def up(v):
            return -(-v // 16) * 16

        base = {"x": 0, "y": up(self.x_need)}
        base["g"] = base["y"] + up(self.y_need)
        base["c"] = base["g"] + up(self.g_need)
        rows = np.array(self.rows, np.int64)
        for pos, area in self.fix:
            rows[pos] += base[area]
        consts = np.concatenate(self.fconsts) if self.fconsts else np.zeros(0, np.float32)
        m = np.zeros(base["c"] + consts.size + 16, np.float32)
        m[base["c"] : base["c"] + consts.size] = consts
        return FusedRun(rows, m, q, np.concatenate(self.dconsts), np.concatenate(self.iconsts),
                        np.concatenate(self.tables), self.loops, ops)  # fmt: skip


def fuse(sg, run: list, run_kernels: list) -> tuple[list, list]:
    """(run, run_kernels) of a planned subgraph with each run of consecutive fusable int8
    operators replaced by one FusedRun (its first kernel names it in errors); unchanged when
    fused runs are off or nothing fuses."""
    if not program.enabled() or sg.dynamic or sg.preserve_all:
        return run, run_kernels
    if not any(k.op.name in _PRODUCTS for k in run_kernels):
        return run, run_kernels
    loops = _loops()
    if loops is None:
        return run, run_kernels
    q = sg.arena.view(np.int8)
    out_run, out_kernels = [], []
    group: list[int] = []
    builder = _Builder(sg, loops)

    def close():
        nonlocal builder
        if group:
            out_run.append(builder.finish(q, [run_kernels[j].op.index for j in group]))
            out_kernels.append(run_kernels[group[0]])
            group.clear()
        builder = _Builder(sg, loops)

    for j, (f, kernel) in enumerate(zip(run, run_kernels)):
        saved = (len(builder.rows), len(builder.fix), builder.fsize, len(builder.fconsts),
                 builder.dsize, len(builder.dconsts), builder.isize, len(builder.iconsts),
                 builder.tsize, len(builder.tables), builder.x_need, builder.y_need,
                 builder.g_need, builder.last)  # fmt: skip
        patched = (
            None
            if builder.last is None
            else list(builder.rows[builder.last[0] + 10 : builder.last[0] + 12])
        )
        try:
            builder.op(kernel, kernel.op)
        except (_Unsupported, AttributeError, TypeError, ValueError, KeyError):
            (nr, nf, builder.fsize, nfc, builder.dsize, ndc, builder.isize, nic, builder.tsize,
             nt, builder.x_need, builder.y_need, builder.g_need, builder.last) = saved  # fmt: skip
            if patched is not None:
                builder.rows[builder.last[0] + 10 : builder.last[0] + 12] = patched
            del builder.rows[nr:], builder.fix[nf:], builder.fconsts[nfc:]
            del builder.dconsts[ndc:], builder.iconsts[nic:], builder.tables[nt:]
            close()
            out_run.append(f)
            out_kernels.append(kernel)
            continue
        group.append(j)
    close()
    return out_run, out_kernels
