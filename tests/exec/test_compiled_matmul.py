"""MatMul, BatchMatMulV2 and the Winograd convolutions' stacked products through the compiled
product (pointwise.product / pointwise.stack, _gemm_vec), and a row times a transposed matrix
and 1-4 rows times a transposed matrix as dot products of rows (pointwise.row_dots): numpy's
product to float rounding, the same bits on any number of threads and through the pool's team,
and numpy's own product where neither runs (5-7 rows, a transposed right operand of more
rows, another dtype)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import _gemm_vec, _spin, conv_winograd, intra_op, jit, pointwise
from rill.exec.testing import run_kernel

pytestmark = pytest.mark.skipif(
    not jit.enabled() or pointwise._mod() is None,
    reason="the compiled product is off (RILL_JIT=0 or RILL_CONV_DIRECT=0)",
)

RNG = np.random.default_rng(4242)
_TOL = {np.float32: 2e-6, np.float64: 1e-14}


def _run(op_type, x, y, **attrs):
    with rg.Graph().as_default() as g:
        a = rg.placeholder(rg.as_dtype(x.dtype))
        b = rg.placeholder(rg.as_dtype(y.dtype))
        op = g.create_op(op_type, [a, b], attrs)
        (out,) = run_kernel(op, x, y)
    return out


def _matmul(x, y, transpose_a=False, transpose_b=False):
    return _run("MatMul", x, y, transpose_a=transpose_a, transpose_b=transpose_b)


def _bmm(x, y):
    return _run("BatchMatMulV2", x, y, adj_x=False, adj_y=False)


def _close(got, a, b):
    """got is a · b to float rounding: within a bound scaled by |a|·|b| per element."""
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    scale = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    tol = _TOL[got.dtype.type] * max(8, a.shape[-1])
    assert (np.abs(got - want) <= tol * scale + 1e-300).all()


@pytest.fixture
def watched(monkeypatch, idle_cores):
    """The compiled entry points called (by name), with the team off unless a test asks for
    it; and `cores(n)`: n idle cores and a pool of n threads."""
    calls = []
    for name in ("gemm_rows", "gemm_team", "gemm_stack", "gemm_stack_team"):
        real = getattr(_gemm_vec, name)

        def watch(*args, _real=real, _name=name):
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(_gemm_vec, name, watch)

    def cores(n):
        idle_cores(n)
        calls.clear()
        return calls

    return cores


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m, k, n, transpose_a",
    [(197, 192, 768, False), (64, 1024, 256, False), (40, 700, 1100, False),
     (9, 300, 17, False), (300, 64, 513, True), (130, 40, 48, True)],
    ids=str,
)  # fmt: skip
def test_matmul_is_numpys_to_rounding_and_the_same_bits_on_any_thread_count(
    watched, monkeypatch, dtype, m, k, n, transpose_a
):
    monkeypatch.setattr(intra_op, "team", lambda: None)
    x = RNG.standard_normal((k, m) if transpose_a else (m, k)).astype(dtype)
    y = RNG.standard_normal((k, n)).astype(dtype)
    a = x.T if transpose_a else x
    watched(1)
    one = _matmul(x, y, transpose_a=transpose_a)
    assert one.dtype == dtype and one.flags.c_contiguous
    _close(one, a, y)
    for cores in (2, 4):
        calls = watched(cores)
        assert np.array_equal(_matmul(x, y, transpose_a=transpose_a), one)
        assert calls and set(calls) == {"gemm_rows"}
        if m * k * n >= threads.SPLIT_GRAIN:
            assert len(calls) == min(cores, -(-m // _gemm_vec.CO))  # row pieces on threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs, n", [((1, 197, 192), 576), ((8, 64, 256), 1024), ((2, 3, 30, 16), 70)],
                         ids=str)  # fmt: skip
def test_a_stack_times_one_matrix_is_one_compiled_product(watched, monkeypatch, dtype, xs, n):
    """x [..., m, k] @ w [k, n] (an imported Linear layer): one [rows, k] x [k, n] product."""
    monkeypatch.setattr(intra_op, "team", lambda: None)
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((xs[-1], n)).astype(dtype)
    watched(1)
    one = _bmm(x, w)
    assert one.shape == (*xs[:-1], n) and one.dtype == dtype
    _close(one.reshape(-1, n), x.reshape(-1, xs[-1]), w)
    calls = watched(2)
    assert np.array_equal(_bmm(x, w), one) and set(calls) == {"gemm_rows"}


def test_products_through_the_team_are_the_unsplit_bits(watched, monkeypatch, polling_team):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    xs = rng.standard_normal((1, 197, 192)).astype(np.float32)
    ws = rng.standard_normal((192, 768)).astype(np.float32)
    runs = [(_matmul(x, w), _bmm(xs, ws)) for _ in range(10)]
    calls = watched(2)
    runs = [(_matmul(x, w), _bmm(xs, ws)) for _ in range(10)]
    assert "gemm_team" in calls
    monkeypatch.setattr(intra_op, "team", lambda: None)
    one = (_matmul(x, w), _bmm(xs, ws))
    for got in runs:
        assert np.array_equal(got[0], one[0]) and np.array_equal(got[1], one[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m, k, n",
    [(1, 1024, 1000), (1, 576, 1024), (1, 37, 5), (1, 64, 1), (4, 3, 300), (3, 130, 7),
     (4, 1280, 64), (2, 65, 33)],
    ids=str,
)  # fmt: skip
def test_a_few_rows_times_a_transposed_matrix_are_dot_products(monkeypatch, dtype, m, k, n):
    """[m, k] x [n, k]ᵀ for 1-4 rows (a classifier head at batch 1-4): _gemm_vec.row_dots,
    numpy's product to rounding, each element's bits the same whatever run of w's rows
    computes it and however many rows x has."""
    monkeypatch.setattr(intra_op, "team", lambda: None)
    calls = []
    real = _gemm_vec.row_dots
    monkeypatch.setattr(_gemm_vec, "row_dots", lambda *a: calls.append(a[3:]) or real(*a))
    x = RNG.standard_normal((m, k)).astype(dtype)
    w = RNG.standard_normal((n, k)).astype(dtype)
    got = _matmul(x, w, transpose_b=True)
    assert calls == [(0, n)] and got.shape == (m, n) and got.dtype == dtype
    _close(got, x, w.T)
    pieces = np.full((m, n), np.nan, dtype)
    for j in range(0, n, 3):  # runs of 3 rows of w, as a piece would take them
        real(x, w, pieces, j, j + 3)
    assert np.array_equal(pieces, got)
    for i in range(m):  # each row of x alone: the same bits
        assert np.array_equal(_matmul(x[i : i + 1], w, transpose_b=True), got[i : i + 1])
    # transpose_a: one row read through a transposed view, the same products (rows of x not
    # contiguous: numpy's product)
    other = _matmul(np.ascontiguousarray(x.T), w, True, True)
    assert np.array_equal(other, got) if m == 1 else _close(other, x, w.T) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_few_rows_times_a_transposed_matrix_through_the_team_are_the_unsplit_bits(
    monkeypatch, polling_team, dtype
):
    calls = []
    real = _gemm_vec.row_dots_team
    monkeypatch.setattr(_gemm_vec, "row_dots_team", lambda *a: calls.append(1) or real(*a))
    x = RNG.standard_normal((3, 1024)).astype(dtype)
    w = RNG.standard_normal((1000, 1024)).astype(dtype)
    runs = [_matmul(x, w, transpose_b=True) for _ in range(10)]
    assert calls
    monkeypatch.setattr(intra_op, "team", lambda: None)
    one = _matmul(x, w, transpose_b=True)
    for got in runs:
        assert np.array_equal(got, one)


def test_what_the_compiled_product_leaves_to_numpy(watched):
    """A few rows (a classifier head at batch 1-7), a transposed right operand (a gradient's
    dy · wᵀ, an imported Gemm's transB), integers: numpy's product, as before."""
    calls = watched(1)
    x = RNG.standard_normal((7, 300)).astype(np.float32)
    w = RNG.standard_normal((300, 64)).astype(np.float32)
    assert np.array_equal(_matmul(x, w), np.matmul(x, w)) and not calls
    wt = np.ascontiguousarray(w.T)
    x2 = RNG.standard_normal((64, 300)).astype(np.float32)
    assert np.array_equal(_matmul(x2, wt, transpose_b=True), np.matmul(x2, wt.T)) and not calls
    xi = RNG.integers(-5, 5, (16, 20)).astype(np.int32)
    wi = RNG.integers(-5, 5, (20, 32)).astype(np.int32)
    assert np.array_equal(_matmul(xi, wi), xi @ wi) and not calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m, k, n, pieces, act, columns",
    [
        (64, 256, 1024, 4, _gemm_vec.RAW, True),  # a GPT-2 MLP's product: runs of columns
        (16, 40, 70, 2, _gemm_vec.RAW, True),  # ragged: the last run ends in a partial block
        (9, 17, 200, 3, 0, True),  # a bias and Relu, uneven runs, a partial block of rows
        (24, 30, 40, 8, _gemm_vec.RAW, False),  # fewer blocks of columns than pieces: rows
        (96, 50, 49, 4, 2, False),  # more rows than columns: runs of rows
    ],
)
def test_a_product_through_the_team_in_runs_of_rows_or_columns_is_the_unsplit_bits(
    dtype, polling_team, m, k, n, pieces, act, columns
):
    """gemm_team cuts a product with no more rows than columns (and a piece's worth of blocks
    of columns) in runs of whole blocks of columns, the last to the end, each a product of its
    own; else in runs of whole blocks of rows. Both are one gemm_rows call's bits."""
    a = RNG.standard_normal((k + 3, m)).astype(dtype)[:k].T  # a strided view of a's rows
    b = RNG.standard_normal((k, n)).astype(dtype)
    bias = RNG.standard_normal(m).astype(dtype)
    one = np.full((m, n), np.nan, dtype)
    _gemm_vec.gemm_rows(a, b, one, bias, 0, m, act)
    if act == _gemm_vec.RAW:
        _close(one, a, b)
    v = _gemm_vec._team_args(a, b, one, bias, act, pieces)
    assert bool(v[_gemm_vec._COLUMNS]) == columns
    cells = polling_team._pool.team
    served = int(cells[_spin.SERVED])
    deadline = time.monotonic() + 20  # (on a busy machine the worker may miss a few)
    while int(cells[_spin.SERVED]) == served and time.monotonic() < deadline:
        polling_team.team()
        got = np.full((m, n), np.nan, dtype)
        _gemm_vec.gemm_team(a, b, got, bias, act, pieces, cells,
                            _gemm_vec.piece_function(np.dtype(dtype)))  # fmt: skip
        assert np.array_equal(got, one)
    assert int(cells[_spin.SERVED]) > served, "no worker ever took a piece"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m, k, n, unit",
    [
        (40, 240, 196, True),  # MobileNetV3's gated projection: runs of columns, a thin rest
        (16, 16, 3136, True),  # more columns than a packed panel holds
        (5, 7, 9, True),  # one block of rows (b is otherwise read in place), a thin column
        (5, 7, 9, False),  # a's rows strided: the last columns a block of their own
        (130, 70, 37, True),  # more rows than columns: runs of rows through the team
        (8, 1, 20, False),  # one step
    ],
)
@pytest.mark.parametrize("act", [_gemm_vec.RAW, 4])
def test_a_product_with_b_scaled_as_it_is_packed_is_the_bits_of_scaling_first(
    dtype, polling_team, m, k, n, unit, act
):
    """gemm_scaled_rows / gemm_scaled_team / gemm_scaled_batch_team: b's row t times s[t]
    (a squeeze-excite gate on a pointwise convolution's input), formed as the product packs b,
    give gemm_rows' bits on numpy's b · s[:, None], alone, through the team and for a batch."""
    a = RNG.standard_normal((m, k)).astype(dtype)
    if unit:  # a pointwise convolution's filter: its [c, o] seen transposed
        a = np.ascontiguousarray(a.T).T
    b = RNG.standard_normal((k, n)).astype(dtype)
    s = RNG.standard_normal(k).astype(dtype)
    bias = RNG.standard_normal(m).astype(dtype)
    want = np.full((m, n), np.nan, dtype)
    _gemm_vec.gemm_rows(a, b * s[:, None], want, bias, 0, m, act)
    got = np.full((m, n), np.nan, dtype)
    _gemm_vec.gemm_scaled_rows(a, b, s, got, bias, 0, m, act)
    np.testing.assert_array_equal(got, want)
    if act == _gemm_vec.RAW:
        _close(got, a, b * s[:, None])
        unscaled = np.empty((m, n), dtype)
        _gemm_vec.gemm_rows(a, b, unscaled, bias, 0, m, act)
        assert not np.array_equal(unscaled, got)  # (the scale is not lost)
    stack = RNG.standard_normal((3, k, n)).astype(dtype)
    gates = RNG.standard_normal((3, k)).astype(dtype)
    each = np.empty((3, m, n), dtype)
    for i in range(3):
        _gemm_vec.gemm_rows(a, stack[i] * gates[i][:, None], each[i], bias, 0, m, act)
    cells = polling_team._pool.team
    fn = _gemm_vec.piece_function(np.dtype(dtype))
    served = int(cells[_spin.SERVED])
    deadline = time.monotonic() + 20  # (on a busy machine the worker may miss a few)
    while int(cells[_spin.SERVED]) == served and time.monotonic() < deadline:
        polling_team.team()
        team = np.full((m, n), np.nan, dtype)
        _gemm_vec.gemm_scaled_team(a, b, s, team, bias, act, 4, cells, fn)
        np.testing.assert_array_equal(team, want)
        batch = np.full((3, m, n), np.nan, dtype)
        _gemm_vec.gemm_scaled_batch_team(a, stack, gates, batch, bias, act, 2, cells, fn)
        np.testing.assert_array_equal(batch, each)
    assert int(cells[_spin.SERVED]) > served, "no worker ever took a piece"
    with pytest.raises(ValueError, match="one element per row of b"):
        _gemm_vec.gemm_scaled_rows(a, b, s[:-1], got, bias, 0, m, act)
    with pytest.raises(ValueError, match="a scale per product"):
        _gemm_vec.gemm_scaled_batch_team(a, stack, gates[:2], batch, bias, act, 2, cells, fn)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stack_of_products_is_each_products_bits_on_any_thread(dtype, polling_team):
    a = RNG.standard_normal((36, 50, 40)).astype(dtype)[:, :45]  # a strided view, as Winograd's
    b = RNG.standard_normal((36, 40, 33)).astype(dtype)
    each = np.empty((36, 45, 33), dtype)
    none = np.zeros(1, dtype)
    for s in range(36):
        _gemm_vec.gemm_rows(a[s], b[s], each[s], none, 0, 45, _gemm_vec.RAW)
    _close(each, a, b)
    solo = np.full_like(each, np.nan)
    _gemm_vec.gemm_stack(a, b, solo, 0, 20)
    _gemm_vec.gemm_stack(a, b, solo, 20, 36)
    assert np.array_equal(solo, each)
    cells = polling_team._pool.team
    served = int(cells[_spin.SERVED])  # the pieces workers ran
    deadline = time.monotonic() + 20  # (on a busy machine the worker may miss a few)
    while int(cells[_spin.SERVED]) == served and time.monotonic() < deadline:
        polling_team.team()  # a team caller: keeps a worker polling (as the kernels ask)
        got = np.full_like(each, np.nan)
        _gemm_vec.gemm_stack_team(a, b, got, 1, cells, _gemm_vec.piece_function(np.dtype(dtype)))
        assert np.array_equal(got, each)
    assert int(cells[_spin.SERVED]) > served, "no worker ever took a piece"
    with pytest.raises(ValueError, match="different lengths"):
        _gemm_vec.gemm_stack(a[:3], b[:2], solo[:3], 0, 3)


