"""Diagonals and bands: Diag, DiagPart, MatrixBandPart, MatrixDiag(V3), MatrixDiagPart(V3),
MatrixSetDiag(V3).

The V3 ops address a range of diagonals k = (lo, hi) of the innermost two dimensions (0 is the
main diagonal, positive above it). Packed diagonals are stored from hi down to lo, each padded
to the longest one; `align` says where the shorter ones sit: "RIGHT_LEFT" (the default) aligns
superdiagonals right and subdiagonals left (the main diagonal is never shorter than another, so
it needs no rule).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     m = rg.placeholder(rg.float32, [2, 4, 5])
...     p = matrix_diag_part(m, k=(-1, 2))
...     d = matrix_diag(rg.placeholder(rg.float32, [3]), k=1)
>>> p.shape, d.shape
(TensorShape([2, 4, 4]), TensorShape([4, 4]))
"""

from __future__ import annotations

from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = [
    "diag",
    "diag_part",
    "matrix_band_part",
    "matrix_diag",
    "matrix_diag_part",
    "matrix_set_diag",
    "diag_range",
    "diag_length",
]

_DIAG_T = "T: {bfloat16, float16, float32, float64, int32, int64, complex64, complex128}"
_ALIGN = 'align: {"LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT"} = "RIGHT_LEFT"'


def diag_range(k) -> tuple[int, int]:
    """(lo, hi) from a k value (a scalar or a pair); ValueError when lo > hi."""
    import numpy as np

    k = np.asarray(k).reshape(-1)
    if k.size not in (1, 2):
        raise ValueError(f"k must be a scalar or a pair, got {k.size} values")
    lo, hi = int(k[0]), int(k[-1])
    if lo > hi:
        raise ValueError(f"lower diagonal index {lo} must not exceed the upper one {hi}")
    return lo, hi


def diag_length(rows: int, cols: int, d: int) -> int:
    """The length of diagonal d of a rows×cols matrix."""
    return max(0, min(rows + min(d, 0), cols - max(d, 0)))


def _diag_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [unknown_shape()]
    return [s.concatenate(s)]


def _diag_part_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [unknown_shape()]
    if s.rank % 2:
        raise ValueError(f"DiagPart needs an input of even rank, got shape {s}")
    h = s.rank // 2
    return [s[:h].merge_with(s[h:])]


def _band_shape(op):
    s = op._inputs[0].shape
    if s.rank is not None and s.rank < 2:
        raise ValueError(f"input must be at least a matrix, got shape {s}")
    return [s]


def _matrix_diag_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [unknown_shape()]
    if s.rank < 1:
        raise ValueError(f"diagonal must be at least a vector, got shape {s}")
    return [s.concatenate([s[-1]])]


def _matrix_diag_part_shape(op):
    s = op._inputs[0].shape
    if s.rank is None:
        return [unknown_shape()]
    if s.rank < 2:
        raise ValueError(f"input must be at least a matrix, got shape {s}")
    m, n = s[-2], s[-1]
    return [s[:-2].concatenate([None if m is None or n is None else min(m, n)])]


def _set_diag_shape(op):
    return [op._inputs[0].shape]


def _const_k(t):
    v = constant_value(t)
    return None if v is None else diag_range(v)


def _matrix_diag_v3_shape(op):
    d = op._inputs[0].shape
    k = _const_k(op._inputs[1])
    rows, cols = constant_value(op._inputs[2]), constant_value(op._inputs[3])
    if k is None or d.rank is None:
        return [unknown_shape()]
    lo, hi = k
    batch = d[:-1] if lo == hi else d[:-2]
    length = d[-1]
    if length is None:
        return [batch.concatenate([None, None])]
    min_rows = length - min(hi, 0)
    min_cols = length + max(lo, 0)
    rows = -1 if rows is None else int(rows)
    cols = -1 if cols is None else int(cols)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    return [batch.concatenate([rows, cols])]


def _matrix_diag_part_v3_shape(op):
    s = op._inputs[0].shape
    k = _const_k(op._inputs[1])
    if k is None or s.rank is None:
        return [unknown_shape()]
    if s.rank < 2:
        raise ValueError(f"input must be at least a matrix, got shape {s}")
    lo, hi = k
    m, n = s[-2], s[-1]
    length = None
    if m is not None and n is not None:
        length = max(diag_length(m, n, d) for d in range(lo, hi + 1))
    extra = [] if lo == hi else [hi - lo + 1]
    return [s[:-2].concatenate(extra + [length])]


