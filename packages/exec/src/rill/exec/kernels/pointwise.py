"""The product of a channels-first pointwise (1×1) convolution: W [o, c] · X [c, p] per image.

Every NCHW path of a 1×1 convolution (Conv2D's channels-first case, the fused convolutions'
lean paths, with or without a gate) computes its product here, so that fused and unfused ops
give the same bits. With the compiled loops on, the product is `_gemm_vec.gemm_rows`: register
blocks of 8 output channels by 16 or 32 positions, a chain of fused multiply-adds per element
in channel order, the same whatever rows a thread computes, so a product splits over threads
in row blocks without changing a bit; optionally with the bias and a compiled activation
applied in registers. Where it does not run (the compiled loops off, RILL_CONV_DIRECT=0 in the
environment, another dtype, rows that are not contiguous, fewer positions than one vector) the
product is numpy's matmul, split over threads only in halves that give one call's bits
(threads.matmul). The two agree to float rounding, not to the bit.
"""

from __future__ import annotations

import numpy as np

from rill.exec import threads
from rill.exec.kernels import intra_op, jit

__all__ = ["matmul", "product", "stack", "batch", "row_dots", "compiled", "NO_SPLIT", "SPLIT_GRAIN"]

# split_from for a product that must run on the calling thread (one image's, inside a split).
NO_SPLIT = 1 << 62
SPLIT_GRAIN = threads.SPLIT_GRAIN
# The fewest multiply-adds of a compiled product split through the pool's team (a hand-off
# of about a microsecond where a worker polls): about 5 µs of work.
TEAM_GRAIN = 1 << 18
# The bias argument where none is applied, by dtype (one compiled signature: a 1-D C array).
_NO_BIAS = {dt: np.zeros(1, dt) for dt in jit.FLOATS}


def _mod():
    """_gemm_vec, or None where it does not run (the compiled loops off, RILL_CONV_DIRECT=0)."""
    return jit.direct("_gemm_vec")


def compiled(wt: np.ndarray, x: np.ndarray, out: np.ndarray):
    """_gemm_vec where it computes wt · x into out, else None."""
    mod = _mod()
    dt = out.dtype
    if (
        mod is None
        or dt not in jit.FLOATS
        or wt.dtype != dt
        or x.dtype != dt
        or x.ndim != 2
        or out.ndim != 2
        or x.strides[1] != dt.itemsize
        or out.strides[1] != dt.itemsize
        or x.shape[1] * dt.itemsize < mod.VECTOR_BYTES
        or not wt.size
    ):
        return None
    return mod


def matmul(
    wt, x, out, split_from: int = threads.SPLIT_GRAIN, bias=None, code=None, scale=None
) -> bool:
    """out = wt · x (wt [o, c], x [c, p], out [o, p]); with `code` (an activation code of
    _conv_loops' epilogue) and bias [o] also the bias and the activation, where the compiled
    product applies them itself: returns whether it did (else the caller applies them).
    With `scale` ([c], contiguous, x's dtype: a squeeze-excite gate) the product is wt · (x ·
    scale[:, None]), x's rows scaled with numpy's multiply's bits: the compiled product scales
    them as it packs x (no pass over x of its own), else numpy multiplies first.
    Splits over the intra-op threads from `split_from` multiply-adds."""
    mod = compiled(wt, x, out)
    if mod is None:
        if scale is not None:
            x = x * scale[:, None]
        work = wt.shape[0] * wt.shape[1] * x.shape[1]
        if work >= split_from and intra_op.threads_now() > 1:
            threads.matmul(wt, x, out=out, most=2, exact=True)
        else:
            np.matmul(wt, x, out=out)
        return False
    return _run(mod, wt, x, out, split_from, 2, bias, code, scale)


def product(a, b, out, most: int = threads.MAX_PIECES, split_from: int = SPLIT_GRAIN) -> bool:
    """out = a · b through the compiled product (a [m, k] any strides, b [k, n] and out [m, n]
    with contiguous rows), over the intra-op threads (the team from TEAM_GRAIN multiply-adds,
    else at most `most` row pieces from `split_from`; NO_SPLIT: on the calling thread); False,
    with out untouched, where it does not run (see compiled) or a has fewer rows than a block
    (a product of a few rows, a matrix-vector product, is BLAS's): the caller computes it."""
    mod = compiled(a, b, out)
    if mod is None or a.shape[0] < mod.CO:
        return False
    _run(mod, a, b, out, split_from, most, None, None)
    return True


