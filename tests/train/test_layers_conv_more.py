"""tf.layers conv2d_transpose, separable_conv2d, conv1d, max_pooling1d, average_pooling1d:
variables, shapes, values (against the nn builders with the same weights) and training."""

import numpy as np
import pytest

import rill.graph as rg
from rill.autodiff import gradients
from rill.exec import Session
from rill.train import layers

rng = np.random.default_rng(3)


def _run(fetch, feed=None):
    s = Session()
    s.run(rg.global_variables_initializer())
    return s, s.run(fetch, feed)


def test_conv2d_transpose_layer_with_unknown_batch():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None, 4, 4, 3])
        y = layers.conv2d_transpose(x, 5, 3, strides=2, padding="valid", name="up")
        assert y.shape.as_list() == [None, 9, 9, 5]
        (kernel, bias) = rg.trainable_variables()
        assert kernel.name == "up/kernel:0" and kernel.shape.as_list() == [3, 3, 5, 3]
        xv = rng.normal(size=(2, 4, 4, 3)).astype(np.float32)
        ref = rg.nn.conv2d_transpose(x, kernel, rg.stack([rg.shape(x)[0], 9, 9, 5]), 2, "VALID")
        s, (got, want) = _run([y, ref + bias], {x: xv})
        assert got.shape == (2, 9, 9, 5)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        same = layers.conv2d_transpose(x, 2, 3, strides=2, padding="same")
        assert same.shape.as_list() == [None, 8, 8, 2]


def test_separable_conv2d_layer():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None, 6, 6, 2])
        y = layers.separable_conv2d(x, 4, 3, depth_multiplier=2, padding="same", name="sep")
        names = sorted(v.name for v in rg.trainable_variables())
        assert names == ["sep/bias:0", "sep/depthwise_kernel:0", "sep/pointwise_kernel:0"]
        dw, pw = (v for v in rg.trainable_variables() if "kernel" in v.name)
        ref = rg.nn.separable_conv2d(x, dw, pw, [1, 1, 1, 1], "SAME")
        xv = rng.normal(size=(1, 6, 6, 2)).astype(np.float32)
        _, (got, want) = _run([y, ref], {x: xv})
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_conv1d_and_1d_pooling_layers_train():
    with rg.Graph().as_default():
        rg.set_random_seed(0)
        x = rg.placeholder(rg.float32, [None, 12, 3])
        h = layers.conv1d(x, 4, 3, padding="same", activation=rg.relu)
        assert h.shape.as_list() == [None, 12, 4]
        p = layers.max_pooling1d(h, 2, 2)
        a = layers.average_pooling1d(h, 3, 3)
        assert p.shape.as_list() == [None, 6, 4] and a.shape.as_list() == [None, 4, 4]
        loss = rg.reduce_mean(rg.square(p)) + rg.reduce_mean(a)
        grads = gradients(loss, rg.trainable_variables())
        xv = rng.normal(size=(2, 12, 3)).astype(np.float32)
        _, (hv, pv, av, gv) = _run([h, p, a, grads], {x: xv})
        np.testing.assert_allclose(pv, hv.reshape(2, 6, 2, 4).max(axis=2), rtol=1e-6)
        np.testing.assert_allclose(av, hv.reshape(2, 4, 3, 4).mean(axis=2), rtol=1e-5)
        assert all(np.isfinite(g).all() for g in gv) and np.abs(gv[0]).sum() > 0


def test_layer_shape_errors_name_the_layer():
    with rg.Graph().as_default():
        with pytest.raises(ValueError, match="expected ndim=3"):
            layers.conv1d(rg.placeholder(rg.float32, [None, 4, 4, 3]), 2, 3)
        with pytest.raises(ValueError, match="channel dimension"):
            layers.conv2d_transpose(rg.placeholder(rg.float32, [None, 4, 4, None]), 2, 3)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_conv3d_and_3d_pooling_layers_train(data_format):
    first = data_format == "channels_first"
    with rg.Graph().as_default():
        rg.set_random_seed(0)
        shape = [None, 2, 4, 6, 6] if first else [None, 4, 6, 6, 2]
        x = rg.placeholder(rg.float32, shape)
        h = layers.conv3d(x, 3, (2, 3, 3), padding="same", data_format=data_format,
                          activation=rg.relu, name="c3")  # fmt: skip
        kernel, bias = rg.trainable_variables()
        assert kernel.name == "c3/kernel:0" and kernel.shape.as_list() == [2, 3, 3, 2, 3]
        p = layers.max_pooling3d(h, 2, 2, data_format=data_format)
        a = layers.average_pooling3d(h, (1, 2, 3), (1, 2, 3), data_format=data_format)
        loss = rg.reduce_mean(rg.square(p)) + rg.reduce_mean(a)
        grads = gradients(loss, [kernel, bias])
        xv = rng.normal(size=(2, *shape[1:])).astype(np.float32)
        _, (hv, pv, av, kv, bv, gv) = _run([h, p, a, kernel, bias, grads], {x: xv})
        # channels last throughout, for the numpy references
        hl, xl = (np.moveaxis(hv, 1, -1), np.moveaxis(xv, 1, -1)) if first else (hv, xv)
        xp = np.pad(xl, [(0, 0), (0, 1), (1, 1), (1, 1), (0, 0)])
        want = np.zeros_like(hl)
        for d, i, j in np.ndindex(2, 3, 3):
            want += np.einsum(
                "ndhwc,co->ndhwo", xp[:, d : d + 4, i : i + 6, j : j + 6], kv[d, i, j]
            )
        np.testing.assert_allclose(hl, np.maximum(want + bv, 0), rtol=1e-4, atol=1e-5)
        pl = np.moveaxis(pv, 1, -1) if first else pv
        al = np.moveaxis(av, 1, -1) if first else av
        np.testing.assert_allclose(pl, hl.reshape(2, 2, 2, 3, 2, 3, 2, 3).max(axis=(2, 4, 6)),
                                   rtol=1e-6)  # fmt: skip
        np.testing.assert_allclose(al, hl.reshape(2, 4, 1, 3, 2, 2, 3, 3).mean(axis=(2, 4, 6)),
                                   rtol=1e-5)  # fmt: skip
        assert all(np.isfinite(g).all() for g in gv) and np.abs(gv[0]).sum() > 0
        with pytest.raises(ValueError, match="expected ndim=5"):
            layers.conv3d(rg.placeholder(rg.float32, [None, 4, 4, 3]), 2, 3)
