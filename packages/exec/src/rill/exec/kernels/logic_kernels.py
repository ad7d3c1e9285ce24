"""Kernels for rill.graph.ops.logic_ops: comparisons, logical ops and selection."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.math_kernels import _broadcasting, _dims, _ufunc_kernel
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

for _op, _ufunc, _binary in (
    ("Less", "less", True),
    ("LessEqual", "less_equal", True),
    ("Greater", "greater", True),
    ("GreaterEqual", "greater_equal", True),
    ("LogicalAnd", "logical_and", True),
    ("LogicalOr", "logical_or", True),
    ("LogicalNot", "logical_not", False),
):
    register_kernel(_op, devices=("CPU", "GPU"))(_ufunc_kernel(_ufunc, binary=_binary))


def _equal_factory(ufunc_name: str, if_incompatible: bool):
    def factory(incompatible_shape_error, xp):
        fn = getattr(xp, ufunc_name)
        if incompatible_shape_error:
            return _broadcasting(fn)

        def compute(x, y):
            try:
                return fn(x, y)
            except ValueError:
                return xp.asarray(if_incompatible)

        return compute

    return factory


register_kernel("Equal", devices="CPU")(_equal_factory("equal", False))
register_kernel("NotEqual", devices="CPU")(_equal_factory("not_equal", True))
_NOT_STRING = tuple(t for t in dtypes.ALL_TYPES if t.np != np.dtype(object))
register_kernel("Equal", devices="GPU", constraints={"T": _NOT_STRING})(
    _equal_factory("equal", False)
)
register_kernel("NotEqual", devices="GPU", constraints={"T": _NOT_STRING})(
    _equal_factory("not_equal", True)
)


@register_kernel("Select", devices=("CPU", "GPU"))
def select(xp):
    where = xp.where

    def compute(c, t, e):
        if t.shape != e.shape:
            raise InvalidArgumentError(
                f"'then' and 'else' must have the same size.  but received: {_dims(t)} vs. "
                f"{_dims(e)}"
            )
        if c.ndim == 0:
            if xp is np:
                return t if bool(c) else e
            return where(c, t, e)  # a device condition is not read on the host
        if c.shape == t.shape:
            return where(c, t, e)
        if c.ndim == 1:
            if t.ndim == 0:
                raise InvalidArgumentError(
                    f"'then' must be at least a vector, but saw shape: {_dims(t)}"
                )
            if c.shape[0] != t.shape[0]:
                raise InvalidArgumentError(
                    "Number of batches of 'then' must match size of 'cond', but saw: "
                    f"{t.shape[0]} vs. {c.shape[0]}"
                )
            return where(c.reshape((-1,) + (1,) * (t.ndim - 1)), t, e)
        raise InvalidArgumentError(
            "condition must be a scalar, a vector or of the shape of 'then': "
            f"{_dims(c)} != {_dims(t)}"
        )

    return compute


@register_kernel("SelectV2", devices=("CPU", "GPU"))
def select_v2(xp):
    where = xp.where

    def compute(c, t, e):
        try:
            return where(c, t, e)
        except ValueError:
            raise InvalidArgumentError(
                f"condition {_dims(c)}, then {_dims(t)}, and else {_dims(e)} must be broadcastable"
            ) from None

    return compute
