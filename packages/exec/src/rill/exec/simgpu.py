"""A simulated GPU for machines without one: a numpy-backed stand-in of the cupy API subset rill's
GPU kernels use, with cupy's rules about mixing arrays.

`SimArray` behaves as a cupy array where it matters for transfer and mixing bugs:

- implicit conversion to numpy fails exactly as cupy's does (`np.asarray(a)` raises TypeError
  "Implicit conversion to a NumPy array is not allowed...");
- the stand-in module's functions refuse numpy arrays as operands ("Unsupported type
  <class 'numpy.ndarray'>"), as cupy's do; `asarray`/`array` copy host arrays in, `asnumpy` and
  `.get()` copy out;
- numpy ufuncs and functions applied to a SimArray dispatch to the stand-in (cupy's
  `__array_ufunc__`/`__array_function__`) and give SimArrays; reductions give 0-d arrays, not
  numpy scalars;
- dtypes cupy has no kernels for (strings, objects, bfloat16) are refused.

`SimGpuDevice` is a GPU device (device_type "GPU") whose array module is the stand-in, so the
kernels registered for GPU, placement, partitioning and the host/device copies run in CI.

>>> import numpy as np
>>> a = simcupy.asarray(np.arange(3.0))
>>> float((a * 2).sum())
6.0
>>> np.asarray(a)
Traceback (most recent call last):
...
TypeError: Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a NumPy array explicitly.
"""

from __future__ import annotations

import contextlib
import operator
import threading
import types

import numpy as np

from rill.exec.device import Device

__all__ = ["SimArray", "simcupy", "SimGpuDevice", "simulated_gpus", "OutOfMemoryError", "capturing"]

_IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
    "NumPy array explicitly."
)


class OutOfMemoryError(MemoryError):
    """cupy.cuda.memory.OutOfMemoryError's stand-in."""


# Bytes a single array may take on the simulated device (None: unlimited); set per thread
# by SimGpuDevice while its kernels run.
_limit = threading.local()

_CAPTURING = (
    "operation not permitted when stream is capturing (a device-to-host copy during a CUDA "
    "graph capture)"
)


def _no_copy_out() -> None:
    """Device-to-host copies fail while a (simulated) stream captures, as on a real GPU."""
    if getattr(_limit, "capturing", False):
        raise RuntimeError(_CAPTURING)


@contextlib.contextmanager
def capturing():
    """This thread's device-to-host copies raise, as during a CUDA graph capture (rill.exec.
    step_graphs' simulated graphs)."""
    prev = getattr(_limit, "capturing", False)
    _limit.capturing = True
    try:
        yield
    finally:
        _limit.capturing = prev


def _check_dtype(dt: np.dtype) -> None:
    if dt.kind not in "biufc" or not dt.isbuiltin:  # strings, objects, bfloat16 (ml_dtypes)
        raise TypeError(f"Unsupported dtype {dt}")


def _wrap(v):
    if type(v) is np.ndarray:
        _check_dtype(v.dtype)
        lim = getattr(_limit, "bytes", None)
        if lim is not None and v.nbytes > lim:
            raise OutOfMemoryError(
                f"Out of memory allocating {v.nbytes:,} bytes (allocated so far: 0 bytes, "
                f"limit set to: {lim:,} bytes)."
            )
        return SimArray(v)
    if isinstance(v, np.generic) and not isinstance(v, (np.str_, np.bytes_, np.object_)):
        return SimArray(np.asarray(v))
    if type(v) is tuple:
        return tuple(_wrap(x) for x in v)
    if type(v) is list:
        return [_wrap(x) for x in v]
    return v


def _unwrap(v, where: str):
    """The numpy array behind a SimArray; a numpy array here is a mixing bug (cupy refuses it)."""
    t = type(v)
    if t is SimArray:
        return v._a
    if t is np.ndarray:
        raise TypeError(f"Unsupported type {t}")
    if t is tuple or t is list:
        return t(_unwrap(x, where) for x in v)
    return v


def _unwrap_kw(kw: dict, where: str) -> dict:
    return {k: _unwrap(v, where) for k, v in kw.items()} if kw else kw


def _key(k):
    """An index: cupy accepts host integer arrays in indices (copying them in)."""
    t = type(k)
    if t is SimArray:
        return k._a
    if t is tuple:
        return tuple(_key(x) for x in k)
    return k


