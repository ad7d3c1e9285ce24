"""CUDA C kernels for the convolution and pooling kernels' memory-bound passes, on cupy only.

cupy copies a strided view (the im2col windows) with one generic kernel that decomposes every
element's index over all the view's axes in 64-bit arithmetic; on an H200 those copies were
half of the CNN train step's device time at batch 512. The kernels here are compiled for one
geometry each (every size a constant, so each index split is a multiply and a shift), read the
input where a window reaches it and write zeros where it reaches padding (no padded copy).

- `im2col(x, ...)`: the [n*oh*ow, kh*kw*c] patch matrix of NHWC x.
- `col2im(dcols, ...)`: its adjoint, the input gradient from the patches' gradients, one
  thread per input position summing the taps that read it (no scattered additions).
- `tiled_max_pool(x, ...)`: MaxPool for windows that tile the input, one thread per window.
- `tiled_max_pool_grad(x, grad, ...)`: MaxPoolGrad for windows that tile the input, one thread
  per window: the gradient goes to the window's first maximum in row-major order (a NaN only as
  the window's first value), as the CPU kernel and the whole-array path choose; every other
  position gets zero.

`usable(xp)` says whether they run: on cupy (never on the simulated GPU, whose kernels take the
whole-array paths), until a kernel fails to compile, after which the paths above are used and
FALLBACK_REASON says why. The GPU suite (marker `gpu`) runs every convolution and pooling sample
through them.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = [
    "FALLBACK_REASON", "usable", "im2col", "col2im", "tiled_max_pool", "tiled_max_pool_grad",
]  # fmt: skip

FALLBACK_REASON: str | None = None

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_KERNELS: dict = {}
_LOCK = threading.Lock()
_THREADS = 256


def usable(xp, dtype) -> bool:
    return (
        FALLBACK_REASON is None
        and not getattr(xp, "is_simulated", False)
        and hasattr(xp, "RawKernel")
        and np.dtype(dtype) in _CTYPES
    )


def _kernel(xp, name: str, source: str):
    fn = _KERNELS.get(source)
    if fn is None:
        with _LOCK:
            fn = _KERNELS.get(source)
            if fn is None:
                fn = xp.RawKernel(source, name)
                fn.compile()
                _KERNELS[source] = fn
    return fn


def _launch(xp, name: str, source: str, total: int, args) -> bool:
    global FALLBACK_REASON
    try:
        fn = _kernel(xp, name, source)
    except Exception as e:  # noqa: BLE001 - a kernel that does not compile falls back, once
        FALLBACK_REASON = f"{name}: {type(e).__name__}: {str(e)[:300]}"
        return False
    blocks = min(-(-total // _THREADS), 1 << 20)
    fn((blocks,), (_THREADS,), args)
    return True


def _index_type(total: int) -> str:
    return "unsigned int" if total < (1 << 31) else "unsigned long long"


def _elementwise(name: str, params: str, body: str) -> str:
    """A kernel `name`(params) running `body` once per element e of the output (a grid-stride
    loop over {TOTAL} elements, indices of type {I}); the result is a template for str.format."""
    return (
        f'extern "C" __global__ void {name}({params}) {{{{\n'
        "    typedef {I} idx;\n"
        "    const idx total = ({I}){TOTAL};\n"
        "    for (idx e = ({I})blockIdx.x * blockDim.x + threadIdx.x; e < total;\n"
        "         e += ({I})gridDim.x * blockDim.x) {{\n"
        "        idx t = e;\n"
        f"{body}"
        "    }}\n"
        "}}\n"
    )


_IM2COL = _elementwise(
    "im2col",
    "const {T}* __restrict__ x, {T}* __restrict__ cols",
    """
        const int ch = t % {C}; t /= {C};
        const int j = t % {KW}; t /= {KW};
        const int i = t % {KH}; t /= {KH};
        const int ox = t % {OW}; t /= {OW};
        const int oy = t % {OH};
        const idx b = t / {OH};
        const int y = oy * {SH} + i * {DH} - {PT};
        const int xx = ox * {SW} + j * {DW} - {PL};
        {T} v = 0;
        if (y >= 0 && y < {H} && xx >= 0 && xx < {W})
            v = x[((b * {H} + y) * {W} + xx) * {C} + ch];
        cols[e] = v;
""",
)


def _geometry(shape, kh, kw, strides, dilations, pads, oh, ow) -> dict:
    """The constants of a convolution window over NHWC `shape` that im2col and col2im take."""
    _, h, w, c = shape
    return {"C": c, "KH": kh, "KW": kw, "OH": oh, "OW": ow, "H": h, "W": w, "SH": strides[0],
            "SW": strides[1], "DH": dilations[0], "DW": dilations[1], "PT": pads[0],
            "PL": pads[1]}  # fmt: skip


def im2col(xp, x, kh, kw, strides, dilations, pads, oh, ow):
    """The [n*oh*ow, kh*kw*c] patches of contiguous NHWC x (top/left padding `pads`, either may
    be negative), or None where the kernel cannot run."""
    n, _, _, c = x.shape
    total = n * oh * ow * kh * kw * c
    cols = xp.empty((n * oh * ow, kh * kw * c), x.dtype)
    if total == 0:
        return cols
    geometry = _geometry(x.shape, kh, kw, strides, dilations, pads, oh, ow)
    src = _IM2COL.format(T=_CTYPES[x.dtype], I=_index_type(max(total, x.size)), TOTAL=total,
                         **geometry)  # fmt: skip
    if not _launch(xp, "im2col", src, total, (xp.ascontiguousarray(x), cols)):
        return None
    return cols


_COL2IM = _elementwise(
    "col2im",
    "const {T}* __restrict__ dcols, {T}* __restrict__ dx",
    """
        const int ch = t % {C}; t /= {C};
        const int xx = t % {W}; t /= {W};
        const int y = t % {H};
        const idx b = t / {H};
        {T} acc = 0;
        for (int i = 0; i < {KH}; ++i) {{
            const int ty = y + {PT} - i * {DH};
            if (ty < 0 || ty % {SH} != 0 || ty / {SH} >= {OH}) continue;
            for (int j = 0; j < {KW}; ++j) {{
                const int tx = xx + {PL} - j * {DW};
                if (tx < 0 || tx % {SW} != 0 || tx / {SW} >= {OW}) continue;
                const idx row = (b * {OH} + ty / {SH}) * {OW} + tx / {SW};
                acc += dcols[row * ({KH} * {KW} * {C}) + (i * {KW} + j) * {C} + ch];
            }}
        }}
        dx[e] = acc;
