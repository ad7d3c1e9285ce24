"""Batched linear algebra on the innermost two dimensions: MatrixInverse, MatrixDeterminant,
LogMatrixDeterminant, Cholesky, Qr, Svd, SelfAdjointEigV2, MatrixSolve, MatrixTriangularSolve,
MatrixSolveLs.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     a = rg.placeholder(rg.float64, [None, 4, 4])
...     b = rg.placeholder(rg.float64, [None, 4, 2])
...     x = matrix_solve(a, b)
...     s, u, v = svd(rg.placeholder(rg.float32, [5, 3]))
>>> x.shape, s.shape, u.shape, v.shape
(TensorShape([None, 4, 2]), TensorShape([3]), TensorShape([5, 3]), TensorShape([3, 3]))
"""

from __future__ import annotations

from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, broadcast_shapes, unknown_shape

__all__ = [
    "matrix_inverse",
    "matrix_determinant",
    "log_matrix_determinant",
    "cholesky",
    "qr",
    "svd",
    "self_adjoint_eig",
    "matrix_solve",
    "matrix_triangular_solve",
    "matrix_solve_ls",
]

_T = "T: {float64, float32, float16, complex64, complex128}"


def _matrix(s: TensorShape, what: str, square: bool = False) -> TensorShape:
    if s.rank is None:
        return s
    if s.rank < 2:
        raise ValueError(f"{what} must have rank >= 2, got shape {s}")
    if square and s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise ValueError(f"{what} must be square matrices, got shape {s}")
    return s


def _square_shape(op):
    return [_matrix(op._inputs[0].shape, "input", square=True)]


def _det_shape(op):
    s = _matrix(op._inputs[0].shape, "input", square=True)
    return [unknown_shape() if s.rank is None else s[:-2]]


def _log_det_shape(op):
    (s,) = _det_shape(op)
    return [s, s]


def _qr_shape(op):
    s = _matrix(op._inputs[0].shape, "input")
    if s.rank is None:
        return [s, s]
    m, n = s[-2], s[-1]
    k = None if m is None or n is None else min(m, n)
    if op.attrs["full_matrices"]:
        return [s[:-2].concatenate([m, m]), s[:-2].concatenate([m, n])]
    return [s[:-2].concatenate([m, k]), s[:-2].concatenate([k, n])]


def _svd_shape(op):
    s = _matrix(op._inputs[0].shape, "input")
    if s.rank is None:
        return [s, s, s]
    m, n = s[-2], s[-1]
    k = None if m is None or n is None else min(m, n)
    batch = s[:-2]
    if not op.attrs["compute_uv"]:
        return [batch.concatenate([k]), TensorShape([0]), TensorShape([0])]
    if op.attrs["full_matrices"]:
        return [batch.concatenate([k]), batch.concatenate([m, m]), batch.concatenate([n, n])]
    return [batch.concatenate([k]), batch.concatenate([m, k]), batch.concatenate([n, k])]


def _eig_shape(op):
    s = _matrix(op._inputs[0].shape, "input", square=True)
    if s.rank is None:
        return [s, s]
    e = s[:-1]
    return [e, s if op.attrs["compute_v"] else TensorShape([0])]


def _solve_shape(op):
    a = _matrix(op._inputs[0].shape, "matrix", square=op.type != "MatrixSolveLs")
    b = _matrix(op._inputs[1].shape, "rhs")
    if a.rank is None or b.rank is None:
        return [unknown_shape()]
    if a[-2] is not None and b[-2] is not None and a[-2] != b[-2]:
        raise ValueError(
            f"matrix has {a[-2]} rows but rhs has {b[-2]}; they must be equal (shapes {a}, {b})"
        )
    if op.type == "MatrixSolveLs":
        return [a[:-2].concatenate([a[-1], b[-1]])]
    if op.type == "MatrixTriangularSolve":
        # the batch dimensions broadcast
        batch = broadcast_shapes(a[:-2], b[:-2])
        return [batch.concatenate([b[-2], b[-1]])]
    return [a[:-2].merge_with(b[:-2]).concatenate([a[-1], b[-1]])]


defop("MatrixInverse", inputs=["input: T"], outputs=["output: T"],
      attrs=["adjoint: bool = false", _T], shape=_square_shape,
      doc="The inverse (of the adjoint with adjoint=True) of each innermost square matrix.")  # fmt: skip
defop("MatrixDeterminant", inputs=["input: T"], outputs=["output: T"],
      attrs=["T: {float16, float32, float64, complex64, complex128}"], shape=_det_shape,
      doc="The determinant of each innermost square matrix.")  # fmt: skip
