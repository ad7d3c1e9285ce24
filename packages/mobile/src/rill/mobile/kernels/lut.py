"""Element-wise int8 functions as 256-entry tables.

An element-wise operator on an int8 tensor is a function of 256 possible values. Its kernel
computes the reference kernel's integer arithmetic once, in prepare, for all 256 inputs, and
invoke is a single table lookup (indexing by the bytes seen as uint8 needs no temporary). The
table holds exactly what the arithmetic gives, so this changes the cost, never the result.
"""

from __future__ import annotations

import numpy as np

from rill.mobile.kernels import jit

__all__ = ["INT8_VALUES", "table_from_int8", "apply_table", "table_run"]

# The 256 int8 values in the order of their uint8 bit patterns: 0..127, then -128..-1.
INT8_VALUES = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.int64)


def table_from_int8(fn, dtype) -> np.ndarray:
    """fn maps an int64 array of int8 values to outputs; the table indexed by uint8 bits."""
    return np.ascontiguousarray(np.asarray(fn(INT8_VALUES.copy())).astype(dtype))


def apply_table(table: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    np.take(table, x.view(np.uint8), out=out)


def table_run(table: np.ndarray, x: np.ndarray, out: np.ndarray):
    """The invoke closure out = table[bits of x] (int8 x by its uint8 bits, int16 by uint16):
    one compiled loop when the compiled loops are on and both arrays are contiguous, else
    np.take. The same lookups either way."""
    bits = x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16)
    loops = jit.loops()
    if loops is not None and bits.flags.c_contiguous and out.flags.c_contiguous:
        loop, flat_in, flat_out = loops.lookup, bits.reshape(-1), out.reshape(-1)
        return lambda: loop(table, flat_in, flat_out)
    return lambda: np.take(table, bits, out=out)
