"""What the finite-difference conformance suite cannot see in the nn family's gradients: the op
types of the gradient graphs (one BiasAddGrad for BiasAdd, one ReluGrad on Relu's output, conv
backprops with constant sizes), None for integer and non-differentiable inputs, and whole
gradients against numpy formulas written here (softmax cross-entropy, batch normalization, the
Figure 1 MLP)."""

import collections

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import NO_GRADIENT, gradient_registry, gradients
from rill.autodiff.grads.nn_grad import is_zero
from rill.exec import Session
from rill.graph.tensor_util import constant_value


def _run(fetches, feed=None):
    with Session(graph=rg.get_default_graph()) as sess:
        return sess.run(fetches, feed)


def _grads_of(y, xs):
    """The gradients of y for an explicit seed placeholder (so no Fill appears), and the op
    types they added."""
    g = rg.get_default_graph()
    dy = rg.placeholder(y.dtype, y.shape, name="dy")
    before = len(g.get_operations())
    grads = gradients(y, xs, grad_ys=dy)
    return dy, grads, [op.type for op in g.get_operations()[before:]]


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# -- the size of the gradient graphs --------------------------------------------------------------


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_bias_add_gradient_is_one_bias_add_grad(graph, data_format):
    shape = [None, 4, 3, 3] if data_format == "NCHW" else [None, 3, 3, 4]
    x = rg.placeholder(rg.float32, shape, name="x")
    b = rg.placeholder(rg.float32, [4], name="b")
    dy, (dx, db), types = _grads_of(rg.bias_add(x, b, data_format=data_format), [x, b])
    assert types == ["BiasAddGrad"]
    assert dx is dy and db.op.attrs["data_format"] == data_format
    gv = np.arange(2 * 36, dtype=np.float32).reshape([2, *shape[1:]])
    axes = (0, 2, 3) if data_format == "NCHW" else (0, 1, 2)
    np.testing.assert_array_equal(_run(db, {dy: gv}), gv.sum(axes))


def test_relu_gradient_is_one_relu_grad_on_the_output(graph):
    x = rg.placeholder(rg.float32, [None, 5], name="x")
    y = rg.relu(x)
    dy, (dx,), types = _grads_of(y, [x])
    assert types == ["ReluGrad"]
    assert dx.op.inputs[0] is dy and dx.op.inputs[1] is y
    xv = np.array([[-1.0, 2.0, -3.0, 4.0, 0.5]], np.float32)
    gv = np.array([[10.0, 20.0, 30.0, 40.0, 50.0]], np.float32)
    np.testing.assert_array_equal(_run(dx, {x: xv, dy: gv}), [[0, 20, 0, 40, 50]])


@pytest.mark.parametrize(
    "op, grad_op, uses_output",
    [
        (rg.relu6, "Relu6Grad", True),
        (rg.elu, "EluGrad", True),
        (rg.selu, "SeluGrad", True),
        (rg.softplus, "SoftplusGrad", False),
        (rg.softsign, "SoftsignGrad", False),
        (rg.leaky_relu, "LeakyReluGrad", False),
    ],
)
def test_activation_gradients_are_one_grad_op(graph, op, grad_op, uses_output):
    x = rg.placeholder(rg.float32, [None, 5], name="x")
    y = op(x)
    dy, (dx,), types = _grads_of(y, [x])
    assert types == [grad_op]
    assert dx.op.inputs[1] is (y if uses_output else x)


def test_leaky_relu_gradient_keeps_alpha(graph):
    x = rg.placeholder(rg.float64, [4], name="x")
    (dx,) = gradients(rg.leaky_relu(x, alpha=0.25), [x])
    assert dx.op.attrs["alpha"] == pytest.approx(0.25)
    np.testing.assert_allclose(_run(dx, {x: [-2.0, -1.0, 1.0, 2.0]}), [0.25, 0.25, 1.0, 1.0])


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_gradient_has_constant_sizes(graph, data_format):
    shape = [8, 1, 28, 28] if data_format == "NCHW" else [8, 28, 28, 1]
    x = rg.placeholder(rg.float32, shape, name="x")
    w = rg.placeholder(rg.float32, [5, 5, 1, 32], name="w")
    y = rg.conv2d(x, w, strides=2, padding="SAME", data_format=data_format, dilations=1)
    dy, (dx, dw), types = _grads_of(y, [x, w])
    assert sorted(types) == ["Const", "Const", "Conv2DBackpropFilter", "Conv2DBackpropInput"]
    assert dx.op.type == "Conv2DBackpropInput" and dw.op.type == "Conv2DBackpropFilter"
    np.testing.assert_array_equal(constant_value(dx.op.inputs[0]), shape)
    np.testing.assert_array_equal(constant_value(dw.op.inputs[1]), [5, 5, 1, 32])
    for grad in (dx, dw):
        for attr in ("strides", "padding", "data_format", "dilations", "explicit_paddings"):
            assert grad.op.attrs[attr] == y.op.attrs[attr]
    assert dx.shape == x.shape and dw.shape == w.shape


