"""Winograd convolutions F(m×m, r×r) for stride-1 3×3 and 5×5 NHWC convolutions, forward and
both gradients, when the compiled loops are on (`jit.loops()`; with RILL_JIT=0 the convolution
kernels keep their GEMM paths, the reference these results are tested against).

A Winograd convolution splits the output into m×m tiles; a tile's a×a input window (a = m+r-1)
is transformed (B^T d B), multiplied elementwise by the transformed filter (G g G^T) and
transformed back (A^T · A). The elementwise products of all tiles at one of the a² positions
are one GEMM over channels ([tiles, in] × [in, out]), so a 5×5 convolution in 4×4 tiles makes
64 products where the direct one makes 400 per 16 outputs. The filter gradient is the adjoint:
the input tiles' transforms times the output gradient's (A dY A^T), summed over tiles in a GEMM
of long inner dimension, and transformed back by G^T · G; the input gradient is the forward
convolution of the output gradient with the flipped filter.

The transform matrices are the Cook-Toom ones for the interpolation points 0, ±1, ±2, (±1/2)
and ∞, built here in float64 (the filter side carries the divisions, so the tile transforms
take only small exact coefficients). Results differ from the GEMM paths by rounding only (in
float32, about 1e-5 of the result's scale for 4×4 tiles of a 5×5 filter, 3e-6 for 2×2 tiles). Tiles are processed in blocks fixed by the
shapes, shared out over the intra-op threads; the filter gradient sums its blocks in fixed
groups, so the bits never depend on the thread count.

Channels-first forward convolutions (NCHW Conv2D and _FusedConv2D: imported ONNX models) run
the same tile loops on channels-last views of their arrays (winograd_nchw), each convolution
node holding its filter's transform while the filter stays the same. A 3×3 one on planes too
small for many 4×4 tiles (up to 12×12 at batch 1) takes 2×2 tiles, F(2×2, 3×3) (_FEW_TILES).
"""

from __future__ import annotations

import functools
import importlib

import numpy as np

from rill.exec.kernels import intra_op, jit, pointwise
from rill.exec.kernels.conv_common import balanced_step
from rill.exec.kernels.intra_op import groups_of, parallel_blocks, scratch

__all__ = ["winograd_tile", "winograd_tile_nchw", "winograd_forward", "winograd_forward_nchw",
           "winograd_nchw", "winograd_backprop_filter", "winograd_backprop_input",
           "set_enabled"]  # fmt: skip

# The tiles with compiled transforms, (m, r): F(m×m, r×r) (tools/gen_winograd_loops.py writes
# them), and the output tile size used per filter size.
_TILE_SETS = ((2, 3), (2, 5), (4, 3), (4, 5))
_TILES = {3: 4, 5: 4}
# The finite interpolation points, the first a - 1 of them for a tile of a × a inputs.
_POINTS = (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)
# Below this many multiply-adds (of the direct convolution) or channels, the transforms cost
# more than the products they save.
_MIN_WORK = 1 << 24
_MIN_CHANNELS = 16
# The work floor of a channels-first convolution whose filter transform a node holds (or makes
# on its first call, or when a filter comes twice in a row): with the transform made once, the
# tiles paid from far less work. One thread, CPU time, transform held, Winograd vs the GEMM
# path: SqueezeNet's 48→192 3×3 at 13×13 (14M multiply-adds) 245 vs 316 µs, 32→32 at 28×28
# (7.2M) 131 vs 279, 24→96 at 13×13 (3.5M) 90 vs 114.
_MIN_WORK_HELD = 1 << 21
# The bytes of transformed tiles (input and product) per block: they stay in cache between the
# input transform, the GEMMs and the output transform.
_BLOCK_BYTES = 2 << 20
_MIN_TILES = 32
# The fewest tiles in a block made only so that threads can share a small batch.
_SPLIT_TILES = 64
# The fewest output tiles (all images) of a channels-first Winograd convolution: making the
# filter's transform, or with it held (winograd_nchw). At 4 tiles of 256 channels (ResNet-18 ½'s
# last stage at batch 1) the GEMM path was faster even so, at 16 of 128 channels Winograd.
_MIN_TILES_NCHW = 128
_MIN_TILES_CACHED = 16
# A channels-first 3×3 convolution whose 4×4 output tiles would number fewer than _FEW_TILES
# (planes of up to 12×12 at batch 1) takes 2×2 tiles, F(2×2, 3×3), with 16 tile positions,
# not 36, where those reach _MIN_TILES_CACHED: each product [tiles, c] · [c, o] then reads its
# position's filter transform for 4 times as many rows. ResNet-18 ½'s last stage (256 → 256
# channels at 7×7, batch 1, the transform held): the 16 products of 16 tiles took 551-700 µs
# on one thread, 374-443 through the team, the whole convolution 760 and 530, against 950 and
# 815 on its GEMM path (one block of patches); 36 products of 4 tiles took 760-960 on one
# thread. The model: 17.9 -> 17.4 ms on one thread, 12.6 -> 10.6 with default threads (same
# process, alternating, 20 rounds: 75% and 100% won). At 14×14 (16 tiles of 4×4) the two tile
# sizes' products took the same time.
_FEW_TILES = 16
# A filter transform of at least this many filter columns (c·o) is made in _FILTER_PIECES
# pieces of input channels, over the threads of the convolution it serves.
_MIN_FILTER_SPLIT = 1024
_FILTER_PIECES = 4
# The fewest multiply-adds of a one-block convolution whose products split over threads (in
# groups of tile positions).
_MIN_PRODUCT_SPLIT = 1 << 23