# Keyword arguments numpy takes and cupy's functions do not.
_REFUSED_KW = {
    n: frozenset({"initial", "where"})
    for n in ("max", "min", "amax", "amin", "sum", "prod", "mean", "all", "any", "nanmax",
              "nanmin", "std", "var")
}  # fmt: skip


class _Flags:
    """cupy's array flags: no `writeable` (device arrays are always writable)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, f):
        self.c_contiguous, self.f_contiguous, self.owndata = (
            f.c_contiguous,
            f.f_contiguous,
            f.owndata,
        )


class _Fn:
    """A numpy callable (function or ufunc) acting on SimArrays as cupy's counterpart does."""

    __slots__ = ("_f", "_name")

    def __init__(self, f, name: str):
        self._f = f
        self._name = name

    def __call__(self, *args, **kw):
        if kw:
            refused = _REFUSED_KW.get(self._name.rsplit(".", 1)[-1])
            if refused and refused & kw.keys():
                bad = sorted(refused & kw.keys())[0]
                raise TypeError(f"{self._name}() got an unexpected keyword argument '{bad}'")
        return _wrap(self._f(*_unwrap(args, self._name), **_unwrap_kw(kw, self._name)))

    def __getattr__(self, name):
        if name in ("at",):
            raise AttributeError(f"'{self._name}' has no attribute {name!r} on the GPU stand-in")
        attr = getattr(self._f, name)
        return _Fn(attr, f"{self._name}.{name}") if callable(attr) else attr

    def __repr__(self):
        return f"<simcupy {self._name}>"


