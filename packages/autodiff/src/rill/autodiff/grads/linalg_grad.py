"""Gradients for rill.graph.ops.linalg_ops, from TensorFlow's linalg_grad formulas. As
TensorFlow's: Qr's covers every shape but a tall matrix with full_matrices=True, Svd's the reduced
decomposition and the full one of matrices whose dimensions differ by at most one, MatrixSolveLs's
the fast (normal equations) path."""

from __future__ import annotations

from rill.autodiff.grads.math_grad import _dense, _scalar
from rill.autodiff.registry import register_gradient
from rill.graph.errors import GraphTypeError
from rill.graph.ops import array_ops, diag_ops, math_ops, reshape_ops
from rill.graph.ops import linalg_ops as la
from rill.graph.ops.matmul_ops import matmul


def _adjoint(x):
    r = x.shape.rank
    if r is None:
        raise GraphTypeError(f"the gradient needs {x.name} to have a known rank")
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return reshape_ops.transpose(x, perm, conjugate=x.dtype.is_complex)


def _expand2(x):
    return reshape_ops.expand_dims(reshape_ops.expand_dims(x, -1), -1)


@register_gradient("MatrixInverse")
def _matrix_inverse_grad(op, grad):
    """dA = -Yᴴ g Yᴴ (Y = A⁻¹); with adjoint: dA = -Y gᴴ Y"""
    y = op.outputs[0]
    grad = _dense(grad)
    if op.attrs["adjoint"]:
        return -matmul(y, matmul(grad, y, adjoint_a=True))
    return -matmul(y, matmul(grad, y, adjoint_b=True), adjoint_a=True)


@register_gradient("MatrixDeterminant")
def _matrix_determinant_grad(op, grad):
    """dA = g·det(A)·A⁻ᴴ"""
    a, det = op.inputs[0], op.outputs[0]
    return _expand2(_dense(grad) * det) * la.matrix_inverse(a, adjoint=True)


@register_gradient("LogMatrixDeterminant")
def _log_matrix_determinant_grad(op, _grad_sign, grad):
    """dA = g·A⁻ᴴ (the sign has no gradient)"""
    return _expand2(_dense(grad)) * la.matrix_inverse(op.inputs[0], adjoint=True)


def _eye_like(x):
    return diag_ops.matrix_diag(array_ops.ones_like(diag_ops.matrix_diag_part(x)))


@register_gradient("Cholesky")
def _cholesky_grad(op, grad):
    """With L⁻¹ = solve(L, I) and Φ(M) = tril(M) with the diagonal halved:
    dA = ½ (S + Sᴴ), S = L⁻ᴴ Φ(Lᴴ g) L⁻¹"""
    l = op.outputs[0]  # noqa: E741 - the Cholesky factor's usual name
    grad = _dense(grad)
    l_inv = la.matrix_triangular_solve(l, _eye_like(l))
    middle = matmul(l, grad, adjoint_a=True)
    middle = diag_ops.matrix_set_diag(
        middle, _scalar(0.5, middle.dtype) * diag_ops.matrix_diag_part(middle)
    )
    middle = diag_ops.matrix_band_part(middle, -1, 0)
    s = matmul(matmul(l_inv, middle, adjoint_a=True), l_inv)
    return (s + _adjoint(s)) * _scalar(0.5, s.dtype)


def _solve_grad(op, grad, triangular: bool):
    a, b = op.inputs
    x = op.outputs[0]
    adjoint = op.attrs["adjoint"]
    grad = _dense(grad)
    if triangular:
        lower = op.attrs["lower"]
        gb = la.matrix_triangular_solve(a, grad, lower=lower, adjoint=not adjoint)
    else:
        gb = la.matrix_solve(a, grad, adjoint=not adjoint)
    ga = -matmul(x, gb, adjoint_b=True) if adjoint else -matmul(gb, x, adjoint_b=True)
    if triangular:
        ga = (
            diag_ops.matrix_band_part(ga, -1, 0)
            if op.attrs["lower"]
            else (diag_ops.matrix_band_part(ga, 0, -1))
        )
    return ga, gb


@register_gradient("MatrixSolve")
def _matrix_solve_grad(op, grad):
    """db = solve(A, g, adjoint=not adjoint); dA = -db Xᴴ (with adjoint: -X dbᴴ)"""
    return _solve_grad(op, grad, triangular=False)


