"""The TFLite rule registry: how each rill op lowers to TFLite operators.

A rule is a function `rule(ctx, op)` registered by op name with `@register_tflite("Conv2D")`;
it reads the op's inputs through the `LoweringContext`, emits operators, and binds the op's
outputs. Rules live in one module per op family (nn.py, math.py, array.py).
"""

from __future__ import annotations

from rill.graph.errors import describe_op
from rill.graph.op_def import RuleRegistry

TFLITE_RULES = RuleRegistry("tflite")


def register_tflite(op_type: str):
    """Decorator: registers the TFLite lowering rule of `op_type` (which must be declared).

    >>> import rill.mobile.convert  # registers the rules of every family
    >>> TFLITE_RULES.has("Conv2D"), TFLITE_RULES.has("Softplus")
    (True, False)
    """
    return TFLITE_RULES(op_type)


class ConverterError(Exception):
    """A graph (or an op in it) that cannot be converted; the message names the op and its line."""


def op_error(op, message: str) -> ConverterError:
    """A ConverterError about `op` showing its printed line and the user line that created it."""
    return ConverterError(f"op {op.name!r} ({op.type}): {message}\n{describe_op(op)}")
