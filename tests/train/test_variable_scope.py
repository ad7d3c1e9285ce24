"""get_variable and variable_scope: names, sharing rules, defaults, regularizers, collections."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.train import (
    AUTO_REUSE,
    GraphKeys,
    get_collection,
    get_local_variable,
    get_regularization_loss,
    get_regularization_losses,
    get_variable,
    get_variable_scope,
    init_ops,
    no_regularizer,
    variable_scope,
)


def init_and_run(fetches):
    with Session() as s:
        s.run(rg.global_variables_initializer())
        s.run(rg.local_variables_initializer())
        return s.run(fetches)


def test_names_and_collections(graph):
    with variable_scope("layer1"):
        w = get_variable("w", [2, 3])
        with variable_scope("inner"):
            b = get_variable("b", [3], trainable=False)
    assert (w.name, b.name) == ("layer1/w:0", "layer1/inner/b:0")
    assert w.op.name == "layer1/w" and w.shape == rg.TensorShape([2, 3])
    assert w in rg.trainable_variables() and b not in rg.trainable_variables()
    assert rg.global_variables() == [w, b]
    # Initializer ops live under the variable's name, not under any name scope.
    assert w.initial_value.name.startswith("layer1/w/Initializer/")


def test_variable_names_ignore_name_scopes(graph):
    with graph.name_scope("ns"):
        with variable_scope("vs") as vs:
            v = get_variable("v", [1])
            c = rg.constant(1.0, name="c")
    assert v.name == "vs/v:0"
    assert c.name == "ns/vs/c:0" and vs.original_name_scope == "ns/vs/"


def test_existing_variable_without_reuse_is_an_error(graph):
    with variable_scope("dense"):
        get_variable("kernel", [2, 2])
    with pytest.raises(ValueError) as e, variable_scope("dense"):
        get_variable("kernel", [2, 2])
    msg = str(e.value)
    assert "Variable dense/kernel already exists, disallowed. Did you mean to set reuse=True" in msg
    assert "test_variable_scope.py" in msg  # where the first one was defined


def test_reuse_true_needs_an_existing_variable(graph):
    with pytest.raises(ValueError, match="Variable foo/v does not exist, or was not created with"):
        with variable_scope("foo", reuse=True):
            get_variable("v", [1])
    # A variable made without get_variable is not in the store.
    rg.Variable(1.0, name="bar/v")
    with pytest.raises(ValueError, match="bar/v does not exist"):
        with variable_scope("bar", reuse=True):
            get_variable("v", [])


def test_reuse_returns_the_same_variable_and_checks_shape_and_dtype(graph):
    with variable_scope("s"):
        v = get_variable("v", [2, 3])
    with variable_scope("s", reuse=True):
        assert get_variable("v", [2, 3]) is v
        assert get_variable("v") is v  # no shape: anything compatible
        with pytest.raises(ValueError, match=r"Trying to share variable s/v, but specified shape"):
            get_variable("v", [3, 2])
        with pytest.raises(ValueError, match="specified dtype float64 and found dtype float32"):
            get_variable("v", [2, 3], dtype=rg.float64)


def test_reuse_variables_and_reopening_a_scope_object(graph):
    with variable_scope("model") as scope:
        v = get_variable("v", [1])
        scope.reuse_variables()
        assert get_variable("v", [1]) is v
    with variable_scope(scope, reuse=True) as again:
        assert again.name == "model" and get_variable("v") is v
    # Re-entering the scope object from somewhere else keeps its absolute name.
    with variable_scope("elsewhere"), variable_scope(scope, reuse=True):
        assert get_variable("v") is v


def test_reuse_is_inherited_and_cannot_be_switched_off(graph):
    with variable_scope("a"):
        with variable_scope("b"):
            v = get_variable("v", [1])
    with variable_scope("a", reuse=True):
        with variable_scope("b", reuse=False) as b:
            assert b.reuse is True
            assert get_variable("v") is v


def test_auto_reuse(graph):
    def net():
        with variable_scope("shared", reuse=AUTO_REUSE):
            return get_variable("w", [2], initializer=init_ops.ones_initializer())

    w1, w2 = net(), net()
    assert w1 is w2
    assert len(rg.global_variables()) == 1


def test_default_name_is_made_unique(graph):
    names = []
    for _ in range(3):
        with variable_scope(None, default_name="block") as s:
            names.append(s.name)
            get_variable("w", [1])
    assert names == ["block", "block_1", "block_2"]
    # Counts are per parent scope, and reset when the parent closes.
    for _ in range(2):
        with variable_scope("outer"):
            with variable_scope(None, default_name="block") as s:
                assert s.name == "outer/block"


def test_scope_initializer_dtype_and_explicit_override(graph):
    with variable_scope("s", initializer=init_ops.constant_initializer(3.0), dtype=rg.float64):
        a = get_variable("a", [2])
        b = get_variable("b", [2], initializer=init_ops.zeros_initializer())
        with variable_scope("inner"):  # inherits both
            c = get_variable("c", [1])
    assert a.dtype is rg.float64 and c.dtype is rg.float64
    va, vb, vc = init_and_run([a, b, c])
    np.testing.assert_array_equal(va, [3, 3])
    np.testing.assert_array_equal(vb, [0, 0])
    np.testing.assert_array_equal(vc, [3])


def test_default_initializers(graph):
    f = get_variable("f", [200, 300])
    i = get_variable("i", [3], dtype=rg.int32)
    bo = get_variable("bo", [2], dtype=rg.bool_)
    vf, vi, vb = init_and_run([f, i, bo])
    limit = np.sqrt(6 / 500)  # glorot uniform
    assert np.abs(vf).max() <= limit and np.abs(vf).max() > 0.99 * limit
    np.testing.assert_array_equal(vi, [0, 0, 0])
    np.testing.assert_array_equal(vb, [False, False])


def test_initializer_class_value_and_tensor(graph):
    a = get_variable("a", [2], initializer=init_ops.ones_initializer)  # a class: instantiated
    b = get_variable("b", initializer=[[1.0, 2.0]])  # a value: shape from it
    c = get_variable("c", initializer=rg.constant(np.arange(3, dtype=np.int64)))
    assert b.shape == rg.TensorShape([1, 2]) and c.dtype is rg.int64
    va, vb, vc = init_and_run([a, b, c])
    np.testing.assert_array_equal(va, [1, 1])
    np.testing.assert_array_equal(vb, [[1, 2]])
    np.testing.assert_array_equal(vc, [0, 1, 2])
    with pytest.raises(ValueError, match="do not specify a shape"):
        get_variable("d", [2], initializer=[1.0, 2.0])
    with pytest.raises(ValueError, match="Initializer type 'float32' and explicit dtype 'int32'"):
        get_variable("e", initializer=rg.constant([1.0]), dtype=rg.int32)


def test_shape_must_be_fully_defined(graph):
    with pytest.raises(ValueError, match=r"Shape of a new variable \(v\) must be fully defined"):
        get_variable("v", [None, 3])
    with pytest.raises(ValueError, match="must be fully defined"):
        get_variable("u")
    # A zero-argument initializer gives the value itself.
    w = get_variable("w", initializer=lambda: rg.constant([5.0, 6.0]))
    np.testing.assert_array_equal(init_and_run(w), [5, 6])


def test_regularizer_losses(graph):
    reg = lambda v: rg.multiply(0.5, rg.reduce_sum(rg.square(v)))  # noqa: E731
    with variable_scope("net", regularizer=reg):
        w = get_variable("w", initializer=[1.0, 2.0])
        b = get_variable("b", initializer=[3.0], regularizer=no_regularizer)
    x = get_variable("x", initializer=[[2.0]], regularizer=reg)
    losses = get_regularization_losses()
    assert len(losses) == 2 and losses == get_collection(GraphKeys.REGULARIZATION_LOSSES)
    assert losses[0].name.startswith("net/w/Regularizer/")
    assert get_regularization_losses("net/") == losses[:1]
    total = get_regularization_loss()
    assert total.op.type == "AddN" and total.name == "total_regularization_loss:0"
    assert init_and_run(total) == pytest.approx(0.5 * (1 + 4) + 0.5 * 4)
    # Reusing a variable adds no second loss.
    with variable_scope("net", reuse=True, regularizer=reg):
        assert get_variable("w") is w
    assert len(get_regularization_losses()) == 2
    del b, x


def test_regularization_loss_without_losses_is_zero(graph):
    t = get_regularization_loss()
    assert t.op.type == "Const" and init_and_run(t) == 0.0


def test_local_variables(graph):
    v = get_local_variable("counter", [], dtype=rg.int32)
    assert v in rg.local_variables() and v not in rg.global_variables()
    assert v not in rg.trainable_variables()
    assert init_and_run(v) == 0


def test_collections_argument(graph):
    v = get_variable("v", [1], collections=["mine"])
    assert get_collection("mine") == [v] and v not in rg.global_variables()
    assert v in rg.trainable_variables()


def test_custom_getters_compose(graph):
    calls = []

    def outer(getter, name, *args, **kwargs):
        calls.append(("outer", name))
        return getter(name, *args, **kwargs)

    def inner(getter, name, *args, **kwargs):
        calls.append(("inner", name))
        kwargs["trainable"] = False
        return getter(name, *args, **kwargs)

    with variable_scope("a", custom_getter=outer), variable_scope("b", custom_getter=inner):
        v = get_variable("v", [1])
    assert calls == [("inner", "a/b/v"), ("outer", "a/b/v")]
    assert v not in rg.trainable_variables()
    with pytest.raises(ValueError, match="must be callable"):
        variable_scope("c", custom_getter=3)


def test_argument_errors(graph):
    with pytest.raises(TypeError, match="If default_name is None then name_or_scope is required"):
        variable_scope(None)
    with pytest.raises(TypeError, match="must be a string or VariableScope"):
        variable_scope(3)
    with pytest.raises(ValueError, match="reuse parameter"):
        variable_scope("a", reuse="yes")
    with pytest.raises(ValueError, match="reuse=True cannot be used without a name_or_scope"):
        with variable_scope(None, default_name="d", reuse=True):
            pass
    # Partitioned variables are tested in test_partitioned_variables.py.
    assert len(get_variable("p", [4, 2], partitioner=lambda shape, dtype: [2, 1])) == 2


def test_auxiliary_name_scope_false(graph):
    with variable_scope("v1", auxiliary_name_scope=False) as s:
        c = rg.constant(0.0, name="c")
        w = get_variable("w", [1])
    assert c.name == "c:0" and w.name == "v1/w:0" and s.name == "v1"


def test_scopes_are_per_graph_and_restored(graph):
    root = get_variable_scope()
    assert root.name == ""
    with variable_scope("x"):
        with rg.Graph().as_default():
            assert get_variable_scope().name == ""
            get_variable("v", [1])  # another graph, another store: no clash
        get_variable("v", [1])
    assert get_variable_scope() is root


def test_scope_stack_is_per_thread(graph):
    seen = []

    def worker():
        with graph.as_default():
            seen.append(get_variable_scope().name)

    with variable_scope("main_thread"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == [""]


def test_exception_inside_scope_restores_state(graph):
    with pytest.raises(RuntimeError), variable_scope("boom"):
        raise RuntimeError
    assert get_variable_scope().name == ""
    assert graph.get_name_scope() == ""
