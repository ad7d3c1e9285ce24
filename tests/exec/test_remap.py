"""The remapper: chains become fused ops in the step plan, and results stay bit-identical to the
unfused chain (the same session config with `disable_remapper`)."""

from __future__ import annotations

import numpy as np
import pytest
from remap_runs import remap_config, run_both

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError

RNG = np.random.default_rng(77)


def assert_identical(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
        assert np.asarray(x).dtype == np.asarray(y).dtype


ACTS = {
    None: lambda t: t,
    "Relu": rg.relu,
    "Relu6": rg.relu6,
    "Elu": rg.elu,
    "LeakyRelu": lambda t: rg.leaky_relu(t, alpha=0.3),
}


@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_conv_bias_activation_fuses_and_matches(act, dtype):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.as_dtype(dtype), [None, 9, 8, 3])
        w = rg.constant((RNG.standard_normal((3, 3, 3, 5)) * 0.5).astype(dtype))
        b = rg.constant(RNG.standard_normal(5).astype(dtype))
        y = ACTS[act](rg.bias_add(rg.conv2d(x, w, [1, 1, 1, 1], "SAME"), b))
    xv = RNG.standard_normal((4, 9, 8, 3)).astype(dtype)
    fused, plain, types = run_both(g, [y], {x: xv})
    assert "_FusedConv2D" in types and "Conv2D" not in types and "BiasAdd" not in types
    if act is not None:
        assert act not in types
    assert_identical(fused, plain)


@pytest.mark.parametrize("act", ["Relu", None])
@pytest.mark.parametrize("bias", ["BiasAdd", "add_vector_left", "add_vector_right"])
def test_matmul_bias_activation_fuses_and_matches(act, bias):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, 6])
        w = rg.constant(RNG.standard_normal((6, 4)).astype(np.float32))
        b = rg.constant(RNG.standard_normal(4).astype(np.float32))
        m = rg.matmul(x, w)
        z = {"BiasAdd": lambda: rg.bias_add(m, b), "add_vector_left": lambda: b + m,
             "add_vector_right": lambda: m + b}[bias]()  # fmt: skip
        y = ACTS[act](z)
    fused, plain, types = run_both(g, [y], {x: RNG.standard_normal((5, 6)).astype(np.float32)})
    assert "_FusedMatMul" in types and "MatMul" not in types
    assert_identical(fused, plain)


def test_add_of_a_matrix_is_not_a_bias():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [3, 6])
        w = rg.constant(RNG.standard_normal((6, 4)).astype(np.float32))
        y = rg.matmul(x, w) + rg.constant(np.ones((3, 4), np.float32))
    fused, plain, types = run_both(g, [y], {x: np.ones((3, 6), np.float32)})
    assert "_FusedMatMul" not in types
    assert_identical(fused, plain)


def test_a_fetched_intermediate_stops_the_fusion_there():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [2, 5, 5, 2])
        w = rg.constant(RNG.standard_normal((3, 3, 2, 4)).astype(np.float32))
        b = rg.constant(RNG.standard_normal(4).astype(np.float32))
        pre = rg.bias_add(rg.conv2d(x, w, [1, 1, 1, 1], "VALID"), b)
        y = rg.relu(pre)
    xv = RNG.standard_normal((2, 5, 5, 2)).astype(np.float32)
    fused, plain, types = run_both(g, [y, pre], {x: xv})
    assert "_FusedConv2D" in types and "Relu" in types  # conv + bias fused, the Relu not
    assert_identical(fused, plain)


def test_a_control_dependency_on_an_intermediate_stops_the_fusion():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 4, 4, 1])
        w = rg.constant(np.ones((2, 2, 1, 1), np.float32))
        conv = rg.conv2d(x, w, [1, 1, 1, 1], "SAME")
        y = rg.bias_add(conv, rg.constant(np.ones(1, np.float32)))
        with g.control_dependencies([conv]):
            z = rg.identity(y) * 2.0
    fused, plain, types = run_both(g, [z], {x: np.ones((1, 4, 4, 1), np.float32)})
    assert "_FusedConv2D" not in types
    assert_identical(fused, plain)


def test_a_kernel_error_names_the_convolution():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [None, None, None, None])
        w = rg.constant(np.ones((3, 3, 2, 4), np.float32))
        y = rg.relu(rg.bias_add(rg.conv2d(x, w, [1, 1, 1, 1], "SAME", name="the_conv"),
                                rg.constant(np.ones(4, np.float32))))  # fmt: skip
    with Session(graph=g) as s:
        with pytest.raises(InvalidArgumentError) as e:
            s.run(y, {x: np.ones((1, 5, 5, 3), np.float32)})  # 3 channels, the filter wants 2
    assert e.value.op is not None and e.value.op.name == "the_conv"


# -- the max-pool gradient through a Relu ---------------------------------------------------------


def _pool_grad_graph(shape, ksize, strides, padding):
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, shape)
        dy = rg.placeholder(rg.float32)
        r = rg.relu(x)
        p = rg.max_pool(r, ksize, strides, padding)
        (dx,) = gradients([p], [x], grad_ys=[dy])
    return g, x, dy, p, dx


