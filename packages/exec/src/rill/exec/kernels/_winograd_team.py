"""The tile transforms of a channels-first Winograd convolution's one block of tiles in pieces
of whole tile rows, run by the intra-op pool's team (or on the calling thread).

At batch 1 a convolution of a small image is one block of tiles (conv_winograd._Tiles): its
products split over the team, but its transforms, once the products were compiled half of its
time, ran on the calling thread. Here they split too, in two phases around the products: the
input tiles' transforms (input_tiles_a) of each piece's tiles, then, after the products, its
output tiles' (output_tiles_a_m, to channels-last rows, then to_channels_first with the fused
epilogue). Pieces of a few tiles each would have made the products' row blocks mostly padding,
so the products stay whole, between the phases (conv_winograd).

The arrays are passed as addresses and sizes (int64 cells, as a team piece takes them), and
every caller, the team's C piece function or `run` on a thread, rebuilds them the same way and
calls the same compiled `_pieces`: each tile and output value is computed by the same code
whichever piece and thread computes it, so the bits do not depend on the split. The input rows
a piece shares with the piece above are transformed by both.
"""

from __future__ import annotations

import numba
import numpy as np

from rill.exec.kernels import _winograd_loops as W
from rill.exec.kernels._spin import PIECE_SIG, array_at, team_run

_jit = numba.njit(nogil=True, cache=True, boundscheck=False, error_model="numpy")

__all__ = ["ARGS", "INPUT", "OUTPUT", "args", "run", "run_team", "piece_function"]

# The cells of a convolution's arguments: addresses of x [n, c, h, w], the tile buffers
# v [a·a, tv, c] and mm [a·a, tm, o], out [n, o, oh, ow], bias [nb], side [ns] (empty, or out's
# shape); sizes; the activation code, the tile geometry, the pieces per image and the phase.
(_X, _V, _MM, _OUT, _BIAS, _SIDE, _N, _C, _H, _W, _O, _OH, _OW, _A, _M, _PT, _PL, _TV, _TM,
 _NB, _NS, _CODE, _TW, _TH, _PER, _PHASE, _ISZ) = range(27)  # fmt: skip
ARGS = 28
# The phases: the input tiles' transforms, and the output tiles' (the products between them).
INPUT, OUTPUT = 0, 1


def args(x, v, mm, out, bias, side, code, m, pads, a, tw, th, per_image) -> np.ndarray:
    """The cells for `run` / `run_team` (the arrays must stay alive while they run; x, out,
    bias and side C-contiguous, v and mm whole tile buffers [a·a, tiles', channels])."""
    n, c, h, w = x.shape
    o, oh, ow = out.shape[1:]
    cells = np.zeros(ARGS, np.int64)
    for i, arr in ((_X, x), (_V, v), (_MM, mm), (_OUT, out), (_BIAS, bias), (_SIDE, side)):
        cells[i] = arr.ctypes.data
    cells[_N], cells[_C], cells[_H], cells[_W], cells[_O] = n, c, h, w, o
    cells[_OH], cells[_OW], cells[_A], cells[_M] = oh, ow, a, m
    cells[_PT], cells[_PL], cells[_TV], cells[_TM] = pads[0], pads[1], v.shape[1], mm.shape[1]
    cells[_NB], cells[_NS], cells[_CODE] = bias.size, side.size, code
    cells[_TW], cells[_TH], cells[_PER] = tw, th, per_image
    cells[_ISZ] = x.itemsize
    return cells


@_jit
def _from(addr, positions, tiles, channels, like):  # pragma: no cover - compiled
    """A tile buffer [positions, tiles, channels]'s view from tile s on, where addr is the
    address of its element [0, s, 0]: an array of the buffer's strides typed contiguous
    (the tile loops vectorize over the channels only for such arrays; a slice's view, of
    unknown strides, ran them 3-4 times as long). Its last position's rows past the buffer's
    end are never touched: the loops reach tiles [0, s1 - s) of each position only."""
    return array_at(addr, positions * tiles * channels, like).reshape((positions, tiles, channels))


