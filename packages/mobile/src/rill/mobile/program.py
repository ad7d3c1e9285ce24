"""A float32 subgraph compiled into one call: the whole-subgraph program.

When numba is installed (the `jit` extra) and compiled loops are on (rill.mobile.kernels.jit),
allocate_tensors turns a planned float32 subgraph whose every operator has a compiled kernel
(`SUPPORTED`) into a *program*: an int64 array of rows (operator code, parameter count,
parameters) that one compiled function (`_program_loops.run`) executes over one flat float32
array — the tensor arena followed by the program's constants (weights re-laid out for the
kernels: convolution filters as [KH, KW, CI, CO], fully-connected ones as [K, N]). Invoke is then
one call, with no per-operator Python and no allocation; LiteRT runs small models in a few
microseconds, and per-operator numpy calls alone cost more than that.

Any operator outside the compiled set, a non-float32 tensor, a dynamic shape or a subgraph with
control flow leaves the subgraph on the per-operator path, transparently. The program's float
arithmetic may reassociate sums and fuse multiply-adds, so it agrees with the per-operator path
(and LiteRT) to float rounding rather than bit for bit; `set_enabled(False)` or `RILL_JIT=0`
(which turns every compiled loop off) keeps the per-operator path.
"""

from __future__ import annotations

import importlib
import os
import types

import numpy as np

from rill.mobile.kernels import jit

__all__ = ["Program", "build", "enabled", "set_enabled", "SUPPORTED"]

_F32 = np.dtype(np.float32)
_enabled = os.environ.get("RILL_JIT_PROGRAM", "1").strip().lower() not in ("0", "false", "off",
                                                                             "no")  # fmt: skip

_UNARY = {"NEG": 0, "RSQRT": 1, "SQRT": 2, "EXP": 3, "ABS": 4, "SQUARE": 5, "TANH": 6,
          "LOGISTIC": 7, "RELU": 8, "RELU6": 9, "LOG": 13}  # fmt: skip
_BINARY = {"ADD": 0, "SUB": 1, "MUL": 2, "DIV": 3, "SQUARED_DIFFERENCE": 4, "MAXIMUM": 5,
           "MINIMUM": 6}  # fmt: skip
_COPY = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}
SUPPORTED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MEAN", "SOFTMAX",
                       "TRANSPOSE", "BATCH_MATMUL", "AVERAGE_POOL_2D", "MAX_POOL_2D", "GELU",
                       *_UNARY, *_BINARY, *_COPY})  # fmt: skip
(OP_GEMM, OP_CONV, OP_DW, OP_BINARY, OP_UNARY, OP_MEAN, OP_SOFTMAX, OP_TRANSPOSE, OP_BMM, OP_POOL,
 OP_COPY, OP_CONV_TAPS) = range(12)  # fmt: skip
# Input channels up to which a convolution runs directly, tap by tap in register tiles
# (kernels._program_loops.conv_taps), rather than as gathered windows times the weights
# (MobileNetV2's 3-channel stem: ~50 -> ~34 us; the small CNN's 14x14x8 -> 16 layer: ~5.9 ->
# ~4.0 us).
TAPS_MAX_CI = 8
_ACTS = (0, 1, 2, 3)  # NONE, RELU, RELU_N1_TO_1, RELU6


def enabled() -> bool:
    """Whether allocate_tensors builds programs (needs the compiled loops on as well)."""
    return _enabled and jit.enabled()


def set_enabled(on: bool) -> bool:
    """Turns whole-subgraph programs on or off (tests, benchmarks); returns the old setting."""
    global _enabled
    old, _enabled = _enabled, bool(on)
    return old


class _Unsupported(Exception):
    pass


class CompiledKernels:
    """A module of compiled program kernels (rill.mobile.kernels.<name>, with a `compile_run()`),
    compiled or loaded from numba's cache on the first call, in allocate rather than in invoke.
    Calling it gives the module, or None where compiled loops are off or it failed: any failure
    leaves every subgraph on the per-operator path and is not tried again, since a numba that
    lacks an option the kernels pass (`_nrt`, an internal one), rejects one (KeyError,
    TypeError) or cannot compile them (numba's own errors) must not fail allocate_tensors."""

    def __init__(self, name: str):
        self.name, self.module, self.failed = name, None, False

    def __call__(self):
        if jit.loops() is None or self.failed:  # numba missing or compiled loops off
            return None
        if self.module is None:
            try:
                module = importlib.import_module(f"rill.mobile.kernels.{self.name}")
                module.compile_run()
            except Exception:  # noqa: BLE001 - see above
                self.failed = True
                return None
            self.module = module
        return self.module


