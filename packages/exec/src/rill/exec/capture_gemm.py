"""Matrix products and joins a CUDA graph capture can record (rill.exec.step_graphs).

cupy refuses any cuBLAS call while a stream is capturing ("calling cuBLAS API during stream
capture is currently unsupported"), although cuBLAS itself supports capture. While rill captures a
step on a thread, `cupy.matmul` (which rill's GPU kernels call) runs its products through a cuBLAS
handle of rill's own instead, called through ctypes: the library cupy has loaded, a workspace of
WORKSPACE_BYTES set once (so cuBLAS allocates nothing while capturing), the capturing stream set
before each call. Outside a capture, and on every other thread, `cupy.matmul` is cupy's.

Products it records: float32 and float64 matrices, a stack of matrices times one matrix (folded
into one product) and two stacks of equal batch (one strided batched call). Operands that are
neither row- nor column-major are copied first. Anything else raises NotCapturable, and the step
then runs uncaptured.

cuBLAS works on column-major matrices; a row-major [m, k] array is the column-major [k, m]
matrix. So out = a @ b (row-major) is computed as outᵀ = bᵀ aᵀ (column-major), and an operand
stored column-major (a transposed view) is passed with cuBLAS's transpose flag (`operand`).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = [
    "install", "install_joins", "blas", "capturing", "active", "operand", "gemm_args",
    "NotCapturable",
]  # fmt: skip

WORKSPACE_BYTES = 32 << 20
_OP_N, _OP_T = 0, 1

_state = threading.local()  # .on: this thread is capturing


class NotCapturable(Exception):
    """A product the capture path does not record."""


def active() -> bool:
    """Whether this thread is capturing a step (see `capturing`)."""
    return getattr(_state, "on", False)


def _joined(xp, arrays, axis: int, new_axis: bool):
    """stack (new_axis) or concatenate of device arrays by one copy into each part of the
    result: while capturing, cupy's own joins of many arrays copy a table of pointers from the
    host, which a capture refuses. (`axis` may be negative, as numpy allows.)"""
    first = arrays[0]
    axis = axis % (first.ndim + 1 if new_axis else first.ndim)
    if new_axis:
        shape = first.shape[:axis] + (len(arrays),) + first.shape[axis:]
    else:
        shape = list(first.shape)
        shape[axis] = sum(a.shape[axis] for a in arrays)
        shape = tuple(shape)
    dtype = np.result_type(*[a.dtype for a in arrays])
    out = xp.empty(shape, dtype)
    lead = (slice(None),) * axis
    at = 0
    for a in arrays:
        if new_axis:
            out[lead + (at,)] = a
            at += 1
        else:
            out[lead + (slice(at, at + a.shape[axis]),)] = a
            at += a.shape[axis]
    return out


class capturing:
    """Within: this thread's cupy.matmul calls go through the capturable cuBLAS handle."""

    def __enter__(self):
        self.prev = getattr(_state, "on", False)
        _state.on = True
        return self

    def __exit__(self, *exc):
        _state.on = self.prev
        return False


