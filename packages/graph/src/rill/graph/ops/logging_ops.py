"""Assert, Print and CheckNumerics (TensorFlow's logging_ops and numerics): ops that check or
report values while a step runs.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.constant([1.0, 2.0])
...     rg.assert_op(rg.reduce_all(x > 0.0), [x]).type, rg.check_numerics(x, "x").op.type
('Assert', 'CheckNumerics')
"""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop

__all__ = ["assert_op", "check_numerics", "print_op"]


def _assert_shape(op):
    cond = op.inputs[0].shape
    if cond.rank not in (None, 0):
        raise ValueError(f"Assert's condition must be a scalar, got shape {cond}")
    return []


defop(
    "Assert",
    inputs=["condition: bool", "data: T"],
    attrs=["T: list(type) >= 1", "summarize: int = 3"],
    shape=_assert_shape,
    stateful=True,
    doc="Fails the step with InvalidArgumentError, showing `data`, when `condition` is false.",
)
defop(
    "Print",
    inputs=["input: T", "data: U"],
    outputs=["output: T"],
    attrs=[
        "T: type",
        "U: list(type) >= 0",
        "message: string = ''",
        "first_n: int = -1",
        "summarize: int = 3",
    ],
    shape=shape_fns.unchanged,
    stateful=True,
    doc="Passes `input` through, printing `message` and `data` to standard error.",
)
defop(
    "CheckNumerics",
    inputs=["tensor: T"],
    outputs=["output: T"],
    attrs=["T: {bfloat16, float16, float32, float64}", "message: string"],
    shape=shape_fns.unchanged,
    stateful=True,
    doc="Passes `tensor` through; fails the step if it holds a NaN or an infinity.",
)


def assert_op(condition, data, summarize: int = 3, name: str | None = None) -> Operation:
    """An op that fails the step when `condition` is false, its error showing the first
    `summarize` entries of each tensor in `data` (the Assert op; `tf.Assert`)."""
    g = get_default_graph()
    with g.name_scope(name or "Assert"):
        condition = convert_to_tensor(condition, dtypes.bool_, name="Condition")
        data = [convert_to_tensor(d) for d in data]
        if not data:
            raise ValueError("Assert needs at least one data tensor")
        attrs = {"summarize": int(summarize)}
        return g.create_op("Assert", [condition, data], attrs, name="Assert")


def print_op(input, data, message: str = "", first_n: int = -1, summarize: int = 3, name=None):  # noqa: A002
    """`input` unchanged; each time it runs, prints `message` and the values of `data` to
    standard error (the Print op; `tf.Print`)."""
    g = get_default_graph()
    input = convert_to_tensor(input)  # noqa: A001
    data = [convert_to_tensor(d) for d in data]
    attrs = {"message": message, "first_n": int(first_n), "summarize": int(summarize)}
    return g.create_op("Print", [input, data], attrs, name=name or "Print").outputs[0]


def check_numerics(tensor, message: str, name: str | None = None) -> Tensor:
    """`tensor` unchanged, or an InvalidArgumentError naming `message` if it holds a NaN or an
    infinity (`tf.debugging.check_numerics`)."""
    tensor = convert_to_tensor(tensor)
    g = get_default_graph()
    op = g.create_op("CheckNumerics", [tensor], {"message": message}, name=name or "CheckNumerics")
    return op.outputs[0]