def test_conv2d_gradient_with_unknown_batch_takes_spatial_sizes(graph):
    x = rg.placeholder(rg.float32, [None, 14, 14, 32], name="x")
    w = rg.placeholder(rg.float32, [5, 5, 32, 64], name="w")
    dy, (dx, dw), types = _grads_of(rg.conv2d(x, w, strides=1, padding="SAME"), [x, w])
    assert "Shape" not in types and "ShapeN" not in types
    np.testing.assert_array_equal(constant_value(dx.op.inputs[0]), [14, 14])
    assert dx.shape.as_list() == [None, 14, 14, 32]
    xv = np.random.default_rng(0).standard_normal((3, 14, 14, 32)).astype(np.float32)
    wv = np.random.default_rng(1).standard_normal((5, 5, 32, 64)).astype(np.float32)
    gv = np.ones((3, 14, 14, 64), np.float32)
    assert _run(dx, {x: xv, w: wv, dy: gv}).shape == (3, 14, 14, 32)


def test_grouped_conv2d_with_unknown_batch_takes_runtime_sizes(graph):
    # [height, width] sizes would make the kernel take the filter's depth (2) for the input's.
    x = rg.placeholder(rg.float32, [None, 4, 4, 4], name="x")
    w = rg.placeholder(rg.float32, [3, 3, 2, 2], name="w")
    dy, (dx, dw), types = _grads_of(rg.conv2d(x, w, strides=1, padding="SAME"), [x, w])
    assert dx.op.inputs[0].op.type == "Shape"
    assert constant_value(dw.op.inputs[1]) is not None


def test_conv2d_gradient_with_unknown_shapes_uses_shape_ops(graph):
    x = rg.placeholder(rg.float32, None, name="x")
    w = rg.placeholder(rg.float32, None, name="w")
    dy, (dx, dw), types = _grads_of(rg.conv2d(x, w, strides=1, padding="VALID"), [x, w])
    assert types.count("Shape") == 2
    assert dx.op.inputs[0].op.inputs[0] is x and dw.op.inputs[1].op.inputs[0] is w


def test_pool_gradients_are_one_op(graph):
    x = rg.placeholder(rg.float32, [None, 28, 28, 32], name="x")
    dy, (dx,), types = _grads_of(rg.max_pool(x, 2, 2, "SAME"), [x])
    assert types == ["MaxPoolGrad"]
    assert dx.op.inputs[0] is x and dx.op.inputs[1].op.type == "MaxPool"
    dy, (dx,), types = _grads_of(rg.avg_pool(x, 2, 2, "SAME"), [x])
    assert sorted(types) == ["AvgPoolGrad", "Shape"]
    x4 = rg.placeholder(rg.float32, [2, 4, 4, 3], name="x4")
    dy, (dx,), types = _grads_of(rg.avg_pool(x4, 2, 2, "VALID"), [x4])
    assert sorted(types) == ["AvgPoolGrad", "Const"]


def test_max_pool_routes_to_the_window_maximum(graph):
    x = rg.placeholder(rg.float64, [1, 2, 4, 1], name="x")
    dy, (dx,), _ = _grads_of(rg.max_pool(x, 2, 2, "VALID"), [x])
    xv = np.array([1.0, 5.0, 2.0, 0.0, 3.0, 4.0, 7.0, 6.0]).reshape(1, 2, 4, 1)
    gv = np.array([10.0, 20.0]).reshape(1, 1, 2, 1)
    want = np.array([0, 10.0, 0, 0, 0, 0, 20.0, 0]).reshape(1, 2, 4, 1)
    np.testing.assert_array_equal(_run(dx, {x: xv, dy: gv}), want)