""",
)


def col2im(xp, dcols, shape, kh, kw, strides, dilations, pads, oh, ow):
    """The input gradient [n, h, w, c] from the patch gradients dcols [n*oh*ow, kh*kw*c]: each
    input position sums the patch entries that read it, tap by tap in row-major order (the
    whole-array path's order of additions), or None where the kernel cannot run."""
    n, h, w, c = shape
    total = n * h * w * c
    dx = xp.empty(shape, dcols.dtype)
    if total == 0:
        return dx
    geometry = _geometry(shape, kh, kw, strides, dilations, pads, oh, ow)
    src = _COL2IM.format(T=_CTYPES[dcols.dtype], I=_index_type(max(total, dcols.size)),
                         TOTAL=total, **geometry)  # fmt: skip
    if not _launch(xp, "col2im", src, total, (xp.ascontiguousarray(dcols), dx)):
        return None
    return dx


def _tiled_pool(name: str, params: str, body: str) -> str:
    """_elementwise over a tiled pool's outputs: before `body`, `base` is the first input element
    of output element e's window; TAP in the body is tap k's offset from it (row-major)."""
    window = """
        const int in = t % {INNER}; t /= {INNER};
        const int ox = t % {OW}; t /= {OW};
        const int oy = t % {OH};
        const idx outer = t / {OH};
        const idx base = ((outer * {H} + oy * {KH}) * {W} + ox * {KW}) * {INNER} + in;
"""
    return _elementwise(name, params, window + body.replace("TAP", _TAP_OFFSET))


_TAP_OFFSET = "((k / {KW}) * {W} + k % {KW}) * {INNER}"

_MAX_POOL = _tiled_pool("max_pool", "const {T}* __restrict__ x, {T}* __restrict__ out", """
        {T} best = x[base];
        for (int k = 1; k < {KH} * {KW}; ++k) {{
            const {T} v = x[base + TAP];
            if (v > best || v != v) best = v;
        }}
        out[e] = best;
""")  # fmt: skip


def tiled_max_pool(xp, x, a1, kh, kw):
    """The max pool of x whose kh×kw windows tile its spatial axes a1, a1 + 1 exactly (a NaN in
    a window gives NaN, as the whole-array max), or None where the kernel cannot run."""
    shape = list(x.shape)
    h, w = shape[a1], shape[a1 + 1]
    inner = int(np.prod(shape[a1 + 2 :], dtype=np.int64))
    shape[a1], shape[a1 + 1] = h // kh, w // kw
    out = xp.empty(tuple(shape), x.dtype)
    if out.size == 0:
        return out
    src = _MAX_POOL.format(
        T=_CTYPES[x.dtype], I=_index_type(x.size), TOTAL=int(out.size), INNER=inner,
        OH=h // kh, OW=w // kw, H=h, W=w, KH=kh, KW=kw,
    )  # fmt: skip
    if not _launch(xp, "max_pool", src, int(out.size), (xp.ascontiguousarray(x), out)):
        return None
    return out


_MAX_POOL_GRAD = _tiled_pool(
    "max_pool_grad",
    "const {T}* __restrict__ x, const {T}* __restrict__ g,\n"
    "                                         {T}* __restrict__ dx",
    """
        {T} best = x[base];
        int pick = 0;
        if (best == best) {{
            for (int k = 1; k < {KH} * {KW}; ++k) {{
                const {T} v = x[base + TAP];
                if (v > best) {{ best = v; pick = k; }}
            }}
        }}
        const {T} gv = g[e];
        for (int k = 0; k < {KH} * {KW}; ++k)
            dx[base + TAP] = k == pick ? gv : ({T})0;
""")  # fmt: skip


def tiled_max_pool_grad(xp, x, grad, a1, kh, kw):
    """dx of a max pool whose kh×kw windows tile x's spatial axes a1, a1 + 1 exactly (x and
    grad contiguous after the call), or None where the kernel cannot run."""
    shape = x.shape
    h, w = shape[a1], shape[a1 + 1]
    inner = int(np.prod(shape[a1 + 2 :], dtype=np.int64))
    total = int(grad.size)
    dx = xp.empty(shape, grad.dtype)
    if total == 0:
        return dx
    src = _MAX_POOL_GRAD.format(
        T=_CTYPES[x.dtype], I=_index_type(x.size), TOTAL=total, INNER=inner, OH=h // kh,
        OW=w // kw, H=h, W=w, KH=kh, KW=kw,
    )  # fmt: skip
    args = (xp.ascontiguousarray(x), xp.ascontiguousarray(grad), dx)
    if not _launch(xp, "max_pool_grad", src, total, args):
        return None
    return dx
