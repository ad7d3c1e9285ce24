"""Writes packages/exec/src/rill/exec/kernels/_winograd_loops.py: the Winograd tile transforms
of conv_winograd written out as numba loops, one set per tile (a × a inputs, m × m outputs),
from the Cook-Toom matrices conv_winograd builds. Run it after changing those matrices or the
tile list: `.venv/bin/python tools/gen_winograd_loops.py`, then `ruff format` the module
(tests/exec/test_conv_winograd.py checks the written-out transforms against the matrices)."""

from __future__ import annotations

import pathlib

import numpy as np

from rill.exec.kernels.conv_winograd import _TILE_SETS, _matrices

OUT = (pathlib.Path(__file__).resolve().parents[1]
       / "packages/exec/src/rill/exec/kernels/_winograd_loops.py")  # fmt: skip

HEAD = '''"""The compiled tile transforms behind rill.exec.kernels.conv_winograd (import that module).

Written by tools/gen_winograd_loops.py from conv_winograd's matrices; do not edit by hand.

Each loop works on a range [t0, t1) of the output tiles, numbered image by image, tile row by tile
row; the innermost loops run over the channels (the contiguous axis of NHWC), which the compiler
vectorizes where a loop stores to one array (the output transforms write one transformed value a
loop: with several stores a loop, the checks that the arrays do not overlap outgrew the
vectorizer's limit and the loops ran scalar). A tile's values are summed in a fixed order, so
the bits do not depend on the threads; multiply-adds may be fused.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels._conv_loops import _epilogue

_jit = numba.njit(
    nogil=True, cache=True, boundscheck=False, error_model="numpy", fastmath={"contract"}
)
# The copy-out: no fast-math at all. It promises the unfused pass's bits, and a jitted function
# it calls (_conv_loops' _epilogue) is compiled with the flags of its first caller: compiled
# first from a contracting loop, the epilogue fused multiply-adds for every caller after.
_exact_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")
'''


TRANSPOSE = '''

@_exact_jit
def to_channels_first(src, dst, bias, act, side):  # pragma: no cover - compiled
    """dst[k, y, x] = src[y, x, k] for src [rows, w, c] (channels-last output rows made in cache)
    and dst [c, rows, w] (one image's rows of a channels-first output); where bias has elements,
    + bias[k] and then `act` (_conv_loops' epilogue, the operations of bias_activation_planes),
    or, where side [c, rows, w] has elements too, (+ bias[k]) + side, then Relu when act is 1
    (those of bias_side_activation: a residual): a fused convolution's epilogue, the same bits as
    that pass after the copy. Writing the channels-first output from the tile loops directly
    stores one value per cache line; this reads the rows back with the stores contiguous."""
    rows, w, c = src.shape
    zero, six = dst.dtype.type(0), dst.dtype.type(6)
    if bias.shape[0] == 0:
        for y in range(rows):
            for k in range(c):
                for x in range(w):
                    dst[k, y, x] = src[y, x, k]
    elif side.size:
        for y in range(rows):
            for k in range(c):
                bq = bias[k]
                for x in range(w):
                    v = (src[y, x, k] + bq) + side[k, y, x]
                    if act == 1:
                        v = v if (v != v or v > zero) else zero
                    dst[k, y, x] = v
    else:
        for y in range(rows):
            for k in range(c):
                bq = bias[k]
                for x in range(w):
                    dst[k, y, x] = _epilogue(src[y, x, k], bq, act, zero, six)
'''


def _name(c: float) -> str:
    c = float(c)
    return "k" + repr(abs(c)).replace(".", "_") if c != int(c) else f"k{abs(int(c))}"


def _expr(row, names) -> str:
    """sum_k row[k] * names[k] as source, skipping zeros."""
    parts = []
    for c, n in zip(row, names):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        term = n if abs(c) == 1 else f"{_name(c)} * {n}"
        parts.append((sign, term))
    first = ("-" if parts[0][0] == "-" else "") + parts[0][1]
    return " ".join([first] + [f"{s} {t}" for s, t in parts[1:]])


def _consts(mats, dtype_of: str) -> list[str]:
    vals = sorted({abs(float(c)) for m in mats for c in np.ravel(m) if c != 0 and abs(c) != 1})
    return [f"    {_name(v)} = {dtype_of}.dtype.type({v!r})" for v in vals]


def _lines(body: list[str]) -> str:
    return "\n".join(body) + "\n"


