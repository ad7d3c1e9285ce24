"""Scans, rolls, ranges and contractions: Cumprod, CumulativeLogsumexp, Roll, LinSpace, Einsum.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     a = rg.placeholder(rg.float32, [None, 3, 4])
...     b = rg.placeholder(rg.float32, [4, 5])
...     y = einsum("bij,jk->bik", a, b)
...     r = roll(y, 1, 2)
...     n = linspace(0.0, 1.0, 7)
>>> y.shape, r.shape, n.shape
(TensorShape([None, 3, 5]), TensorShape([None, 3, 5]), TensorShape([7]))
"""

from __future__ import annotations

import string

from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape
from rill.graph.tensor_util import constant_value

__all__ = [
    "cumprod",
    "cumulative_logsumexp",
    "roll",
    "linspace",
    "einsum",
    "parse_einsum",
]


def _scan_shape(op):
    a = op._inputs[1].shape
    if a.rank not in (None, 0):
        raise ValueError(f"axis must be a scalar, got shape {a}")
    return [op._inputs[0].shape]


defop(
    "Cumprod",
    inputs=["x: T", "axis: Tidx"],
    outputs=["out: T"],
    attrs=[
        "exclusive: bool = false",
        "reverse: bool = false",
        "T: numbertypes",
        "Tidx: {int32, int64} = int32",
    ],
    shape=_scan_shape,
    doc="Running products along `axis` (exclusive: each element left out of its own product).",
)
defop(
    "CumulativeLogsumexp",
    inputs=["x: T", "axis: Tidx"],
    outputs=["out: T"],
    attrs=[
        "exclusive: bool = false",
        "reverse: bool = false",
        "T: {bfloat16, float16, float32, float64}",
        "Tidx: {int32, int64} = int32",
    ],
    shape=_scan_shape,
    doc="Running log(sum(exp(x))) along `axis`, computed without overflow.",
)


def _roll_shape(op):
    s, a = op._inputs[1].shape, op._inputs[2].shape
    if s.rank not in (None, 0, 1) or a.rank not in (None, 0, 1):
        raise ValueError(f"shift and axis must be scalars or vectors, got {s} and {a}")
    if s.rank == 1 and a.rank == 1 and not s.is_compatible_with(a):
        raise ValueError(f"shift and axis must have the same size, got {s} and {a}")
    return [op._inputs[0].shape]


defop(
    "Roll",
    inputs=["input: T", "shift: Tshift", "axis: Taxis"],
    outputs=["output: T"],
    attrs=["T: type", "Tshift: {int32, int64}", "Taxis: {int32, int64}"],
    shape=_roll_shape,
    doc="Elements shifted by `shift` along each `axis`, wrapping around.",
)


def _linspace_shape(op):
    for t, what in zip(op._inputs, ("start", "stop", "num")):
        if t.shape.rank not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got shape {t.shape}")
    num = constant_value(op._inputs[2])
    if num is None:
        return [TensorShape([None])]
    if int(num) <= 0:
        raise ValueError(f"num must be positive, got {int(num)}")
    return [TensorShape([int(num)])]


defop(
    "LinSpace",
    inputs=["start: T", "stop: T", "num: Tidx"],
    outputs=["output: T"],
    attrs=["T: {bfloat16, float16, float32, float64}", "Tidx: {int32, int64} = int32"],
    shape=_linspace_shape,
    doc="num evenly spaced values from start to stop, both included.",
)


def parse_einsum(equation: str, ranks: list[int | None]) -> tuple[list[str], str]:
    """The equation's input subscripts and output subscript, with "..." replaced by capital
    letters for the broadcast dimensions (ranks must then be known), and the implicit output
    (sorted letters used once) filled in. Raises ValueError for a malformed equation.

    >>> parse_einsum("...ij,jk", [3, 2])
    (['Aij', 'jk'], 'Aik')
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != len(ranks):
        raise ValueError(f"einsum {equation!r} names {len(subs)} inputs, got {len(ranks)}")
    n_ell = 0
    for s, r in zip(subs, ranks):
        if "..." in s:
            if r is None:
                raise ValueError(f"einsum {equation!r}: '...' needs inputs of known rank")
            n_ell = max(n_ell, r - (len(s) - 3))
    ell = string.ascii_uppercase[:n_ell]
    out_subs = []
    for s, r in zip(subs, ranks):
        if "..." in s:
            k = r - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k :])
        if r is not None and len(s) != r:
            raise ValueError(f"einsum {equation!r}: subscript {s!r} does not match rank {r}")
        out_subs.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_subs)
        out = ell + "".join(
            sorted(c for c in set(letters) if c.islower() and letters.count(c) == 1)
        )
    for c in out:
        if not any(c in s for s in out_subs):
            raise ValueError(f"einsum {equation!r}: output subscript {c!r} is in no input")
    return out_subs, out


def _einsum_shape(op):
    shapes = [t.shape for t in op._inputs]
    eq = op.attrs["equation"]
    subs, out = parse_einsum(eq, [s.rank for s in shapes])
    seen: dict[str, set] = {}
    for s, shape in zip(subs, shapes):
        for c, d in zip(s, shape.dims if shape.rank is not None else [None] * len(s)):
            seen.setdefault(c, set()).add(d)
    dims = {}
    for c, vals in seen.items():
        known = {v for v in vals if v is not None and v != 1}
        if len(known) > 1:
            raise ValueError(f"einsum {eq!r}: dimension {c!r} has sizes {sorted(known)}")
        if known:
            dims[c] = known.pop()
        elif None in vals:
            dims[c] = None
        else:
            dims[c] = 1
    return [TensorShape([dims.get(c) for c in out])]


defop(
    "Einsum",
    inputs=["inputs: N * T"],
    outputs=["output: T"],
    attrs=["equation: string", "N: int >= 1", "T: type"],
    shape=_einsum_shape,
    doc="The tensor contraction that `equation` names (numpy's einsum notation, with '...').",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type: str, inputs, attrs=None, name=None) -> Tensor:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def cumprod(x, axis=0, exclusive: bool = False, reverse: bool = False, name=None) -> Tensor:
    """Running products of x along `axis` (Cumprod)."""
    return _op("Cumprod", [x, axis], {"exclusive": exclusive, "reverse": reverse}, name)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None) -> Tensor:
    """Running log-sum-exp of x along `axis` (CumulativeLogsumexp)."""
    return _op("CumulativeLogsumexp", [x, axis], {"exclusive": exclusive, "reverse": reverse}, name)


def roll(input, shift, axis, name=None) -> Tensor:  # noqa: A002 - TensorFlow's argument name
    """input rolled by `shift` along `axis` (Roll)."""
    return _op("Roll", [input, shift, axis], name=name)


def linspace(start, stop, num, name=None) -> Tensor:
    """num values from start to stop inclusive (LinSpace)."""
    start = convert_to_tensor(start, name="start")
    stop = convert_to_tensor(stop, dtype=start.dtype, name="stop")
    return _op("LinSpace", [start, stop, num], name=name or "LinSpace")


def einsum(equation: str, *inputs, name=None) -> Tensor:
    """The contraction `equation` of `inputs` (Einsum)."""
    ts = [convert_to_tensor(x) for x in inputs]
    return _op("Einsum", [ts], {"equation": equation}, name=name)
