"""Kernels for rill.graph.ops.script_ops: PyFunc and PyFuncStateless call the Python function
registered in this process under the op's token (TensorFlow's tf.py_func semantics: numpy
values in — a scalar as a numpy scalar, a scalar string as bytes — and out; StopIteration ends the input as OutOfRangeError; any other exception is
UnknownError naming it)."""

from __future__ import annotations

import numpy as np

from rill.exec.kernel_registry import register_kernel
from rill.exec.kernels.array_kernels import outputs
from rill.graph.errors import InvalidArgumentError, NotFoundError, OutOfRangeError, UnknownError
from rill.graph.ops.script_ops import lookup_py_func


def _convert(value, dtype, token: str, i: int) -> np.ndarray:
    want = dtype.np
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        same = arr.dtype == want or (want.kind == "O" and arr.dtype.kind in "OSU")
        if not same:
            raise InvalidArgumentError(
                f"{i}-th value returned by {token} is {arr.dtype}, but expects {dtype.name}"
            )
    if want.kind == "O":  # strings: bytes objects, as every string tensor holds
        arr = np.asarray(value, dtype=object)
        enc = np.frompyfunc(lambda s: s.encode() if isinstance(s, str) else s, 1, 1)
        return enc(arr).astype(object) if arr.ndim else np.asarray(enc(arr[()]), dtype=object)
    try:
        return np.asarray(value, dtype=want)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"{i}-th value returned by {token} cannot be converted to {dtype.name}: {e}"
        ) from None


def _py_func(token, Tin, Tout):
    n_out = len(Tout)

    def compute(*args):
        func = lookup_py_func(token)
        if func is None:
            raise NotFoundError(
                f"the Python function {token} is not registered in this process (a PyFunc "
                "runs only in the process whose py_func call built it)"
            )
        # As in TensorFlow, a scalar arrives as a numpy scalar, a scalar string as bytes.
        args = [a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in args]
        try:
            result = func(*args)
        except StopIteration as e:
            raise OutOfRangeError(f"{token} raised StopIteration: {e}") from None
        except Exception as e:  # noqa: BLE001 - the user's function: reported, never escapes
            raise UnknownError(f"{token} raised {type(e).__name__}: {e}") from e
        if n_out == 0:
            return None
        values = list(result) if n_out > 1 or isinstance(result, (list, tuple)) else [result]
        if len(values) != n_out:
            raise InvalidArgumentError(
                f"{token} returned {len(values)} values, but the op expects {n_out}"
            )
        return outputs(_convert(v, t, token, i) for i, (v, t) in enumerate(zip(values, Tout)))

    return compute


register_kernel("PyFunc")(_py_func)
register_kernel("PyFuncStateless")(_py_func)
