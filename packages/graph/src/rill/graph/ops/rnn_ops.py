"""The fused LSTM cell: TensorFlow's LSTMBlockCell and its gradient LSTMBlockCellGrad.

One op computes a whole LSTM time step from x, the previous cell state and output, the kernel
w [input + units, 4 * units] and bias b [4 * units] (gates in the order i, ci, f, o, as
BasicLSTMCell splits them), with optional peepholes (wci, wcf, wco) and cell clipping:

    i  = sigmoid(xh·w[:, i] + b_i [+ wci * cs_prev])
    ci = tanh(xh·w[:, ci] + b_ci)
    f  = sigmoid(xh·w[:, f] + b_f + forget_bias [+ wcf * cs_prev])
    cs = ci * i + cs_prev * f                  (clipped to ±cell_clip when cell_clip > 0)
    o  = sigmoid(xh·w[:, o] + b_o [+ wco * cs])
    co = tanh(cs);  h = co * o

It returns every intermediate (i, cs, f, o, ci, co, h), which the gradient reuses.
"""

from __future__ import annotations

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["lstm_block_cell"]

_IN = ["x: T", "cs_prev: T", "h_prev: T", "w: T", "wci: T", "wcf: T", "wco: T", "b: T"]
_GATES = ["i: T", "cs: T", "f: T", "o: T", "ci: T", "co: T"]


def _merge(a, b, what: str, op):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ValueError(f"{op.type}: {what} differ ({a} vs {b})")


def _batch_units(op):
    """The [batch, units] of every gate, checked against all the inputs' shapes."""
    x, cs, h, w = (op._inputs[k].shape.with_rank(2) for k in range(4))
    batch = _merge(_merge(x[0], cs[0], "batch sizes of x and cs_prev", op), h[0],
                   "batch sizes of x and h_prev", op)  # fmt: skip
    units = _merge(cs[1], h[1], "cell sizes of cs_prev and h_prev", op)
    if w[1] is not None:
        if w[1] % 4:
            raise ValueError(f"{op.type}: w's second dimension {w[1]} is not 4 * cell size")
        units = _merge(units, w[1] // 4, "cell size and w's second dimension / 4", op)
    if x[1] is not None and units is not None and w[0] is not None and x[1] + units != w[0]:
        raise ValueError(
            f"{op.type}: w's first dimension {w[0]} is not input size {x[1]} + cell size {units}"
        )
    for k, name in ((4, "wci"), (5, "wcf"), (6, "wco")):
        units = _merge(units, op._inputs[k].shape.with_rank(1)[0], f"cell size and {name}", op)
    b = op._inputs[7].shape.with_rank(1)[0]
    if b is not None and units is not None and b != 4 * units:
        raise ValueError(f"{op.type}: b has {b} elements, not 4 * cell size {4 * units}")
    return batch, units


def _cell_shape(op):
    s = TensorShape(list(_batch_units(op)))
    return [s] * 7


def _cell_grad_shape(op):
    batch, units = _batch_units(op)
    s = TensorShape([batch, units])
    four = None if units is None else 4 * units
    u = TensorShape([units])
    return [s, TensorShape([batch, four]), u, u, u]


defop(
    "LSTMBlockCell",
    inputs=_IN,
    outputs=[*_GATES, "h: T"],
    attrs=[
        "forget_bias: float = 1.0",
        "cell_clip: float = 3.0",
        "use_peephole: bool = false",
        "T: {float16, float32}",
    ],
    shape=_cell_shape,
    doc="One LSTM time step (the module docstring gives the formulas); cell_clip <= 0: no "
    "clipping.",
)

defop(
    "LSTMBlockCellGrad",
    inputs=[*_IN, *_GATES, "cs_grad: T", "h_grad: T"],
    outputs=["cs_prev_grad: T", "dicfo: T", "wci_grad: T", "wcf_grad: T", "wco_grad: T"],
    attrs=["use_peephole: bool", "T: {float16, float32}"],
    shape=_cell_grad_shape,
    doc="The gradient of LSTMBlockCell with respect to cs_prev, its four gate pre-activations "
    "(dicfo, in the order i, ci, f, o) and the peepholes (zero without them); the gradients "
    "of x, h_prev, w and b follow from dicfo by two products and a sum.",
)


def lstm_block_cell(x, cs_prev, h_prev, w, wci, wcf, wco, b, forget_bias: float = 1.0,
                    cell_clip: float = -1.0, use_peephole: bool = False,
                    name: str | None = None) -> list[Tensor]:  # fmt: skip
    """The LSTMBlockCell op's seven outputs (i, cs, f, o, ci, co, h); cell_clip <= 0 (the
    default here, as TensorFlow's LSTMBlockCell layer passes) clips nothing."""
    op = get_default_graph().create_op(
        "LSTMBlockCell",
        [x, cs_prev, h_prev, w, wci, wcf, wco, b],
        {
            "forget_bias": float(forget_bias),
            "cell_clip": float(cell_clip),
            "use_peephole": bool(use_peephole),
        },  # fmt: skip
        name=name or "LSTMBlockCell",
    )
    return list(op.outputs)