def batch(wt, x, out, bias, code, scale=None) -> bool:
    """out[i] = wt · x[i] for a batch (wt [o, c]; x [n, c, p], out [n, o, p] with contiguous
    rows), then + bias [o] and the epilogue `code` in registers, through the team (each
    product's rows in pieces of whole row blocks): True where it ran, the same bits as each
    image's own product and epilogue; False, out untouched, where it does not run (the
    compiled product off, no polling worker, too little work). With `scale` [n, c] (contiguous
    rows) image i's input is x[i] · scale[i][:, None], as matmul scales it."""
    if x.ndim != 3 or not len(x):
        return False
    mod = compiled(wt, x[0], out[0])
    dt = out.dtype
    if mod is None or bias is None or bias.dtype != dt or bias.shape != (wt.shape[0],):
        return False
    if wt.shape[0] * wt.shape[1] * x.shape[0] * x.shape[2] < TEAM_GRAIN:
        return False
    team = intra_op.team()
    if team is None:
        return False
    pieces, fn = max(1, 4 // len(x)), mod.piece_function(dt)
    if scale is None:
        mod.gemm_batch_team(wt, x, out, bias, code, pieces, team, fn)
    else:
        mod.gemm_scaled_batch_team(wt, x, scale, out, bias, code, pieces, team, fn)
    return True


def row_dots(x, w, out) -> bool:
    """out [m, n] = x [m, k] · wᵀ (w [n, k]; the rows of x, w and out contiguous, one float
    dtype) through _gemm_vec.row_dots: a run of w's rows per piece over the team from
    TEAM_GRAIN multiply-adds, else on the calling thread; the same bits either way. False, out
    untouched, where it does not run."""
    mod = _mod()
    dt = out.dtype
    if (
        mod is None
        or dt not in jit.FLOATS
        or x.dtype != dt
        or w.dtype != dt
        or x.strides[1] != dt.itemsize
        or out.strides[1] != dt.itemsize
        or w.strides[1] != dt.itemsize
    ):
        return False
    team = None
    if x.shape[0] * w.size >= TEAM_GRAIN and w.shape[0] > 1:
        team = intra_op.team()
    if team is not None:
        mod.row_dots_team(x, w, out, 4, team, mod.row_dot_piece_function(dt))
    else:
        mod.row_dots(x, w, out, 0, w.shape[0])
    return True


def _run(mod, wt, x, out, split_from, most, bias, code, scale=None) -> bool:
    o, c = wt.shape
    work = o * c * x.shape[1]
    if code is None or bias is None or bias.dtype != out.dtype or bias.shape != (o,):
        act, bias = mod.RAW, _NO_BIAS[out.dtype]
    else:
        act = code
    blocks = -(-o // mod.CO)
    team = None
    if work >= TEAM_GRAIN and split_from < NO_SPLIT and blocks > 1:
        team = intra_op.team()
    if team is not None:
        # Pieces of whole row blocks for the caller and the polling workers, with no Python
        # in the hand-off; four, so that a worker that starts late takes fewer.
        fn = mod.piece_function(out.dtype)
        if scale is None:
            mod.gemm_team(wt, x, out, bias, act, 4, team, fn)
        else:
            mod.gemm_scaled_team(wt, x, scale, out, bias, act, 4, team, fn)
        return act != mod.RAW

    def rows(m0, m1):
        if scale is None:
            mod.gemm_rows(wt, x, out, bias, m0, m1, act)
        else:
            mod.gemm_scaled_rows(wt, x, scale, out, bias, m0, m1, act)

    parts = 1
    if work >= split_from:
        parts = min(threads.threads_for(work, most), intra_op.threads_now(), blocks)
    if parts <= 1:
        rows(0, o)
    else:
        cut = [min(o, blocks * i // parts * mod.CO) for i in range(parts + 1)]
        intra_op.parallel_for(parts, lambda lo, hi: rows(cut[lo], cut[hi]), max_threads=parts)
    return act != mod.RAW


def stack(a, b, out, split_from: int = threads.SPLIT_GRAIN) -> bool:
    """out[s] = a[s] · b[s] for stacks of products of the same shapes (a Winograd
    convolution's products, one per tile position) through the compiled product, each the
    same bits as its own product whatever the threads: over the team from TEAM_GRAIN
    multiply-adds (a piece per product), else over the intra-op threads from `split_from`
    (NO_SPLIT: on the calling thread). False, out untouched, where the compiled product does
    not run."""
    if a.ndim != 3 or b.ndim != 3 or out.ndim != 3 or not len(out):
        return False
    mod = compiled(a[0], b[0], out[0])
    if mod is None:
        return False
    s, m, k = a.shape
    work = s * m * k * b.shape[2]
    team = None
    if work >= TEAM_GRAIN and split_from < NO_SPLIT and s > 1:
        team = intra_op.team()
    if team is not None:
        mod.gemm_stack_team(a, b, out, max(1, 4 // s), team, mod.piece_function(out.dtype))
        return True
    parts = 1
    if work >= split_from:
        parts = min(threads.threads_for(work, s), intra_op.threads_now())
    if parts <= 1:
        mod.gemm_stack(a, b, out, 0, s)
    else:
        intra_op.parallel_for(s, lambda lo, hi: mod.gemm_stack(a, b, out, lo, hi),
                              max_threads=parts)  # fmt: skip
    return True