def gen_input(a: int, bt: np.ndarray) -> str:
    d = [f"d{k}" for k in range(a)]
    body = ["", "", "@_jit",
            f"def input_tiles_{a}(x, m, pt, pl, tw, tpi, t0, t1, v):  # pragma: no cover - compiled",
            f'    """v[xi * {a} + nu, t - t0, :] = (B^T d B)[xi, nu] for the tiles t in [t0, t1) (whole',
            f"    tile rows): d is the {a} × {a} window of x [n, h, w, c] at rows t_y * m - pt, columns",
            "    t_x * m - pl (zero outside x; 0 <= pl); tw tiles per tile row, tpi per image.",
            "",
            "    Tiles above one another share input rows: each input row's transforms (d B, per tile",
            '    column) are computed once, from a zero-padded copy of the row, for all its tiles."""',
            *_consts([bt], "v"), "    _, h, wd, c = x.shape", f"    wp = (tw - 1) * m + {a}",
            "    inside = max(0, min(wd, wp - pl))", "    prow = np.zeros((wp, c), v.dtype)",
            f"    most = (min(t1 - t0, tpi) // tw - 1) * m + {a}",
            f"    rows = np.empty((most, tw, {a}, c), v.dtype)", "    t = t0", "    while t < t1:",
            "        b = t // tpi", "        ty0 = (t - b * tpi) // tw",
            "        end = min(t1, (b + 1) * tpi)", "        ty1 = (end - b * tpi) // tw",
            "        y0 = ty0 * m - pt", f"        for r in range((ty1 - ty0 - 1) * m + {a}):",
            "            y = y0 + r", "            if y < 0 or y >= h:",
            "                rows[r] = 0", "                continue", "            for xx in range(inside):",
            "                for k in range(c):", "                    prow[pl + xx, k] = x[b, y, xx, k]",
            "            for tx in range(tw):", "                x0 = tx * m", "                for k in range(c):"]  # fmt: skip
    body += [f"                    d{j} = prow[x0 + {j}, k]" for j in range(a)]
    body += [f"                    rows[r, tx, {nu}, k] = {_expr(bt[nu], d)}" for nu in range(a)]
    body += ["        for ty in range(ty0, ty1):", "            r0 = (ty - ty0) * m",
             "            for tx in range(tw):", "                tt = b * tpi + ty * tw + tx - t0",
             f"                for nu in range({a}):", "                    for k in range(c):"]  # fmt: skip
    body += [f"                        d{i} = rows[r0 + {i}, tx, nu, k]" for i in range(a)]
    body += [
        f"                        v[{xi * a} + nu, tt, k] = {_expr(bt[xi], d)}" for xi in range(a)
    ]
    body += ["        t = end"]
    return _lines(body)


def gen_output(a: int, m: int, at: np.ndarray) -> str:
    body = ["", "", "@_jit",
            f"def output_tiles_{a}_{m}(mm, oh, ow, tw, tpi, t0, t1, out):  # pragma: no cover - compiled",
            f'    """out[n, t_y * {m} + i, t_x * {m} + j, :] = (A^T M A)[i, j] for the tiles t in [t0, t1)',
            f'    (the parts inside out), from mm [{a * a}, t1 - t0, o]."""',
            *_consts([at], "out"), "    o = out.shape[3]",
            f"    cols = np.empty(({a}, {m}, o), out.dtype)",
            "    for t in range(t0, t1):", "        b = t // tpi", "        q = t - b * tpi",
            "        ty = q // tw", f"        y0 = ty * {m}", f"        x0 = (q - ty * tw) * {m}",
            "        tt = t - t0", f"        ni = min({m}, oh - y0)", f"        nj = min({m}, ow - x0)",
            f"        for xi in range({a}):", f"            r = xi * {a}"]  # fmt: skip
    for j in range(m):
        p = [f"mm[r + {k}, tt, k]" for k in range(a)]
        body += [
            "            for k in range(o):",
            f"                cols[xi, {j}, k] = {_expr(at[j], p)}",
        ]
    body += ["        for j in range(nj):", "            xx = x0 + j"]
    for i in range(m):
        p = [f"cols[{k}, j, k]" for k in range(a)]
        loop = ["for k in range(o):", f"    out[b, y0 + {i}, xx, k] = {_expr(at[i], p)}"]
        if i:  # (a tile's first output row always lies inside out)
            body += [f"            if ni > {i}:"] + ["                " + s for s in loop]
        else:
            body += ["            " + s for s in loop]
    return _lines(body)


def gen_gradient(a: int, m: int, at: np.ndarray) -> str:
    d = [f"d{k}" for k in range(m)]
    body = ["", "", "@_jit",
            f"def gradient_tiles_{a}_{m}(dy, tw, tpi, t0, t1, z):  # pragma: no cover - compiled",
            f'    """z[xi * {a} + nu, t - t0, :] = (A dY A^T)[xi, nu] for the tiles t in [t0, t1): dY is',
            f'    the {m} × {m} tile of dy [n, oh, ow, o] (zero outside dy); the adjoint of output_tiles."""',
            *_consts([at], "z"), "    _, oh, ow, o = dy.shape",
            f"    rows = np.empty(({m}, {a}, o), z.dtype)", f"    g = np.empty(({m}, o), z.dtype)",
            "    for t in range(t0, t1):", "        b = t // tpi", "        q = t - b * tpi",
            "        ty = q // tw", f"        y0 = ty * {m}", f"        x0 = (q - ty * tw) * {m}",
            f"        for i in range({m}):", "            y = y0 + i", f"            for j in range({m}):",
            "                xx = x0 + j", "                if y < oh and xx < ow:",
            "                    for k in range(o):", "                        g[j, k] = dy[b, y, xx, k]",
            "                else:", "                    for k in range(o):",
            "                        g[j, k] = 0", "            for k in range(o):"]  # fmt: skip
    body += [f"                d{j} = g[{j}, k]" for j in range(m)]
    body += [f"                rows[i, {nu}, k] = {_expr(at[:, nu], d)}" for nu in range(a)]
    body += [
        "        tt = t - t0",
        f"        for nu in range({a}):",
        "            for k in range(o):",
    ]
    body += [f"                d{i} = rows[{i}, nu, k]" for i in range(m)]
    body += [f"                z[{xi * a} + nu, tt, k] = {_expr(at[:, xi], d)}" for xi in range(a)]
    return _lines(body)


def main() -> None:
    src = [HEAD, TRANSPOSE]
    inputs = set()
    for m, r in _TILE_SETS:
        at, _, bt = _matrices(m, r)
        a = m + r - 1
        if a not in inputs:
            inputs.add(a)
            src.append(gen_input(a, bt))
        src.append(gen_output(a, m, at))
        src.append(gen_gradient(a, m, at))
    OUT.write_text("".join(src))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
