"""Kernels for rill.graph.ops.matmul_ops: MatMul and BatchMatMulV2."""

from __future__ import annotations

import numpy as np

from rill.exec import threads
from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels import pointwise, serial_gemm
from rill.exec.kernels.intra_op import groups_of, parallel_blocks
from rill.graph.errors import InvalidArgumentError


def _dims(x) -> str:
    return "[" + ",".join(str(d) for d in x.shape) + "]"


def _adjoint(xp, x, complex_: bool):
    x = xp.swapaxes(x, -1, -2)
    return xp.conj(x) if complex_ else x


# The most rows of a product with a transposed matrix that MatMul computes as its transpose: at
# batch 2-16 a classifier head's [m, 576] x [576, 1024]ᵀ took 400 -> 170-300 µs that way (one
# thread), 32 rows 660 -> 550, 64 the same either way.
_FLIP_ROWS = 32
# The most rows of a product by a transposed matrix computed as dot products of rows
# (pointwise.row_dots). One thread, [m, 1024] x [1000, 1024]ᵀ, µs cold (the weight read from
# memory) / warm: m = 1 115 / 45 by OpenBLAS and as dot products about the same, m = 4
# 319 / 214 and 195 / 89, m = 8 394 / 227 and 402 / 198, m = 16 (1280 columns) 694 / 453 and
# 848 / 614: OpenBLAS's GEMM reuses each loaded vector for more outputs.
_DOT_ROWS = 4


# The fewest multiply-adds of such a product split in halves over two threads, where the halves
# give one call's bits (threads.matmul(exact=True)). Each half packs half the weight: a batch-8
# classifier head, [8, 1280] x [1280, 1000]ᵀ, took 0.25 ms in one call and 0.18 in halves,
# [8, 576] x [576, 1024] 0.23 and 0.17 (quiet, two threads).
_HALVES = 2 * threads.SPLIT_GRAIN