class SimArray:
    """A device array of the simulated GPU (see the module docstring)."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, a: np.ndarray):
        self._a = a

    # -- cupy's conversion rules ----------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        raise TypeError(_IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        fn = getattr(ufunc, method)
        if method == "at":
            return NotImplemented
        return _Fn(fn, f"{ufunc.__name__}.{method}")(*inputs, **kw)

    def __array_function__(self, func, types_, args, kwargs):
        name = func.__name__
        if name not in _FUNCTIONS:
            return NotImplemented
        return _Fn(func, name)(*args, **kwargs)

    def get(self, stream=None, order="C", out=None):
        _no_copy_out()
        return self._a.copy()

    # -- attributes -------------------------------------------------------------------------------

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a.flags))
    T = property(lambda self: SimArray(self._a.T))
    real = property(lambda self: SimArray(self._a.real))
    imag = property(lambda self: SimArray(self._a.imag))
    device = property(lambda self: "sim:0")

    def __getattr__(self, name):
        if name in ("tolist", "tobytes", "item"):
            _no_copy_out()
            return getattr(self._a, name)
        if name.startswith("__"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        return _Fn(attr, f"ndarray.{name}") if callable(attr) else _wrap(attr)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        for i in range(len(self._a)):
            yield SimArray(self._a[i])

    def __getitem__(self, key):
        return _wrap(self._a[_key(key)])

    def __setitem__(self, key, value):
        self._a[_key(key)] = _unwrap(value, "__setitem__")

    def __bool__(self):
        _no_copy_out()
        return bool(self._a)

    def __int__(self):
        _no_copy_out()
        return int(self._a)

    def __float__(self):
        _no_copy_out()
        return float(self._a)

    def __complex__(self):
        _no_copy_out()
        return complex(self._a)

    def __index__(self):
        _no_copy_out()
        return operator.index(self._a)

    def __repr__(self):
        return f"sim{self._a!r}"

    def __copy__(self):
        return SimArray(self._a.copy())

    def __deepcopy__(self, memo):
        return SimArray(self._a.copy())

    def __reduce__(self):
        raise TypeError("a device array cannot be pickled")


def _binary(name):
    def op(self, other):
        return _wrap(getattr(self._a, name)(_unwrap(other, name)))

    op.__name__ = name
    return op


for _n in [
    "add",
    "sub",
    "mul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "matmul",
    "and",
    "or",
    "xor",
    "lshift",
    "rshift",
    "lt",
    "le",
    "gt",
    "ge",
    "eq",
    "ne",
    "radd",
    "rsub",
    "rmul",
    "rtruediv",
    "rfloordiv",
    "rmod",
    "rpow",
    "rmatmul",
    "rand",
    "ror",
    "rxor",
]:
    setattr(SimArray, f"__{_n}__", _binary(f"__{_n}__"))
for _n in ["iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor"]:

    def _inplace(self, other, _n=_n):
        getattr(self._a, f"__{_n}__")(_unwrap(other, _n))
        return self

    setattr(SimArray, f"__{_n}__", _inplace)
for _n in ["neg", "pos", "abs", "invert"]:
    setattr(SimArray, f"__{_n}__", lambda self, _n=_n: SimArray(getattr(self._a, f"__{_n}__")()))
SimArray.__hash__ = None  # type: ignore[assignment]


# -- the module -----------------------------------------------------------------------------------

# numpy names the stand-in exposes (cupy has each of them); anything else is an AttributeError,
# as it would be on cupy.
_FUNCTIONS_TEXT = """
abs absolute add all allclose amax amin any arange arccos arccosh arcsin arcsinh arctan
arctan2 arctanh argmax argmin argsort argwhere around array_equal atleast_1d atleast_2d
bincount bitwise_and bitwise_not bitwise_or bitwise_xor broadcast_arrays broadcast_shapes
broadcast_to ceil clip concatenate conj conjugate copy copysign cos cosh count_nonzero
cumprod cumsum diag diagonal divide dot einsum empty empty_like equal exp exp2 expand_dims
expm1 eye fabs flip floor floor_divide fmax fmin fmod full full_like greater greater_equal
hypot identity imag invert isclose isfinite isinf isnan left_shift less less_equal linspace
log log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor matmul max
maximum mean min minimum mod moveaxis multiply nan_to_num nanmax nanmin ndim negative
nonzero not_equal ones ones_like outer pad positive power prod ravel real reciprocal
remainder repeat reshape right_shift rint roll rollaxis round sign signbit sin sinh sort
split sqrt square squeeze stack std subtract sum swapaxes take take_along_axis tan tanh
tensordot tile trace transpose tril triu true_divide trunc unique var vstack hstack where
zeros zeros_like searchsorted cbrt deg2rad rad2deg heaviside lexsort partition argpartition
indices unravel_index ravel_multi_index put_along_axis copyto
"""
_FUNCTIONS = frozenset(_FUNCTIONS_TEXT.split())
# Names passed through unchanged (dtypes, type objects, constants, type helpers).
_PASSTHROUGH_TEXT = """
bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64
complex128 dtype finfo iinfo result_type promote_types can_cast issubdtype integer floating
complexfloating number signedinteger unsignedinteger inexact generic pi e inf nan newaxis
shape size intp
"""
_PASSTHROUGH = frozenset(_PASSTHROUGH_TEXT.split())


def _asarray(a, dtype=None, order=None, *, blocking=False, copy=None):
    if type(a) is SimArray:
        if dtype is None or np.dtype(dtype) == a.dtype:
            return a
        return SimArray(a._a.astype(dtype))
    if type(a) in (list, tuple) and any(type(x) is SimArray for x in a):
        a = [x._a if type(x) is SimArray else x for x in a]
    arr = np.array(a, dtype=dtype, order=order or "K")
    if arr.dtype.kind in "OSU":
        raise ValueError(f"Unsupported dtype {arr.dtype}")
    return _wrap(arr)


def _asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if type(a) is SimArray:
        _no_copy_out()
        return a._a.copy()
    return np.asarray(a)


def _get_array_module(*args):
    return simcupy if any(type(a) is SimArray for a in args) else np


class _RandomState:
    """cupy.random.RandomState's stand-in: a seeded generator giving device arrays (the methods
    rill's GPU kernels use, with cupy's signatures)."""

    def __init__(self, seed=None):
        self._g = np.random.default_rng(seed)

    def random_sample(self, size=None, dtype=float):
        return _wrap(np.asarray(self._g.random(size, dtype=dtype)))

    def standard_normal(self, size=None, dtype=float):
        return _wrap(np.asarray(self._g.standard_normal(size, dtype=dtype)))

    def randint(self, low, high=None, size=None, dtype=int):
        return _wrap(np.asarray(self._g.integers(low, high, size=size, dtype=dtype)))


def _scatter_add(a, slices, value):
    np.add.at(_unwrap(a, "scatter_add"), _key(slices), _unwrap(value, "scatter_add"))


def _scatter_max(a, slices, value):
    np.maximum.at(_unwrap(a, "scatter_max"), _key(slices), _unwrap(value, "scatter_max"))


class _Stream:
    def __init__(self, non_blocking=False, null=False):
        self.null = null

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        return self


class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class _CudaDevice:
    def __init__(self, index=0):
        self.id = index

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


simcupy = types.ModuleType("simcupy", "numpy-backed stand-in of the cupy API subset rill uses")
simcupy.ndarray = SimArray
simcupy.asarray = _asarray
simcupy.array = _asarray
simcupy.ascontiguousarray = _asarray
simcupy.asnumpy = _asnumpy
simcupy.get_array_module = _get_array_module
simcupy.random = types.SimpleNamespace(RandomState=_RandomState)
simcupy.cuda = types.SimpleNamespace(
    Device=_CudaDevice,
    Stream=_Stream,
    Event=_Event,
    get_current_stream=lambda: _Stream(null=True),
    runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
    memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
)
simcupy.scatter_add = _scatter_add  # cupyx.scatter_add
simcupy.scatter_max = _scatter_max  # cupyx.scatter_max
simcupy.is_simulated = True


def _as_strided(a, shape, strides):  # cupy.lib.stride_tricks.as_strided
    from numpy.lib.stride_tricks import as_strided

    return SimArray(as_strided(_unwrap(a, "as_strided"), shape=shape, strides=strides))


simcupy.as_strided = _as_strided
for _n in _FUNCTIONS:
    if hasattr(np, _n):
        setattr(simcupy, _n, _Fn(getattr(np, _n), _n))
for _n in _PASSTHROUGH:
    if hasattr(np, _n):
        setattr(simcupy, _n, getattr(np, _n))


class SimGpuDevice(Device):
    """A GPU device whose array module is `simcupy`: runs the GPU kernel registrations on the
    CPU with cupy's conversion rules. `memory_limit` (bytes) bounds one allocation, to exercise
    out-of-memory handling."""

    device_type = "GPU"
    simulated = True

    def __init__(self, index: int, memory_limit: int | None = None, graphs: bool = False, **kw):
        super().__init__(index, **kw)
        self.xp = simcupy
        self.memory_limit = memory_limit
        self.graph_backend = None
        if graphs:
            from rill.exec import capture_gemm
            from rill.exec.step_graphs import SimGraphs

            self.graph_backend = SimGraphs(self)
            capture_gemm.install_joins(simcupy)  # joins part by part while capturing

    def to_host(self, value):
        if type(value) is SimArray:
            _no_copy_out()
            return value._a.copy()
        return value

    def from_host(self, value):
        t = type(value)
        if t is np.ndarray:
            if value.dtype.kind in "OSUV" or not value.dtype.isbuiltin:
                return value  # strings, objects, bfloat16 have no device form (kept on host)
            return SimArray(value.copy())
        if isinstance(value, np.generic) and value.dtype.kind in "biufc":
            return SimArray(np.asarray(value))
        return value

    swapped_bytes = 0  # bytes moved to the host by swap_out (a counter for tests)

    def swap_out(self, value):
        """swap_memory: the value moved to host memory (a Swapped holding a host copy)."""
        from rill.exec.kernels.gpu.loops import Swapped

        if type(value) is not SimArray:
            return value
        self.swapped_bytes += value.nbytes
        return Swapped(value._a.copy(), None, None)

    def swap_in(self, swapped):
        return SimArray(swapped.host.copy())

    @contextlib.contextmanager
    def running(self):
        prev = getattr(_limit, "bytes", None)
        _limit.bytes = self.memory_limit
        try:
            yield
        finally:
            _limit.bytes = prev


_SIMULATED: list = []  # stack of (count, memory_limit) installed by simulated_gpus


@contextlib.contextmanager
def simulated_gpus(count: int = 1, memory_limit: int | None = None, graphs: bool = False):
    """Sessions created inside get `count` simulated GPUs (in place of real ones); `graphs`:
    their straight-line steps are captured and replayed (rill.exec.step_graphs.SimGraphs) as a
    real GPU's are.

    >>> import rill.graph as rg
    >>> from rill.exec import Session
    >>> with simulated_gpus(1):
    ...     sess = Session(graph=rg.Graph())
    >>> sess.list_devices()[-1]
    '/job:localhost/replica:0/task:0/device:GPU:0'
    >>> sess.close()
    """
    _SIMULATED.append((count, memory_limit, graphs))
    try:
        yield
    finally:
        _SIMULATED.pop()


def simulated_config():
    """(count, memory_limit, graphs) of the innermost `simulated_gpus`, or None."""
    return _SIMULATED[-1] if _SIMULATED else None