def test_max_pool_grad_gradient_goes_through_max_pool_grad_grad(graph):
    # As TensorFlow's: the pooled input and output get zeros, the incoming gradient gets
    # MaxPoolGradGrad (its values are checked in the gradient conformance suite).
    x = rg.placeholder(rg.float64, [1, 4, 4, 1], name="x")
    (dx,) = gradients(rg.reduce_sum(rg.max_pool(x, 2, 2, "VALID")), [x])
    (ddx,) = gradients(rg.reduce_sum(dx * x), [x])
    types = {op.type for op in rg.get_default_graph().get_operations()}
    assert "MaxPoolGradGrad" in types
    xv = np.arange(16, dtype=np.float64).reshape(1, 4, 4, 1)
    # d/dx sum(dx * x) = dx (dx is piecewise constant in x): 1 at each window's maximum
    np.testing.assert_array_equal(_run(ddx, {x: xv}), _run(dx, {x: xv}))


def test_bias_add_grad_gradient_broadcasts_without_shape_ops(graph):
    from rill.autodiff import get_gradient_function

    x = rg.placeholder(rg.float64, [2, 3, 4], name="x")
    db = rg.get_default_graph().create_op("BiasAddGrad", [x], None).outputs[0]
    g = rg.placeholder(rg.float64, [4], name="g")
    before = len(rg.get_default_graph().get_operations())
    dx = get_gradient_function(db.op)(db.op, g)
    types = [op.type for op in rg.get_default_graph().get_operations()[before:]]
    assert sorted(types) == ["BroadcastTo", "Const"]
    np.testing.assert_array_equal(
        _run(dx, {g: [1.0, 2.0, 3.0, 4.0]}), np.broadcast_to([1.0, 2.0, 3.0, 4.0], (2, 3, 4))
    )


def test_relu_second_derivative_is_relu_grad(graph):
    x = rg.placeholder(rg.float64, [4], name="x")
    (dx,) = gradients(rg.reduce_sum(rg.relu(x) * x), [x])
    (ddx,) = gradients(rg.reduce_sum(dx), [x])
    # d/dx of (relu(x) + x·[x > 0]) is 2·[x > 0].
    np.testing.assert_array_equal(_run(ddx, {x: [-1.0, 2.0, -3.0, 4.0]}), [0, 2, 0, 2])


# -- softmax cross-entropy ------------------------------------------------------------------------


def test_softmax_cross_entropy_gradients_match_numpy(graph):
    rng = np.random.default_rng(3)
    zv = rng.standard_normal((4, 5))
    lv = _softmax(rng.standard_normal((4, 5)))
    gv = rng.uniform(0.5, 2.0, 4)
    z = rg.placeholder(rg.float64, [None, 5], name="logits")
    lab = rg.placeholder(rg.float64, [None, 5], name="labels")
    loss = rg.softmax_cross_entropy_with_logits(labels=lab, logits=z)
    dy, (dz, dl), types = _grads_of(loss, [z, lab])
    # The loss alone: no softmax term from the (zero) backprop gradient, no run-time broadcast.
    assert "Softmax" not in types and "BroadcastGradientArgs" not in types
    assert "Shape" not in types
    got_z, got_l = _run([dz, dl], {z: zv, lab: lv, dy: gv})
    log_p = zv - zv.max(1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(1, keepdims=True))
    np.testing.assert_allclose(got_z, gv[:, None] * (np.exp(log_p) - lv), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_l, -gv[:, None] * log_p, rtol=1e-12, atol=1e-14)


def test_softmax_cross_entropy_backprop_gradient_goes_through_the_softmax(graph):
    rng = np.random.default_rng(4)
    zv, lv = rng.standard_normal((3, 4)), _softmax(rng.standard_normal((3, 4)))
    z = rg.placeholder(rg.float64, [3, 4], name="logits")
    lab = rg.placeholder(rg.float64, [3, 4], name="labels")
    op = rg.get_default_graph().create_op("SoftmaxCrossEntropyWithLogits", [z, lab])
    gb = rng.standard_normal((3, 4))
    dz, dl = gradients([op.outputs[1]], [z, lab], grad_ys=[rg.constant(gb)])
    p = _softmax(zv)
    want_z = (gb - (gb * p).sum(1, keepdims=True)) * p
    got_z, got_l = _run([dz, dl], {z: zv, lab: lv})
    np.testing.assert_allclose(got_z, want_z, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_l, -gb, rtol=1e-12)


def test_sparse_softmax_cross_entropy_gradient(graph):
    rng = np.random.default_rng(5)
    zv = rng.standard_normal((4, 6))
    yv = np.array([5, 0, 3, 3], np.int64)
    z = rg.placeholder(rg.float64, [None, 6], name="logits")
    y = rg.placeholder(rg.int64, [None], name="labels")
    loss = rg.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)
    dy, (dz, dlab), types = _grads_of(loss, [z, y])
    assert dlab is None
    assert "Softmax" not in types
    gv = np.array([1.0, 2.0, 0.5, -1.0])
    want = _softmax(zv)
    want[np.arange(4), yv] -= 1
    np.testing.assert_allclose(_run(dz, {z: zv, y: yv, dy: gv}), gv[:, None] * want, rtol=1e-12)