_loops = CompiledKernels("_program_loops")


class Program:
    """One subgraph's program: `prog` (int64 rows), `m` (float32: the arena's bytes, then the
    constants) and `ops` (the operator indices it runs, in order). Calling it, or `run(prog, m)`
    (the compiled function itself, which Interpreter.invoke calls directly), runs it."""

    def __init__(self, prog: np.ndarray, constants: np.ndarray, ops: list[int], loops):
        self.prog, self.constants, self.ops, self.run = prog, constants, ops, loops.run
        self.m: np.ndarray | None = None

    def attach(self, m: np.ndarray) -> None:
        """Binds the float32 array that holds the arena and, after it, the constants."""
        m[m.size - self.constants.size :] = self.constants
        self.m = m

    def __call__(self) -> None:
        self.run(self.prog, self.m)


def _pad4(shape) -> list[int]:
    shape = [int(d) for d in shape]
    if len(shape) > 4:
        raise _Unsupported("more than 4 dimensions")
    return [1] * (4 - len(shape)) + shape


def _strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


# A depthwise input with padding is first copied, padded, to the scratch area
# (kernels._program_loops.depthwise) when an output side is below DW_PAD_BELOW and it has at
# most DW_PAD_CHANNELS channels: then many windows reach outside, and one box of direct tiles
# over the copy beats the border boxes (the keyword-spotting CNN's 25x5x16 layer: ~1.1 vs
# ~1.3 us). With many channels the copy costs more than it saves (MobileNetV2's 6x6x144
# layers: ~3.1 us padded, ~2.5 in boxes; its 3x3 ones run one by one either way).
DW_PAD_BELOW, DW_PAD_CHANNELS = 12, 32


def depthwise_padded(h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl) -> int:
    """The cells (rows × columns) of a depthwise input's padded copy, or 0 for no copy: when
    every window lies inside the input, or outside the cases above."""
    hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    if pt == 0 and pl == 0 and hp <= h and wp <= w:
        return 0
    if min(oh, ow) >= DW_PAD_BELOW or c > DW_PAD_CHANNELS:
        return 0
    return hp * wp


def conv_padded(h, w, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl) -> int:
    """The cells of a direct convolution's padded input copy (kernels._program_loops.conv_taps),
    or 0 when every window lies inside the input or it runs tap by tap (1-2 input channels,
    an odd number of 8-channel blocks: it reads the input in place)."""
    if ci <= 2 and co % 16 == 8:
        return 0
    hp, wp = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    if pt == 0 and pl == 0 and hp <= h and wp <= w:
        return 0
    return hp * wp


