"""The composite nn builders (rill.graph.ops.nn_impl), the tf-like namespaces and the
module-level scopes, run and checked against numpy references."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session

rng = np.random.default_rng(0)


def _run(build):
    g = rg.Graph()
    with g.as_default():
        out = build()
        return Session(graph=g).run(out)


def test_xw_plus_b_and_l2_normalize():
    x, w, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=4)
    got = _run(lambda: rg.nn.xw_plus_b(x, w, b))
    np.testing.assert_allclose(got, x @ w + b, rtol=1e-10)
    got = _run(lambda: rg.nn.l2_normalize(x, dim=1))
    np.testing.assert_allclose(got, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-10)
    zero = _run(lambda: rg.nn.l2_normalize(np.zeros(3), 0))
    np.testing.assert_array_equal(zero, 0)


def test_weighted_cross_entropy_matches_the_definition():
    z = rng.uniform(size=(4, 3))
    x = rng.normal(scale=5, size=(4, 3))
    q = 2.5
    want = -(q * z * np.log(1 / (1 + np.exp(-x))) + (1 - z) * np.log(1 - 1 / (1 + np.exp(-x))))
    got = _run(lambda: rg.nn.weighted_cross_entropy_with_logits(z, x, q))
    np.testing.assert_allclose(got, want, rtol=1e-9)
    big = _run(lambda: rg.nn.weighted_cross_entropy_with_logits([1.0], [-1000.0], 1.0))
    assert np.isfinite(big).all() and abs(big[0] - 1000.0) < 1e-6


def _conv_valid(x, w, stride=1, dilation=1):
    """Reference NHWC cross-correlation, VALID padding."""
    kh, kw = w.shape[:2]
    ekh, ekw = (kh - 1) * dilation + 1, (kw - 1) * dilation + 1
    n, h, wd, _ = x.shape
    oh, ow = (h - ekh) // stride + 1, (wd - ekw) // stride + 1
    out = np.zeros((n, oh, ow, w.shape[3]))
    for i in range(oh):
        for j in range(ow):
            patch = x[
                :,
                i * stride : i * stride + ekh : dilation,
                j * stride : j * stride + ekw : dilation,
            ]
            out[:, i, j] = np.einsum("nhwc,hwcd->nd", patch, w)
    return out


def test_conv2d_transpose_is_the_adjoint_of_conv2d():
    x = rng.normal(size=(2, 7, 7, 3))
    w = rng.normal(size=(3, 3, 3, 4))
    y = rng.normal(size=(2, 3, 3, 4))

    def build():
        conv = rg.nn.conv2d(x, w, [1, 2, 2, 1], "VALID")
        t = rg.nn.conv2d_transpose(y, w, [2, 7, 7, 3], [1, 2, 2, 1], "VALID")
        assert t.shape.as_list() == [2, 7, 7, 3]
        return [conv, t]

    conv, t = _run(build)
    np.testing.assert_allclose(conv, _conv_valid(x, w, stride=2), rtol=1e-9)
    assert np.isclose(np.sum(conv * y), np.sum(x * t))
    with rg.Graph().as_default(), pytest.raises(ValueError, match="in_channels"):
        rg.nn.conv2d_transpose(y, rng.normal(size=(3, 3, 3, 5)), [2, 7, 7, 3], 2, "VALID")


def test_atrous_separable_and_depthwise():
    x = rng.normal(size=(1, 9, 9, 2))
    w = rng.normal(size=(3, 3, 2, 3))
    got = _run(lambda: rg.nn.atrous_conv2d(x, w, 2, "VALID"))
    np.testing.assert_allclose(got, _conv_valid(x, w, dilation=2), rtol=1e-9)
    dw = rng.normal(size=(3, 3, 2, 2))
    pw = rng.normal(size=(1, 1, 4, 5))
    got = _run(lambda: rg.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "VALID"))
    depth = np.concatenate(
        [_conv_valid(x[..., c : c + 1], dw[:, :, c : c + 1, :]) for c in range(2)], axis=-1
    )
    np.testing.assert_allclose(got, np.einsum("nhwc,cd->nhwd", depth, pw[0, 0]), rtol=1e-9)
    got = _run(lambda: rg.nn.depthwise_conv2d(x, dw, [1, 1, 1, 1], "VALID"))
    np.testing.assert_allclose(got, depth, rtol=1e-9)


def test_conv1d_and_1d_pools():
    x = rng.normal(size=(2, 10, 3))
    w = rng.normal(size=(3, 3, 4))
    got = _run(lambda: rg.nn.conv1d(x, w, 1, "VALID"))
    want = _conv_valid(x[:, None], w[None])[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    got = _run(lambda: rg.nn.max_pool1d(x, 2, 2, "VALID"))
    np.testing.assert_allclose(got, x.reshape(2, 5, 2, 3).max(axis=2))
    got = _run(lambda: rg.nn.avg_pool1d(x, 2, 2, "VALID"))
    np.testing.assert_allclose(got, x.reshape(2, 5, 2, 3).mean(axis=2))


def test_image_namespace():
    img = rng.uniform(size=(4, 5, 3)).astype(np.float32)
    np.testing.assert_array_equal(_run(lambda: rg.image.flip_left_right(img)), img[:, ::-1])
    np.testing.assert_array_equal(_run(lambda: rg.image.flip_up_down(img)), img[::-1])
    np.testing.assert_array_equal(
        _run(lambda: rg.image.transpose_image(img)), img.transpose(1, 0, 2)
    )
    got = _run(lambda: rg.image.per_image_standardization(img))
    want = (img - img.mean()) / max(img.std(), 1 / np.sqrt(img.size))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    u8 = _run(lambda: rg.image.convert_image_dtype(img, rg.uint8))
    np.testing.assert_array_equal(u8, (img * 255.5).astype(np.uint8))
    back = _run(lambda: rg.image.convert_image_dtype(u8, rg.float32))
    np.testing.assert_allclose(back, u8 / 255.0, rtol=1e-6)


def test_namespaces_reexport_the_owning_builders():
    assert rg.nn.relu is rg.relu and rg.math.reduce_sum is rg.reduce_sum
    assert rg.random.uniform is rg.random_uniform and rg.linalg.matmul is rg.matmul
    with rg.Graph().as_default():
        t = rg.linalg.matrix_transpose(rg.ones([2, 3, 4]))
        assert t.shape.as_list() == [2, 4, 3]


def test_module_level_scopes():
    g = rg.Graph()
    with g.as_default():
        a = rg.constant(1.0, name="a")
        with rg.name_scope(None, "outer") as scope:
            assert scope == "outer/"
            with rg.device("/cpu:0"), rg.control_dependencies([a]):
                b = rg.constant(2.0, name="b")
            with rg.colocate_with(a):
                c = rg.identity(a, name="c")
    assert b.name == "outer/b:0" and b.device == "/device:CPU:0"
    assert b.op.control_inputs == [a.op]
    assert c.op.colocation_groups() == ["a"]
    with pytest.raises(ValueError):
        with g.as_default(), rg.device("/nonsense:zz"):
            pass


def test_batch_normalization_formula():
    x = rng.normal(size=(4, 3))
    m, v = x.mean(0), x.var(0)
    off, sc = rng.normal(size=3), rng.normal(size=3)
    got = _run(lambda: rg.nn.batch_normalization(x, m, v, off, sc, 1e-3))
    np.testing.assert_allclose(got, (x - m) * sc / np.sqrt(v + 1e-3) + off, rtol=1e-10)


def test_math_composites():
    x = rng.normal(size=(3, 4)) * 10
    np.testing.assert_allclose(
        _run(lambda: rg.math.reduce_logsumexp(x, 1)), np.log(np.exp(x).sum(1)), rtol=1e-10
    )
    np.testing.assert_allclose(
        _run(lambda: rg.math.reduce_logsumexp(x, keepdims=True)),
        [[np.log(np.exp(x).sum())]],
        rtol=1e-10,
    )
    big = _run(lambda: rg.math.reduce_logsumexp(np.array([1000.0, 1000.0])))
    assert np.isclose(big, 1000.0 + np.log(2))
    neg_inf = _run(lambda: rg.math.reduce_logsumexp(np.array([-np.inf, -np.inf])))
    assert neg_inf == -np.inf
    np.testing.assert_allclose(_run(lambda: rg.math.reduce_variance(x, 0)), x.var(0), rtol=1e-10)
    np.testing.assert_allclose(_run(lambda: rg.math.reduce_std(x)), x.std(), rtol=1e-10)
    np.testing.assert_allclose(
        _run(lambda: rg.math.reduce_euclidean_norm(x, 1)), np.linalg.norm(x, axis=1), rtol=1e-10
    )
    np.testing.assert_allclose(
        _run(lambda: rg.math.log_sigmoid(np.array([-800.0, 0.0, 30.0]))),
        [-800.0, np.log(0.5), -np.log1p(np.exp(-30.0))],
        rtol=1e-10,
    )


def test_nn_composites():
    x, w, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=4)
    np.testing.assert_allclose(_run(lambda: rg.nn.relu_layer(x, w, b)), np.maximum(x @ w + b, 0))
    np.testing.assert_allclose(
        _run(lambda: rg.nn.crelu(x)), np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], -1)
    )
    np.testing.assert_allclose(_run(lambda: rg.nn.silu(x)), x / (1 + np.exp(-x)), rtol=1e-10)
    assert float(_run(lambda: rg.nn.zero_fraction(np.array([0.0, 1.0, 0.0, 2.0])))) == 0.5
    z = np.array([0.0, 1.0, 3.0, 10.0])
    c = np.array([0.5, -0.2, 1.0, 2.0])
    base = np.exp(c) - z * c
    np.testing.assert_allclose(_run(lambda: rg.nn.log_poisson_loss(z, c)), base, rtol=1e-10)
    stirling = np.where(
        z > 1, z * np.log(np.maximum(z, 1)) - z + 0.5 * np.log(2 * np.pi * np.maximum(z, 1)), 0
    )
    np.testing.assert_allclose(
        _run(lambda: rg.nn.log_poisson_loss(z, c, compute_full_loss=True)),
        base + stirling,
        rtol=1e-10,
    )