def test_softmax_and_log_softmax_gradients(graph):
    rng = np.random.default_rng(6)
    zv, gv = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    z = rg.placeholder(rg.float64, [2, 5], name="z")
    dy, (ds,), _ = _grads_of(rg.softmax(z), [z])
    dy2, (dls,), _ = _grads_of(rg.log_softmax(z), [z])
    p = _softmax(zv)
    got_s, got_ls = _run([ds, dls], {z: zv, dy: gv, dy2: gv})
    np.testing.assert_allclose(got_s, p * (gv - (gv * p).sum(1, keepdims=True)), rtol=1e-12)
    np.testing.assert_allclose(got_ls, gv - p * gv.sum(1, keepdims=True), rtol=1e-12)


def test_is_zero_recognizes_filler_gradients(graph):
    x = rg.placeholder(rg.float32, [None, 3], name="x")
    assert is_zero(rg.zeros_like(x)) and is_zero(rg.zeros([2, 3])) and is_zero(None)
    assert is_zero(rg.zeros([100, 100]))  # a Fill
    assert not is_zero(rg.ones([2, 3])) and not is_zero(x)


# -- batch normalization --------------------------------------------------------------------------


def _bn_reference(xv, sv, gv, axis, eps, training, mean=None, var=None):
    """dx, dscale, doffset of y = scale·(x - μ)/√(σ² + ε) + offset, by the chain rule."""
    axes = tuple(a for a in range(xv.ndim) if a != axis)
    shape = [1] * xv.ndim
    shape[axis] = -1
    x, g = xv.astype(np.float64), gv.astype(np.float64)
    if training:
        mean, var = x.mean(axes), x.var(axes)
    inv = 1 / np.sqrt(var.astype(np.float64) + eps)
    xhat = (x - mean.reshape(shape)) * inv.reshape(shape)
    doffset = g.sum(axes)
    dscale = (g * xhat).sum(axes)
    dxhat = g * sv.reshape(shape)
    if not training:
        return dxhat * inv.reshape(shape), dscale, doffset
    m = x.size // x.shape[axis]
    dx = (inv.reshape(shape) / m) * (
        m * dxhat - dxhat.sum(axes).reshape(shape) - xhat * (dxhat * xhat).sum(axes).reshape(shape)
    )
    return dx, dscale, doffset


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("training", [True, False])
def test_fused_batch_norm_gradient_matches_numpy(graph, data_format, training):
    rng = np.random.default_rng(7)
    shape = (4, 3, 5, 5) if data_format == "NCHW" else (4, 5, 5, 3)
    axis = 1 if data_format == "NCHW" else 3
    f = np.float32
    xv = (rng.standard_normal(shape) * 2 + 1).astype(f)
    sv, ov = rng.uniform(0.5, 1.5, 3).astype(f), rng.standard_normal(3).astype(f)
    mv, vv = rng.standard_normal(3).astype(f), rng.uniform(0.5, 2.0, 3).astype(f)
    gv = rng.standard_normal(shape).astype(f)
    x = rg.placeholder(rg.float32, [None, *shape[1:]], name="x")
    s = rg.placeholder(rg.float32, [3], name="scale")
    o = rg.placeholder(rg.float32, [3], name="offset")
    m = rg.placeholder(rg.float32, [3], name="mean")
    v = rg.placeholder(rg.float32, [3], name="variance")
    y, _, _ = rg.fused_batch_norm(x, s, o, m, v, epsilon=0.001, data_format=data_format,
                                  is_training=training)  # fmt: skip
    dy, (dx, ds, do, dm, dv), types = _grads_of(y, [x, s, o, m, v])
    # Besides the gradient op, only the zeros gradients() fills in for the unused outputs.
    assert sorted(types) == ["Const"] * 4 + ["FusedBatchNormGradV3", "ZerosLike"], types
    assert dm is None and dv is None
    got = _run([dx, ds, do], {x: xv, s: sv, o: ov, m: mv, v: vv, dy: gv})
    want = _bn_reference(xv, sv, gv, axis, 0.001, training, mv, vv)
    for g_, w_ in zip(got, want):
        np.testing.assert_allclose(g_, w_, rtol=1e-4, atol=1e-4)


# -- LRN, L2Loss ----------------------------------------------------------------------------------