def _pad(size, kernel, stride, dilation, out) -> int:
    return max(((out - 1) * stride + (kernel - 1) * dilation + 1 - size) // 2, 0)


class _Builder:
    def __init__(self, sg, plan, alias, base: int):
        self.sg, self.plan, self.alias, self.base = sg, plan, alias, base  # base: in floats
        self.consts: list[np.ndarray] = []
        self.const_at: dict[int, int] = {}  # tensor index → its offset (untransformed copy)
        self.size = 0
        self.rows: list[int] = []
        self.scratch = 0  # floats of the largest convolution's gathered rows
        self.scratch_users: list[int] = []  # the rows' last parameter: the scratch offset

    def const(self, a: np.ndarray) -> int:
        a = np.ascontiguousarray(a, np.float32).ravel()
        off = self.base + self.size
        self.consts.append(a)
        pad = (-a.size) % 16  # 64-byte alignment for every constant
        if pad:
            self.consts.append(np.zeros(pad, np.float32))
        self.size += a.size + pad
        return off

    def value(self, i: int) -> np.ndarray | None:
        return self.sg._value(i)

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(int(d) for d in self.sg.shapes[i])

    def at(self, i: int) -> int:
        """The float offset of tensor i in m: in the arena, or a constant copied after it."""
        t = self.sg.tensors[i]
        if t.dtype != _F32:
            raise _Unsupported(f"tensor #{i} is {t.type_name}")
        v = self.value(i)
        if v is not None:
            if v.dtype != _F32:
                raise _Unsupported(f"constant #{i} is {v.dtype}")
            if i not in self.const_at:
                self.const_at[i] = self.const(v)
            return self.const_at[i]
        key = ("t", self.alias.get(i, i))
        if key not in self.plan.offsets:
            raise _Unsupported(f"tensor #{i} has no arena bytes")
        off = self.plan.offsets[key]
        size = int(np.prod(self.shape(i), dtype=np.int64)) * 4
        if off % 4 or off + size > self.plan.arena_size:  # the kernels do not check bounds
            raise _Unsupported(f"tensor #{i} is not a whole float32 run of the arena")
        return off // 4

    def weight(self, i: int) -> np.ndarray:
        v = self.value(i)
        if v is None or v.dtype != _F32 or self.sg.tensors[i].dtype != _F32:
            raise _Unsupported(f"weights #{i} are not constant float32")
        return v

    def emit(self, code: int, params) -> None:
        params = [int(v) for v in params]
        self.rows += [code, len(params), *params]

    # -- operators -------------------------------------------------------------------------------

    def op(self, op) -> None:
        name = op.name
        o = types.SimpleNamespace(**op.options) if isinstance(op.options, dict) else op.options
        ins, outs = list(op.inputs), list(op.outputs)
        if name not in SUPPORTED:
            raise _Unsupported(name)
        act = int(getattr(o, "fused_activation_function", 0) or 0) if o is not None else 0
        if act not in _ACTS:
            raise _Unsupported(f"fused activation {act}")
        handler = getattr(self, "_" + name.lower(), None)
        if handler is not None:
            handler(op, ins, outs, o, act)
        else:
            self._generic(name, ins, outs, o, act)

    def _generic(self, name, ins, outs, o, act) -> None:
        y = outs[0]
        if name in _COPY:
            self.emit(OP_COPY, [self.at(ins[0]), self.at(y), int(np.prod(self.shape(y)))])
        elif name in _UNARY:
            n = int(np.prod(self.shape(y)))
            if self.shape(ins[0]) != self.shape(y):
                raise _Unsupported("shape change")
            self.emit(OP_UNARY, [self.at(ins[0]), self.at(y), n, _UNARY[name]])
        elif name in _BINARY:
            self._binary(_BINARY[name], ins, y, act)
        else:  # pragma: no cover - SUPPORTED and the handlers agree
            raise _Unsupported(name)

    def _gelu(self, op, ins, outs, o, act) -> None:
        code = 12 if (o is not None and getattr(o, "approximate", False)) else 11
        n = int(np.prod(self.shape(outs[0])))
        self.emit(OP_UNARY, [self.at(ins[0]), self.at(outs[0]), n, code])

    def _binary(self, code, ins, y, act) -> None:
        out = _pad4(self.shape(y))
        strides = []
        for i in ins[:2]:
            s = _pad4(self.shape(i))
            st = _strides(s)
            for d in range(4):
                if s[d] != out[d]:
                    if s[d] != 1:
                        raise _Unsupported("broadcast")
                    st[d] = 0
            strides.append(st)
        # Adjacent axes that both operands run through contiguously (or both broadcast) become
        # one, so the kernel's inner loop is as long as it can be (an elementwise row of 16x32
        # is one loop of 512, a scalar operand too)
        j = 3  # the axis the ones after d have become
        for d in (2, 1, 0):
            if all(st[d] == st[j] * out[j] for st in strides):
                out[j] *= out[d]
                out[d] = 1
                for st in strides:
                    st[d] = 0
            else:
                j = d
        self.emit(OP_BINARY, [self.at(ins[0]), self.at(ins[1]), self.at(y), code, act, *out,
                              *strides[0], *strides[1]])  # fmt: skip

    def _conv_2d(self, op, ins, outs, o, act) -> None:
        x, w, y = ins[0], ins[1], outs[0]
        b = ins[2] if len(ins) > 2 else -1
        nb, h, w_, ci = self.shape(x)
        _, oh, ow, co = self.shape(y)
        wv = self.weight(w)
        co_w, kh, kw, ci_w = wv.shape
        if ci_w == 1 < ci and co_w == co and co % ci == 0:
            # One input channel per group (ConvNeXt's 7×7): a depthwise convolution, whose
            # output channel c·m + j reads input channel c as the group's does.
            self._depthwise(x, wv.transpose(3, 1, 2, 0), b, y, o, act)
            return
        if ci_w != ci or co_w != co:
            raise _Unsupported("grouped convolution")
        sh, sw, dh, dw = o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor
        bo = self.const(self.weight(b)) if b >= 0 else -1
        if kh == kw == 1 and sh == sw == 1 and oh == h and ow == w_:
            wo = self.const(wv.reshape(co, ci).T)
            self.emit(OP_GEMM, [self.at(x), wo, bo, self.at(y), nb * h * w_, ci, co, act])
            return
        wo = self.const(wv.transpose(1, 2, 3, 0))
        pt, pl = _pad(h, kh, sh, dh, oh), _pad(w_, kw, sw, dw, ow)
        if ci <= TAPS_MAX_CI:
            self.emit(OP_CONV_TAPS, [self.at(x), wo, bo, self.at(y), nb, h, w_, ci, oh, ow, co,
                                     kh, kw, sh, sw, dh, dw, pt, pl, act, -1])  # fmt: skip
            padded = conv_padded(h, w_, ci, oh, ow, co, kh, kw, sh, sw, dh, dw, pt, pl)
            if padded:  # the input's padded copy goes to the scratch area
                self.scratch = max(self.scratch, nb * padded * ci)
                self.scratch_users.append(len(self.rows) - 1)
            return
        self.scratch = max(self.scratch, nb * oh * ow * kh * kw * ci)
        self.emit(OP_CONV, [self.at(x), wo, bo, self.at(y), nb, h, w_, ci, oh, ow, co, kh, kw,
                            sh, sw, dh, dw, pt, pl, act, -1])  # fmt: skip
        self.scratch_users.append(len(self.rows) - 1)

    def _depthwise_conv_2d(self, op, ins, outs, o, act) -> None:
        b = ins[2] if len(ins) > 2 else -1
        self._depthwise(ins[0], self.weight(ins[1]), b, outs[0], o, act)

    def _depthwise(self, x, wv, b, y, o, act) -> None:
        """A depthwise convolution of x by the [1, KH, KW, CO] filter wv (and bias b or -1)."""
        nb, h, w_, ci = self.shape(x)
        _, oh, ow, co = self.shape(y)
        _, kh, kw, co_w = wv.shape
        if co_w != co or co % ci:
            raise _Unsupported("depthwise channels")
        sh, sw, dh, dw = o.stride_h, o.stride_w, o.dilation_h_factor, o.dilation_w_factor
        bo = self.const(self.weight(b)) if b >= 0 else -1
        wo = self.const(wv.reshape(kh, kw, co))
        pt, pl = _pad(h, kh, sh, dh, oh), _pad(w_, kw, sw, dw, ow)
        padded = depthwise_padded(h, w_, co, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)
        self.emit(OP_DW, [self.at(x), wo, bo, self.at(y), nb, h, w_, ci, oh, ow, co, kh, kw,
                          sh, sw, dh, dw, pt, pl, co // ci, act, -1, -1, -1])  # fmt: skip
        if padded:  # the input's padded copy goes to the scratch area
            self.scratch = max(self.scratch, nb * padded * ci)
            self.scratch_users.append(len(self.rows) - 1)

    def _fully_connected(self, op, ins, outs, o, act) -> None:
        if o is not None and getattr(o, "weights_format", 0):
            raise _Unsupported("shuffled weights")
        x, w, y = ins[0], ins[1], outs[0]
        b = ins[2] if len(ins) > 2 else -1
        wv = self.weight(w)
        n, k = wv.shape
        size = int(np.prod(self.shape(x)))
        if size % k or int(np.prod(self.shape(y))) != size // k * n:
            raise _Unsupported("shapes")
        bo = self.const(self.weight(b)) if b >= 0 else -1
        self.emit(OP_GEMM, [self.at(x), self.const(wv.T), bo, self.at(y), size // k, k, n, act])

    def _mean(self, op, ins, outs, o, act) -> None:
        shape = self.shape(ins[0])
        axes = self.value(ins[1])
        if axes is None:
            raise _Unsupported("axes")
        axes = sorted({int(a) % len(shape) for a in np.ravel(axes)}) if shape else []
        if not axes or axes != list(range(axes[0], axes[-1] + 1)):
            raise _Unsupported("axes not adjacent")
        outer = int(np.prod(shape[: axes[0]]))
        red = int(np.prod(shape[axes[0] : axes[-1] + 1]))
        inner = int(np.prod(shape[axes[-1] + 1 :]))
        if red == 0:
            raise _Unsupported("empty mean")
        self.emit(OP_MEAN, [self.at(ins[0]), self.at(outs[0]), outer, red, inner])

    def _softmax(self, op, ins, outs, o, act) -> None:
        shape = self.shape(ins[0])
        if not shape or shape[-1] == 0:
            raise _Unsupported("softmax shape")
        beta = self.const(np.array([o.beta], np.float32))
        self.emit(OP_SOFTMAX, [self.at(ins[0]), self.at(outs[0]),
                               int(np.prod(shape[:-1])), shape[-1], beta])  # fmt: skip

    def _transpose(self, op, ins, outs, o, act) -> None:
        shape = self.shape(ins[0])
        perm = self.value(ins[1])
        if perm is None or len(shape) > 4:
            raise _Unsupported("perm")
        perm = [int(p) % len(shape) for p in np.ravel(perm)] if shape else []
        st = _strides(shape)
        out = [shape[p] for p in perm]
        pad = 4 - len(out)
        self.emit(OP_TRANSPOSE, [self.at(ins[0]), self.at(outs[0]), *([1] * pad + out),
                                 *([0] * pad + [st[p] for p in perm])])  # fmt: skip

    def _batch_matmul(self, op, ins, outs, o, act) -> None:
        a, b, y = ins[0], ins[1], outs[0]
        sa, sb, sy = self.shape(a), self.shape(b), self.shape(y)
        if len(sy) < 2:
            raise _Unsupported("rank")
        if len(sa) < 2 or len(sb) < 2:
            raise _Unsupported("rank")
        adj_x, adj_y = bool(getattr(o, "adj_x", False)), bool(getattr(o, "adj_y", False))
        ra, ka = (sa[-1], sa[-2]) if adj_x else (sa[-2], sa[-1])
        kb, cb = (sb[-1], sb[-2]) if adj_y else (sb[-2], sb[-1])
        if ka != kb:
            raise _Unsupported("depth")
        batch = int(np.prod(sy[:-2]))
        na, nbt = int(np.prod(sa[:-2])), int(np.prod(sb[:-2]))
        for s, n in ((sa, na), (sb, nbt)):
            if n != 1 and _pad4(s[:-2]) != _pad4(sy[:-2]):
                raise _Unsupported("broadcast batch")
        if sy[-2:] != (ra, cb):
            raise _Unsupported("shapes")
        self.emit(OP_BMM, [self.at(a), self.at(b), self.at(y), na, sa[-2], sa[-1], nbt, sb[-2],
                           sb[-1], adj_x, adj_y, batch, ra, ka, cb])  # fmt: skip

    def _pool(self, kind, ins, outs, o, act) -> None:
        nb, h, w_, c = self.shape(ins[0])
        _, oh, ow, _ = self.shape(outs[0])
        kh, kw, sh, sw = o.filter_height, o.filter_width, o.stride_h, o.stride_w
        pt, pl = _pad(h, kh, sh, 1, oh), _pad(w_, kw, sw, 1, ow)
        self.emit(OP_POOL, [self.at(ins[0]), self.at(outs[0]), nb, h, w_, c, oh, ow, kh, kw, sh,
                            sw, pt, pl, kind, act])  # fmt: skip

    def _average_pool_2d(self, op, ins, outs, o, act) -> None:
        self._pool(0, ins, outs, o, act)

    def _max_pool_2d(self, op, ins, outs, o, act) -> None:
        self._pool(1, ins, outs, o, act)


def build(sg, plan, alias: dict[int, int]) -> Program | None:
    """The program of a planned subgraph (`Subgraph.allocate`, after plan_arena), or None when
    programs are off or some operator or tensor is outside the compiled set."""
    if not enabled() or sg.dynamic:
        return None
    loops = _loops()
    if loops is None:
        return None
    base = -(-plan.arena_size // 64) * 16  # floats: the constants start 64-byte aligned
    b = _Builder(sg, plan, alias, base)
    ran = []
    try:
        for k, op in enumerate(sg.sg.operators):
            if k in sg.folded_ops or (op.outputs and op.outputs[0] in alias):
                continue
            if any(sg.tensors[i].is_variable for i in (*op.inputs, *op.outputs) if i >= 0):
                raise _Unsupported("variable")
            b.op(op)
            ran.append(k)
    except _Unsupported:
        return None
    except (AttributeError, TypeError, ValueError):  # options this builder does not read
        return None
    if not ran:
        return None
    if b.scratch:
        at = b.const(np.zeros(b.scratch, np.float32))
        for r in b.scratch_users:
            b.rows[r] = at
    consts = np.concatenate(b.consts) if b.consts else np.zeros(0, np.float32)
    return Program(np.array(b.rows, np.int64), consts, ran, loops)


def arena_bytes(plan, program: Program | None) -> int:
    """The bytes to allocate for the arena: the plan's, then the program's constants."""
    if program is None:
        return plan.arena_size
    return -(-plan.arena_size // 64) * 64 + program.constants.size * 4
