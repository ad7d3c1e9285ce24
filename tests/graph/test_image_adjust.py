"""tf.image's composite functions against numpy (and properties for the random ones)."""

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph import image_adjust as ia

IMG = np.random.RandomState(0).rand(5, 6, 3).astype(np.float32)


def _run(fn, *xs):
    with rg.Graph().as_default():
        out = fn(*[rg.constant(x) for x in xs])
        with Session() as sess:
            return sess.run(out)


def test_brightness_contrast_gamma_float_and_uint8():
    np.testing.assert_allclose(
        _run(lambda x: ia.adjust_brightness(x, 0.1), IMG), IMG + 0.1, rtol=1e-6
    )
    mean = IMG.mean(axis=(0, 1), keepdims=True)
    np.testing.assert_allclose(
        _run(lambda x: ia.adjust_contrast(x, 2.0), IMG),
        (IMG - mean) * 2 + mean,
        rtol=1e-5,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        _run(lambda x: ia.adjust_gamma(x, 2.0, 0.5), IMG), 0.5 * IMG**2, rtol=1e-6
    )
    u8 = (IMG * 255).astype(np.uint8)
    bright = _run(lambda x: ia.adjust_brightness(x, 0.5), u8)
    assert bright.dtype == np.uint8 and bright.max() == 255  # saturated, no wrap-around
    assert (bright >= u8).all()


def test_random_flips_and_adjustments_are_one_of_the_allowed_results():
    for seed in range(6):
        got = _run(lambda x, s=seed: ia.random_flip_left_right(x, seed=s), IMG)
        assert np.array_equal(got, IMG) or np.array_equal(got, IMG[:, ::-1])
        got = _run(lambda x, s=seed: ia.random_flip_up_down(x, seed=s), IMG)
        assert np.array_equal(got, IMG) or np.array_equal(got, IMG[::-1])
    batch = np.stack([IMG] * 8)
    got = _run(lambda x: ia.random_flip_left_right(x, seed=3), batch)
    for g in got:
        assert np.array_equal(g, IMG) or np.array_equal(g, IMG[:, ::-1])
    delta = _run(lambda x: ia.random_brightness(x, 0.2, seed=1), IMG) - IMG
    assert np.allclose(delta, delta.flat[0], atol=1e-6) and abs(delta.flat[0]) <= 0.2
    with pytest.raises(ValueError, match="upper must be > lower"):
        ia.random_contrast(IMG, 0.5, 0.5)


def test_rotations_crops_pads():
    for k in range(4):
        np.testing.assert_array_equal(_run(lambda x, k=k: ia.rot90(x, k), IMG), np.rot90(IMG, k))
    np.testing.assert_array_equal(
        _run(lambda x: ia.crop_to_bounding_box(x, 1, 2, 3, 2), IMG), IMG[1:4, 2:4]
    )
    padded = _run(lambda x: ia.pad_to_bounding_box(x, 1, 2, 8, 9), IMG)
    want = np.zeros((8, 9, 3), np.float32)
    want[1:6, 2:8] = IMG
    np.testing.assert_array_equal(padded, want)
    got = _run(lambda x: ia.resize_image_with_crop_or_pad(x, 3, 10), IMG)
    want = np.zeros((3, 10, 3), np.float32)
    want[:, 2:8] = IMG[1:4]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(_run(lambda x: ia.central_crop(x, 0.5), IMG), IMG[1:4, 1:5])
    with rg.Graph().as_default(), Session() as sess:
        with pytest.raises(rg.errors.InvalidArgumentError, match="target box"):
            sess.run(ia.pad_to_bounding_box(rg.constant(IMG), 0, 0, 4, 6))


def test_grayscale_gradients_total_variation():
    gray = _run(ia.rgb_to_grayscale, IMG)
    np.testing.assert_allclose(gray[..., 0], IMG @ np.float32([0.2989, 0.5870, 0.1140]), rtol=1e-5)
    assert _run(ia.grayscale_to_rgb, gray).shape == (5, 6, 3)
    batch = IMG[None]
    dy, dx = _run(ia.image_gradients, batch)
    np.testing.assert_allclose(dy[0, :-1], IMG[1:] - IMG[:-1], rtol=1e-6)
    assert not dy[0, -1].any() and not dx[0, :, -1].any()
    tv = np.abs(np.diff(IMG, axis=0)).sum() + np.abs(np.diff(IMG, axis=1)).sum()
    np.testing.assert_allclose(_run(ia.total_variation, IMG), tv, rtol=1e-5)
    np.testing.assert_allclose(_run(ia.total_variation, batch), [tv], rtol=1e-5)
