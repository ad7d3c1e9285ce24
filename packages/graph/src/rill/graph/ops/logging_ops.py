"""Run-time checks and printing: Assert, CheckNumerics(V2), Print, StringFormat, PrintV2.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [3])
...     a = assert_op(rg.reduce_all(x > 0.0), [x], name="positive")
...     y = check_numerics(x, "x is bad")
...     s = string_format("x = {}", [x])
>>> a.type, y.shape, s.dtype
('Assert', TensorShape([3]), rill.string)
"""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["assert_op", "check_numerics", "print_op", "string_format", "print_v2"]


def _assert_shape(op):
    c = op._inputs[0].shape
    if c.rank not in (None, 0):
        raise ValueError(f"the condition of an Assert must be a scalar, got shape {c}")
    return []


defop(
    "Assert",
    inputs=["condition: bool", "data: T"],
    attrs=["T: list(type) >= 1", "summarize: int = 3"],
    shape=_assert_shape,
    stateful=True,
    doc="Fails with InvalidArgumentError showing `data` when condition is false.",
)
for _name in ("CheckNumerics", "CheckNumericsV2"):
    defop(
        _name,
        inputs=["tensor: T"],
        outputs=["output: T"],
        attrs=["T: {bfloat16, float16, float32, float64}", "message: string"],
        shape=shape_fns.unchanged,
        stateful=True,
        doc="Forwards tensor; fails with InvalidArgumentError (message) if it has NaN or Inf.",
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
    doc="Forwards input, printing message and data to stderr (the first first_n times).",
)
defop(
    "StringFormat",
    inputs=["inputs: T"],
    outputs=["output: string"],
    attrs=[
        "T: list(type) >= 0",
        "template: string = '%s'",
        "placeholder: string = '%s'",
        "summarize: int = 3",
    ],
    shape=lambda op: [TensorShape([])],
    doc="template with each placeholder replaced by the next tensor, printed as TensorFlow "
    "prints tensors (at most summarize elements per dimension at each end).",
)
defop(
    "PrintV2",
    inputs=["input: string"],
    attrs=["output_stream: string = 'stderr'", "end: string = '\n'"],
    shape=None,
    stateful=True,
    doc="Prints a scalar string to output_stream ('stderr', 'stdout', 'log(info)', ...).",
)


# -- builders -------------------------------------------------------------------------------------


def _op(op_type, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def assert_op(condition, data, summarize: int = 3, name=None) -> Operation:
    """An Assert op: fails the step when condition is false."""
    data = [convert_to_tensor(d) for d in data]
    return _op("Assert", [condition, data], {"summarize": summarize}, name or "Assert")


def check_numerics(tensor, message: str, name=None) -> Tensor:
    """tensor, checked for NaN and Inf (CheckNumerics)."""
    return _op("CheckNumerics", [tensor], {"message": message}, name).outputs[0]


def print_op(input, data, message: str = "", first_n: int = -1, summarize: int = 3, name=None):  # noqa: A002
    """input, printing data on the way (Print, tf.compat.v1.Print)."""
    data = [convert_to_tensor(d) for d in data]
    attrs = {"message": message, "first_n": first_n, "summarize": summarize}
    return _op("Print", [input, data], attrs, name).outputs[0]


def string_format(template: str, inputs, placeholder: str = "{}", summarize: int = 3, name=None):
    """A scalar string: template with the tensors filled in (StringFormat)."""
    inputs = [convert_to_tensor(t) for t in inputs]
    attrs = {"template": template, "placeholder": placeholder, "summarize": summarize}
    return _op("StringFormat", [inputs], attrs, name).outputs[0]


def print_v2(input, output_stream: str = "stderr", end: str = "\n", name=None) -> Operation:  # noqa: A002
    """Prints a scalar string (PrintV2)."""
    input = convert_to_tensor(input, dtype=dtypes.string)  # noqa: A001
    return _op("PrintV2", [input], {"output_stream": output_stream, "end": end}, name)