_enabled = [True]


def set_enabled(on: bool) -> bool:
    """Turns the Winograd paths on or off (tests and benchmarks); returns the old setting."""
    old, _enabled[0] = _enabled[0], bool(on)
    return old


def _loops():
    if jit.loops() is None:
        return None
    return importlib.import_module("rill.exec.kernels._winograd_loops")


@functools.cache
def _matrices(m: int, r: int):
    """(A^T [m, a], G [a, r], B^T [a, a]) in float64 for F(m, r): Y = A^T [(G g) ⊙ (B^T d)]."""
    a = m + r - 1
    pts = _POINTS[: a - 1]
    at = np.zeros((m, a))
    g = np.zeros((a, r))
    for k, p in enumerate(pts):
        at[:, k] = [p**i for i in range(m)]
        f = np.prod([p - q for q in pts if q != p])
        g[k] = [p**j / f for j in range(r)]
    at[m - 1, a - 1] = 1.0
    g[a - 1, r - 1] = 1.0
    # B^T solves sum_k A^T[i, k] G[k, j] B^T[k, l] = [l == i + j] (correlation); its entries
    # are small dyadic rationals, rounded exactly.
    lhs = np.einsum("ik,kj->ijk", at, g).reshape(m * r, a)
    rhs = np.zeros((m, r, a))
    for i in range(m):
        for j in range(r):
            rhs[i, j, i + j] = 1.0
    bt = np.linalg.lstsq(lhs, rhs.reshape(m * r, a), rcond=None)[0]
    bt = np.round(bt * 64) / 64
    assert np.abs(lhs @ bt - rhs.reshape(m * r, a)).max() < 1e-9
    return at, g, bt


def winograd_tile(win, kh, kw, c, o, n, oh, ow, pads, dtype) -> int:
    """The output tile size m for a Winograd convolution of this geometry (c channels in, o out,
    an oh × ow output, the window's top-left at -pads), or 0 where the GEMM paths serve it
    (other windows, strides, dilations, dtypes, padding beyond the window; small work;
    RILL_JIT=0)."""
    return 0 if win.nchw else _tile(win, kh, kw, c, o, n, oh, ow, pads, dtype)