@_jit
def _pieces(g, p0, p1, like):  # pragma: no cover - compiled
    n, c, h, w, o = g[_N], g[_C], g[_H], g[_W], g[_O]
    oh, ow, a, m = g[_OH], g[_OW], g[_A], g[_M]
    tw, th, per = g[_TW], g[_TH], g[_PER]
    tpi = tw * th
    x = array_at(g[_X], n * c * h * w, like).reshape((n, c, h, w)).transpose(0, 2, 3, 1)
    isz = g[_ISZ]
    out = array_at(g[_OUT], n * o * oh * ow, like).reshape((n, o, oh, ow))
    bias = array_at(g[_BIAS], g[_NB], like)
    side = array_at(g[_SIDE], g[_NS], like)
    for p in range(p0, p1):
        b, q = p // per, p % per
        ty0, ty1 = th * q // per, th * (q + 1) // per
        if ty1 <= ty0:
            continue
        s0, s1 = b * tpi + ty0 * tw, b * tpi + ty1 * tw
        if g[_PHASE] == 0:  # the input tiles' transforms
            vp = _from(g[_V] + s0 * c * isz, a * a, g[_TV], c, like)
            if a == 6:
                W.input_tiles_6(x, m, g[_PT], g[_PL], tw, tpi, s0, s1, vp)
            elif a == 4:
                W.input_tiles_4(x, m, g[_PT], g[_PL], tw, tpi, s0, s1, vp)
            else:
                W.input_tiles_8(x, m, g[_PT], g[_PL], tw, tpi, s0, s1, vp)
            continue
        # The output tiles, renumbered from the piece's first tile row (as one image of
        # y1 - y0 rows), to channels-last rows, then copied out with the epilogue.
        mp = _from(g[_MM] + s0 * o * isz, a * a, g[_TM], o, like)
        y0, y1 = ty0 * m, min(oh, ty1 * m)
        rows = np.empty((1, y1 - y0, ow, o), out.dtype)
        if a == 8:
            W.output_tiles_8_4(mp, y1 - y0, ow, tw, tpi, 0, s1 - s0, rows)
        elif a == 4:
            W.output_tiles_4_2(mp, y1 - y0, ow, tw, tpi, 0, s1 - s0, rows)
        elif m == 4:
            W.output_tiles_6_4(mp, y1 - y0, ow, tw, tpi, 0, s1 - s0, rows)
        else:
            W.output_tiles_6_2(mp, y1 - y0, ow, tw, tpi, 0, s1 - s0, rows)
        if side.size:
            part = side.reshape((n, o, oh, ow))[b, :, y0:y1]
        else:
            part = side.reshape((0, 0, 0))
        W.to_channels_first(rows[0], out[b, :, y0:y1], bias, g[_CODE], part)


@_jit
def run(g, phase, p0, p1, like):  # pragma: no cover - compiled
    """Pieces [p0, p1) of `phase` (INPUT, OUTPUT) on the calling thread (like: a scalar of the
    arrays' type)."""
    g[_PHASE] = phase
    _pieces(g, p0, p1, like)


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _piece32(argp, p):  # pragma: no cover - compiled
    _pieces(numba.carray(argp, ARGS), p, p + 1, np.float32(0))


@numba.cfunc(PIECE_SIG, nopython=True, cache=True, error_model="numpy")
def _piece64(argp, p):  # pragma: no cover - compiled
    _pieces(numba.carray(argp, ARGS), p, p + 1, np.float64(0))


def piece_function(dtype) -> int:
    """The address of the team piece function for `dtype` (float32 or float64)."""
    return (_piece32 if np.dtype(dtype).itemsize == 4 else _piece64).address


@_jit
def run_team(g, phase, pieces, team, fn):  # pragma: no cover - compiled
    """Every piece of `phase`, through the team (_spin.team_run; fn: piece_function(dtype))."""
    g[_PHASE] = phase
    team_run(team, fn, g, pieces)