@pytest.mark.parametrize(
    "ksize,strides,padding",
    [
        ([1, 2, 2, 1], [1, 2, 2, 1], "VALID"),  # tiling windows: the fused path
        ([1, 2, 2, 1], [1, 2, 2, 1], "SAME"),  # odd sizes: windows clipped at the edge
        ([1, 3, 3, 1], [1, 2, 2, 1], "SAME"),  # overlapping windows
        ([1, 1, 1, 1], [1, 1, 1, 1], "VALID"),  # one tap
    ],
)
def test_max_pool_grad_through_relu_fuses_and_matches(ksize, strides, padding):
    shape = [3, 8, 7, 4] if padding == "SAME" else [3, 8, 6, 4]
    g, x, dy, p, dx = _pool_grad_graph(shape, ksize, strides, padding)
    xv = RNG.standard_normal(shape).astype(np.float32)
    xv[0, :4] = 0.0  # windows of equal zeros (ties) after the Relu
    xv[1, 0, 0, 0] = np.nan  # a NaN first in its window
    xv[1, 3, 1, 2] = np.nan  # and one later in a window
    xv[2, :2, :2] = -1.0  # windows whose maximum is negative: the Relu makes them 0
    with Session(graph=g) as s:
        pshape = s.run(p, {x: xv}).shape
    dyv = RNG.standard_normal(pshape).astype(np.float32)
    dyv[0, 0, 0, 0] = np.inf  # an infinite gradient on a window the Relu zeroes: NaN, unfused
    dyv[2, 0, 0, 1] = -2.0  # a negative one there: -0
    fused, plain, types = run_both(g, [dx], {x: xv, dy: dyv})
    assert "_FusedMaxPoolGrad" in types and "ReluGrad" not in types
    np.testing.assert_array_equal(fused[0], plain[0])
    np.testing.assert_array_equal(np.signbit(fused[0]), np.signbit(plain[0]))


def test_max_pool_grad_of_another_input_is_not_fused():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 4, 4, 1])
        dy = rg.placeholder(rg.float32, [1, 2, 2, 1])
        r = rg.relu(x)
        p = rg.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")  # pools x, not the Relu
        (dx,) = gradients([p, r], [x], grad_ys=[dy, rg.ones_like(r)])
    xv = RNG.standard_normal((1, 4, 4, 1)).astype(np.float32)
    fused, plain, types = run_both(g, [dx], {x: xv, dy: np.ones((1, 2, 2, 1), np.float32)})
    assert "_FusedMaxPoolGrad" not in types
    assert_identical(fused, plain)


def test_a_cnn_trains_identically_fused_and_unfused():
    from rill.train import MomentumOptimizer

    g = rg.Graph()
    with g.as_default():
        g.seed = 3
        x = rg.placeholder(rg.float32, [None, 12, 12, 1])
        y = rg.placeholder(rg.float32, [None, 3])
        w1 = rg.Variable(rg.random_uniform([3, 3, 1, 4], -0.3, 0.3))
        b1 = rg.Variable(rg.constant(np.full(4, 0.01, np.float32)))
        w2 = rg.Variable(rg.random_uniform([6 * 6 * 4, 3], -0.3, 0.3))
        b2 = rg.Variable(rg.zeros([3]))
        h = rg.relu(rg.bias_add(rg.conv2d(x, w1, [1, 1, 1, 1], "SAME"), b1))
        h = rg.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        logits = rg.matmul(rg.reshape(h, [-1, 6 * 6 * 4]), w2) + b2
        loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = MomentumOptimizer(0.1, 0.9).minimize(loss)
        init = rg.global_variables_initializer()
    xv = RNG.random((8, 12, 12, 1), dtype=np.float32)
    yv = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 8)]
    finals = []
    for remap in (True, False):
        with Session(graph=g, config=remap_config(remap)) as s:
            s.run(init)
            for _ in range(4):
                s.run(train, {x: xv, y: yv})
            finals.append(s.run([w1, b1, w2, b2, loss], {x: xv, y: yv}))
    assert_identical(finals[0], finals[1])


def test_a_fused_op_with_an_unsupported_chain_is_refused_by_name():
    g = rg.Graph()
    with g.as_default():
        x = rg.placeholder(rg.float32, [1, 3, 3, 1])
        w = rg.constant(np.ones((1, 1, 1, 1), np.float32))
        b = rg.constant(np.ones(1, np.float32))
        attrs = {"strides": [1, 1, 1, 1], "padding": "SAME", "fused_ops": ["Relu", "BiasAdd"],
                 "num_args": 1}  # fmt: skip
        y = g.create_op("_FusedConv2D", [x, w, [b], []], attrs, name="odd_fusion").outputs[0]
    with Session(graph=g) as s:
        with pytest.raises(InvalidArgumentError, match=r"fused_ops \[BiasAdd\]") as e:
            s.run(y, {x: np.ones((1, 3, 3, 1), np.float32)})
    assert e.value.op is not None and e.value.op.name == "odd_fusion"