def test_a_winograd_convolution_through_the_team_is_the_unsplit_bits(
    watched, monkeypatch, polling_team
):
    """ResNet-18 ½'s 28×28 stage at batch 1: one block of tiles, whose 36 products go through
    the team (a piece per position) where a worker polls."""
    x = RNG.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 64, 64)).astype(np.float32)
    tiles = conv_winograd._Tiles(1, 28, 28, 4, 6, 128, 4)
    assert len(tiles.blocks) == 1
    calls = watched(2)
    runs = [conv_winograd.winograd_forward_nchw(x, w, 28, 28, (1, 1), 4) for _ in range(10)]
    assert "gemm_stack_team" in calls
    monkeypatch.setattr(intra_op, "team", lambda: None)
    one = conv_winograd.winograd_forward_nchw(x, w, 28, 28, (1, 1), 4)
    for got in runs:
        assert np.array_equal(got, one)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "xs, o, r, m, epilogue",
    [((1, 32, 27, 27), 64, 3, 4, "relu"), ((1, 64, 13, 13), 256, 3, 4, "residual"),
     ((8, 24, 7, 7), 32, 3, 4, None), ((1, 16, 20, 20), 48, 5, 4, "relu"),
     ((1, 16, 18, 18), 32, 5, 2, "residual"),
     ((1, 16, 55, 55), 48, 3, 4, "relu")],  # two or more blocks of _forward's
    ids=str,
)  # fmt: skip
def test_a_one_block_winograd_convolution_splits_its_transforms_with_the_unsplit_bits(
    monkeypatch, request, dtype, xs, o, r, m, epilogue
):
    """A channels-first convolution of one block of tiles (or one image's, of several blocks):
    its input and output transforms in pieces of tile rows through the team (_winograd_team),
    around the products: the bits of the unsplit pipeline, and of _forward's, which does the
    same steps block by block."""
    from rill.exec.kernels import _winograd_team

    n, c, h, _ = xs
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((r, r, c, o)).astype(dtype)
    bias = RNG.standard_normal(o).astype(dtype)
    side = RNG.standard_normal((n, o, h, h)).astype(dtype)
    code = 0 if epilogue is None else 1
    ep = (bias, code, side if epilogue == "residual" else np.empty((0, 0, 0, 0), dtype))
    pads = ((r - 1) // 2,) * 2
    tiles = conv_winograd._Tiles(n, h, h, m, m + r - 1, c + o, x.itemsize)
    held = tiles.tpi * (m + r - 1) ** 2 * (c + o) * x.itemsize
    assert len(tiles.blocks) == 1 or (n == 1 and held <= conv_winograd._PIECES_BYTES)
    ran = []
    for name in ("run", "run_team"):
        real = getattr(_winograd_team, name)
        monkeypatch.setattr(_winograd_team, name,
                            lambda *a, _real=real, _name=name: ran.append(_name) or _real(*a))  # fmt: skip

    def conv():
        return conv_winograd.winograd_forward_nchw(x, w, h, h, pads, m, epilogue=ep)

    request.getfixturevalue("polling_team")
    split = [conv() for _ in range(5)]
    assert "run_team" in ran
    monkeypatch.setattr(intra_op, "team", lambda: None)
    ran.clear()
    one = conv()
    assert ran == ["run", "run"]  # the input phase, then the output phase, each whole
    monkeypatch.setattr(conv_winograd, "_team_module", lambda: None)  # _forward's blocks
    ran.clear()
    before = conv()
    assert not ran
    for got in split:
        assert np.array_equal(got, one)
    assert np.array_equal(one, before)
    old = conv_winograd.set_enabled(False)
    try:  # and it is the convolution, within Winograd's rounding
        want = _conv_reference(x, w, pads, bias, code, ep[2])
    finally:
        conv_winograd.set_enabled(old)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    assert np.abs(one - want).max() <= tol * np.abs(want).max()


def _conv_reference(x, w, pads, bias, code, side):
    """The convolution in float64 by shifted products, + bias (+ side), then Relu (code 1)."""
    n, c, h, wd = x.shape
    r, _, _, o = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0],) * 2, (pads[1],) * 2))
    out = np.zeros((n, o, h, wd))
    for i in range(r):
        for j in range(r):
            out += np.einsum("nchw,co->nohw", xp[:, :, i : i + h, j : j + wd], w[i, j])
    out += bias[:, None, None]
    if side.size:
        out += side
    return np.maximum(out, 0) if code == 1 else out


def test_row_dots_names_bad_operands():
    x = np.ones((2, 8), np.float32)
    w = np.ones((5, 8), np.float32)
    with pytest.raises(ValueError, match="row_dots: operands of mismatched shapes"):
        _gemm_vec.row_dots(x, np.ones((5, 7), np.float32), np.empty((2, 5), np.float32), 0, 5)
    with pytest.raises(ValueError, match="row_dots: the rows of x, w and out must be contiguous"):
        _gemm_vec.row_dots(np.ones((8, 2), np.float32).T, w, np.empty((2, 5), np.float32), 0, 5)
