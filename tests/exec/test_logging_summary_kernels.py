"""Assert / Print / CheckNumerics, the tf.assert_* builders, and the summary ops' Summary
protocol buffers (parsed back with rill's own wire-compatible proto)."""

import io
import wave
import zlib

import numpy as np
import pytest

import rill.graph as rg
from rill.exec import Session
from rill.graph.errors import InvalidArgumentError
from rill.graph.proto.summary_pb2 import Summary


def _summary(t, feed=None):
    return Summary.FromString(Session(graph=t.graph).run(t, feed))  # bytes, as TensorFlow


def test_assert_passes_and_fails_naming_its_data():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [None])
        a = rg.assert_op(rg.reduce_all(x > 0.0), ["x must be positive:", x], summarize=2)
        s = Session()
        s.run(a, {x: [1.0, 2.0]})
        with pytest.raises(InvalidArgumentError, match="assertion failed") as e:
            s.run(a, {x: [-1.0, 2.0, 3.0]})
        assert "x must be positive:" in str(e.value) and "-1" in str(e.value)


def test_print_passes_its_input_through_and_prints_first_n(capfd):
    with rg.Graph().as_default():
        x = rg.placeholder(rg.int32, [3])
        y = rg.print_op(x, [x, "tail"], message="x is ", first_n=1) * 2
        s = Session()
        np.testing.assert_array_equal(s.run(y, {x: [1, 2, 3]}), [2, 4, 6])
        s.run(y, {x: [4, 5, 6]})
    err = capfd.readouterr().err
    assert err.count("x is ") == 1 and "tail" in err and "4 5 6" not in err


def test_check_numerics_names_nan_and_inf():
    with rg.Graph().as_default():
        x = rg.placeholder(rg.float32, [2])
        y = rg.check_numerics(x, "after layer 1")
        s = Session()
        np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [1.0, 2.0])
        with pytest.raises(InvalidArgumentError, match="after layer 1 : Tensor had NaN values"):
            s.run(y, {x: [np.nan, 1.0]})
        with pytest.raises(InvalidArgumentError, match="Tensor had Inf values"):
            s.run(y, {x: [np.inf, 1.0]})


def test_assert_builders_static_and_dynamic():
    with rg.Graph().as_default():
        with pytest.raises(InvalidArgumentError, match="x == y did not hold"):
            rg.assert_equal(rg.constant([1, 2]), rg.constant([1, 3]))
        with pytest.raises(ValueError, match="must have rank 2"):
            rg.assert_rank(rg.constant([1, 2]), 2)
        with pytest.raises(TypeError, match="must be of type float32"):
            rg.assert_type(rg.constant([1, 2]), rg.float32)
        x = rg.placeholder(rg.float32, [None])
        checks = [rg.assert_positive(x), rg.assert_less(x, 10.0), rg.assert_non_negative(x)]
        with rg.control_dependencies(checks):
            y = rg.identity(x)
        s = Session()
        s.run(y, {x: [1.0, 9.0]})
        with pytest.raises(InvalidArgumentError, match="x > y did not hold"):
            s.run(y, {x: [0.0, 9.0]})
        with pytest.raises(InvalidArgumentError, match="x < y did not hold"):
            s.run(y, {x: [1.0, 11.0]})


def test_assert_near_and_rank_at_least():
    with rg.Graph().as_default():
        with pytest.raises(ValueError, match="rank at least 3"):
            rg.assert_rank_at_least(rg.constant([1, 2]), 3)
        x = rg.placeholder(rg.float32, None)
        r = rg.assert_rank_at_least(x, 1)
        near = rg.assert_near(x, 1.0, atol=0.01)
        s = Session()
        s.run([r, near], {x: [1.005]})
        with pytest.raises(InvalidArgumentError, match="assertion failed"):
            s.run(r, {x: 1.0})
        with pytest.raises(InvalidArgumentError, match="not equal to tolerance"):
            s.run(near, {x: [1.5]})


