"""Kernels for rill.graph.ops.linalg_ops, over numpy.linalg (LAPACK), batched over the leading
dimensions. Half precision is computed in float32. A singular or non-positive-definite input is
InvalidArgumentError with TensorFlow's wording."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.graph.errors import InvalidArgumentError
from rill.graph.shapes import TensorShape


def _work(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _square(x, what="input"):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise InvalidArgumentError(f"{what} must be a batch of square matrices, got shape "
                                   f"{TensorShape(x.shape)}")  # fmt: skip


def _adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


@register_kernel("MatrixInverse", expensive=True)
def matrix_inverse(adjoint, T):
    def compute(x):
        _square(x)
        a = _adj(x) if adjoint else x
        try:
            return np.linalg.inv(_work(a)).astype(x.dtype)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("Input is not invertible.") from None

    return compute


@register_kernel("MatrixDeterminant", expensive=True)
def matrix_determinant(T):
    def compute(x):
        _square(x)
        return np.asarray(np.linalg.det(_work(x))).astype(x.dtype)

    return compute


@register_kernel("LogMatrixDeterminant", expensive=True)
def log_matrix_determinant(T):
    def compute(x):
        _square(x)
        sign, logabs = np.linalg.slogdet(_work(x))
        return np.asarray(sign).astype(x.dtype), np.asarray(logabs).astype(x.dtype)

    return compute


@register_kernel("Cholesky", expensive=True)
def cholesky(T):
    def compute(x):
        _square(x)
        low = np.tril(_work(x))
        herm = low + np.tril(low, -1).conj().swapaxes(-1, -2)  # the lower triangle, mirrored
        try:
            return np.linalg.cholesky(herm).astype(x.dtype)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError(
                "Cholesky decomposition was not successful. The input might not be valid."
            ) from None

    return compute


@register_kernel("Qr", expensive=True)
def qr(full_matrices, T):
    def compute(x):
        if x.ndim < 2:
            raise InvalidArgumentError(f"input must have rank >= 2, got {TensorShape(x.shape)}")
        q, r = np.linalg.qr(_work(x), mode="complete" if full_matrices else "reduced")
        return q.astype(x.dtype), r.astype(x.dtype)

    return compute


@register_kernel("Svd", expensive=True)
def svd(compute_uv, full_matrices, T):
    def compute(x):
        if x.ndim < 2:
            raise InvalidArgumentError(f"input must have rank >= 2, got {TensorShape(x.shape)}")
        w = _work(x)
        if not compute_uv:
            s = np.linalg.svd(w, compute_uv=False)
            empty = np.zeros((0,), x.dtype)
            return s.astype(x.real.dtype).astype(x.dtype), empty, empty
        u, s, vh = np.linalg.svd(w, full_matrices=full_matrices)
        return s.astype(x.dtype), u.astype(x.dtype), _adj(vh).astype(x.dtype)

    return compute


@register_kernel("SelfAdjointEigV2", expensive=True)
def self_adjoint_eig(compute_v, T):
    def compute(x):
        _square(x)
        w = _work(x)
        if not compute_v:
            return np.linalg.eigvalsh(w, UPLO="L").astype(x.dtype), np.zeros((0,), x.dtype)
        e, v = np.linalg.eigh(w, UPLO="L")
        return e.astype(x.dtype), v.astype(x.dtype)

    return compute


def _check_rhs(a, b):
    if b.ndim < 2 or a.shape[-2] != b.shape[-2]:
        raise InvalidArgumentError(
            f"matrix and rhs must have as many rows: shapes {TensorShape(a.shape)} and "
            f"{TensorShape(b.shape)}"
        )


@register_kernel("MatrixSolve", expensive=True)
def matrix_solve(adjoint, T):
    def compute(a, b):
        _square(a, "matrix")
        _check_rhs(a, b)
        if a.shape[:-2] != b.shape[:-2]:
            raise InvalidArgumentError(
                f"matrix and rhs must have the same batch shape: {TensorShape(a.shape)} and "
                f"{TensorShape(b.shape)}"
            )
        m = _adj(a) if adjoint else a
        try:
            return np.linalg.solve(_work(m), _work(b)).astype(b.dtype)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError("Input matrix is not invertible.") from None

    return compute


@register_kernel("MatrixTriangularSolve", expensive=True)
def matrix_triangular_solve(lower, adjoint, T):
    def compute(a, b):
        _square(a, "matrix")
        _check_rhs(a, b)
        tri = np.tril(_work(a)) if lower else np.triu(_work(a))
        m = _adj(tri) if adjoint else tri
        diag = np.diagonal(tri, axis1=-2, axis2=-1)
        if (diag == 0).any():
            raise InvalidArgumentError("Input matrix is not invertible.")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        m = np.broadcast_to(m, batch + m.shape[-2:])
        rhs = np.broadcast_to(_work(b), batch + b.shape[-2:])
        return np.linalg.solve(m, rhs).astype(b.dtype)

    return compute


@register_kernel("MatrixSolveLs", expensive=True)
def matrix_solve_ls(T, fast):
    def compute(a, b, l2):
        _check_rhs(a, b)
        lam = float(l2)
        w, rhs = _work(a), _work(b)
        if not fast:
            if lam != 0:
                raise InvalidArgumentError("fast=False is only implemented for l2_regularizer=0")
            flat_a = w.reshape(-1, *w.shape[-2:])
            flat_b = rhs.reshape(-1, *rhs.shape[-2:])
            out = np.stack([np.linalg.lstsq(x, y, rcond=None)[0] for x, y in zip(flat_a, flat_b)])
            return out.reshape(*a.shape[:-2], a.shape[-1], b.shape[-1]).astype(b.dtype)
        m, n = a.shape[-2:]
        try:
            if m >= n:  # (AᴴA + λI)⁻¹ Aᴴ B
                gram = _adj(w) @ w + lam * np.eye(n, dtype=w.dtype)
                return np.linalg.solve(gram, _adj(w) @ rhs).astype(b.dtype)
            gram = w @ _adj(w) + lam * np.eye(m, dtype=w.dtype)  # Aᴴ (AAᴴ + λI)⁻¹ B
            return (_adj(w) @ np.linalg.solve(gram, rhs)).astype(b.dtype)
        except np.linalg.LinAlgError:
            raise InvalidArgumentError(
                "the normal equations are singular; use a positive l2_regularizer"
            ) from None

    return compute