@register_gradient("MatrixTriangularSolve")
def _matrix_triangular_solve_grad(op, grad):
    """as MatrixSolve's, with dA restricted to the triangle that was read; batch dimensions
    that broadcast are summed back"""
    ga, gb = _solve_grad(op, grad, triangular=True)
    a, b = op.inputs
    if a.shape.rank is not None and ga.shape.rank is not None and ga.shape.rank > a.shape.rank:
        from rill.graph.ops import reduction_ops

        ga = reduction_ops.reduce_sum(ga, list(range(ga.shape.rank - a.shape.rank)))
    return ga, gb


@register_gradient("SelfAdjointEigV2")
def _self_adjoint_eig_grad(op, grad_e, grad_v):
    """dA = V (diag(ge) + F ∘ (Vᴴ gv)) Vᴴ with F_ij = 1 / (e_j - e_i) off the diagonal, then
    folded onto the lower triangle that the op reads"""
    e, v = op.outputs
    if not op.attrs["compute_v"]:
        raise GraphTypeError("SelfAdjointEigV2's gradient needs compute_v=True")
    ge = array_ops.zeros_like(e) if grad_e is None else _dense(grad_e)
    inner = diag_ops.matrix_diag(ge)
    if grad_v is not None:
        diff = reshape_ops.expand_dims(e, -2) - reshape_ops.expand_dims(e, -1)
        eye = _eye_like(diag_ops.matrix_diag(e))
        f = math_ops.reciprocal(diff + eye) * (array_ops.ones_like(eye) - eye)
        inner = inner + f * matmul(v, _dense(grad_v), adjoint_a=True)
    ga = matmul(v, matmul(inner, v, adjoint_b=True))
    ga = diag_ops.matrix_band_part(ga + _adjoint(ga), -1, 0)
    return diag_ops.matrix_set_diag(ga, _scalar(0.5, ga.dtype) * diag_ops.matrix_diag_part(ga))


def _tri_solve_right(x, r):
    """x r⁻ᴴ for upper-triangular r"""
    return _adjoint(la.matrix_triangular_solve(r, _adjoint(x), lower=False, adjoint=False))


def _qr_grad_square_or_tall(q, r, dq, dr):
    """For A = QR (m >= n, reduced): M = R drᴴ - dqᴴ Q, dA = (dq + Q copyltu(M)) R⁻ᴴ"""
    qdq = matmul(q, dq, adjoint_a=True)
    qdq_ = qdq - _adjoint(qdq)
    rdr = matmul(r, dr, adjoint_b=True)
    rdr_ = rdr - _adjoint(rdr)
    tril = diag_ops.matrix_band_part(qdq_ + rdr_, -1, 0)
    grad_a = matmul(q, dr + _tri_solve_right(tril, r))
    grad_b = _tri_solve_right(dq - matmul(q, qdq), r)
    return grad_a + grad_b


@register_gradient("Qr")
def _qr_grad(op, dq, dr):
    """m >= n: the square/tall formula. A wide A = [X Y] (m < n) with R = [U V]: X = QU is the
    square case with dq + Y dVᴴ for dq and dU for dr, and dY = Q dV."""
    a = op.inputs[0]
    q, r = op.outputs
    m, n = a.shape[-2], a.shape[-1]
    if m is None or n is None or (op.attrs["full_matrices"] and m > n):
        raise GraphTypeError(
            "Qr's gradient needs the matrix dimensions known statically and is not defined for "
            "full_matrices=True with more rows than columns (as TensorFlow's)"
        )
    dq = array_ops.zeros_like(q) if dq is None else _dense(dq)
    dr = array_ops.zeros_like(r) if dr is None else _dense(dr)
    if m >= n:
        return _qr_grad_square_or_tall(q, r, dq, dr)
    y = a[..., :, m:]
    u = r[..., :, :m]
    dv = dr[..., :, m:]
    du = dr[..., :, :m]
    dy = matmul(q, dv)
    dx = _qr_grad_square_or_tall(q, u, dq + matmul(y, dv, adjoint_b=True), du)
    return reshape_ops.concat([dx, dy], -1)


def _safe_reciprocal(x, epsilon=1e-20):
    return x * math_ops.reciprocal(x * x + _scalar(epsilon, x.dtype))