defop("LogMatrixDeterminant", inputs=["input: T"],
      outputs=["sign: T", "log_abs_determinant: T"],
      attrs=["T: {float16, float32, float64, complex64, complex128}"], shape=_log_det_shape,
      doc="sign and log|det| of each innermost square matrix.")  # fmt: skip
defop("Cholesky", inputs=["input: T"], outputs=["output: T"], attrs=[_T], shape=_square_shape,
      doc="The lower Cholesky factor L (L Lᴴ = input) of each Hermitian positive-definite "
      "matrix; only the lower triangle of the input is read.")  # fmt: skip
defop("Qr", inputs=["input: T"], outputs=["q: T", "r: T"],
      attrs=["full_matrices: bool = false", _T], shape=_qr_shape,
      doc="The QR decomposition of each innermost matrix.")  # fmt: skip
defop("Svd", inputs=["input: T"], outputs=["s: T", "u: T", "v: T"],
      attrs=["compute_uv: bool = true", "full_matrices: bool = false", _T], shape=_svd_shape,
      doc="Singular values (descending) and vectors: input = u diag(s) vᴴ.")  # fmt: skip
defop("SelfAdjointEigV2", inputs=["input: T"], outputs=["e: T", "v: T"],
      attrs=["compute_v: bool = true", _T], shape=_eig_shape,
      doc="Eigenvalues (ascending) and eigenvectors of each Hermitian matrix (lower triangle "
      "read).")  # fmt: skip
defop("MatrixSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
      attrs=["adjoint: bool = false", _T], shape=_solve_shape,
      doc="X with matrix X = rhs (matrixᴴ X = rhs with adjoint=True).")  # fmt: skip
defop("MatrixTriangularSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
      attrs=["lower: bool = true", "adjoint: bool = false",
             "T: {bfloat16, float64, float32, float16, complex64, complex128}"],
      shape=_solve_shape,
      doc="MatrixSolve for a triangular matrix (only the lower or upper triangle is read); "
      "batch dimensions broadcast.")  # fmt: skip
defop("MatrixSolveLs", inputs=["matrix: T", "rhs: T", "l2_regularizer: float64"],
      outputs=["output: T"], attrs=[_T, "fast: bool = true"], shape=_solve_shape,
      doc="The least-squares solution of matrix X ≈ rhs with L2 regularization.")  # fmt: skip


# -- builders -------------------------------------------------------------------------------------


def _op(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def matrix_inverse(input, adjoint: bool = False, name=None) -> Tensor:  # noqa: A002
    return _op("MatrixInverse", [input], {"adjoint": adjoint}, name).outputs[0]


def matrix_determinant(input, name=None) -> Tensor:  # noqa: A002
    return _op("MatrixDeterminant", [input], name=name).outputs[0]


def log_matrix_determinant(input, name=None) -> tuple[Tensor, Tensor]:  # noqa: A002
    op = _op("LogMatrixDeterminant", [input], name=name)
    return op.outputs[0], op.outputs[1]


def cholesky(input, name=None) -> Tensor:  # noqa: A002
    return _op("Cholesky", [input], name=name).outputs[0]


def qr(input, full_matrices: bool = False, name=None) -> tuple[Tensor, Tensor]:  # noqa: A002
    op = _op("Qr", [input], {"full_matrices": full_matrices}, name)
    return op.outputs[0], op.outputs[1]


def svd(tensor, full_matrices: bool = False, compute_uv: bool = True, name=None):
    """(s, u, v) as tf.linalg.svd returns them (s alone with compute_uv=False)."""
    op = _op("Svd", [tensor], {"full_matrices": full_matrices, "compute_uv": compute_uv}, name)
    return tuple(op.outputs) if compute_uv else op.outputs[0]


def self_adjoint_eig(tensor, name=None) -> tuple[Tensor, Tensor]:
    op = _op("SelfAdjointEigV2", [tensor], {"compute_v": True}, name)
    return op.outputs[0], op.outputs[1]


def matrix_solve(matrix, rhs, adjoint: bool = False, name=None) -> Tensor:
    return _op("MatrixSolve", [matrix, rhs], {"adjoint": adjoint}, name).outputs[0]


def matrix_triangular_solve(matrix, rhs, lower: bool = True, adjoint: bool = False, name=None):
    attrs = {"lower": lower, "adjoint": adjoint}
    return _op("MatrixTriangularSolve", [matrix, rhs], attrs, name).outputs[0]


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast: bool = True, name=None) -> Tensor:
    lam = convert_to_tensor(l2_regularizer, dtype="float64", name="l2_regularizer")
    return _op("MatrixSolveLs", [matrix, rhs, lam], {"fast": fast}, name).outputs[0]
