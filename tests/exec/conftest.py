"""Fixtures for the exec tests."""

from __future__ import annotations

import time

import pytest


@pytest.fixture
def polling_team(monkeypatch):
    """Two idle cores and the intra-op pool's team ready: a worker polling, kept polling for
    the test (0.5 s after each job, rather than a millisecond), so that every kernel that may
    split through the team does. Returns the intra_op module; skips where the pool's compiled
    waits are off (RILL_SPIN=0 or RILL_JIT=0)."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    if intra_op._poller() is None:
        pytest.skip("the pool's compiled waits are off (RILL_SPIN=0 or RILL_JIT=0)")
    monkeypatch.setattr(intra_op, "_THREADS", 2)
    monkeypatch.setattr(threads, "_BUDGET", 2)
    monkeypatch.setattr(threads, "cores_free", lambda: 2)
    monkeypatch.setattr(threads, "cores_idle", lambda: 2)
    monkeypatch.setattr(intra_op, "WORKER_POLL_S", 0.5)
    monkeypatch.setattr(intra_op, "_TEAM_WANT_NS", 10**9)
    monkeypatch.setattr(intra_op, "_NUDGE_NS", 0)
    deadline = time.monotonic() + 20
    while intra_op.team() is None:
        assert time.monotonic() < deadline, "no pool worker started polling in 20 s"
        time.sleep(0.001)
    return intra_op


@pytest.fixture
def blas_products(monkeypatch):
    """Float products through numpy's BLAS and rill.exec.threads' pieces, as where the
    compiled product does not run (RILL_JIT=0, RILL_CONV_DIRECT=0): for the tests of that
    path, which the compiled product takes over where it runs."""
    from rill.exec.kernels import pointwise

    monkeypatch.setattr(pointwise, "compiled", lambda *args: None)


@pytest.fixture
def idle_cores(monkeypatch):
    """set(n): a pool of n intra-op threads and n idle cores for the thread policy."""
    from rill.exec import threads
    from rill.exec.kernels import intra_op

    def set_cores(n):
        monkeypatch.setattr(intra_op, "_THREADS", n)
        monkeypatch.setattr(threads, "_BUDGET", n)
        monkeypatch.setattr(threads, "cores_free", lambda: n)
        monkeypatch.setattr(threads, "cores_idle", lambda: n)

    return set_cores
