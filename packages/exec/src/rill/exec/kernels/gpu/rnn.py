"""GPU kernels for the fused LSTM cell (LSTMBlockCell, LSTMBlockCellGrad), written against `xp`.

The forward pass is two GEMMs, x · w[:input size] and h_prev · w[input size:] (row blocks of w,
contiguous: no copy of w and no [x, h_prev] concatenation), and one elementwise pass that adds
them and the bias and applies the gates; the gradient is one elementwise pass, then the four
gate gradients side by side (one concatenation) and, with peepholes, three column sums.

Each elementwise pass is one Python function of arithmetic and `xp` ufuncs. Where `xp` has
`fuse` (cupy) it is compiled into one kernel per configuration (peepholes, clipping, forget
bias), shared by every cell with that configuration; elsewhere (the simulated GPU) the function
runs on the arrays as plain expressions. If building or compiling a fused kernel raises, the
passes run unfused from then on and FUSED_FALLBACK_REASON says why.

Nothing here reads a device value on the host: shapes and dtypes are host metadata, constants
are Python numbers, and every output is a device array (a kernel launches device work only).
T is float32 or float16; float16 is computed in float32 (products and gates) and rounded once
to float16, where the CPU kernel computes its float16 gates in float64.

The optional `xw` (x · w[:input size] computed beforehand, the CPU loop executor's hoisted
input projection) takes the place of the first GEMM. The hoisting (rill.exec.executor.hoist)
only projects host arrays, so nothing passes it on a GPU today; it costs nothing to accept.
"""

from __future__ import annotations

import threading

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.rnn_kernels import _check, _check_grad
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

__all__ = ["FUSED_FALLBACK_REASON", "fused_in_use"]

_TYPES = {"T": (dtypes.float16, dtypes.float32)}
_F32 = np.dtype(np.float32)

# Why the elementwise passes run unfused on a device whose `xp` has `fuse` (None: they are
# fused there, or nothing was tried yet). Set once by the first failure; read by the GPU suite.
FUSED_FALLBACK_REASON: str | None = None

# (xp, pass, configuration) -> the pass's callable, one per configuration shared by all cells
# (a fused kernel compiles once per input signature). Built under the lock; calls need none.
_PASSES: dict = {}
_LOCK = threading.Lock()


def fused_in_use(xp) -> bool:
    """Whether the passes run as fused kernels on this array module (not after a fallback)."""
    return getattr(xp, "fuse", None) is not None and FUSED_FALLBACK_REASON is None


def _fall_back(name: str, e: BaseException) -> None:
    global FUSED_FALLBACK_REASON
    if FUSED_FALLBACK_REASON is None:
        FUSED_FALLBACK_REASON = f"{name}: {type(e).__name__}: {str(e)[:300]}"


class _Pass:
    """An elementwise pass: `fn` fused into one kernel by `xp.fuse` where xp has it, else `fn`
    itself. A fused call that raises anything but MemoryError (cupy's out-of-memory) is taken
    as the kernel failing to build: the pass, and passes made later, run `fn` unfused."""

    __slots__ = ("name", "plain", "fused")

    def __init__(self, xp, fn, name: str):
        self.name, self.plain, self.fused = name, fn, None
        fuse = getattr(xp, "fuse", None)
        if fuse is not None and FUSED_FALLBACK_REASON is None:
            try:
                self.fused = fuse(kernel_name=name)(fn)
            except Exception as e:  # noqa: BLE001 - any failure to build means: unfused
                _fall_back(name, e)

    def __call__(self, *args):
        fused = self.fused
        if fused is not None:
            try:
                return fused(*args)
            except MemoryError:
                raise
            except Exception as e:  # noqa: BLE001 - tracing or compiling failed: unfused
                self.fused = None
                _fall_back(self.name, e)
        return self.plain(*args)


def _cached(xp, key, make):
    full = (xp, *key)
    p = _PASSES.get(full)
    if p is None:
        with _LOCK:
            p = _PASSES.get(full)
            if p is None:
                p = _PASSES[full] = make()
    return p


def _forward_pass(xp, forget_bias: float, cell_clip: float, peephole: bool) -> _Pass:
    """The forward elementwise pass for one configuration: from the two GEMMs' column blocks
    (gx_*, gh_*), the bias blocks, cs_prev and (with peepholes) wci, wcf, wco to
    (i, cs, f, o, ci, co, h)."""
    exp, tanh, maximum, minimum = xp.exp, xp.tanh, xp.maximum, xp.minimum
    fb, clip = float(forget_bias), float(cell_clip)

    def sig(v):
        return 1.0 / (1.0 + exp(-v))

    def cell(gx_i, gh_i, gx_c, gh_c, gx_f, gh_f, gx_o, gh_o, b_i, b_c, b_f, b_o, cs_prev,
             wci, wcf, wco):  # fmt: skip
        pi = gx_i + gh_i + b_i
        pf = gx_f + gh_f + b_f + fb
        if peephole:
            pi = pi + cs_prev * wci
            pf = pf + cs_prev * wcf
        i = sig(pi)
        ci = tanh(gx_c + gh_c + b_c)
        f = sig(pf)
        cs = ci * i + cs_prev * f
        if clip > 0:
            cs = minimum(maximum(cs, -clip), clip)
        po = gx_o + gh_o + b_o
        if peephole:
            po = po + cs * wco
        o = sig(po)
        co = tanh(cs)
        return i, cs, f, o, ci, co, co * o

    if peephole:
        fn = cell
    else:  # the peepholes are not arguments of the kernel at all

        def fn(gx_i, gh_i, gx_c, gh_c, gx_f, gh_f, gx_o, gh_o, b_i, b_c, b_f, b_o, cs_prev):
            return cell(gx_i, gh_i, gx_c, gh_c, gx_f, gh_f, gx_o, gh_o, b_i, b_c, b_f, b_o,
                        cs_prev, None, None, None)  # fmt: skip

    return _cached(xp, ("forward", fb, clip, peephole),
                   lambda: _Pass(xp, fn, "rill_lstm_block_cell"))  # fmt: skip


