"""Samples for rill.graph.ops.segment_ops: distinct values (so a max/min has no tie within
perturbation), products away from zero except where the zero case is the point."""

import numpy as np

import rill.graph as rg
from op_samples import rand, sample
from rill.graph.ops import segment_ops as so


def distinct(*shape):
    n = int(np.prod(shape))
    rng = np.random.default_rng(7)
    return ((rng.permutation(n) - n / 2) * 0.1 + rng.uniform(0, 0.01, n)).reshape(shape)


def _ids(*values):
    return lambda: rg.constant(np.array(values, np.int32))


_SORTED = [0, 0, 1, 3, 3, 3]
for _op, _fn in (("SegmentSum", so.segment_sum), ("SegmentMean", so.segment_mean),
                 ("SegmentMax", so.segment_max), ("SegmentMin", so.segment_min)):  # fmt: skip
    sample(_op, [distinct(6, 2)], lambda d, f=_fn: f(d, _ids(*_SORTED)()))
sample("SegmentProd", [rand(6, 2, lo=0.5, hi=1.5)], lambda d: so.segment_prod(d, _ids(*_SORTED)()))
sample("SegmentProd", [np.array([[0.0, 1.2], [0.7, 0.0], [1.1, 0.9], [0.0, 0.8], [0.6, 1.3]])],
       lambda d: so.segment_prod(d, _ids(0, 0, 1, 2, 2)()), name="zeros", tol=1e-4)  # fmt: skip
_UNSORTED = [2, 0, -1, 2, 1, 2]
for _op, _fn in (("UnsortedSegmentMax", so.unsorted_segment_max),
                 ("UnsortedSegmentMin", so.unsorted_segment_min)):  # fmt: skip
    sample(_op, [distinct(6, 2)], lambda d, f=_fn: f(d, _ids(*_UNSORTED)(), 3))
sample("UnsortedSegmentProd", [rand(6, 2, lo=0.5, hi=1.5)],
       lambda d: so.unsorted_segment_prod(d, _ids(*_UNSORTED)(), 3))  # fmt: skip

_IDX = np.array([[1], [3]], np.int32)
for _op, _fn in (("TensorScatterUpdate", so.tensor_scatter_update),
                 ("TensorScatterAdd", so.tensor_scatter_add),
                 ("TensorScatterSub", so.tensor_scatter_sub),
                 ("TensorScatterMax", so.tensor_scatter_max),
                 ("TensorScatterMin", so.tensor_scatter_min)):  # fmt: skip
    sample(_op, [distinct(4, 3), distinct(2, 3) + 0.033],
           lambda t, u, f=_fn: f(t, rg.constant(_IDX), u))  # fmt: skip
sample("TensorScatterAdd", [rand(3, 4), rand(3)],
       lambda t, u: so.tensor_scatter_add(t, rg.constant(np.array([[0, 1], [2, 3], [0, 1]])), u),
       name="elements_repeated")  # fmt: skip