def _halves(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return threads.matmul(a, b, most=2, exact=True)


@register_kernel("MatMul", devices=("CPU", "GPU"), expensive=True)
def matmul(transpose_a, transpose_b, T, xp):
    want = T.np
    # On the CPU, float products go through the thread policy (split over the intra-op threads,
    # single-threaded BLAS pieces, or one call where that gives their bits: the same bits
    # whatever the thread count).
    mm = serial_gemm.product if xp is np and want in (np.float32, np.float64) else xp.matmul

    def compute(a, b):
        if a.ndim != 2 or b.ndim != 2:
            raise InvalidArgumentError(
                f"MatMul needs matrices, got In[0]: {_dims(a)}, In[1]: {_dims(b)}"
            )
        x = a.T if transpose_a else a
        y = b.T if transpose_b else b
        if x.shape[1] != y.shape[0]:
            raise InvalidArgumentError(
                f"Matrix size-incompatible: In[0]: {_dims(a)}, In[1]: {_dims(b)}"
            )
        # numpy multiplies bfloat16 in float32; the op's type is the operands'.
        if mm is not xp.matmul:
            out = _compiled(x, y, want)
            if out is not None:
                return out
            if transpose_b and x.shape[0] <= _DOT_ROWS:
                # A few rows times a transposed matrix (a classifier head at batch 1-4): the
                # dot products of the rows, a run of the matrix's rows per piece over the team
                # (OpenBLAS's kernel ran on one thread): MobileNetV3-small b1, default threads,
                # 1.16 -> 1.12 ms.
                out = np.empty((x.shape[0], b.shape[0]), want)
                if pointwise.row_dots(x, b, out):
                    return out
        work = x.shape[0] * x.shape[1] * y.shape[1]
        if mm is not xp.matmul and work < 2 * threads.GEMM_GRAIN:
            # Too small for threads.matmul's fixed pieces: one call, without the policy's
            # overhead (a batch-1 classifier head's GEMV), or from _HALVES multiply-adds its
            # exact halves where a second thread is there to run one.
            one = np.matmul if work < _HALVES else _halves
            if 2 <= x.shape[0] <= _FLIP_ROWS and y.flags.f_contiguous and not y.flags.c_contiguous:
                # A few rows times a transposed row-major matrix (an imported Gemm's weight,
                # transB): OpenBLAS took about twice as long as for the product's transpose,
                # b · xᵀ, computed here and copied back (the same dot products).
                return one(y.T, x.T).T.astype(want, order="C")
            return one(x, y).astype(want, copy=False)
        return mm(x, y).astype(want, copy=False)

    return compute


def _compiled(a: np.ndarray, b: np.ndarray, want) -> np.ndarray | None:
    """a @ b [m, n] through the compiled product (pointwise.product: split-invariant, over
    the intra-op threads), or None where it does not run."""
    if a.dtype != want or b.dtype != want:
        return None
    out = np.empty((a.shape[0], b.shape[1]), want)
    return out if pointwise.product(a, b, out) else None


def _batched(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for float stacks of matrices with the same batch dims: fixed groups of the batch
    (a function of the shapes only) shared over the intra-op threads; each matrix product is
    its own single-threaded BLAS call, as in numpy's own loop, on whichever thread runs it."""
    batch_shape = a.shape[:-2]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    a3, b3 = a.reshape(-1, m, k), b.reshape(-1, k, n)
    out = np.empty((len(a3), m, n), np.result_type(a, b))
    groups = groups_of(len(a3))

    def one(g):
        s = slice(groups[g].start, groups[g].stop)
        np.matmul(a3[s], b3[s], out=out[s])

    parallel_blocks(len(groups), one, len(a3) * m * k * n)
    return out.reshape(*batch_shape, m, n)


def _rows_times_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., m, k] @ b [k, n] (a stack times one matrix: the Linear layers of imported
    transformers) as one [rows, k] x [k, n] product through rill.exec.threads.matmul, which
    splits it in fixed blocks over the intra-op threads (numpy's own loop multiplies the stack
    one matrix at a time on one thread). Below rill.exec.threads.COARSE_GRAIN multiply-adds
    pieces cost CPU over one call (a GPT-2-like block at batch 1, [64, 256] x [256, 1024]:
    312 µs in one call, 404 in four column pieces; two fixed halves made the whole decoder 4-9%
    slower on one thread): such a product is one call on one thread, and on two or more splits
    in two halves (SMALL_STACK_PIECES) only where they give one call's bits on this machine's
    BLAS (rill.exec.threads.matmul's `exact`), so the bits never depend on the threads. Below
    SMALL_STACK_EXACT multiply-adds it is numpy's one call: the second thread's wake-up costs
    more than its half saves. (With sleeping hand-offs ViT-small and the GPT-2-like decoder at
    batch 1 ran 26.5 -> 23.5 and 10.7 -> 8.9 ms with halves only from 2^25 instead of 2^22;
    with polling hand-offs, halves from 2^24 instead of 2^25 took them 19.4 -> 17.6 and
    7.42 -> 7.28 ms, same process, alternating; once a woken worker no longer slept on the GIL
    (intra_op's settle polls), halves from 2^23 took the decoder 6.90 -> 6.24 and 7.47 -> 6.96
    ms in two runs and ViT-small 15.36 -> 15.17 ms; 2^22 was slower again, 6.51 -> 6.80.)"""
    k, n = b.shape
    if a.flags.c_contiguous:
        out = _compiled(a.reshape(-1, k), b, b.dtype)
        if out is not None:
            return out.reshape(*a.shape[:-1], n)
    work = a.size // k * k * n
    if work < 2 * threads.SPLIT_GRAIN:
        return np.matmul(a, b)
    rows = a.reshape(-1, k)
    if work >= threads.COARSE_GRAIN:
        return threads.matmul(rows, b).reshape(*a.shape[:-1], n)
    if work < SMALL_STACK_EXACT:
        return np.matmul(a, b)
    out = threads.matmul(rows, b, most=SMALL_STACK_PIECES, exact=True)
    return out.reshape(*a.shape[:-1], n)


# The most pieces of a stack-times-matrix product below rill.exec.threads.COARSE_GRAIN, and the
# least multiply-adds for which it splits at all.
SMALL_STACK_PIECES = 2
SMALL_STACK_EXACT = 1 << 23


@register_kernel("BatchMatMulV2", devices=("CPU", "GPU"), expensive=True)
def batch_matmul_v2(adj_x, adj_y, T, xp):
    mm, want, cplx = xp.matmul, T.np, T.is_complex
    if xp is np and want in (np.float32, np.float64):
        # Stacks with the same batch dims go over the intra-op threads (rill.exec.threads).
        def mm(a, b):
            if (
                a.ndim == b.ndim >= 3
                and a.shape[:-2] == b.shape[:-2]
                and a.shape[-1] == b.shape[-2]
            ):
                return _batched(a, b)
            if a.ndim >= 3 and b.ndim == 2 and a.shape[-1] == b.shape[0]:
                return _rows_times_matrix(a, b)
            return np.matmul(a, b)

    def compute(x, y):
        if x.ndim < 2 or y.ndim < 2:
            raise InvalidArgumentError(
                f"BatchMatMulV2 needs rank >= 2, got In[0]: {_dims(x)}, In[1]: {_dims(y)}"
            )
        a = _adjoint(xp, x, cplx) if adj_x else x
        b = _adjoint(xp, y, cplx) if adj_y else y
        if a.shape[-1] != b.shape[-2]:
            raise InvalidArgumentError(
                f"Matrix size-incompatible: In[0]: {_dims(x)}, In[1]: {_dims(y)} "
                f"(adj_x={adj_x}, adj_y={adj_y})"
            )
        try:
            return mm(a, b).astype(want, copy=False)
        except ValueError:
            raise InvalidArgumentError(
                f"In[0] and In[1] must have compatible batch dimensions: {_dims(x)} vs. {_dims(y)}"
            ) from None

    return compute
