"""Python functions as graph ops: `py_func`, `numpy_function` (TensorFlow's PyFunc and
PyFuncStateless) and `py_function` (TensorFlow's eager-style variant).

The function lives in this process's registry under a token that the op carries as its `token`
attr; the kernel looks it up when the op runs. A GraphDef holding a PyFunc therefore runs only in
the process that built it (as in TensorFlow): anywhere else the kernel fails with a clear error,
and nothing from a file or the network is ever turned into code.

>>> import numpy as np
>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [3])
...     y = py_func(lambda a: np.sort(a), [x], rg.float32)
>>> y.op.type, y.dtype
('PyFunc', rill.float32)
"""

from __future__ import annotations

import itertools
import secrets
import threading

import numpy as np

from rill.graph import dtypes
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["py_func", "numpy_function", "py_function", "lookup_py_func"]

_PY_FUNC = dict(
    inputs=["input: Tin"],
    outputs=["output: Tout"],
    attrs=["token: string", "Tin: list(type) >= 0", "Tout: list(type) >= 0"],
    shape=lambda op: [TensorShape(None) for _ in op.get_attr("Tout")],
    doc="Calls the Python function registered under `token` on the inputs' numpy values.",
)
defop("PyFunc", stateful=True, **_PY_FUNC)
defop("PyFuncStateless", **_PY_FUNC)

_registry: dict[str, object] = {}
_lock = threading.Lock()
_ids = itertools.count()
_SALT = secrets.token_hex(4)


def lookup_py_func(token: str):
    """The function registered under `token` in this process, or None."""
    return _registry.get(token)


def _register(func) -> str:
    with _lock:
        # A random part keeps a token from an imported GraphDef from naming a local function.
        token = f"pyfunc_{next(_ids)}_{_SALT}"
        _registry[token] = func
    return token


def py_func(func, inp, Tout, stateful: bool = True, name=None):
    """Wraps `func` (numpy arrays in, numpy arrays or scalars out) as an op (TF1's tf.py_func).

    Args:
        func: called with one numpy array per input when the op runs.
        inp: the input tensors.
        Tout: a dtype (the op then has one output, returned as a Tensor) or a list/tuple of
            dtypes (a list of Tensors is returned).
        stateful: False makes it PyFuncStateless (a candidate for common-subexpression
            elimination, as in TensorFlow).

    Returns:
        A Tensor or a list of Tensors, of unknown shape (the Operation when Tout is empty).
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, got {type(func).__name__}")
    single = not isinstance(Tout, (list, tuple))
    touts = [dtypes.as_dtype(t) for t in ([Tout] if single else Tout)]
    g = get_default_graph()
    inputs = [convert_to_tensor(x) for x in (inp or [])]
    op = g.create_op(
        "PyFunc" if stateful else "PyFuncStateless",
        [inputs],
        attrs={"token": _register(func), "Tin": [t.dtype for t in inputs], "Tout": touts},
        name=name or "PyFunc",
    )
    outs: list[Tensor] = list(op.outputs)
    if not outs:
        return op  # nothing to fetch: the op itself is what runs it
    return outs[0] if single else outs


def numpy_function(func, inp, Tout, stateful: bool = True, name=None):
    """TensorFlow's tf.numpy_function: py_func under its newer name."""
    return py_func(func, inp, Tout, stateful=stateful, name=name)


class _EagerValue(np.ndarray):
    """A py_function argument: the input's numpy value, which also answers TensorFlow's eager
    `.numpy()` (a numpy scalar, or bytes for a string, when it has no dimensions)."""

    def numpy(self):
        return self[()] if self.ndim == 0 else self.view(np.ndarray)


def _eager(value) -> _EagerValue:
    if isinstance(value, (bytes, str)):
        value = np.asarray(value, dtype=object)
    return np.asarray(value).view(_EagerValue)


def _plain(value):
    """A py_function result as py_func takes it: `.numpy()` of anything that has one."""
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, _EagerValue):
        return value.view(np.ndarray)
    numpy = getattr(value, "numpy", None)
    return numpy() if callable(numpy) else value


def py_function(func, inp, Tout, name=None):
    """TensorFlow's tf.py_function in a graph: `func` gets each input as a numpy array that also
    has the eager tensor's `.numpy()`, so functions written for TensorFlow 2 (`x.numpy()`) and
    for numpy both run; it returns arrays, scalars or objects with `.numpy()`. Always stateful,
    as in TensorFlow. Tout and the result are as for py_func."""
    if not callable(func):
        raise TypeError(f"py_function: func must be callable, got {type(func).__name__}")

    def call(*args):
        return _plain(func(*[_eager(a) for a in args]))

    return py_func(call, inp, Tout, stateful=True, name=name or "EagerPyFunc")