def winograd_tile_nchw(win, kh, kw, c, o, n, oh, ow, pads, dtype) -> int:
    """winograd_tile for a channels-first forward convolution whose filter transform is not
    held yet, which also needs _MIN_TILES_NCHW tiles: with fewer, making the filter's transform
    (a*a/r² times the filter's size) costs more than the products saved (ResNet-18 ½ at batch
    1: 196 tiles of 32 channels 2.2× faster than the GEMM path, 49 of 64 channels 1.4× slower
    when the transform is made per call, 2.4× faster when it is held)."""
    m = _tile(win, kh, kw, c, o, n, oh, ow, pads, dtype)
    return m if m and n * -(-oh // m) * -(-ow // m) >= _MIN_TILES_NCHW else 0


def winograd_nchw(win, x, w, oh, ow, pads, out, cache, epilogue=None) -> np.ndarray | None:
    """The channels-first forward convolution x [n, c, h, w] ⋆ w [r, r, c, o] into out
    [n, o, oh, ow] by Winograd tiles where it pays (winograd_forward_nchw), else None (the
    caller's GEMM path runs).

    `cache`, a two-element list kept by the caller (one per convolution node), holds per tile
    size (element 1 for 2×2 tiles, 0 for 4×4: a node serving batch 1 and batch 8 on a small
    plane takes both) the last filter seen (a copy) and its transform once made. A filter
    equal to it, element for element, reuses the transform (inference's constant filters; the
    transform cost up to a fifth of the convolution), and then _MIN_TILES_CACHED tiles
    suffice. A new filter is
    transformed at once with _MIN_TILES_NCHW tiles or on the node's first call; with fewer,
    only when it comes again (so changing filters, as in training, keep the GEMM path there).
    Below _MIN_WORK multiply-adds (down to _MIN_WORK_HELD) a new filter too is transformed
    only on the node's first call or when it comes again.

    `epilogue`: (bias [o], code, side), a fused convolution's bias and compiled activation
    (_conv_loops' epilogue codes), or with a residual `side` [n, o, oh, ow] (not empty) its
    bias, side input and Relu (code 1) or none (0), applied as each block's rows are copied
    out; done by the time a result is returned (None: not applied, the caller's GEMM path
    runs)."""
    n, c = x.shape[:2]
    r, _, _, o = w.shape
    m = _tile(win, r, w.shape[1], c, o, n, oh, ow, pads, x.dtype, _MIN_WORK_HELD)
    if m == 4 and r == 3 and n * -(-oh // m) * -(-ow // m) < _FEW_TILES:
        m = 2
    tiles = n * -(-oh // m) * -(-ow // m) if m else 0
    if tiles < _MIN_TILES_CACHED:
        return None
    key = (m, x.dtype, w.dtype, w.shape)
    slot = 1 if m == 2 else 0
    held = cache[slot]  # one read: another thread may replace it
    if held is not None and held[3] is w and held[2] == key and held[1] is not None:
        # The very array object seen before, read-only, and held by this cache: see below.
        return winograd_forward_nchw(x, w, oh, ow, pads, m, out, held[1], epilogue)
    same = held is not None and held[2] == key and np.array_equal(held[0], w)
    if same and held[1] is not None:
        u = held[1]
        # Seen twice with the same elements and read-only (a constant's view, handed out step
        # after step): from now on the object itself is the key, and the compare (0.2 ms for a
        # 3×3 256→256 filter, 0.8 ms of ResNet-18 ½'s inference) is skipped. Holding the
        # object keeps it alive, and rill changes an array in place only where nothing else
        # refers to it (resources' in-place update checks the reference counts), so a held
        # object's elements stay those compared.
        if not w.flags.writeable:
            cache[slot] = (held[0], u, key, w)
    elif same or held is None or (tiles >= _MIN_TILES_NCHW and _work(r, c, o, n, oh, ow)):
        u = _filter_tiles(w, m, x.dtype)
        cache[slot] = (held[0] if same else w.copy(), u, key, None)
    else:
        cache[slot] = (w.copy(), None, key, None)
        return None
    return winograd_forward_nchw(x, w, oh, ow, pads, m, out, u, epilogue)


def _work(r, c, o, n, oh, ow) -> bool:
    """Whether the direct convolution's multiply-adds reach _MIN_WORK (a new filter's transform
    pays in one call)."""
    return n * oh * ow * r * r * c * o >= _MIN_WORK


def _tile(win, kh, kw, c, o, n, oh, ow, pads, dtype, min_work=None) -> int:
    if not _enabled[0] or kh != kw or kh not in _TILES:
        return 0
    if not all(0 <= p < kh for p in pads):
        return 0
    if win.strides != (1, 1) or win.dilations != (1, 1) or np.dtype(dtype) not in jit.FLOATS:
        return 0
    floor = _MIN_WORK if min_work is None else min_work
    if min(c, o) < _MIN_CHANNELS or n * oh * ow * kh * kw * c * o < floor:
        return 0
    return _TILES[kh] if _loops() is not None else 0


class _Tiles:
    """The output tiles of an oh × ow convolution in tile size m, and their blocks: tile ranges
    [t0, t1) of whole images or whole tile rows of one image, fixed by the shapes (so each
    block's output rows are contiguous)."""

    def __init__(self, n, oh, ow, m, a, channels, itemsize):
        self.th, self.tw = -(-oh // m), -(-ow // m)
        self.tpi = self.th * self.tw
        self.m, self.oh, self.ow = m, oh, ow
        per_tile = a * a * channels * itemsize
        # At least _MIN_TILES rows per GEMM, however many channels.
        most = max(_MIN_TILES, _BLOCK_BYTES // per_tile)
        if self.tpi <= most:
            step = max(1, most // self.tpi)
            count = -(-n // step)
            step = balanced_step(n, -(-n // count))
            self.blocks = [(b * self.tpi, min(n, b + step) * self.tpi)
                           for b in range(0, n, step)]  # fmt: skip
        else:
            rows = max(1, most // self.tw)
            # The fewest blocks of at most that many tile rows, as even as can be: 13 + 1 rows
            # (SqueezeNet's 55×55 at 16 → 64 channels) made a block of 14 tiles, its 36
            # products mostly BLAS calls' overhead; 7 + 7: 561 -> 527 µs at batch 1.
            rows = -(-self.th // -(-self.th // rows))
            self.blocks = self._row_blocks(n, rows)
        # Too few images for two or four blocks (batch-1 inference) of _SPLIT_TILES tiles or more:
        # blocks of tile rows (of about _MIN_TILES tiles or more), so that threads share an image.
        total = n * self.tpi
        want = 4 if total >= 4 * _SPLIT_TILES else 2 if total >= 2 * _SPLIT_TILES else 1
        if len(self.blocks) < want:
            if n >= want:
                step = -(-n // want)
                self.blocks = [
                    (b * self.tpi, min(n, b + step) * self.tpi) for b in range(0, n, step)
                ]
            else:
                per_image = min(-(-want // n), max(1, self.tpi // _MIN_TILES))
                self.blocks = self._row_blocks(n, -(-self.th // per_image))

    def _row_blocks(self, n, rows):
        return [
            (b * self.tpi + r * self.tw, b * self.tpi + min(self.th, r + rows) * self.tw)
            for b in range(n)
            for r in range(0, self.th, rows)
        ]

    def out_rows(self, out: np.ndarray, t0: int, t1: int) -> np.ndarray:
        """The [rows, channels] view of out that tiles [t0, t1) write (for an epilogue)."""
        b0, b1 = t0 // self.tpi, -(-t1 // self.tpi)
        if b1 - b0 > 1 or (t0 % self.tpi == 0 and t1 - t0 == self.tpi):
            return out[b0:b1].reshape(-1, out.shape[-1])
        r0 = (t0 % self.tpi) // self.tw * self.m
        r1 = min(self.oh, ((t1 - 1) % self.tpi // self.tw + 1) * self.m)
        return out[b0, r0:r1].reshape(-1, out.shape[-1])


def _tile_buffer(slot: str, positions: int, tiles: int, channels: int, dtype) -> np.ndarray:
    """A scratch [positions, tiles', channels] array (tiles' >= tiles, odd) for the transforms
    of `tiles` tiles: the loops write one tile's `positions` rows far apart, and with an even
    tile count those rows can lie a multiple of 4 KiB apart, all in the same few sets of the L1
    cache (on the MNIST CNN one in four stores missed). An odd count spreads them."""
    count = tiles | 1
    return scratch(slot, positions * count * channels, dtype).reshape(positions, count, channels)


def winograd_forward(x, w, oh, ow, pads, m, epilogue=None) -> np.ndarray:
    """x [n, h, w, c] ⋆ w [r, r, c, o] → [n, oh, ow, o], stride 1, the window's top-left at
    (-pads[0], -pads[1]); epilogue(rows) applied to each block's output rows in place."""
    x = np.ascontiguousarray(x)
    out = np.empty((x.shape[0], oh, ow, w.shape[3]), x.dtype)
    return _forward(x, w, oh, ow, pads, m, out, epilogue)


def winograd_forward_nchw(x, w, oh, ow, pads, m, out=None, u=None, epilogue=None) -> np.ndarray:
    """x [n, c, h, w] ⋆ w [r, r, c, o] → [n, o, oh, ow] (into `out` when given), stride 1, the
    window's top-left at (-pads[0], -pads[1]); u: w's transform when already made; epilogue:
    (bias [o], activation code, side) applied as the rows are copied out (winograd_nchw). The
    tile
    loops read and write the channels-first arrays through channels-last views (strided, no
    transposing copies): a tile row's reads and writes span a few input or output rows per
    channel, which stay in cache."""
    x = np.ascontiguousarray(x)
    if out is None:
        out = np.empty((x.shape[0], w.shape[3], oh, ow), x.dtype)
    if epilogue is None:
        epilogue = (np.empty(0, x.dtype), 0, np.empty((0, 0, 0, 0), x.dtype))
    bias, code, side = epilogue
    if _pieces_nchw(x, w, oh, ow, pads, m, out, u, bias, code, side):
        return out
    _forward(x.transpose(0, 2, 3, 1), w, oh, ow, pads, m, out.transpose(0, 2, 3, 1), u=u,
             out_cf=(out, bias, code, side))  # fmt: skip
    return out


def _team_module():
    """_winograd_team, or None where it does not run (as pointwise._mod)."""
    return jit.direct("_winograd_team")


# The pieces of tile rows per image of a one-block channels-first convolution (at most): each
# piece transforms two more input rows than its tiles' share.
_PIECES_NCHW = 4
# The most bytes of tile buffers (input and product) of one image whose convolution runs this
# way though _Tiles gives it several blocks: SqueezeNet's 55×55 16 → 64 (2.3 MB) and ResNet-18
# ½'s 56×56 32 → 32 (1.8 MB), 2 blocks each, went over the Python pool a block a thread; here,
# at batch 1 with default threads, SqueezeNet 3.24 -> 3.16 ms and ResNet-18 ½ 3.97 -> 3.74 (one
# thread: 4.92 -> 4.91, 5.62 -> 5.39), same process, alternating.
_PIECES_BYTES = 4 << 20


def _pieces_nchw(x, w, oh, ow, pads, m, out, u, bias, code, side) -> bool:
    """A channels-first convolution of one block of tiles (a small batch of small images), or
    of one image's tiles whose buffers hold at most _PIECES_BYTES, with its transforms split
    too: where a worker polls, the input tiles' transforms in pieces of whole tile rows
    through the pool's team (_winograd_team), then the per-position products (a piece per
    position), then the output tiles' transforms and copy-out in the same pieces; else the
    transforms on this thread and the products over the threads from _MIN_PRODUCT_SPLIT
    multiply-adds. The same bits however it is split (each tile and product row computed by
    the same code), and the same as _forward's. False where it does not apply (several blocks
    of a batch or of a large image, the compiled product off, fewer output channels than a
    vector): _forward runs."""
    n, c = x.shape[:2]
    r, _, _, o = w.shape
    a = m + r - 1
    dt = x.dtype
    mod = _team_module()
    if mod is None or (a, m) not in ((4, 2), (6, 4), (6, 2), (8, 4)) or w.dtype != dt:
        return False
    # The products' operands as pointwise.compiled sees them (dtype, a vector of columns).
    wk = np.ascontiguousarray(w[0, 0])
    if pointwise.compiled(np.empty((1, c), dt), wk, np.empty((1, o), dt)) is None:
        return False
    tiles = _Tiles(n, oh, ow, m, a, c + o, dt.itemsize)
    several = n > 1 or n * tiles.tpi * a * a * (c + o) * dt.itemsize > _PIECES_BYTES
    if (len(tiles.blocks) != 1 and several) or out.size == 0:
        return False
    if u is None:
        u = scratch("wino_u", a * a * c * o, dt).reshape(a * a, c, o)
        u = _filter_tiles(w, m, dt, u, n * tiles.tpi * a * a * c * o)
    total = n * tiles.tpi
    v = _tile_buffer("wino_v", a * a, total, c, dt)
    mm = _tile_buffer("wino_m", a * a, total, o, dt)
    side = np.ascontiguousarray(side) if side.size else np.empty(0, dt)
    bias = np.ascontiguousarray(bias)
    work = total * a * a * c * o
    like = dt.type(0)
    team = intra_op.team() if work >= pointwise.TEAM_GRAIN else None
    # Pieces of tile rows where the team runs them, else whole images (the same bits).
    per = min(tiles.th, max(1, _PIECES_NCHW // n)) if team is not None else 1
    g = mod.args(x, v, mm, out, bias, side, code, m, pads, a, tiles.tw, tiles.th, per)
    pieces = n * per
    if team is not None:
        mod.run_team(g, mod.INPUT, pieces, team, mod.piece_function(dt))
    else:
        mod.run(g, mod.INPUT, 0, pieces, like)
    if not pointwise.stack(v[:, :total], u, mm[:, :total], _MIN_PRODUCT_SPLIT):
        np.matmul(v[:, :total], u, out=mm[:, :total])  # (not reached: checked above)
    if team is not None:
        mod.run_team(g, mod.OUTPUT, pieces, team, mod.piece_function(dt))
    else:
        mod.run(g, mod.OUTPUT, 0, pieces, like)
    return True


def _filter_tiles(w, m, dt, out=None, work: int = 0) -> np.ndarray:
    """U [a*a, c, o] = G w G^T for w [r, r, c, o], computed in float64, in dtype dt (into `out`
    when given), in fixed pieces of input channels shared out over the intra-op threads as part
    of a convolution of `work` multiply-adds (serial for 0).

    On the MNIST CNN it took 0.35 ms of a 5 ms convolution, before the tiles' threads start:
    fresh float64 temporaries page-faulted on every call, so they live in each thread's scratch
    memory. Each output element is the same two float64 products whatever the pieces."""
    r, _, c, o = w.shape
    a = m + r - 1
    g = _matrices(m, r)[1]
    if out is None:
        out = np.empty((a * a, c, o), dt)
    pieces = groups_of(c, _FILTER_PIECES if c * o >= _MIN_FILTER_SPLIT else 1)

    def piece(k):
        c0, c1 = pieces[k].start, pieces[k].stop
        cols = (c1 - c0) * o
        w64 = scratch("wino_w64", r * r * cols, np.float64).reshape(r, r, c1 - c0, o)
        np.copyto(w64, w[:, :, c0:c1])
        t = scratch("wino_t64", r * a * cols, np.float64).reshape(r, a, cols)
        np.matmul(g, w64.reshape(r, r, cols), out=t)  # rows i, G·cols
        u64 = scratch("wino_u64", a * a * cols, np.float64).reshape(a, a * cols)
        np.matmul(g, t.reshape(r, a * cols), out=u64)
        np.copyto(out[:, c0:c1], u64.reshape(a * a, c1 - c0, o))

    parallel_blocks(len(pieces), piece, work)
    return out


def _forward(x, w, oh, ow, pads, m, out, epilogue=None, u=None, out_cf=None) -> np.ndarray:
    """winograd_forward into out [n, oh, ow, o] (x and out may be strided views; epilogue only
    for a contiguous out); u: the filter's transform when already made. out_cf: (out's
    channels-first array [n, o, oh, ow] (out its transposed view), bias, activation code, side
    input of out's shape or empty): each
    block's output rows are then made channels-last in scratch memory and copied into it
    (to_channels_first, which adds the bias, when it has elements, and activates) — the tile
    loops' stores into the channels-first array directly touched one cache line per value
    (SqueezeNet's 16→64 3×3 at 55×55, 182 tiles: 244 → 217 µs; 64→256 at 13×13: 61 → 36)."""
    loops = _loops()
    n, h, wd, c = x.shape
    r, _, _, o = w.shape
    a = m + r - 1
    dt = x.dtype
    if u is None:
        u = scratch("wino_u", a * a * c * o, dt).reshape(a * a, c, o)
        u = _filter_tiles(w, m, dt, u, n * -(-oh // m) * -(-ow // m) * a * a * c * o)
    tiles = _Tiles(n, oh, ow, m, a, c + o, dt.itemsize)
    input_tiles = getattr(loops, f"input_tiles_{a}")
    output_tiles = getattr(loops, f"output_tiles_{a}_{m}")
    if out_cf is not None:
        output_tiles = functools.partial(_output_cf, loops, output_tiles, m, out_cf)
    if len(tiles.blocks) == 1:
        # One block (a small batch of small images: ResNet-18 ½'s 7×7 stage at batch 8, 32
        # tiles, 3-4 ms a convolution): its a·a products, one [tiles, c] x [c, o] product
        # each, over the threads (the transforms, a tenth of the work, on this thread). The
        # compiled products (pointwise.stack) go through the pool's team where a worker polls,
        # a piece per position, else over parallel_for from _MIN_PRODUCT_SPLIT multiply-adds;
        # each is the same bits on any thread. Where they do not run, each is a BLAS call
        # (numpy's loop over a stack), in fixed groups of positions: the same calls as one
        # stacked matmul, so the same bits on any number of threads.
        t0, t1 = tiles.blocks[0]
        v = _tile_buffer("wino_v", a * a, t1 - t0, c, dt)
        input_tiles(x, m, pads[0], pads[1], tiles.tw, tiles.tpi, t0, t1, v)
        mm = _tile_buffer("wino_m", a * a, t1 - t0, o, dt)
        # Compiled, through the pool's team where a worker polls (a piece per position).
        if not pointwise.stack(v[:, : t1 - t0], u, mm[:, : t1 - t0], _MIN_PRODUCT_SPLIT):
            groups = groups_of(a * a)

            def product(g):
                p = slice(groups[g].start, groups[g].stop)
                np.matmul(v[p, : t1 - t0], u[p], out=mm[p, : t1 - t0])

            work = n * tiles.tpi * a * a * c * o
            parallel_blocks(len(groups), product, work if work >= _MIN_PRODUCT_SPLIT else 0)
        output_tiles(mm, oh, ow, tiles.tw, tiles.tpi, t0, t1, out)
        if epilogue is not None:
            epilogue(tiles.out_rows(out, t0, t1))
        return out

    def one(i):
        t0, t1 = tiles.blocks[i]
        v = _tile_buffer("wino_v", a * a, t1 - t0, c, dt)
        input_tiles(x, m, pads[0], pads[1], tiles.tw, tiles.tpi, t0, t1, v)
        mm = _tile_buffer("wino_m", a * a, t1 - t0, o, dt)
        if not pointwise.stack(v[:, : t1 - t0], u, mm[:, : t1 - t0], pointwise.NO_SPLIT):
            np.matmul(v[:, : t1 - t0], u, out=mm[:, : t1 - t0])
        output_tiles(mm, oh, ow, tiles.tw, tiles.tpi, t0, t1, out)
        if epilogue is not None:
            epilogue(tiles.out_rows(out, t0, t1))

    parallel_blocks(len(tiles.blocks), one, n * tiles.tpi * a * a * c * o)
    return out


def _output_cf(loops, output_tiles, m, cf, mm, oh, ow, tw, tpi, t0, t1, out) -> None:
    """output_tiles(mm, oh, ow, tw, tpi, t0, t1, out) for the transposed view `out` of the
    channels-first array of cf = (array, bias, code, side), through channels-last scratch rows:
    the block's tiles (whole images, or whole tile rows of one image) renumbered from its first
    image and tile row."""
    out_cf, bias, code, side = cf
    b0, ty0 = t0 // tpi, (t0 % tpi) // tw
    b1 = -(-t1 // tpi)
    base = b0 * tpi + ty0 * tw
    y0 = ty0 * m
    y1 = oh if b1 - b0 > 1 or t1 % tpi == 0 else min(oh, ((t1 % tpi) // tw) * m)
    rows = scratch("wino_rows", (b1 - b0) * (y1 - y0) * ow * out.shape[3], out.dtype)
    rows = rows.reshape(b1 - b0, y1 - y0, ow, out.shape[3])
    output_tiles(mm, y1 - y0, ow, tw, tpi, t0 - base, t1 - base, rows)
    for i in range(b1 - b0):
        part = side[b0 + i, :, y0:y1] if side.size else side.reshape(0, 0, 0)  # none
        loops.to_channels_first(rows[i], out_cf[b0 + i, :, y0:y1], bias, code, part)


def winograd_backprop_input(dy, w, h, wd, pads, m) -> np.ndarray:
    """d(loss)/d(input) [n, h, wd, c] of a stride-1 convolution: dy [n, oh, ow, o] ⋆ the
    flipped filter [r, r, o, c], the window's top-left at (pads - (r - 1))."""
    r = w.shape[0]
    wf = w[::-1, ::-1].transpose(0, 1, 3, 2)
    return winograd_forward(dy, wf, h, wd, (r - 1 - pads[0], r - 1 - pads[1]), m)


def winograd_backprop_filter(x, dy, r, pads, m) -> np.ndarray:
    """d(loss)/d(filter) [r, r, c, o] of a stride-1 convolution of x [n, h, w, c] giving dy
    [n, oh, ow, o]: per tile position, the input tiles' transforms (B^T d B) times the output
    gradient's (A dY A^T), summed over tiles (fixed groups of blocks, in order), then G^T · G."""
    loops = _loops()
    x = np.ascontiguousarray(x)
    dy = np.ascontiguousarray(dy)
    n, h, wd, c = x.shape
    _, oh, ow, o = dy.shape
    a = m + r - 1
    g = _matrices(m, r)[1]
    dt = x.dtype
    tiles = _Tiles(n, oh, ow, m, a, c + o, dt.itemsize)
    groups = groups_of(len(tiles.blocks))
    # The calling thread's scratch memory, written by whichever threads run the groups.
    input_tiles = getattr(loops, f"input_tiles_{a}")
    gradient_tiles = getattr(loops, f"gradient_tiles_{a}_{m}")
    parts = scratch("wino_parts", len(groups) * a * a * c * o, dt).reshape(len(groups), a * a, c, o)

    def one(k):
        acc, tmp = parts[k], None
        for i in groups[k]:
            t0, t1 = tiles.blocks[i]
            v = _tile_buffer("wino_v", a * a, t1 - t0, c, dt)
            input_tiles(x, m, pads[0], pads[1], tiles.tw, tiles.tpi, t0, t1, v)
            z = _tile_buffer("wino_m", a * a, t1 - t0, o, dt)
            gradient_tiles(dy, tiles.tw, tiles.tpi, t0, t1, z)
            if tmp is None:
                np.matmul(v[:, : t1 - t0].transpose(0, 2, 1), z[:, : t1 - t0], out=acc)
                tmp = scratch("wino_du", acc.size, dt).reshape(acc.shape)
            else:
                np.matmul(v[:, : t1 - t0].transpose(0, 2, 1), z[:, : t1 - t0], out=tmp)
                acc += tmp

    parallel_blocks(len(groups), one, n * tiles.tpi * a * a * c * o)
    # The groups' sums added in order, then G^T · du · G in float64, in fixed pieces of input
    # channels over the threads (temporaries in each thread's scratch memory: fresh ones
    # page-fault).
    dw = np.empty((r, r, c, o), dt)
    pieces = groups_of(c, _FILTER_PIECES if c * o >= _MIN_FILTER_SPLIT else 1)

    def finish(k):
        c0, c1 = pieces[k].start, pieces[k].stop
        cols = (c1 - c0) * o
        acc = parts[0][:, c0:c1]  # summed in place, in the gradient's dtype
        for j in range(1, len(groups)):
            acc += parts[j][:, c0:c1]
        du = scratch("wino_du64", a * a * cols, np.float64).reshape(a * a, c1 - c0, o)
        np.copyto(du, acc)
        t = scratch("wino_t64", r * a * cols, np.float64).reshape(r, a * cols)
        np.matmul(g.T, du.reshape(a, a * cols), out=t)  # G^T · rows
        dw64 = scratch("wino_w64", r * r * cols, np.float64).reshape(r, r, cols)
        np.matmul(g.T, t.reshape(r, a, cols), out=dw64)  # · G on the columns
        np.copyto(dw[:, :, c0:c1], dw64.reshape(r, r, c1 - c0, o))

    parallel_blocks(len(pieces), finish, n * tiles.tpi * a * a * c * o)
    return dw
