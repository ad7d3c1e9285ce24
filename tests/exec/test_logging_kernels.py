"""Assert, CheckNumerics, Print and PrintV2 at run time: failures are InvalidArgumentError with
the data shown; printing goes to stderr in TensorFlow's format."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError
from rill.graph.ops import logging_ops as lo


def test_assert_fails_showing_the_data_and_passes_otherwise():
    with rg.Graph().as_default() as g:
        x = rg.placeholder(rg.int32, [5])
        a = lo.assert_op(rg.reduce_all(x >= 0), [x], summarize=2, name="nonneg")
        with g.control_dependencies([a]):
            y = rg.identity(x)
    with Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(y, {x: np.arange(5, dtype=np.int32)}), np.arange(5))
        with pytest.raises(InvalidArgumentError, match=r"assertion failed: \[1 -2 ... 4 5\]"):
            s.run(y, {x: np.array([1, -2, 3, 4, 5], np.int32)})


def test_check_numerics_names_nan_and_inf():
    with rg.Graph().as_default() as g:
        x = rg.placeholder(rg.float32, [3])
        y = lo.check_numerics(x, "layer 3")
    with Session(graph=g) as s:
        with pytest.raises(InvalidArgumentError, match="layer 3 : Tensor had Inf and NaN values"):
            s.run(y, {x: np.array([1.0, np.nan, np.inf], np.float32)})
        np.testing.assert_array_equal(s.run(y, {x: np.ones(3, np.float32)}), [1, 1, 1])


def test_print_and_print_v2_write_to_stderr(capsys):
    with rg.Graph().as_default() as g:
        x = rg.placeholder(rg.int32, [4])
        y = lo.print_op(x, [x], message="x: ", first_n=1, summarize=3)
        p = lo.print_v2(lo.string_format("value {}", [x], summarize=1))
    with Session(graph=g) as s:
        s.run(y, {x: np.arange(4, dtype=np.int32)})
        s.run(y, {x: np.arange(4, dtype=np.int32)})  # first_n=1: printed once
        s.run(p, {x: np.arange(4, dtype=np.int32)})
    err = capsys.readouterr().err
    assert err == "x: [0 1 2...]\nvalue [0 ... 3]\n"
