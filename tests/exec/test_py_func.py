"""tf.py_func / tf.numpy_function: Python functions as ops, with TensorFlow's conversions and
errors."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph import import_graph_def
from rill.graph.errors import (
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    UnknownError,
)


def test_values_in_and_out_with_several_outputs_and_strings():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None])
        s = rg.placeholder(rg.string, [])
        y = rg.py_func(lambda a: np.sort(a), [x], rg.float32)
        lo, hi, tag = rg.py_func(
            lambda a, t: (a.min(), a.max(), t.decode().upper()),
            [x, s],
            [rg.float32] * 2 + [rg.string],
        )
        z = y * 2.0  # its output feeds graph ops like any tensor
        with Session() as sess:
            got = sess.run([y, lo, hi, tag, z], {x: [3.0, 1.0, 2.0], s: b"abc"})
    np.testing.assert_array_equal(got[0], [1.0, 2.0, 3.0])
    assert got[1] == 1.0 and got[2] == 3.0 and got[3] == b"ABC"
    np.testing.assert_array_equal(got[4], [2.0, 4.0, 6.0])
    assert y.shape.rank is None and y.op.type == "PyFunc"


def test_stateful_runs_once_per_step_and_stateless_is_its_own_op_type():
    calls = []
    with rg.Graph().as_default():
        c = rg.py_func(lambda: calls.append(1) or np.int64(len(calls)), [], rg.int64)
        d = rg.numpy_function(lambda: np.float64(1.0), [], rg.float64, stateful=False)
        with Session() as sess:
            assert [sess.run(c) for _ in range(3)] == [1, 2, 3]
            assert sess.run(d) == 1.0
    assert d.op.type == "PyFuncStateless"


def test_no_outputs_gives_an_op_to_run():
    seen = []
    with rg.Graph().as_default():
        x = rg.constant([1, 2])
        op = rg.py_func(lambda a: seen.append(a.tolist()), [x], [])
        with Session() as sess:
            sess.run(op)
    assert seen == [[1, 2]]


def test_errors_name_the_function_and_what_went_wrong():
    def bad(a):
        raise ValueError("no good")

    def stop(a):
        raise StopIteration

    with rg.Graph().as_default():
        x = rg.constant([1.0, 2.0])
        fails = rg.py_func(bad, [x], rg.float32, name="user_fn")
        ends = rg.py_func(stop, [x], rg.float32)
        wrong_type = rg.py_func(lambda a: a.astype(np.float64), [x], rg.float32)
        wrong_count = rg.py_func(lambda a: (a, a), [x], [rg.float32])
        with Session() as sess:
            with pytest.raises(UnknownError, match="ValueError: no good") as e:
                sess.run(fails)
            assert "user_fn" in str(e.value)
            with pytest.raises(OutOfRangeError):
                sess.run(ends)
            with pytest.raises(InvalidArgumentError, match="is float64, but expects float32"):
                sess.run(wrong_type)
            with pytest.raises(InvalidArgumentError, match="returned 2 values"):
                sess.run(wrong_count)
            np.testing.assert_array_equal(sess.run(x), [1.0, 2.0])  # the session still works


def test_a_graph_def_from_elsewhere_cannot_call_local_functions():
    with rg.Graph().as_default() as g:
        rg.py_func(lambda a: a, [rg.constant(1.0)], rg.float32, name="f")
    gd = g.as_graph_def()
    token = gd.node[-1].attr["token"].s.decode()
    gd.node[-1].attr["token"].s = b"pyfunc_0"  # what a TensorFlow-made graph carries
    assert token != "pyfunc_0"
    with rg.Graph().as_default():
        (out,) = import_graph_def(gd, return_elements=["f:0"], name="")
        with Session() as sess, pytest.raises(NotFoundError, match="pyfunc_0 is not registered"):
            sess.run(out)


def test_py_function_gives_tensorflow_2_style_values_with_numpy():
    """tf.py_function's func reads its inputs with .numpy() (TensorFlow 2 style) or as arrays,
    and may return arrays, scalars or values with .numpy()."""
    import rill.compat.v1 as tf

    class Eagerish:  # a returned value with .numpy(), as an EagerTensor
        def __init__(self, v):
            self.v = v

        def numpy(self):
            return self.v

    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None])
        s = rg.placeholder(rg.string, [])
        y = tf.py_function(lambda a: a.numpy() * 2 + a, [x], tf.float32)
        n, tag = tf.py_function(
            lambda a, t: (Eagerish(np.int64(a.numpy().size)), t.numpy().decode().upper()),
            [x, s],
            [tf.int64, tf.string],
        )
        with Session() as sess:
            got = sess.run([y, n, tag], {x: [1.0, 2.0], s: b"ab"})
    np.testing.assert_array_equal(got[0], [3.0, 6.0])
    assert got[1] == 2 and got[2] == b"AB"
    assert y.op.type == "PyFunc"
