"""`tf.linalg` of TensorFlow 1.x (rill.graph.linalg, and global_norm from rill.train)."""

# ruff: noqa: F401, F403, E402 - a namespace of re-exports

from rill.graph.linalg import *
from rill.graph.linalg import matrix_transpose
from rill.train.clip_ops import global_norm

transpose = matrix_transpose  # tf.linalg.transpose transposes the last two dimensions

# issue 18's linear algebra under TensorFlow's tf.linalg names
from rill.compat.v1._ops18 import eigvalsh, logdet, lstsq
from rill.graph.ops.diag_ops import diag as tensor_diag
from rill.graph.ops.diag_ops import diag_part as tensor_diag_part
from rill.graph.ops.diag_ops import matrix_band_part as band_part
from rill.graph.ops.diag_ops import matrix_diag as diag
from rill.graph.ops.diag_ops import matrix_diag_part as diag_part
from rill.graph.ops.diag_ops import matrix_set_diag as set_diag
from rill.graph.ops.linalg_ops import cholesky, qr, svd
from rill.graph.ops.linalg_ops import log_matrix_determinant as slogdet
from rill.graph.ops.linalg_ops import matrix_determinant as det
from rill.graph.ops.linalg_ops import matrix_inverse as inv
from rill.graph.ops.linalg_ops import matrix_solve as solve
from rill.graph.ops.linalg_ops import matrix_triangular_solve as triangular_solve
from rill.graph.ops.linalg_ops import self_adjoint_eig as eigh
from rill.graph.ops.manip_ops import einsum