defop("Diag", inputs=["diagonal: T"], outputs=["output: T"], attrs=[_DIAG_T],
      shape=_diag_shape, doc="A tensor of rank 2k with `diagonal` (rank k) on its diagonal.")  # fmt: skip
defop("DiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=[_DIAG_T],
      shape=_diag_part_shape, doc="The diagonal of a rank-2k tensor (Diag's inverse).")  # fmt: skip
defop(
    "MatrixBandPart",
    inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
    outputs=["band: T"],
    attrs=["T: type", "Tindex: {int32, int64} = int64"],
    shape=_band_shape,
    doc="The band of each innermost matrix: num_lower subdiagonals and num_upper superdiagonals "
    "(negative: all of them); zeros elsewhere.",
)
defop("MatrixDiag", inputs=["diagonal: T"], outputs=["output: T"], attrs=["T: type"],
      shape=_matrix_diag_shape, doc="Batched square matrices with `diagonal` on the diagonal.")  # fmt: skip
defop("MatrixDiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=["T: type"],
      shape=_matrix_diag_part_shape, doc="The main diagonal of each innermost matrix.")  # fmt: skip
defop("MatrixSetDiag", inputs=["input: T", "diagonal: T"], outputs=["output: T"],
      attrs=["T: type"], shape=_set_diag_shape,
      doc="input with the main diagonal of each innermost matrix replaced.")  # fmt: skip
defop(
    "MatrixDiagV3",
    inputs=["diagonal: T", "k: int32", "num_rows: int32", "num_cols: int32", "padding_value: T"],
    outputs=["output: T"],
    attrs=["T: type", _ALIGN],
    shape=_matrix_diag_v3_shape,
    doc="Matrices with diagonals k filled from `diagonal`, padding_value elsewhere.",
)
defop(
    "MatrixDiagPartV3",
    inputs=["input: T", "k: int32", "padding_value: T"],
    outputs=["diagonal: T"],
    attrs=["T: type", _ALIGN],
    shape=_matrix_diag_part_v3_shape,
    doc="Diagonals k of each innermost matrix, packed and padded with padding_value.",
)
defop(
    "MatrixSetDiagV3",
    inputs=["input: T", "diagonal: T", "k: int32"],
    outputs=["output: T"],
    attrs=["T: type", _ALIGN],
    shape=_set_diag_shape,
    doc="input with diagonals k of each innermost matrix replaced by `diagonal`.",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type: str, inputs, attrs=None, name=None) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def diag(diagonal, name=None) -> Tensor:
    return _op("Diag", [diagonal], name=name)


def diag_part(input, name=None) -> Tensor:  # noqa: A002
    return _op("DiagPart", [input], name=name)


def matrix_band_part(input, num_lower, num_upper, name=None) -> Tensor:  # noqa: A002
    num_lower = convert_to_tensor(num_lower, name="num_lower")
    num_upper = convert_to_tensor(num_upper, dtype=num_lower.dtype, name="num_upper")
    return _op("MatrixBandPart", [input, num_lower, num_upper], name=name)


def matrix_diag(diagonal, k=0, num_rows=-1, num_cols=-1, padding_value=0, align="RIGHT_LEFT",
                name=None) -> Tensor:  # fmt: skip
    """tf.linalg.diag: MatrixDiagV3."""
    diagonal = convert_to_tensor(diagonal, name="diagonal")
    pad = convert_to_tensor(padding_value, dtype=diagonal.dtype, name="padding_value")
    return _op("MatrixDiagV3", [diagonal, k, num_rows, num_cols, pad], {"align": align}, name)


def matrix_diag_part(input, k=0, padding_value=0, align="RIGHT_LEFT", name=None) -> Tensor:  # noqa: A002
    """tf.linalg.diag_part: MatrixDiagPartV3."""
    input = convert_to_tensor(input, name="input")  # noqa: A001
    pad = convert_to_tensor(padding_value, dtype=input.dtype, name="padding_value")
    return _op("MatrixDiagPartV3", [input, k, pad], {"align": align}, name)


def matrix_set_diag(input, diagonal, k=0, align="RIGHT_LEFT", name=None) -> Tensor:  # noqa: A002
    """tf.linalg.set_diag: MatrixSetDiagV3."""
    return _op("MatrixSetDiagV3", [input, diagonal, k], {"align": align}, name)
