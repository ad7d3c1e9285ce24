"""Samples for rill.graph.ops.linalg_ops: well-conditioned matrices (diagonally dominant,
symmetric positive definite where the op needs it, eigenvalues apart)."""

import numpy as np

from op_samples import rand, sample
from rill.graph.ops import linalg_ops as la


def _well(*shape):
    n = shape[-1]
    return rand(*shape) + 3.0 * np.eye(n)


def _spd(*shape):
    a = rand(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


sample("MatrixInverse", [_well(2, 3, 3)], la.matrix_inverse)
sample("MatrixInverse", [_well(3, 3)], lambda x: la.matrix_inverse(x, adjoint=True),
       name="adjoint")  # fmt: skip
sample("MatrixDeterminant", [_well(2, 3, 3)], la.matrix_determinant)
sample("LogMatrixDeterminant", [_well(2, 3, 3) * np.array([1, -1, 1])],
       lambda x: la.log_matrix_determinant(x)[1])  # fmt: skip
# Cholesky reads the lower triangle only: the sample symmetrizes its input so that the finite
# differences (which perturb every element) see the function the gradient describes.
sample("Cholesky", [_spd(2, 3, 3)],
       lambda x: la.cholesky((x + la.matrix_inverse(la.matrix_inverse(x), adjoint=True)) * 0.5))  # fmt: skip
sample("MatrixSolve", [_well(2, 3, 3), rand(2, 3, 2)], la.matrix_solve)
sample("MatrixSolve", [_well(3, 3), rand(3, 4)],
       lambda a, b: la.matrix_solve(a, b, adjoint=True), name="adjoint")  # fmt: skip
sample("MatrixTriangularSolve", [_well(2, 3, 3), rand(2, 3, 2)], la.matrix_triangular_solve)
sample("MatrixTriangularSolve", [_well(3, 3), rand(3, 2)],
       lambda a, b: la.matrix_triangular_solve(a, b, lower=False, adjoint=True), name="upper_adj")  # fmt: skip
sample("SelfAdjointEigV2", [_spd(3, 3)],
       lambda x: la.self_adjoint_eig((x + la.matrix_inverse(la.matrix_inverse(x), adjoint=True)) * 0.5)[0],
       name="values")  # fmt: skip
sample("Qr", [rand(4, 3)], lambda x: la.qr(x)[1], name="r")
sample("Qr", [rand(2, 4, 3)], lambda x: la.qr(x)[0], name="q")
# distinct singular values (well separated), so that U and V are smooth in A
_SVD_A = np.array([[3.0, 0.4, -0.2], [0.1, 2.0, 0.3], [-0.3, 0.2, 1.0], [0.5, -0.1, 0.2]])
sample("Svd", [_SVD_A], lambda x: la.svd(x)[0], name="values")
sample("Svd", [_SVD_A], lambda x: la.svd(x), name="tall_uv")
sample("Svd", [_SVD_A.T.copy()], lambda x: la.svd(x), name="wide_uv")
sample("Svd", [_SVD_A[:3]], lambda x: la.svd(x, compute_uv=False), name="s_only")
# issue 18: the wide and full decompositions, and least squares (normal equations)
sample("Qr", [rand(3, 5)], lambda x: la.qr(x), name="wide")
sample("Qr", [rand(3, 5)], lambda x: la.qr(x, full_matrices=True), name="wide_full")
sample("Qr", [rand(3, 3)], lambda x: la.qr(x, full_matrices=True), name="square_full")
sample("Svd", [_SVD_A],
       lambda x: (lambda s, u, v: (s, u[:, :3], v))(*la.svd(x, full_matrices=True)),
       name="full_tall")  # fmt: skip
sample("Svd", [_SVD_A.T.copy()],
       lambda x: (lambda s, u, v: (s, u[:, :3] * s, v[:, :3]))(*la.svd(x, full_matrices=True)),
       name="full_wide_uv")  # fmt: skip
sample("MatrixSolveLs", [rand(4, 3) + np.eye(4, 3) * 3, rand(4, 2)],
       lambda a, b: la.matrix_solve_ls(a, b, l2_regularizer=0.1), name="tall")  # fmt: skip
sample("MatrixSolveLs", [rand(2, 4) + np.eye(2, 4) * 3, rand(2, 3)],
       lambda a, b: la.matrix_solve_ls(a, b, l2_regularizer=0.2), name="wide")  # fmt: skip
