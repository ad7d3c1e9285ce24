"""kernel_testing.RNG is shared by several test modules: it is reseeded for every test from the
test's name, so a test's random inputs do not depend on which tests ran before it (a -k
selection, a new test elsewhere) and a failure reproduces alone. `programs_on` turns the
compiled loops and whole-subgraph programs on for a test (the program test modules use it)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed_kernel_rng(request):
    from mobile.kernel_testing import RNG

    key = f"{request.module.__name__}::{request.node.name}".encode()
    RNG.bit_generator.state = np.random.default_rng(zlib.crc32(key)).bit_generator.state


@pytest.fixture
def programs_on():
    from rill.mobile import program
    from rill.mobile.kernels import jit

    old_jit, old = jit.set_enabled(True), program.set_enabled(True)
    yield
    jit.set_enabled(old_jit)
    program.set_enabled(old)