def operand(shape: tuple, strides: tuple, itemsize: int):
    """How cuBLAS reads a row-major 2-D operand of `shape` and `strides` (bytes) as the
    transpose of the column-major matrix it holds: (op, ld), or None when it is neither row- nor
    column-major (copy it first).

    >>> operand((3, 4), (16, 4), 4)  # row-major [3, 4]: column-major [4, 3], not transposed
    (0, 4)
    >>> operand((3, 4), (4, 12), 4)  # a transposed view: column-major [3, 4], transposed
    (1, 3)
    """
    rows, cols = shape
    if cols == 1 or strides[1] == itemsize:
        if rows == 1 or strides[0] % itemsize == 0 and strides[0] // itemsize >= max(cols, 1):
            return _OP_N, max(cols, (strides[0] // itemsize) if rows > 1 else cols, 1)
    if rows == 1 or strides[0] == itemsize:
        if cols == 1 or strides[1] % itemsize == 0 and strides[1] // itemsize >= max(rows, 1):
            return _OP_T, max(rows, (strides[1] // itemsize) if cols > 1 else rows, 1)
    return None


def colmajor_gemm(opa, opb, m, n, k, a, lda, b, ldb, c, ldc) -> None:
    """A numpy model of cuBLAS gemm (alpha 1, beta 0) on flat column-major buffers: the tests
    check `product`'s argument choices against it."""

    def mat(buf, op, rows, cols, ld):  # the op(X) matrix, rows × cols
        if op == _OP_N:
            return np.lib.stride_tricks.as_strided(
                buf, (rows, cols), (buf.itemsize, ld * buf.itemsize)
            )
        return np.lib.stride_tricks.as_strided(
            buf, (cols, rows), (buf.itemsize, ld * buf.itemsize)
        ).T

    res = mat(a, opa, m, k, lda) @ mat(b, opb, k, n, ldb)
    np.lib.stride_tricks.as_strided(c, (m, n), (c.itemsize, ldc * c.itemsize))[...] = res


def gemm_args(a, b):
    """The cuBLAS gemm arguments computing a @ b for 2-D row-major-or-transposed operands into a
    new row-major [m, n] result: (opa, opb, m, n, k, A, lda, B, ldb, ldc) in cuBLAS's terms, where
    A and B name which operand goes first ("b" then "a": outᵀ = bᵀ aᵀ)."""
    m, k = a.shape
    n = b.shape[1]
    ob = operand(b.shape, b.strides, b.itemsize)
    oa = operand(a.shape, a.strides, a.itemsize)
    if ob is None or oa is None:
        return None
    # outᵀ (n × m, column-major, ld n) = op(bᵀ) (n × k) · op(aᵀ) (k × m)
    return ob[0], oa[0], n, m, k, "b", ob[1], "a", oa[1], n


class _Cublas:
    """rill's own cuBLAS handle, for products recorded into CUDA graphs."""

    def __init__(self, cp):
        self.cp = cp
        cp.cuda.device.get_cublas_handle()  # cupy loads libcublas
        path = _loaded("libcublas.so")
        if path is None:
            raise NotCapturable("libcublas is not loaded in this process")
        lib = ctypes.CDLL(path)
        self.lib = lib
        vp, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        gemm = [vp, i32, i32, i32, i32, i32, vp, vp, i32, vp, i32, vp, vp, i32]
        batched = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i64, vp, i32, i64, vp, vp, i32, i64,
                   i32]  # fmt: skip
        for name in ("cublasSgemm_v2", "cublasDgemm_v2"):
            getattr(lib, name).argtypes = gemm
        for name in ("cublasSgemmStridedBatched", "cublasDgemmStridedBatched"):
            getattr(lib, name).argtypes = batched
        h = vp()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        self.handle = h
        self.workspace = cp.empty(WORKSPACE_BYTES, np.uint8)
        _check(lib.cublasSetWorkspace_v2(h, self.workspace.data.ptr, WORKSPACE_BYTES),
               "cublasSetWorkspace")  # fmt: skip
        self.lock = threading.Lock()
        self.one = {np.float32: ctypes.c_float(1.0), np.float64: ctypes.c_double(1.0)}
        self.zero = {np.float32: ctypes.c_float(0.0), np.float64: ctypes.c_double(0.0)}

    def matmul(self, a, b, out=None):
        cp = self.cp
        if type(a) is not cp.ndarray or type(b) is not cp.ndarray:
            raise NotCapturable("matmul of a non-device operand")
        dt = a.dtype.type
        if a.dtype != b.dtype or dt not in (np.float32, np.float64):
            raise NotCapturable(f"matmul of {a.dtype} and {b.dtype}")
        if a.ndim == 1 or b.ndim == 1 or b.ndim > 3 or a.ndim > 3 and b.ndim != 2:
            raise NotCapturable(f"matmul of ranks {a.ndim} and {b.ndim}")
        if a.ndim >= 3 and b.ndim == 2:  # a stack times one matrix: one product
            lead = a.shape[:-1]
            a2 = a.reshape(-1, a.shape[-1]) if a.flags.c_contiguous else cp.ascontiguousarray(
                a).reshape(-1, a.shape[-1])  # fmt: skip
            res = self._product2(a2, b, None)
            res = res.reshape(*lead, b.shape[1])
            return _into(cp, res, out)
        if a.ndim == 2 and b.ndim == 2:
            return self._product2(a, b, out)
        if a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0]:
            return self._batched(a, b, out)
        raise NotCapturable(f"matmul of shapes {a.shape} and {b.shape}")

    def _product2(self, a, b, out):
        cp = self.cp
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        m, n = a.shape[0], b.shape[1]
        res = out if _usable(cp, out, (m, n), a.dtype) else cp.empty((m, n), a.dtype)
        if m and n:
            if a.shape[1] == 0:
                res.fill(0)
            else:
                args = gemm_args(a, b)
                if args is None:
                    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
                    args = gemm_args(a, b)
                opb, opa, nn, mm, k, _, ldb, _, lda, ldc = args
                self._gemm(a.dtype.type, opb, opa, nn, mm, k, b, ldb, a, lda, res, ldc)
        return _into(cp, res, out)

    def _gemm(self, dt, op1, op2, m, n, k, x, ldx, y, ldy, c, ldc):
        fn = self.lib.cublasSgemm_v2 if dt is np.float32 else self.lib.cublasDgemm_v2
        with self.lock:
            _check(self.lib.cublasSetStream_v2(self.handle, self.cp.cuda.get_current_stream().ptr),
                   "cublasSetStream")  # fmt: skip
            _check(fn(self.handle, op1, op2, m, n, k, ctypes.byref(self.one[dt]), x.data.ptr, ldx,
                      y.data.ptr, ldy, ctypes.byref(self.zero[dt]), c.data.ptr, ldc),
                   "gemm")  # fmt: skip

    def _batched(self, a, b, out):
        cp = self.cp
        batch, m, k = a.shape
        n = b.shape[2]
        if b.shape[1] != k:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match")
        a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
        res = out if _usable(cp, out, (batch, m, n), a.dtype) else cp.empty((batch, m, n), a.dtype)
        if batch and m and n:
            if k == 0:
                res.fill(0)
            else:
                dt = a.dtype.type
                fn = (self.lib.cublasSgemmStridedBatched if dt is np.float32
                      else self.lib.cublasDgemmStridedBatched)  # fmt: skip
                with self.lock:
                    _check(
                        self.lib.cublasSetStream_v2(self.handle, cp.cuda.get_current_stream().ptr),
                        "cublasSetStream",
                    )
                    # outᵀ = bᵀ aᵀ per matrix; every operand row-major and contiguous.
                    _check(fn(self.handle, _OP_N, _OP_N, n, m, k, ctypes.byref(self.one[dt]),
                              b.data.ptr, n, k * n, a.data.ptr, k, m * k,
                              ctypes.byref(self.zero[dt]), res.data.ptr, n, m * n, batch),
                           "batched gemm")  # fmt: skip
        return _into(cp, res, out)


def _usable(cp, out, shape, dtype) -> bool:
    return (out is not None and type(out) is cp.ndarray and out.shape == shape
            and out.dtype == dtype and out.flags.c_contiguous)  # fmt: skip


def _into(cp, res, out):
    if out is None or res is out:
        return res
    cp.copyto(out, res)
    return out


def _check(status: int, what: str) -> None:
    if status != 0:
        raise NotCapturable(f"{what} failed: cuBLAS status {status}")


def _loaded(name: str) -> str | None:
    """The path of the shared library `name` (prefix) mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                base = path.rsplit("/", 1)[-1]
                if base.startswith(name):
                    return path
    except OSError:
        return None
    return None


_INSTALL_LOCK = threading.Lock()
_BLAS: list = []


def blas(cp) -> _Cublas:
    """The capturable handle (made on first use, outside any capture: its workspace must not
    come from a graph's memory pool)."""
    with _INSTALL_LOCK:
        if not _BLAS:
            _BLAS.append(_Cublas(cp))
        return _BLAS[0]


def install_joins(xp) -> None:
    """Wraps xp.stack and xp.concatenate once: while this thread captures, they copy part by
    part (`_joined`); otherwise they are xp's own, unchanged. (Module attributes, which rill's
    kernels look up: every join of every kernel is covered.)"""
    with _INSTALL_LOCK:
        for name, new_axis in (("stack", True), ("concatenate", False)):
            orig = getattr(xp, name)
            if getattr(orig, "_rill_capturable", False):
                continue

            def join(arrays, axis=0, out=None, _orig=orig, _new=new_axis, **kw):
                arrays = list(arrays)
                if (
                    getattr(_state, "on", False)
                    and out is None
                    and not kw
                    and axis is not None
                    and arrays
                    and (_new or arrays[0].ndim > 0)
                ):
                    return _joined(xp, arrays, axis, _new)
                if out is not None:
                    kw["out"] = out
                return _orig(arrays, axis=axis, **kw)

            join._rill_capturable = True
            join.__doc__ = orig.__doc__
            setattr(xp, name, join)


def install(cp) -> None:
    """Wraps cupy.matmul once: while this thread captures (`capturing`), products go through
    rill's capturable cuBLAS handle; otherwise cupy's own matmul runs, unchanged. The joins too
    (`install_joins`)."""
    install_joins(cp)
    with _INSTALL_LOCK:
        orig = cp.matmul
        if getattr(orig, "_rill_capturable", False):
            return

        def matmul(a, b, out=None, **kw):
            if getattr(_state, "on", False) and not kw and _BLAS:
                return _BLAS[0].matmul(a, b, out)
            if out is not None:
                kw["out"] = out
            return orig(a, b, **kw)

        matmul._rill_capturable = True
        matmul.__doc__ = orig.__doc__
        cp.matmul = matmul