def test_scalar_and_merged_summaries():
    with rg.Graph().as_default():
        a = rg.scalar_summary(["a", "b"], rg.constant([1.5, 2.5]))
        b = rg.scalar_summary("c", rg.constant(3, rg.int32))
        s = _summary(rg.merge_summary([a, b]))
        assert [(v.tag, v.simple_value) for v in s.value] == [("a", 1.5), ("b", 2.5), ("c", 3.0)]
        with pytest.raises(InvalidArgumentError, match="Duplicate tag a"):
            _summary(rg.merge_summary([a, a]))
        with pytest.raises(InvalidArgumentError, match="not the same shape"):
            _summary(rg.scalar_summary(["a", "b"], rg.constant([1.0])))


def test_histogram_counts_every_value_in_tensorflows_buckets():
    values = np.random.default_rng(0).normal(size=1000)
    with rg.Graph().as_default():
        h = _summary(rg.histogram_summary("w", rg.constant(values))).value[0].histo
    assert h.num == 1000 and np.isclose(h.sum, values.sum())
    assert np.isclose(h.sum_squares, (values**2).sum())
    assert h.min == values.min() and h.max == values.max()
    assert sum(h.bucket) == 1000
    limits = list(h.bucket_limit)
    assert limits == sorted(limits)
    # Each value lies below its bucket's limit and at or above the previous one.
    counts = np.zeros(len(limits))
    for v in values:
        counts[np.searchsorted(limits, v, side="right")] += 1
    np.testing.assert_array_equal(counts, h.bucket)
    with rg.Graph().as_default(), pytest.raises(InvalidArgumentError, match="NaN in summary"):
        _summary(rg.histogram_summary("w", rg.constant([np.nan])))


def _png_pixels(png: bytes, h: int, w: int, c: int) -> np.ndarray:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data = 8, b""
    while pos < len(png):
        n = int.from_bytes(png[pos : pos + 4], "big")
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            data += png[pos + 8 : pos + 8 + n]
        pos += 12 + n
    rows = np.frombuffer(zlib.decompress(data), np.uint8).reshape(h, 1 + w * c)
    assert (rows[:, 0] == 0).all()
    return rows[:, 1:].reshape(h, w, c)


def test_image_summary_scales_floats_and_encodes_png():
    img = np.random.default_rng(1).uniform(size=(3, 4, 5, 3)).astype(np.float32)
    img[0, 0, 0, 0] = np.nan
    with rg.Graph().as_default():
        s = _summary(rg.image_summary("pic", rg.constant(img), max_images=2))
    assert [v.tag for v in s.value] == ["pic/image/0", "pic/image/1"]
    v = s.value[1].image
    assert (v.height, v.width, v.colorspace) == (4, 5, 3)
    got = _png_pixels(v.encoded_image_string, 4, 5, 3)
    want = np.clip(img[1] * (255.0 / img[1].max()), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
    bad = _png_pixels(s.value[0].image.encoded_image_string, 4, 5, 3)
    np.testing.assert_array_equal(bad[0, 0], [255, 0, 0])
    with rg.Graph().as_default(), pytest.raises(ValueError, match="4-D"):
        rg.image_summary("pic", rg.constant(img[0]))


def test_audio_summary_writes_wav():
    clip = np.sin(np.linspace(0, 20, 400)).astype(np.float32)[None]
    with rg.Graph().as_default():
        s = _summary(rg.audio_summary("snd", rg.constant(clip), 8000.0))
    a = s.value[0].audio
    assert s.value[0].tag == "snd/audio" and a.content_type == "audio/wav"
    assert (a.sample_rate, a.num_channels, a.length_frames) == (8000.0, 1, 400)
    with wave.open(io.BytesIO(a.encoded_audio_string)) as w:
        pcm = np.frombuffer(w.readframes(400), "<i2")
        assert w.getframerate() == 8000
    np.testing.assert_allclose(pcm / 32767.0, clip[0], atol=1e-4)
