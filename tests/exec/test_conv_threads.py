"""Convolutions over the intra-op threads: the kernels' blocks are shared out over the threads
(rill.exec.threads decides how many) and the results keep their bits whatever the thread count."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rill.exec.kernels  # noqa: F401 - registers every kernel
import rill.graph as rg
from rill.exec import threads
from rill.exec.kernels import conv_kernels, conv_wide, intra_op
from rill.exec.testing import run_kernel

RNG = np.random.default_rng(21)


def run_op(op_type, inputs, attrs):
    with rg.Graph().as_default() as g:
        phs = [rg.placeholder(rg.as_dtype(np.asarray(a).dtype)) for a in inputs]
        op = g.create_op(op_type, phs, dict(attrs))
        return run_kernel(op, *inputs)


def conv_three(x, w, strides, padding):
    attrs = dict(strides=[1, *strides, 1], padding=padding, data_format="NHWC")
    (y,) = run_op("Conv2D", [x, w], attrs)
    dy = np.linspace(-1, 1, y.size, dtype=x.dtype).reshape(y.shape)
    (dx,) = run_op("Conv2DBackpropInput", [np.array(x.shape, np.int32), w, dy], attrs)
    (dw,) = run_op("Conv2DBackpropFilter", [x, np.array(w.shape, np.int32), dy], attrs)
    return y, dx, dw


class _MeetAnotherThread:
    """Wraps a block method: the first block waits (60 s at most) until a block starts on another
    thread, so a kernel that was given two threads shows it ran on two, with no timing."""

    def __init__(self, real):
        self.real, self.threads, self.met = real, set(), threading.Event()
        self.first = True
        self.lock = threading.Lock()

    def __call__(self, obj, i):
        me = threading.get_ident()
        with self.lock:
            first, self.first = self.first, False
            self.threads.add(me)
            if len(self.threads) > 1:
                self.met.set()
        if first:
            self.met.wait(60)
        return self.real(obj, i)


GEOMETRIES = [
    # (x shape, w shape, strides, padding): the widened stride-1 path, row-major patches,
    # channels-first patches (one channel), and a 1x1 convolution
    ((6, 8, 10, 6), (3, 3, 6, 5), (1, 1), "SAME"),
    ((5, 9, 9, 4), (3, 3, 4, 6), (2, 2), "VALID"),
    ((5, 12, 12, 1), (5, 5, 1, 8), (1, 1), "SAME"),
    ((4, 6, 6, 8), (1, 1, 8, 7), (1, 1), "VALID"),
]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_convolutions_keep_their_bits_on_any_number_of_threads(monkeypatch, geom, dtype):
    xs, ws, strides, padding = geom
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    # Tiny blocks (several per kernel) and no size floor, so these small convolutions split.
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1)
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(conv_kernels, "_BLOCK_BYTES", 512)
    monkeypatch.setattr(conv_kernels, "_SMALL_BLOCK_BYTES", 512)
    monkeypatch.setattr(conv_wide, "_BLOCK_BYTES", 512)
    monkeypatch.setattr(intra_op, "_THREADS", 4)
    monkeypatch.setattr(threads, "_BUDGET", 4)
    split = []
    real_parallel_for = intra_op.parallel_for

    def watch(n, fn, grain=1, pieces_per_thread=1, max_threads=None):
        split.append(max_threads)
        return real_parallel_for(n, fn, grain, pieces_per_thread, max_threads)

    monkeypatch.setattr(intra_op, "parallel_for", watch)
    results = []
    for free in (1, 2, 4):
        monkeypatch.setattr(threads, "cores_free", lambda free=free: free)
        monkeypatch.setattr(threads, "cores_idle", lambda free=free: free)
        split.clear()
        results.append(conv_three(x, w, strides, padding))
        if free == 1:
            assert max(split, default=1) == 1  # one core free: all on the caller
        else:
            assert 1 < max(split, default=1) <= free  # the blocks went to several threads
    for got in results[1:]:
        for a, b in zip(results[0], got):
            assert a.dtype == dtype and np.array_equal(a, b)


def test_blocks_of_a_convolution_run_on_several_threads(monkeypatch):
    monkeypatch.setattr(threads, "GEMM_GRAIN", 1)
    monkeypatch.setattr(threads, "SPLIT_GRAIN", 1)
    monkeypatch.setattr(conv_wide, "_BLOCK_BYTES", 512)
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    meet = _MeetAnotherThread(conv_wide._WidePatches.block)
    monkeypatch.setattr(conv_wide._WidePatches, "block", lambda self, i: meet(self, i))
    x = RNG.standard_normal((4, 6, 8, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 5, 4)).astype(np.float32)
    attrs = dict(strides=[1, 1, 1, 1], padding="SAME", data_format="NHWC")
    (y,) = run_op("Conv2D", [x, w], attrs)
    assert meet.met.is_set() and len(meet.threads) == 2
    monkeypatch.setattr(threads, "cores_free", lambda: 1)
    monkeypatch.setattr(threads, "cores_idle", lambda: 1)
    (y1,) = run_op("Conv2D", [x, w], attrs)
    assert np.array_equal(y, y1)