def _backward_pass(xp, peephole: bool) -> _Pass:
    """The gradient's elementwise pass: to (cs_prev_grad, di, dci, df, do) and, with
    peepholes, the three products whose column sums are the peepholes' gradients."""

    def grad(cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad, wci, wcf, wco):
        do = o * (1.0 - o) * h_grad * co
        dcs = (1.0 - co * co) * h_grad * o + cs_grad
        if peephole:
            dcs = dcs + do * wco
        dci = (1.0 - ci * ci) * dcs * i
        df = f * (1.0 - f) * dcs * cs_prev
        di = i * (1.0 - i) * dcs * ci
        g = dcs * f
        if not peephole:
            return g, di, dci, df, do
        g = g + di * wci + df * wcf
        return g, di, dci, df, do, di * cs_prev, df * cs_prev, do * cs

    if peephole:
        fn = grad
    else:  # cs and the peepholes are not arguments of the kernel

        def fn(cs_prev, i, f, o, ci, co, cs_grad, h_grad):
            return grad(cs_prev, i, None, f, o, ci, co, cs_grad, h_grad, None, None, None)

    return _cached(xp, ("backward", peephole), lambda: _Pass(xp, fn, "rill_lstm_block_cell_grad"))


def _f32(a):
    return a.astype(_F32, copy=False)


@register_kernel("LSTMBlockCell", devices="GPU", constraints=_TYPES, expensive=True)
def lstm_block_cell(forget_bias, cell_clip, use_peephole, T, xp):
    dt = np.dtype(T.np)
    peephole = bool(use_peephole)
    cell = _forward_pass(xp, forget_bias, cell_clip, peephole)

    def compute(x, cs_prev, h_prev, w, wci, wcf, wco, b, xw=None):
        """xw: x · w[:input size] computed beforehand ([batch, 4n], w's dtype), or None."""
        batch, n = _check(x, cs_prev, h_prev, w, wci, wcf, wco, b)
        k = x.shape[1]
        if xw is not None and (
            xw.shape != (batch, 4 * n) or xw.dtype != w.dtype or not xw.flags.c_contiguous
        ):
            raise InvalidArgumentError(
                f"LSTMBlockCell: the input projection must be a row-major [{batch}, "
                f"{4 * n}] {w.dtype} matrix, got {list(xw.shape)} {xw.dtype}"
            )
        if batch == 0 or n == 0:
            return tuple(xp.empty((batch, n), dt) for _ in range(7))
        wf = _f32(w)
        if xw is not None:
            gx = _f32(xw)
        elif k:
            gx = xp.matmul(_f32(x), wf[:k])
        else:
            gx = xp.zeros((batch, 4 * n), _F32)
        gh = xp.matmul(_f32(h_prev), wf[k:])
        bf = _f32(b)
        args = [gx[:, :n], gh[:, :n], gx[:, n : 2 * n], gh[:, n : 2 * n],
                gx[:, 2 * n : 3 * n], gh[:, 2 * n : 3 * n], gx[:, 3 * n :], gh[:, 3 * n :],
                bf[:n], bf[n : 2 * n], bf[2 * n : 3 * n], bf[3 * n :], _f32(cs_prev)]  # fmt: skip
        if peephole:
            args += [_f32(wci), _f32(wcf), _f32(wco)]
        return tuple(v.astype(dt, copy=False) for v in cell(*args))

    return compute


@register_kernel("LSTMBlockCellGrad", devices="GPU", constraints=_TYPES, expensive=True)
def lstm_block_cell_grad(use_peephole, T, xp):
    dt = np.dtype(T.np)
    peephole = bool(use_peephole)
    grad = _backward_pass(xp, peephole)

    def compute(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co, cs_grad, h_grad):
        batch, n = _check_grad(x, cs_prev, h_prev, w, wci, wcf, wco, b, i, cs, f, o, ci, co,
                               cs_grad, h_grad)  # fmt: skip
        if batch == 0 or n == 0:
            zeros = [xp.zeros(n, dt) for _ in range(3)]
            return (xp.empty((batch, n), dt), xp.empty((batch, 4 * n), dt), *zeros)
        if peephole:
            args = [_f32(a) for a in (cs_prev, i, cs, f, o, ci, co, cs_grad, h_grad,
                                      wci, wcf, wco)]  # fmt: skip
            g, di, dci, df, do, pci, pcf, pco = grad(*args)
            sums = [xp.sum(p, axis=0).astype(dt, copy=False) for p in (pci, pcf, pco)]
        else:
            args = [_f32(a) for a in (cs_prev, i, f, o, ci, co, cs_grad, h_grad)]
            g, di, dci, df, do = grad(*args)
            sums = [xp.zeros(n, dt) for _ in range(3)]
        dicfo = xp.concatenate((di, dci, df, do), axis=1).astype(dt, copy=False)
        return (g.astype(dt, copy=False), dicfo, *sums)

    return compute
