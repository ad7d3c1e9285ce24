"""`tf.assert_*` (TensorFlow's check_ops): Assert ops over comparisons, failing at graph
construction when both sides are constants and the check is already false.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None])
...     rg.assert_positive(x).type
'Assert'
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph import Operation, constant, convert_to_tensor, get_default_graph
from rill.graph.ops import logic_ops
from rill.graph.ops.array_ops import rank as rank_op
from rill.graph.ops.logging_ops import assert_op
from rill.graph.ops.reduction_ops import reduce_all
from rill.graph.tensor_util import constant_value

__all__ = [
    "assert_equal",
    "assert_none_equal",
    "assert_less",
    "assert_less_equal",
    "assert_greater",
    "assert_greater_equal",
    "assert_positive",
    "assert_negative",
    "assert_non_negative",
    "assert_non_positive",
    "assert_rank",
    "assert_rank_at_least",
    "assert_near",
    "assert_type",
    "assert_integer",
    "assert_scalar",
]


def _binary_assert(sym, compare, npcompare, default_name, x, y, data, summarize, message, name):
    g = get_default_graph()
    with g.name_scope(name or default_name):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
        if data is None:
            data = [
                message or "Condition x " + sym + " y did not hold element-wise:",
                f"x (name: {x.name}) = ",
                x,
                f"y (name: {y.name}) = ",
                y,
            ]
        elif message is not None:
            data = [message, *data]
        xs, ys = constant_value(x), constant_value(y)
        if xs is not None and ys is not None and not np.all(npcompare(xs, ys)):
            raise InvalidArgumentError(
                f"{message or ''} Condition x {sym} y did not hold element-wise: x = {xs}, "
                f"y = {ys}".strip()
            )
        return assert_op(
            reduce_all(compare(x, y)), data, summarize=3 if summarize is None else summarize
        )


def assert_equal(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x == y element-wise (`tf.assert_equal`)."""
    return _binary_assert(
        "==", logic_ops.equal, np.equal, "assert_equal", x, y, data, summarize, message, name
    )


