"""Samples for rill.graph.ops.manip_ops and rill.graph.ops.diag_ops."""

import numpy as np

import rill.graph as rg
from op_samples import rand, sample
from rill.graph.ops import diag_ops as do
from rill.graph.ops import manip_ops as mo
from rill.graph.ops import set_search_ops as ss


def _nonzero(*shape):
    return rand(*shape, lo=0.3, hi=1.2) * np.where(rand(*shape) < 0, -1.0, 1.0)


sample("Cumprod", [_nonzero(2, 4)], lambda x: mo.cumprod(x, 1))
sample("Cumprod", [_nonzero(3, 2)], lambda x: mo.cumprod(x, 0, exclusive=True, reverse=True),
       name="exclusive_reverse")  # fmt: skip
sample("CumulativeLogsumexp", [rand(2, 4)], lambda x: mo.cumulative_logsumexp(x, 1))
sample("CumulativeLogsumexp", [rand(4, 2)],
       lambda x: mo.cumulative_logsumexp(x, 0, reverse=True),
       name="reverse")  # fmt: skip
sample("Roll", [rand(3, 4)], lambda x: mo.roll(x, [1, -2], [0, 1]))
sample("Einsum", [rand(2, 3), rand(3, 4)], lambda a, b: mo.einsum("ij,jk->ik", a, b))
sample("Einsum", [rand(2, 3, 4), rand(2, 4)], lambda a, b: mo.einsum("bij,bj->bi", a, b),
       name="batched")  # fmt: skip
sample("Einsum", [rand(2, 3)], lambda a: mo.einsum("ij->j", a), name="reduce")
sample("Einsum", [rand(3), rand(4)], lambda a, b: mo.einsum("i,j->ij", a, b), name="outer")
sample("Einsum", [rand(2, 3), rand(3)], lambda a, b: mo.einsum("...j,j->...", a, b),
       name="ellipsis")  # fmt: skip

sample("Diag", [rand(2, 3)], do.diag)
sample("DiagPart", [rand(2, 3, 2, 3)], do.diag_part)
sample("MatrixBandPart", [rand(2, 4, 5)], lambda x: do.matrix_band_part(x, 1, 2))
sample("MatrixBandPart", [rand(4, 4)], lambda x: do.matrix_band_part(x, -1, 0), name="lower")
sample("MatrixDiag", [rand(2, 3)], lambda d: do.matrix_diag(d))
sample("MatrixDiagV3", [rand(2, 3, 4)], lambda d: do.matrix_diag(d, k=(-1, 1), num_rows=5),
       name="band")  # fmt: skip
sample("MatrixDiagV3", [rand(3)], lambda d: do.matrix_diag(d, k=2, align="LEFT_RIGHT"),
       name="superdiagonal")  # fmt: skip
sample("MatrixDiagPartV3", [rand(2, 4, 5)], lambda x: do.matrix_diag_part(x, k=(-2, 1)))
sample("MatrixDiagPartV3", [rand(4, 3)], lambda x: do.matrix_diag_part(x, k=(-1, 1),
       align="LEFT_LEFT", padding_value=9.0), name="left_left")  # fmt: skip
sample("MatrixSetDiagV3", [rand(2, 3, 4), rand(2, 3, 3)],
       lambda x, d: do.matrix_set_diag(x, d, k=(0, 2)))  # fmt: skip


def _raw(op_type, *inputs):
    import rill.graph as rg

    return rg.get_default_graph().create_op(op_type, list(inputs)).outputs[0]


sample("MatrixDiagPart", [rand(2, 3, 4)], lambda x: _raw("MatrixDiagPart", x))
sample("MatrixSetDiag", [rand(3, 4), rand(3)], lambda x, d: _raw("MatrixSetDiag", x, d))
sample("MatrixDiag", [rand(2, 3)], lambda d: _raw("MatrixDiag", d), name="v1")

# Not differentiable: these samples feed the ONNX export suite.
sample("LinSpace", [np.array(-1.0), np.array(2.0)], lambda a, b: mo.linspace(a, b, 7))
sample("LinSpace", [np.array(3.0), np.array(5.0), np.array(1, np.int32)], mo.linspace,
       name="one")  # fmt: skip
sample("Bucketize", [np.array([[-5.0, 0.0, 0.5], [1.0, 9.0, 0.9]])],
       lambda x: ss.bucketize(x, [0.0, 0.5, 1.0, 1.0, 4.0]))  # fmt: skip
sample("Bucketize", [np.array([-1, 0, 2, 3], np.int32)], lambda x: ss.bucketize(x, [-1.0, 2.0]),
       name="int32")  # fmt: skip
sample("HistogramFixedWidth", [np.array([[-3.0, 0.0, 0.1, 0.5], [0.99, 1.0, 7.0, 0.25]])],
       lambda x: ss.histogram_fixed_width(x, [0.0, 1.0], nbins=4))  # fmt: skip
sample("HistogramFixedWidth", [np.array([1, 5, 5, 9, -2, 30], np.int32)],
       lambda x: ss.histogram_fixed_width(x, [0, 10], nbins=3, dtype=rg.int64),
       name="int32")  # fmt: skip
sample("Bincount", [np.array([[1, 5, 5], [0, 9, 2]], np.int32)],
       lambda x: ss.bincount(x, 6), name="counts")  # fmt: skip
sample("Bincount", [np.array([1, 5, 5, 0, 9, 2], np.int32), rand(6)],
       lambda x, w: ss.bincount(x, 7, w), name="weights")  # fmt: skip
_SORTED = np.array([[0.0, 1.0, 1.0, 3.0, 7.0], [-2.0, -2.0, 0.0, 0.0, 5.0]])
_VALUES = np.array([[-1.0, 1.0, 3.0, 8.0], [-2.0, 0.0, 4.0, 5.0]])
sample("LowerBound", [_SORTED, _VALUES], lambda s, v: ss.searchsorted(s, v, side="left"))
sample("UpperBound", [_SORTED, _VALUES], lambda s, v: ss.searchsorted(s, v, side="right"))
sample("UpperBound", [_SORTED.astype(np.int64), _VALUES.astype(np.int64)],
       lambda s, v: ss.searchsorted(s, v, side="right", out_type=rg.int64), name="int64")  # fmt: skip
sample("MatrixDiagV3", [rand(2, 3)], lambda d: do.matrix_diag(d, num_rows=5, padding_value=7.0),
       name="main_padded")  # fmt: skip
sample("MatrixDiagPartV3", [rand(2, 4, 3)], lambda x: do.matrix_diag_part(x), name="main")
sample("MatrixSetDiagV3", [rand(2, 3, 4), rand(2, 3)], lambda x, d: do.matrix_set_diag(x, d),
       name="main")  # fmt: skip
sample("MatrixSetDiagV3", [rand(4, 3), rand(3)], lambda x, d: do.matrix_set_diag(x, d),
       name="tall")  # fmt: skip
sample("Roll", [rand(2, 3, 4)], lambda x: mo.roll(x, [5, -1, 2], [2, 0, 2]), name="same_axis")