def test_lrn_gradient_is_lrn_grad_with_the_same_attrs(graph):
    x = rg.placeholder(rg.float32, [1, 2, 2, 6], name="x")
    y = rg.lrn(x, depth_radius=2, bias=1.5, alpha=0.5, beta=0.75)
    dy, (dx,), types = _grads_of(y, [x])
    assert types == ["LRNGrad"]
    assert dx.op.inputs[1] is x and dx.op.inputs[2] is y
    for k in ("depth_radius", "bias", "alpha", "beta"):
        assert dx.op.attrs[k] == y.op.attrs[k]


def test_l2_loss_gradient(graph):
    t = rg.placeholder(rg.float64, [2, 3], name="t")
    (dt,) = gradients(rg.l2_loss(t) * 3.0, [t])
    tv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(_run(dt, {t: tv}), 3.0 * tv)


# -- not differentiable ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    ["RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
     "RandomShuffle", "Multinomial", "InTopKV2"],
)  # fmt: skip
def test_not_differentiable(op):
    assert gradient_registry.lookup(op) is NO_GRADIENT


def test_random_ops_pass_no_gradient(graph):
    x = rg.placeholder(rg.float32, [5, 2], name="x")
    logits = rg.placeholder(rg.float32, [2, 3], name="logits")
    shuffled = rg.random_shuffle(x, seed=1)
    samples = rg.cast(rg.multinomial(logits, 4, seed=2), rg.float32)
    # The shuffle and the samples are constants to the gradient: only the explicit factors carry
    # one (x's own 2·x, and the samples' sum times d/dlogits of reduce_sum(logits)).
    y = rg.reduce_sum(shuffled * 3.0) + rg.reduce_sum(x * 2.0)
    y = y + rg.reduce_sum(samples) * rg.reduce_sum(logits)
    (dshuffled,) = gradients(rg.reduce_sum(shuffled), [x])
    assert dshuffled is None
    dx, dlogits = gradients(y, [x, logits])
    feed = {x: np.ones((5, 2), np.float32), logits: np.zeros((2, 3), np.float32)}
    dxv, dlv, sv = _run([dx, dlogits, samples], feed)
    np.testing.assert_array_equal(dxv, np.full((5, 2), 2.0))
    np.testing.assert_array_equal(dlv, np.full((2, 3), sv.sum()))


# -- the Figure 1 MLP against numpy backpropagation -----------------------------------------------


def test_figure1_mlp_gradient_matches_numpy_backprop(graph):
    rng = np.random.default_rng(8)
    n, d, h, k = 8, 784, 100, 10
    xv = rng.uniform(0, 1, (n, d))
    labels = np.eye(k)[rng.integers(0, k, n)]
    w1v, b1v = rng.normal(0, 0.05, (d, h)), rng.normal(0, 0.1, h)
    w2v, b2v = rng.normal(0, 0.1, (h, k)), rng.normal(0, 0.1, k)
    x = rg.placeholder(rg.float64, [None, d], name="x")
    y_ = rg.placeholder(rg.float64, [None, k], name="y_")
    w1 = rg.placeholder(rg.float64, [d, h], name="W1")
    b1 = rg.placeholder(rg.float64, [h], name="b1")
    w2 = rg.placeholder(rg.float64, [h, k], name="W2")
    b2 = rg.placeholder(rg.float64, [k], name="b2")
    hidden = rg.relu(rg.bias_add(rg.matmul(x, w1), b1))
    logits = rg.bias_add(rg.matmul(hidden, w2), b2)
    loss = rg.reduce_mean(rg.softmax_cross_entropy_with_logits(labels=y_, logits=logits))
    g = rg.get_default_graph()
    before = len(g.get_operations())
    grads = gradients(loss, [w1, b1, w2, b2])
    types = collections.Counter(op.type for op in g.get_operations()[before:])
    assert types["BiasAddGrad"] == 2 and types["ReluGrad"] == 1
    assert types["BroadcastGradientArgs"] == 0
    got = _run(grads, {x: xv, y_: labels, w1: w1v, b1: b1v, w2: w2v, b2: b2v})

    a1 = xv @ w1v + b1v
    hv = np.maximum(a1, 0)
    z = hv @ w2v + b2v
    dz = (_softmax(z) - labels) / n
    dw2, db2 = hv.T @ dz, dz.sum(0)
    da1 = (dz @ w2v.T) * (a1 > 0)
    dw1, db1 = xv.T @ da1, da1.sum(0)
    for g_, w_ in zip(got, [dw1, db1, dw2, db2]):
        np.testing.assert_allclose(g_, w_, rtol=1e-10, atol=1e-14)
