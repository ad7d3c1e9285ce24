"""Samples for rill.graph.ops.special_math_ops: inputs inside each function's domain and away
from its poles and kinks (the clip bounds, the zeros that the *NoNan ops special-case)."""

import numpy as np

from op_samples import rand, sample
from rill.graph.ops import math_ops
from rill.graph.ops import special_math_ops as sm


def _in(lo, hi):
    return lambda *s: rand(*s, lo=lo, hi=hi)


_UNARY = {
    "Sin": (sm.sin, _in(-3, 3)),
    "Cos": (math_ops.cos, _in(-3, 3)),
    "Tan": (sm.tan, _in(-1.2, 1.2)),
    "Asin": (sm.asin, _in(-0.9, 0.9)),
    "Acos": (sm.acos, _in(-0.9, 0.9)),
    "Atan": (sm.atan, _in(-3, 3)),
    "Sinh": (sm.sinh, _in(-2, 2)),
    "Cosh": (sm.cosh, _in(-2, 2)),
    "Asinh": (sm.asinh, _in(-3, 3)),
    "Acosh": (sm.acosh, _in(1.2, 4)),
    "Atanh": (sm.atanh, _in(-0.9, 0.9)),
    "Expm1": (sm.expm1, _in(-2, 2)),
    "Erfc": (sm.erfc, _in(-2.5, 3.5)),
    "Erfinv": (sm.erfinv, _in(-0.95, 0.95)),
    "Lgamma": (sm.lgamma, _in(0.2, 6)),
    "Digamma": (sm.digamma, _in(0.3, 8)),
}
for _op, (_fn, _values) in _UNARY.items():
    sample(_op, [_values(2, 3)], _fn)
sample("Lgamma", [rand(5, lo=-2.9, hi=-2.1)], sm.lgamma, name="negative")
sample("Digamma", [rand(5, lo=-1.8, hi=-1.2)], sm.digamma, name="negative")

_SPECIAL = np.array([0.5, np.nan, np.inf, -np.inf, -2.0, 0.0])
for _op, _fn in (("IsFinite", sm.is_finite), ("IsNan", sm.is_nan), ("IsInf", sm.is_inf)):
    sample(_op, [_SPECIAL], _fn)

sample("Atan2", [rand(2, 3), rand(2, 3, lo=0.2, hi=1.0) * np.array([1, -1, 1])], sm.atan2)
sample("Atan2", [rand(2, 3), rand(3, lo=0.3, hi=1.0)], sm.atan2, name="broadcast")
sample("Polygamma", [np.array([1.0, 2.0, 3.0]), rand(3, lo=0.5, hi=3.0)], sm.polygamma,
       grad_inputs=[1])  # fmt: skip
sample("Zeta", [np.array([2.0, 3.5, 5.0]), rand(3, lo=0.5, hi=3.0)], sm.zeta, grad_inputs=[1])
_Y = rand(2, 3, lo=0.3, hi=1.5) * np.array([1, -1, 1])
sample("DivNoNan", [rand(2, 3), _Y], sm.div_no_nan)
sample("DivNoNan", [rand(2, 3), np.array([0.5, 0.0, -0.8])], sm.div_no_nan, name="zeros",
       grad_inputs=[0])  # fmt: skip
sample("MulNoNan", [rand(2, 3), _Y], sm.multiply_no_nan)
sample("Xlogy", [rand(2, 3), rand(2, 3, lo=0.3, hi=2.0)], sm.xlogy)
sample("Xlogy", [np.array([0.0, 0.5, -1.0]), rand(3, lo=0.3, hi=2.0)], sm.xlogy, name="zero_x",
       grad_inputs=[1])  # fmt: skip
sample("Xdivy", [rand(2, 3), rand(3, lo=0.3, hi=2.0)], sm.xdivy)
sample("Xlog1py", [rand(2, 3), rand(2, 3, lo=-0.5, hi=2.0)], sm.xlog1py)
sample(
    "ClipByValue",
    [np.array([[-0.9, -0.2, 0.1], [0.35, 0.8, -0.45]]), np.array(-0.3), np.array(0.5)],
    sm.clip_by_value,
)
sample(
    "ClipByValue",
    [np.array([[-0.9, -0.2, 0.1], [0.35, 0.8, -0.45]]),
     np.array([[-0.5, -0.5, 0.2], [0.0, 0.0, 0.0]]), np.array(0.6)],
    sm.clip_by_value,
    name="tensor_min",
)  # fmt: skip
sample("Igamma", [rand(2, 3, lo=0.5, hi=3.0), rand(2, 3, lo=0.2, hi=4.0)], sm.igamma, tol=1e-4)
sample("Igammac", [rand(3, lo=0.5, hi=3.0), rand(3, lo=0.2, hi=4.0)], sm.igammac, tol=1e-4)
sample("Betainc", [rand(3, lo=0.5, hi=3.0), rand(3, lo=0.5, hi=3.0), rand(3, lo=0.1, hi=0.9)],
       sm.betainc, grad_inputs=[2])  # fmt: skip

# Not differentiable: these samples feed the ONNX export suite (integer operands of both signs).
_I = np.array([[7, -7, 7, -7], [0, 6, -6, 1]], np.int32)
_D = np.array([[2, 2, -2, -2], [3, 4, -4, -1]], np.int32)
sample("TruncateDiv", [_I, _D], sm.truncatediv, name="int32")
sample("TruncateDiv", [_I * 1.25, _D * 0.5], sm.truncatediv, name="float")
sample("TruncateMod", [_I.astype(np.int64), _D.astype(np.int64)], sm.truncatemod, name="int64")
sample("TruncateMod", [_I * 1.25, _D * 0.5], sm.truncatemod, name="float")
sample("ApproximateEqual", [np.array([0.0, 1.0, 2.0, 3.0]), np.array([1e-7, 1.5, 2.004, 2.9])],
       lambda x, y: sm.approximate_equal(x, y, tolerance=0.01))  # fmt: skip
sample("ApproximateEqual", [_I, _D], lambda x, y: sm.approximate_equal(x, y, tolerance=1.5),
       name="int32")  # fmt: skip
