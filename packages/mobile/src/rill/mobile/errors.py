"""Errors raised by the interpreter. All are ValueErrors, as LiteRT's are, so `except ValueError`
ported from code written against tf.lite keeps working."""

from __future__ import annotations

__all__ = ["ModelFormatError", "UnsupportedOperatorError", "PrepareError", "InvokeError"]


class ModelFormatError(ValueError):
    """The bytes are not a valid TFLite flatbuffer of schema version 3 (wrong file identifier,
    wrong version, truncated or corrupt data, out-of-range indices)."""


class UnsupportedOperatorError(ValueError):
    """The model uses operators (or operator versions) the interpreter has no kernel for.

    `unsupported` lists every one as (op name, version, [operator indices]), so that a user sees
    the whole list at once, before anything runs.
    """

    def __init__(self, unsupported: list[tuple[str, int, list[int]]], supported: list[str]):
        self.unsupported = unsupported
        lines = [
            f"  {name} version {version} (operator{'s' if len(idx) > 1 else ''} "
            f"{', '.join(f'#{i}' for i in idx)})"
            for name, version, idx in unsupported
        ]
        super().__init__(
            f"the model uses {len(unsupported)} operator kind(s) this interpreter does not "
            "support:\n" + "\n".join(lines) + "\nsupported operators: " + ", ".join(supported)
        )


class PrepareError(ValueError):
    """An operator's checks failed while preparing it (allocate_tensors): wrong input types or
    shapes, missing constant inputs, unsupported quantization. The message names the operator,
    its index and its tensors."""


class InvokeError(RuntimeError, ValueError):
    """An operator failed while running (invoke): an index out of range in the data, say. A
    RuntimeError, as LiteRT's invoke failures are, and a ValueError, as the module's other errors
    are; the message names the operator and its index. Only these and the errors above leave
    `invoke`."""
