"""The compiled product of the channels-first pointwise convolutions (kernels.pointwise,
_gemm_vec): numpy's product to float rounding, the same bits however its rows are split,
tails of rows and columns that never read or write past the operands, and an in-register
epilogue with the compiled epilogue pass's bits."""

from __future__ import annotations

import numpy as np
import pytest

from rill.exec.kernels import jit, pointwise

pytestmark = pytest.mark.skipif(
    not jit.enabled() or pointwise._mod() is None, reason="the compiled loops are off"
)

RNG = np.random.default_rng(7)

# (o, c, p): rows of whole and partial blocks of 8, columns of one vector, whole vectors and
# a partial last block (the overlapping one), a layer of MobileNetV3 and SqueezeNet's head;
# rows of x 4 KiB apart (packed blocks of b with padding after them), with a last chunk of the
# inner dimension under 8 steps (packed without it) and of more.
SHAPES = [(8, 3, 16), (7, 5, 17), (24, 16, 49), (13, 40, 196), (96, 576, 49), (1000, 64, 169),
          (5, 9, 33), (17, 1, 64), (40, 700, 1100), (9, 1300, 300), (20, 133, 1024),
          (13, 104, 2055)]  # fmt: skip


def _operands(o, c, p, dtype, special=False):
    w = RNG.standard_normal((c, o)).astype(dtype)
    x = RNG.standard_normal((c, p)).astype(dtype)
    if special:
        flat = x.reshape(-1)
        picks = RNG.choice(flat.size, max(1, flat.size // 40), replace=False)
        flat[picks] = RNG.choice(np.array([np.inf, -np.inf, np.nan, -0.0], dtype), picks.size)
    return w.T, x  # wt: the transposed view every pointwise path passes


@pytest.mark.parametrize("layout", ["transposed", "row-major"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_the_product_is_numpys_to_rounding_and_split_invariant(shape, dtype, layout):
    """wt read in place (a transposed view: a block's rows are consecutive) or packed."""
    o, c, p = shape
    wt, x = _operands(o, c, p, dtype)
    if layout == "row-major":
        wt = np.ascontiguousarray(wt)
    mod = pointwise.compiled(wt, x, np.empty((o, p), dtype))
    assert mod is not None
    # Guard cells around the output: nothing is written outside it.
    big = np.full((o + 2, p + 3), 7.0, dtype)
    out = big[1 : o + 1, 1 : p + 1]
    mod.gemm_rows(wt, x, out, pointwise._NO_BIAS[np.dtype(dtype)], 0, o, mod.RAW)
    assert (big[0] == 7).all() and (big[-1] == 7).all()
    assert (big[:, 0] == 7).all() and (big[:, p + 1 :] == 7).all()
    want = wt.astype(np.float64) @ x.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-13
    scale = np.abs(wt).astype(np.float64) @ np.abs(x).astype(np.float64)
    assert (np.abs(out - want) <= tol * scale + 1e-30).all()
    # Any split on whole blocks of rows: the same bits.
    for cut in sorted({0, min(8, o), (o // 16) * 8, o - o % 8}):
        parts = np.full((o, p), np.nan, dtype)
        mod.gemm_rows(wt, x, parts, pointwise._NO_BIAS[np.dtype(dtype)], 0, cut, mod.RAW)
        mod.gemm_rows(wt, x, parts, pointwise._NO_BIAS[np.dtype(dtype)], cut, o, mod.RAW)
        np.testing.assert_array_equal(parts, out)
    with pytest.raises(ValueError, match="mismatched"):
        mod.gemm_rows(wt, x[:, :-1], out, pointwise._NO_BIAS[np.dtype(dtype)], 0, o, mod.RAW)
    with pytest.raises(ValueError, match="bias shorter"):
        mod.gemm_rows(wt, x, out, pointwise._NO_BIAS[np.dtype(dtype)], 0, o, 1)  # Relu, no bias
    with pytest.raises(ValueError, match="one vector"):
        mod.gemm_rows(wt[:, :1], x[:1, :1], out[:, :1], pointwise._NO_BIAS[np.dtype(dtype)], 0, o,
                      mod.RAW)  # fmt: skip


def _same_bits(got, want):
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = np.uint32 if got.dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


@pytest.mark.parametrize("layout", ["transposed", "row-major"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code", [None, 0, 1, 4])
def test_a_products_columns_are_the_same_bits_whatever_their_number(layout, dtype, code):
    """The columns past the last whole block (one more block ending at the last column, a
    product of its own; or, up to half a vector of them where a's rows have unit stride,
    _thin_columns over the rows) get the bits a wider product of whole blocks gives them, its
    epilogue included, in any pieces of rows; nothing past them is written."""
    mod = pointwise._mod()
    o, c = 21, 37
    lanes = mod.VECTOR_BYTES // np.dtype(dtype).itemsize
    wt, xw = _operands(o, c, 4 * lanes, dtype, special=True)
    if layout == "row-major":
        wt = np.ascontiguousarray(wt)
    bias = RNG.standard_normal(o).astype(dtype)
    act = mod.RAW if code is None else code
    wide = np.empty((o, 4 * lanes), dtype)  # two whole blocks of two vectors
    mod.gemm_rows(wt, xw, wide, bias, 0, o, act)
    for n in range(lanes, 3 * lanes + 2):
        x = np.ascontiguousarray(xw[:, :n])
        big = np.full((o, n + 3), 7.0, dtype)
        out = big[:, :n]
        mod.gemm_rows(wt, x, out, bias, 0, o, act)
        assert (big[:, n:] == 7).all()
        _same_bits(out, wide[:, :n])
        parts = np.full((o, n), np.nan, dtype)
        mod.gemm_rows(wt, x, parts, bias, 0, 5, act)
        mod.gemm_rows(wt, x, parts, bias, 5, o, act)
        _same_bits(parts, wide[:, :n])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infinities_and_nans_propagate_as_in_numpys_product(dtype):
    wt, x = _operands(24, 32, 50, dtype, special=True)
    out = np.empty((24, 50), dtype)
    assert not pointwise.matmul(wt, x, out)
    want = np.matmul(wt, x)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(out), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(out[fin], want[fin], rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("code", [0, 1, 2, 3, 4])
def test_the_in_register_epilogue_is_the_compiled_pass_bit_for_bit(code, dtype):
    from rill.exec.kernels import _conv_loops

    wt, x = _operands(21, 12, 70, dtype, special=True)
    bias = RNG.standard_normal(21).astype(dtype)
    bias[3] = np.nan
    fused = np.empty((21, 70), dtype)
    assert pointwise.matmul(wt, x, fused, pointwise.NO_SPLIT, bias, code)
    raw = np.empty((21, 70), dtype)
    assert not pointwise.matmul(wt, x, raw, pointwise.NO_SPLIT)
    _conv_loops.bias_activation_planes(raw, bias, code, 0, 21)
    # (A NaN's sign and payload are whichever operand's the CPU kept: not compared.)
    nan = np.isnan(raw)
    np.testing.assert_array_equal(np.isnan(fused), nan)
    bits = np.uint32 if dtype == np.float32 else np.uint64
    np.testing.assert_array_equal(fused[~nan].view(bits), raw[~nan].view(bits))


def test_what_the_compiled_product_leaves_to_numpy():
    f32 = np.float32
    lanes = pointwise._mod().VECTOR_BYTES // 4  # this CPU's vector: 16, 8 or 4 float32
    wt, x = _operands(8, 4, 2 * lanes, f32)
    assert pointwise.compiled(wt, x, np.empty((8, 2 * lanes), f32)) is not None
    # Fewer columns than a vector, another dtype, mixed dtypes, strided columns.
    short = lanes - 1
    assert pointwise.compiled(wt[:, :], x[:, :short], np.empty((8, short), f32)) is None
    xi = x.astype(np.int32)
    assert pointwise.compiled(wt.astype(np.int32), xi, np.empty((8, 2 * lanes), np.int32)) is None
    assert pointwise.compiled(wt.astype(np.float64), x, np.empty((8, 2 * lanes), f32)) is None
    assert pointwise.compiled(wt, x[:, ::2], np.empty((8, lanes), f32)) is None
    # Those still get numpy's product.
    out = np.empty((8, short), f32)
    pointwise.matmul(wt, x[:, :short], out)
    np.testing.assert_array_equal(out, np.matmul(wt, x[:, :short]))


@pytest.fixture
def two_idle_cores(polling_team):
    return polling_team


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_team_split_product_has_the_one_call_bits_and_a_worker_takes_pieces(
    two_idle_cores, dtype
):
    """Through the pool's team (kernels.pointwise above TEAM_GRAIN): a polling worker takes
    some of the pieces, with no Python in the hand-off, and the bits are one call's."""
    import time

    from rill.exec.kernels import _spin

    intra_op = two_idle_cores
    wt, x = _operands(200, 96, 196, dtype)
    bias = RNG.standard_normal(200).astype(dtype)
    assert pointwise.TEAM_GRAIN <= 200 * 96 * 196
    mod = pointwise._mod()
    one = np.empty((200, 196), dtype)
    mod.gemm_rows(wt, x, one, bias, 0, 200, 4)
    served = int(intra_op._pool.team[_spin.SERVED])
    deadline = time.monotonic() + 20
    while int(intra_op._pool.team[_spin.SERVED]) == served and time.monotonic() < deadline:
        out = np.full((200, 196), np.nan, dtype)
        assert pointwise.matmul(wt, x, out, bias=bias, code=4)  # HardSwish in registers
        np.testing.assert_array_equal(out, one)
    assert int(intra_op._pool.team[_spin.SERVED]) > served, "no worker ever took a piece"
    assert intra_op._pool.team[_spin.LOCK] == 0


def test_concurrent_team_callers_each_get_their_own_product(two_idle_cores):
    """Two threads splitting products at once: one holds the team, the other runs alone;
    neither sees the other's pieces."""
    import threading

    results, errors = {}, []
    operands = {i: _operands(64 + 8 * i, 48, 100, np.float32) for i in range(2)}

    def run(i):
        try:
            wt, x = operands[i]
            want = np.matmul(wt.astype(np.float64), x.astype(np.float64))
            for _ in range(300):
                out = np.empty((wt.shape[0], 100), np.float32)
                pointwise.matmul(wt, x, out)
                if np.abs(out - want).max() > 1e-3:
                    errors.append(i)
                    return
            results[i] = True
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == {0: True, 1: True}


def test_no_team_under_a_one_thread_bound_or_on_a_pool_worker(two_idle_cores):
    from rill.exec import threads

    intra_op = two_idle_cores
    assert intra_op.team() is not None
    with threads.limits(1):  # ConfigProto(intra_op_parallelism_threads=1)
        assert intra_op.team() is None
    seen = []
    intra_op.parallel_for(2, lambda lo, hi: seen.append(intra_op.team()), max_threads=2)
    assert len(seen) == 2  # the caller's piece, and a worker's (or the caller's again)
    assert intra_op._tls.__dict__.get("worker") is None


@pytest.mark.parametrize("m, k, n", [(96, 576, 49), (40, 240, 196), (200, 96, 196)], ids=str)
def test_team_products_with_no_worker_polling_run_whole_on_the_caller(m, k, n):
    """gemm_team caps runs of rows at the threads that may take them (the caller and the
    polling workers: none here, so one run) and runs runs of columns as posted; either way the
    caller alone computes the one call's bits, and no job is posted."""
    from rill.exec.kernels import _spin

    mod = pointwise._mod()
    if mod is None:
        pytest.skip("the compiled product is off")
    wt, x = _operands(m, k, n, np.float32)
    bias = RNG.standard_normal(m).astype(np.float32)
    one = np.empty((m, n), np.float32)
    mod.gemm_rows(wt, x, one, bias, 0, m, 1)
    team = np.zeros(_spin.TEAM_CELLS, np.int64)
    assert _spin.polling(team) == 0
    out = np.full((m, n), np.nan, np.float32)
    mod.gemm_team(wt, x, out, bias, 1, 4, team, mod.piece_function(out.dtype))
    np.testing.assert_array_equal(out, one)
    assert team[_spin.SEQ] == 0 and team[_spin.LOCK] == 0