@register_gradient("Svd")
def _svd_grad(op, grad_s, grad_u, grad_v):
    """TensorFlow's formula: with F_ij = 1/(s_j² - s_i²) off the
    diagonal, dA = U (diag(gs) + (F∘UᵀgU + (F∘UᵀgU)ᵀ) S + S (F∘VᵀgV + (F∘VᵀgV)ᵀ)) Vᵀ plus, for a
    non-square A, U S⁻¹ (gVᵀ - gVᵀ V Vᵀ) (full_matrices: V = [V1 V2] and also - V1ᵀ gV2 V2ᵀ);
    a tall A is handled through its transpose"""
    a = op.inputs[0]
    s, u, v = op.outputs
    m, n = a.shape[-2], a.shape[-1]
    full = op.attrs["full_matrices"]
    if full and (m is None or n is None or abs(m - n) > 1):
        raise GraphTypeError(
            "Svd's gradient with full_matrices=True needs the matrix dimensions known statically "
            f"and differing by at most 1 (as TensorFlow's), got {a.shape}"
        )
    gs = array_ops.zeros_like(s) if grad_s is None else _dense(grad_s)
    if not op.attrs["compute_uv"]:
        s2, u2, v2 = la.svd(a, compute_uv=True)
        return matmul(u2, matmul(diag_ops.matrix_diag(gs), v2, adjoint_b=True))
    gu = array_ops.zeros_like(u) if grad_u is None else _dense(grad_u)
    gv = array_ops.zeros_like(v) if grad_v is None else _dense(grad_v)
    if m is None or n is None:
        raise GraphTypeError("Svd's gradient needs the matrix dimensions known statically")
    transpose = m > n
    if transpose:
        m, n = n, m
        u, v = v, u
        gu, gv = gv, gu
    v2 = gv2 = None
    if full and m != n:  # V = [V1 V2]: V2 spans what A's rows do not reach
        v2, gv2 = v[..., :, m:], gv[..., :, m:]
        v, gv = v[..., :, :m], gv[..., :, :m]
    s_mat = diag_ops.matrix_diag(s)
    s_2 = s * s
    f = diag_ops.matrix_set_diag(
        _safe_reciprocal(reshape_ops.expand_dims(s_2, -2) - reshape_ops.expand_dims(s_2, -1)),
        array_ops.zeros_like(s),
    )
    u_gu = matmul(u, gu, adjoint_a=True)
    v_gv = matmul(v, gv, adjoint_a=True)
    f_u, f_v = f * u_gu, f * v_gv
    inner = (
        diag_ops.matrix_diag(gs)
        + matmul(f_u + _adjoint(f_u), s_mat)
        + matmul(s_mat, f_v + _adjoint(f_v))
    )
    grad = matmul(u, matmul(inner, v, adjoint_b=True))
    if m != n:
        gvt = _adjoint(gv)
        term2 = gvt - matmul(matmul(gvt, v), v, adjoint_b=True)
        if v2 is not None:
            term2 = term2 - matmul(matmul(v, gv2, adjoint_a=True), v2, adjoint_b=True)
        s_inv = diag_ops.matrix_diag(_safe_reciprocal(s))
        grad = grad + matmul(matmul(u, s_inv), term2)
    return _adjoint(grad) if transpose else grad


@register_gradient("MatrixSolveLs")
def _matrix_solve_ls_grad(op, grad):
    """For the normal equations (fast=True). m >= n, X = (AᴴA + λI)⁻¹ AᴴB: with
    Z = (AᴴA + λI)⁻¹ g, dA = -A (X Zᴴ + Z Xᴴ) + B Zᴴ and dB = A Z. m < n, X = Aᴴ(AAᴴ + λI)⁻¹B:
    with dB = (AAᴴ + λI)⁻¹ A g and T = (AAᴴ + λI)⁻¹ B, dA = -dB Tᴴ A + T (g - Aᴴ dB)ᴴ."""
    a, b, l2 = op.inputs
    if not op.attrs["fast"]:
        raise GraphTypeError("MatrixSolveLs has no gradient for fast=False (as in TensorFlow)")
    m, n = a.shape[-2], a.shape[-1]
    if m is None or n is None:
        raise GraphTypeError("MatrixSolveLs's gradient needs the matrix dimensions known")
    grad = _dense(grad)
    lam = math_ops.cast(l2, a.dtype)
    if m >= n:
        x = op.outputs[0]
        gram = matmul(a, a, adjoint_a=True)
        gram = gram + lam * _eye_like(gram)
        z = la.matrix_solve(gram, grad)
        xzt = matmul(x, z, adjoint_b=True)
        grad_a = -matmul(a, xzt + _adjoint(xzt)) + matmul(b, z, adjoint_b=True)
        return grad_a, matmul(a, z), None
    gram = matmul(a, a, adjoint_b=True)
    gram = gram + lam * _eye_like(gram)
    grad_b = la.matrix_solve(gram, matmul(a, grad))
    tmp = la.matrix_solve(gram, b)
    a1 = -matmul(grad_b, matmul(tmp, a, adjoint_a=True))
    a2 = matmul(tmp, grad - matmul(a, grad_b, adjoint_a=True), adjoint_b=True)
    return a1 + a2, grad_b, None