def assert_none_equal(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x != y element-wise."""
    return _binary_assert(
        "!=", logic_ops.not_equal, np.not_equal, "assert_none_equal", x, y, data, summarize,
        message, name,
    )  # fmt: skip


def assert_less(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x < y element-wise."""
    return _binary_assert(
        "<", logic_ops.less, np.less, "assert_less", x, y, data, summarize, message, name
    )


def assert_less_equal(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x <= y element-wise."""
    return _binary_assert(
        "<=", logic_ops.less_equal, np.less_equal, "assert_less_equal", x, y, data, summarize,
        message, name,
    )  # fmt: skip


def assert_greater(x, y, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x > y element-wise."""
    return _binary_assert(
        ">", logic_ops.greater, np.greater, "assert_greater", x, y, data, summarize, message, name
    )


def assert_greater_equal(x, y, data=None, summarize=None, message=None, name=None):
    """Asserts x >= y element-wise."""
    return _binary_assert(
        ">=", logic_ops.greater_equal, np.greater_equal, "assert_greater_equal", x, y, data,
        summarize, message, name,
    )  # fmt: skip


def _sign_assert(fn, default_name, x, data, summarize, message, name):
    g = get_default_graph()
    with g.name_scope(name or default_name):
        x = convert_to_tensor(x, name="x")
        return fn(x, constant(0, dtype=x.dtype), data, summarize, message, None)


def assert_positive(x, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x > 0 element-wise."""
    return _sign_assert(_assert_greater_than, "assert_positive", x, data, summarize, message, name)


def assert_negative(x, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x < 0 element-wise."""
    return _sign_assert(assert_less, "assert_negative", x, data, summarize, message, name)


def assert_non_negative(x, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x >= 0 element-wise."""
    return _sign_assert(
        assert_greater_equal, "assert_non_negative", x, data, summarize, message, name
    )


def assert_non_positive(x, data=None, summarize=None, message=None, name=None) -> Operation:
    """Asserts x <= 0 element-wise."""
    return _sign_assert(assert_less_equal, "assert_non_positive", x, data, summarize, message, name)


def _assert_greater_than(x, zero, data, summarize, message, name):
    """x > zero, the comparison assert_positive makes."""
    return assert_greater(x, zero, data, summarize, message, name)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Asserts x has rank `rank`: checked now when x's rank is static, else at run time."""
    g = get_default_graph()
    with g.name_scope(name or "assert_rank"):
        x = convert_to_tensor(x, name="x")
        want = int(rank)
        if x.shape.rank is not None:
            if x.shape.rank != want:
                raise ValueError(
                    f"{message or ''} Tensor {x.name} must have rank {want}; received rank "
                    f"{x.shape.rank}, shape {x.shape}".strip()
                )
            return None
        data = data or [message or f"Tensor {x.name} must have rank {want}. Received rank:",
                        rank_op(x)]  # fmt: skip
        return assert_op(
            logic_ops.equal(rank_op(x), want), data, summarize=3 if summarize is None else summarize
        )


def assert_scalar(tensor, name=None, message=None):
    """The tensor, after checking statically that it is a scalar."""
    tensor = convert_to_tensor(tensor, name=name)
    if tensor.shape.rank != 0:
        raise ValueError(f"{message or ''} Expected scalar shape for {tensor.name}, saw shape: "
                         f"{tensor.shape}.".strip())  # fmt: skip
    return tensor


def assert_type(tensor, tf_type, message=None, name=None):
    """Checks statically that `tensor` has dtype `tf_type` (a TypeError otherwise)."""
    del name
    tensor = convert_to_tensor(tensor)
    want = dtypes.as_dtype(tf_type)
    if tensor.dtype is not want:
        raise TypeError(
            f"{message or ''} {tensor.name} must be of type {want.name}; got "
            f"{tensor.dtype.name}".strip()
        )


def assert_integer(x, message=None, name=None):
    """Checks statically that `x` has an integer dtype (a TypeError otherwise)."""
    del name
    x = convert_to_tensor(x)
    if not x.dtype.is_integer:
        raise TypeError(f"{message or ''} Expected integer type for {x.name}, got "
                        f"{x.dtype.name}".strip())  # fmt: skip


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """Asserts x has rank >= `rank`: checked now when x's rank is static, else at run time."""
    g = get_default_graph()
    with g.name_scope(name or "assert_rank_at_least"):
        x = convert_to_tensor(x, name="x")
        want = int(rank)
        if x.shape.rank is not None:
            if x.shape.rank < want:
                raise ValueError(
                    f"{message or ''} Tensor {x.name} must have rank at least {want}; received "
                    f"rank {x.shape.rank}, shape {x.shape}".strip()
                )
            return None
        data = data or [message or f"Tensor {x.name} must have rank at least {want}. Received:",
                        rank_op(x)]  # fmt: skip
        return assert_op(logic_ops.greater_equal(rank_op(x), want), data,
                         summarize=3 if summarize is None else summarize)  # fmt: skip


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None):
    """Asserts |x - y| <= atol + rtol·|y| element-wise (defaults: 10·eps of the dtype)."""
    from rill.graph.ops import math_ops

    g = get_default_graph()
    with g.name_scope(name or "assert_near"):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=x.dtype, name="y")
        eps = float(np.finfo(x.dtype.np).eps) if x.dtype.is_floating else 0.0
        rtol = constant(10 * eps if rtol is None else rtol, dtype=x.dtype)
        atol = constant(10 * eps if atol is None else atol, dtype=x.dtype)
        diff = math_ops.abs(math_ops.subtract(x, y))
        tol = math_ops.add(atol, math_ops.multiply(rtol, math_ops.abs(y)))
        if data is None:
            data = [message or "x and y not equal to tolerance rtol = %s, atol = %s"
                    % (rtol.op.get_attr("value"), atol.op.get_attr("value")),
                    f"x (name: {x.name}) = ", x, f"y (name: {y.name}) = ", y]  # fmt: skip
        return assert_op(reduce_all(logic_ops.less_equal(diff, tol)), data,
                         summarize=3 if summarize is None else summarize)  # fmt: skip
