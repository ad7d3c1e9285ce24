"""A float matrix product as rill.exec.threads.matmul computes it, in one BLAS call where its
pieces would all run on the calling thread and one call gives their very bits.

threads.matmul splits a large product in fixed pieces (a function of the shapes, so that the
bits never depend on the threads), and on one thread runs them one after the other. Each piece
repacks the operand it does not split, so there the pieces cost CPU over one call: the LSTM
512x64x50 step's folded weight gradient ([1024, 3200] x [3200, 2048]) about 85 ms in one call
against 105 in its 4 column pieces, its gradient loop's [64, 2048] x [2048, 512]ᵀ 1.22 ms in one
call against 1.36 in its 2 column pieces. A BLAS routine's arithmetic is chosen by the shapes,
the transpositions and the strides, never by the values: each (shapes, types, layouts) is tried
once on random operands laid out the same way, the one call against the pieces, and the verdict
kept; where they differ (another BLAS, a small-product kernel for thin pieces) the pieces run as
before.
"""

from __future__ import annotations

import threading

import numpy as np

from rill.exec import threads
from rill.exec.kernels.intra_op import pool_threads

__all__ = ["product"]

_verdicts: dict = {}
_lock = threading.Lock()
# Products whose operands hold more bytes than this are never tried (a trial draws operands of
# their size: its memory, and two products' time): threads.matmul's pieces, as before. The LSTM
# 512x64x50 step's folded weight gradient holds 39 MB.
TRIAL_BYTES = 1 << 26


def _layout(x: np.ndarray) -> str:
    return "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else ""


def _one_call(a: np.ndarray, b: np.ndarray, flip: bool) -> np.ndarray:
    """a @ b in one BLAS call, row-major. flip: b is a row-major matrix's transpose (a
    gradient's dy · wᵀ), computed as (bᵀ · aᵀ)ᵀ, whose large operand BLAS reads without
    transposing, as threads.matmul's column pieces of such a product are. The call is
    threads._gemm, as each of matmul's pieces is (tests watch it)."""
    if not flip:
        return threads._gemm(a, b, out=None)
    out = np.empty((a.shape[0], b.shape[1]), np.result_type(a, b))
    out.T[...] = threads._gemm(b.T, a.T, out=None)
    return out


def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for 2-D float arrays with threads.matmul's bits: its pieces over the intra-op
    threads, or one BLAS call where they would all run on this thread and the call gives the
    same bits on this machine.

    The verdict for a product's shapes, types and layouts is tried at its first call whatever
    the threads (two products of its size on random operands), so that its cost falls in a
    first step, not in whichever later step first finds a single thread to run on."""
    m, k = a.shape
    n = b.shape[1]
    axis, pieces = threads.gemm_pieces(m, k, n)
    if pieces < 2:
        return threads.matmul(a, b)
    lay = (_layout(a), _layout(b))
    if "" in lay or a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
        return threads.matmul(a, b)
    if a.nbytes + b.nbytes > TRIAL_BYTES:
        return threads.matmul(a, b)
    flip = axis == 1 and lay[1] == "F" and not b.flags.c_contiguous
    key = (a.shape, b.shape, a.dtype.str, lay)
    verdict = _verdicts.get(key)
    if verdict is None:
        rng = np.random.default_rng(len(_verdicts))
        pa = np.asarray(_uniform(rng, a.shape, a.dtype), order=lay[0])
        pb = np.asarray(_uniform(rng, b.shape, b.dtype), order=lay[1])
        verdict = bool(np.array_equal(_one_call(pa, pb, flip), threads.matmul(pa, pb)))
        with _lock:
            _verdicts[key] = verdict
    # threads_for weighs the load for this product's size (a coarse one takes a core another
    # task shares); threads_now's idle cores only would make it one call whenever anything
    # else ran at the 50 ms sample (a CNN step's dense-layer products, one step in ten).
    if verdict and min(threads.threads_for(m * k * n, pieces), pool_threads()) < 2:
        return _one_call(a, b, flip)
    return threads.matmul(a, b)


def _uniform(rng, shape, dtype) -> np.ndarray:
    """Random values in [-1, 1) of dtype (drawn in it: a trial's operands are large)."""
    x = rng.random(shape, dtype=dtype)
    x *= 2
    x -= 1
    return x
