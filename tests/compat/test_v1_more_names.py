"""TF1 names added over rill's ops: tf.nn's 3-D / N-D convolution and pooling, moments, CTC
greedy decoding; tf's variable scatters, space-to-batch, small math, string and file ops.
Expected values are numpy's or TensorFlow 2.21's (tf.compat.v1, pasted)."""

from __future__ import annotations

import numpy as np
import pytest

import rill.compat.v1 as tf


def _run(fetches, feed=None):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default():
        yield


_r = np.random.RandomState(0)
X4 = _r.randn(2, 9, 8, 3).astype(np.float32)
W4 = _r.randn(3, 3, 3, 4).astype(np.float32)
X5 = _r.randn(1, 4, 5, 6, 2).astype(np.float32)
W5 = _r.randn(2, 3, 2, 2, 3).astype(np.float32)


def _conv_nhwc(x, w, dil=(1, 1)):
    """VALID stride-1 dilated conv2d in numpy."""
    kh, kw = (w.shape[0] - 1) * dil[0] + 1, (w.shape[1] - 1) * dil[1] + 1
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            patch = x[:, i * dil[0] : i * dil[0] + oh, j * dil[1] : j * dil[1] + ow]
            out += patch @ w[i, j]
    return out


# -- tf.nn convolution ---------------------------------------------------------------------------


def test_conv3d_and_convolution_dispatch():
    got3 = tf.nn.conv3d(X5, W5, [1, 1, 1, 1, 1], "VALID")
    via = tf.nn.convolution(X5, W5, "VALID")
    d2 = tf.nn.convolution(X4, W4, "VALID", dilation_rate=[2, 1])
    a, b, c = _run([got3, via, d2])
    ref = np.zeros(a.shape)
    for i in range(2):
        for j in range(3):
            for k in range(2):
                ref += X5[:, i : i + 3, j : j + 3, k : k + 5] @ W5[i, j, k]
    np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(b, a, rtol=1e-6)
    np.testing.assert_allclose(c, _conv_nhwc(X4, W4, (2, 1)), rtol=1e-4, atol=1e-4)


def test_convolution_errors():
    with pytest.raises(ValueError, match="Cannot specify both 'filters' and 'filter'"):
        tf.nn.convolution(X4, W4, "SAME", filters=W4)
    with pytest.raises(ValueError, match="strides should be of length 1, 2 or 4"):
        tf.nn.convolution(X4, W4, "SAME", strides=[1, 1, 1])


def test_conv_transposes_are_adjoints_of_conv():
    """<conv(x), y> == <x, conv_transpose(y)> for every transposed convolution."""
    y4 = _r.randn(2, 9, 8, 4).astype(np.float32)
    x3, w3, y3 = _r.randn(2, 10, 3), _r.randn(3, 3, 4), _r.randn(2, 5, 4)
    x3, w3, y3 = (a.astype(np.float32) for a in (x3, w3, y3))
    y5 = _r.randn(1, 4, 5, 6, 3).astype(np.float32)
    pairs = [
        (tf.nn.atrous_conv2d(X4, W4, 2, "SAME"), X4,
         tf.nn.atrous_conv2d_transpose(y4, W4, [2, 9, 8, 3], 2, "SAME"), y4),
        (tf.nn.conv1d(x3, np.transpose(w3, (0, 1, 2)), 2, "SAME"), x3,
         tf.nn.conv1d_transpose(y3, np.transpose(w3, (0, 2, 1)).copy().transpose(0, 2, 1),
                                [2, 10, 3], 2), y3),
        (tf.nn.conv3d(X5, W5, [1, 1, 1, 1, 1], "SAME"), X5,
         tf.nn.conv3d_transpose(y5, W5, [1, 4, 5, 6, 2], [1, 1, 1, 1, 1]), y5),
    ]  # fmt: skip
    outs = _run([[p[0], p[2]] for p in pairs])
    for (fwd, bwd), (_, x, _, y) in zip(outs, pairs):
        np.testing.assert_allclose(np.vdot(fwd, y), np.vdot(x, bwd), rtol=1e-3)


def test_conv3d_backprop_filter_v2_is_the_filter_gradient():
    w = tf.constant(W5)
    y = tf.nn.conv3d(X5, w, [1, 1, 1, 1, 1], "SAME")
    g = tf.gradients(tf.reduce_sum(y), w)[0]
    direct = tf.nn.conv3d_backprop_filter_v2(X5, [2, 3, 2, 2, 3], tf.ones_like(y),
                                             [1, 1, 1, 1, 1], "SAME")  # fmt: skip
    a, b = _run([g, direct])
    np.testing.assert_allclose(a, b, rtol=1e-5)


# -- pooling ------------------------------------------------------------------------------------


def test_pool_and_v2_dispatch():
    x3 = X4[:, :, 0, :]
    fetches = [
        tf.nn.pool(X4, [2, 2], "MAX", "VALID", strides=[2, 2]),
        tf.nn.max_pool_v2(X4, 2, 2, "VALID"),
        tf.nn.pool(X4, [2, 2], "MAX", "VALID", dilation_rate=[2, 3]),
        tf.nn.avg_pool_v2(x3, 3, 1, "VALID"),
        tf.nn.max_pool3d(X5, 2, 2, "VALID"),
        tf.nn.avg_pool3d(X5, [1, 2, 2, 2, 1], [1, 1, 1, 1, 1], "VALID"),
    ]
    p, mp, dil, avg1, m3, a3 = _run(fetches)
    ref = X4[:, :8].reshape(2, 4, 2, 4, 2, 3).max(axis=(2, 4))
    np.testing.assert_allclose(p, ref)
    np.testing.assert_allclose(mp, ref)
    # dilated: window taps at (i, j), (i + 2, j), (i, j + 3), (i + 2, j + 3)
    want = np.maximum.reduce([X4[:, a : a + 7, b : b + 5] for a in (0, 2) for b in (0, 3)])
    np.testing.assert_allclose(dil, want)
    np.testing.assert_allclose(avg1, (x3[:, :-2] + x3[:, 1:-1] + x3[:, 2:]) / 3, rtol=1e-5)
    np.testing.assert_allclose(m3, X5[:, :4, :4, :6].reshape(1, 2, 2, 2, 2, 3, 2, 2)
                               .max(axis=(2, 4, 6)))  # fmt: skip
    ref3 = sum(X5[:, a : a + 3, b : b + 4, c : c + 5] for a in (0, 1) for b in (0, 1)
               for c in (0, 1)) / 8  # fmt: skip
    np.testing.assert_allclose(a3, ref3, rtol=1e-5, atol=1e-6)


def test_pool_errors():
    with pytest.raises(ValueError, match="2-D SUM pooling is not supported"):
        tf.nn.pool(X4, [2, 2], "SUM", "VALID")
    with pytest.raises(ValueError, match="'SAME' padding is not implemented for `dilation_rate`"):
        tf.nn.pool(X4, [2, 2], "MAX", "SAME", dilation_rate=[2, 2])
    with pytest.raises(ValueError, match="`strides` > `window_shape` not supported"):
        tf.nn.pool(X4, [2, 2], "MAX", "VALID", strides=[3, 1])
    with pytest.raises(ValueError, match="must be 3, 4 or 5"):
        tf.nn.max_pool_v2(tf.zeros([2, 2]), 2, 2, "VALID")


def test_max_pool_with_argmax_v1_signature():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)[:, ::-1]
    out, arg = tf.nn.max_pool_with_argmax(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID",
                                          Targmax=tf.int32)  # fmt: skip
    assert arg.dtype == tf.int32
    o, a = _run([out, arg])
    np.testing.assert_array_equal(o[0, :, :, 0], [[13, 15], [5, 7]])
    np.testing.assert_array_equal(a[0, :, :, 0], [[1, 3], [9, 11]])
    with pytest.raises(ValueError, match="other than 'NHWC'"):
        tf.nn.max_pool_with_argmax(x, 2, 2, "VALID", data_format="NCHW")


# -- space to batch / depth ---------------------------------------------------------------------


def test_space_to_batch_family():
    x = np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2)
    s2b = tf.space_to_batch(x, [[0, 0], [1, 1]], block_size=2)
    back = tf.batch_to_space(s2b, [[0, 0], [1, 1]], 2)
    nn_s2b = tf.nn.space_to_batch(x, [[0, 0], [1, 1]], 2)
    paddings, crops = tf.required_space_to_batch_paddings([7, 5], [2, 3], [[1, 0], [0, 2]])
    s2d = tf.nn.space_to_depth(x, 2)
    d2s = tf.nn.depth_to_space(s2d, 2)
    a, b, c, p, cr, d, e = _run([s2b, back, nn_s2b, paddings, crops, s2d, d2s])
    assert a.shape == (4, 2, 3, 2)
    np.testing.assert_array_equal(b, x)
    np.testing.assert_array_equal(c, a)
    np.testing.assert_array_equal(p, [[1, 0], [0, 4]])  # TensorFlow 2.21
    np.testing.assert_array_equal(cr, [[0, 0], [0, 2]])
    np.testing.assert_array_equal(d[0, 0, 0], np.concatenate([x[0, 0, 0], x[0, 0, 1],
                                                              x[0, 1, 0], x[0, 1, 1]]))  # fmt: skip
    np.testing.assert_array_equal(e, x)
    with pytest.raises(ValueError, match="Cannot specify both"):
        tf.space_to_batch(x, [[0, 0], [0, 0]], block_size=2, block_shape=2)


def test_with_space_to_batch_is_a_dilated_op():
    out = tf.nn.with_space_to_batch(
        tf.constant(X4), [2, 2], "VALID",
        lambda i, n, p: tf.nn.conv2d(i, W4, [1, 1, 1, 1], p),
    )  # fmt: skip
    np.testing.assert_allclose(_run(out), _conv_nhwc(X4, W4, (2, 2)), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="filter_shape must be specified for SAME"):
        tf.nn.with_space_to_batch(X4, [2, 2], "SAME", lambda i, n, p: i)


# -- statistics ---------------------------------------------------------------------------------


def test_moments_family():
    w = _r.rand(2, 1, 8, 3).astype(np.float32)
    wm, wv = tf.nn.weighted_moments(X4, [1, 2], w)
    counts, m_ss, v_ss, shift = tf.nn.sufficient_statistics(X4, [0, 1], shift=0.5)
    mean, var = tf.nn.normalize_moments(counts, m_ss, v_ss, shift)
    bn = tf.nn.batch_norm_with_global_normalization(
        X4, [0.1, 0.2, 0.3], [1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [2.0, 3.0, 4.0], 0.001, False
    )
    a, b, c, d, e = _run([wm, wv, mean, var, bn])
    ww = np.broadcast_to(w, X4.shape)
    ref_m = (ww * X4).sum((1, 2)) / ww.sum((1, 2))
    ref_v = (ww * (X4 - ref_m[:, None, None]) ** 2).sum((1, 2)) / ww.sum((1, 2))
    np.testing.assert_allclose(a, ref_m, rtol=1e-4)
    np.testing.assert_allclose(b, ref_v, rtol=1e-4)
    np.testing.assert_allclose(c, X4.mean((0, 1)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(d, X4.var((0, 1)), rtol=1e-3, atol=1e-5)
    ref_bn = (X4 - [0.1, 0.2, 0.3]) / np.sqrt(np.float32([1, 2, 3]) + 0.001) + [0, 1, 2]
    np.testing.assert_allclose(e, ref_bn, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Cannot specify both 'keepdims' and 'keep_dims'"):
        tf.nn.sufficient_statistics(X4, [0], keep_dims=True, keepdims=True)


# -- sequences ----------------------------------------------------------------------------------


def test_collapse_repeated():
    labels = np.array([[1, 1, 2, 2, 3, 3], [4, 4, 4, 5, 5, 1], [7, 8, 8, 9, 9, 9]], np.int32)
    out, lens = _run(tf.nn.collapse_repeated(labels, np.array([6, 4, 3], np.int32)))
    np.testing.assert_array_equal(out, [[1, 2, 3], [4, 5, 0], [7, 8, 0]])
    np.testing.assert_array_equal(lens, [3, 2, 2])


def test_ctc_greedy_decoder():
    # classes per step (blank = 3): batch 0: 0 0 3 0 1 1 ; batch 1: 2 3 2 2 (length 4)
    best = np.array([[0, 2], [0, 3], [3, 2], [0, 2], [1, 0], [1, 0]])
    logits = np.full((6, 2, 4), -1.0, np.float32)
    for t in range(6):
        for b in range(2):
            logits[t, b, best[t, b]] = 1.0 + t
    seq = np.array([6, 4], np.int32)
    (dec,), neg = tf.nn.ctc_greedy_decoder(logits, seq)
    (raw,), _ = tf.nn.ctc_greedy_decoder(logits, seq, merge_repeated=False)
    d, n, r = _run([dec, neg, raw])
    np.testing.assert_array_equal(d.indices, [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]])
    np.testing.assert_array_equal(d.values, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(d.dense_shape, [2, 3])
    np.testing.assert_allclose(n, [[-21.0], [-10.0]])
    np.testing.assert_array_equal(r.values, [0, 0, 0, 1, 1, 2, 2, 2])
    too_long = tf.nn.ctc_greedy_decoder(logits, np.array([7, 1], np.int32))[1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="sequence_length"):
        _run(too_long)


# -- variables ----------------------------------------------------------------------------------


def test_variable_scatters():
    v = tf.Variable(np.arange(1.0, 7.0, dtype=np.float32).reshape(3, 2))
    ops = [
        tf.scatter_mul(v, [0, 0], [[2.0, 2.0], [3.0, 3.0]]),
        tf.scatter_div(v, [1], [[2.0, 4.0]]),
        tf.scatter_max(v, [2], [[0.0, 9.0]]),
        tf.scatter_min(v, [2], [[1.0, 10.0]]),
        tf.scatter_nd_update(v, [[0, 1]], [-1.0]),
        tf.scatter_nd_add(v, [[1], [1]], [[1.0, 1.0], [1.0, 1.0]]),
        tf.scatter_nd_sub(v, [[2, 0]], [0.5]),
    ]
    with tf.Session() as s:
        s.run(v.initializer)
        got = [s.run(op) for op in ops]
    np.testing.assert_array_equal(got[0], [[6, 12], [3, 4], [5, 6]])
    np.testing.assert_array_equal(got[1], [[6, 12], [1.5, 1], [5, 6]])
    np.testing.assert_array_equal(got[2], [[6, 12], [1.5, 1], [5, 9]])
    np.testing.assert_array_equal(got[3], [[6, 12], [1.5, 1], [1, 9]])
    np.testing.assert_array_equal(got[6], [[6, -1], [3.5, 3], [0.5, 9]])
    with pytest.raises(TypeError, match="needs a variable"):
        tf.scatter_mul(tf.constant([1.0]), [0], [2.0])


def test_tensor_scatter_nd_max_min():
    mx = tf.tensor_scatter_nd_max([1, 5, 3], [[0], [2], [0]], [4, 1, 2])
    mn = tf.tensor_scatter_nd_min([1, 5, 3], [[0], [2], [1]], [4, 1, 2])
    a, b = _run([mx, mn])
    np.testing.assert_array_equal(a, [4, 5, 3])  # TensorFlow 2.21
    np.testing.assert_array_equal(b, [1, 2, 1])


# -- math ---------------------------------------------------------------------------------------


def test_small_math():
    x = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.2, -1.7]
    a = np.float32([[1, 2, 3], [0, 1, 0]])
    b = np.float32([[4, 5, 6], [0, 0, 1]])
    fetches = [
        tf.rint(x),
        tf.cross(a, b),
        tf.unravel_index([5, 1], [2, 3]),
        tf.unravel_index(4, [2, 3]),
        tf.broadcast_dynamic_shape([2, 1, 3], [4, 1]),
        tf.parallel_stack([[1.0, 2.0], [3.0, 4.0]]),
        tf.is_non_decreasing([1, 1, 2]),
        tf.is_strictly_increasing([1, 1, 2]),
        tf.is_strictly_increasing([3]),
        tf.histogram_fixed_width_bins([-1.0, 0.0, 1.5, 2.0, 5.0, 15.0], [0.0, 5.0], nbins=5),
        tf.lbeta([[1.0, 2.0], [3.0, 4.0]]),
        tf.to_bfloat16([1.5]),
    ]
    got = _run(fetches)
    np.testing.assert_array_equal(got[0], np.rint(x))
    np.testing.assert_array_equal(got[1], np.cross(a, b))
    np.testing.assert_array_equal(got[2], [[1, 0], [2, 1]])
    np.testing.assert_array_equal(got[3], [1, 1])
    np.testing.assert_array_equal(got[4], [2, 4, 3])
    np.testing.assert_array_equal(got[5], [[1, 2], [3, 4]])
    assert got[6] and not got[7] and got[8]
    np.testing.assert_array_equal(got[9], [0, 0, 1, 2, 4, 4])  # TensorFlow 2.21
    np.testing.assert_allclose(got[10], [-0.6931472, -4.0943446], rtol=1e-6)
    assert got[11].dtype.name == "bfloat16" and float(got[11][0]) == 1.5


def test_small_math_errors():
    with pytest.raises(tf.errors.InvalidArgumentError, match="index out of bound"):
        _run(tf.unravel_index([7], [2, 3]))
    with pytest.raises(ValueError, match="same shape"):
        tf.cross([[1.0, 0, 0]], [[0.0, 1, 0], [1, 2, 3]])
    with pytest.raises(TypeError, match="Expected x to be numeric"):
        tf.is_non_decreasing(["a"])
    with pytest.raises(ValueError, match="fully defined"):
        tf.parallel_stack([tf.placeholder(tf.float32, [None])])
    with pytest.raises(tf.errors.InvalidArgumentError, match="incompatible shapes"):
        _run(tf.broadcast_dynamic_shape([2, 2], [3]))


def test_cross_gradient():
    a, b = tf.constant([[1.0, 2.0, 3.0]]), tf.constant([[4.0, 5.0, 6.0]])
    g = tf.constant([[0.5, -1.0, 2.0]])
    da, db = tf.gradients(tf.cross(a, b), [a, b], grad_ys=g)
    x, y = _run([da, db])
    np.testing.assert_allclose(x, np.cross([[4.0, 5, 6]], [[0.5, -1, 2]]))
    np.testing.assert_allclose(y, np.cross([[0.5, -1, 2]], [[1.0, 2, 3]]))


def test_ensure_shape():
    p = tf.placeholder(tf.float32, [None, None])
    y = tf.ensure_shape(p, [None, 3])
    assert y.shape.as_list() == [None, 3]
    assert tf.gradients(tf.reduce_sum(y), p)[0] is not None
    with tf.Session() as s:
        assert s.run(y, {p: np.zeros((2, 3))}).shape == (2, 3)
        with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible with expected"):
            s.run(y, {p: np.zeros((3, 2))})
    with pytest.raises(ValueError, match="not compatible"):
        tf.ensure_shape(tf.zeros([2, 2]), [3, 2])


# -- strings and files --------------------------------------------------------------------------


def test_string_ops():
    strings = ["", "a", "hello", "abcdefgh", "abcdefghijklmnopq", "\xff\x80 ünï"]
    fetches = [
        tf.string_to_hash_bucket(strings, 1000),
        tf.encode_base64(["", "a", "ab", "abc", b"\xff\xfe?>"]),
        tf.encode_base64(["", "a", "ab", "abc"], pad=True),
        tf.decode_base64(["", "YQ", "YQ==", "YWI", "__4_Pg", "YWJj"]),
        tf.string_strip(["  a b \t\n", "\x0b\x0cx\r", ""]),
    ]
    h, e, ep, d, st = _run(fetches)
    np.testing.assert_array_equal(h, [899, 868, 938, 306, 845, 883])  # TensorFlow 2.21
    assert list(e) == [b"", b"YQ", b"YWI", b"YWJj", b"__4_Pg"]
    assert list(ep) == [b"", b"YQ==", b"YWI=", b"YWJj"]
    assert list(d) == [b"", b"a", b"a", b"ab", b"\xff\xfe?>", b"abc"]
    assert list(st) == [b"a b", b"x", b""]
    for bad in ("Y", "a+b/", "YQ=a"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="base64"):
            _run(tf.decode_base64([bad]))


def test_string_split_v1():
    sep = tf.string_split(["a b  c", "", "d,e f"], sep=", ")
    keep = tf.string_split(["a b  c", "", " d"], skip_empty=False)
    chars = tf.string_split(["ab", "c"], sep="")
    a, b, c = _run([sep, keep, chars])
    np.testing.assert_array_equal(a.indices, [[0, 0], [0, 1], [0, 2], [2, 0], [2, 1], [2, 2]])
    assert list(a.values) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    np.testing.assert_array_equal(a.dense_shape, [3, 3])
    np.testing.assert_array_equal(b.indices, [[0, 0], [0, 1], [0, 2], [0, 3], [2, 0], [2, 1]])
    assert list(b.values) == [b"a", b"b", b"", b"c", b"", b"d"]
    assert list(c.values) == [b"a", b"b", b"c"]
    np.testing.assert_array_equal(c.dense_shape, [2, 2])
    with pytest.raises(ValueError, match="RaggedTensor"):
        tf.string_split(["a"], result_type="RaggedTensor")


def test_read_and_write_file(tmp_path):
    path = str(tmp_path / "sub" / "f.bin")
    w = tf.write_file(path, b"\x00hello")
    r = tf.read_file(path)
    with tf.Session() as s:
        s.run(w)
        assert s.run(r) == b"\x00hello"
        with pytest.raises(tf.errors.NotFoundError, match="No such file"):
            s.run(tf.read_file(str(tmp_path / "missing")))


def test_candidate_samplers_under_tf_nn_and_tf_random():
    """word2vec-style TF1 programs call the samplers directly (tf.nn.* and tf.random.*)."""
    g = tf.Graph()
    with g.as_default():
        true = tf.constant([[1], [5]], tf.int64)
        assert tf.random.log_uniform_candidate_sampler is tf.nn.log_uniform_candidate_sampler
        s = tf.nn.log_uniform_candidate_sampler(true, 1, 8, True, 100, seed=3)
        u = tf.random.uniform_candidate_sampler(true, 1, 6, False, 10, seed=4)
        hits = tf.nn.compute_accidental_hits(true, s.sampled_candidates, 1)
    with tf.Session(graph=g) as sess:
        (cand, true_exp, samp_exp), (ucand, _, _), (rows, ids, w) = sess.run([s, u, hits])
    assert len(set(cand.tolist())) == 8 and ((cand >= 0) & (cand < 100)).all()
    assert true_exp.shape == (2, 1) and samp_exp.shape == (8,) and (samp_exp > 0).all()
    assert ucand.shape == (6,) and ((ucand >= 0) & (ucand < 10)).all()
    for r, j in zip(rows, ids):
        assert cand[j] == [1, 5][r]
    assert (w < -1e37).all()


def test_switch_case_runs_the_indexed_branch_and_differentiates():
    g = tf.Graph()
    with g.as_default():
        i = tf.placeholder(tf.int32, [])
        x = tf.placeholder(tf.float32, [3])
        y = tf.switch_case(i, [lambda: x * 2.0, lambda: x + 1.0, lambda: -x])
        z = tf.switch_case(i, {3: lambda: x * 10.0, 1: lambda: x},
                           default=lambda: tf.zeros_like(x))  # fmt: skip
        grad = tf.gradients(y, x)[0]
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    want = {0: (xv * 2, 0 * xv, 2.0), 1: (xv + 1, xv, 1.0), 2: (-xv, 0 * xv, -1.0),
            3: (-xv, 10 * xv, -1.0), 7: (-xv, 0 * xv, -1.0), -1: (-xv, 0 * xv, -1.0)}  # fmt: skip
    with tf.Session(graph=g) as s:
        for k, (wy, wz, wg) in want.items():
            gy, gz, gg = s.run([y, z, grad], {i: k, x: xv})
            np.testing.assert_array_equal(gy, wy)
            np.testing.assert_array_equal(gz, wz)
            np.testing.assert_array_equal(gg, np.full(3, wg, np.float32))


def test_switch_case_refuses_bad_branches_and_index():
    with tf.Graph().as_default():
        x = tf.constant(1.0)
        with pytest.raises(ValueError, match="at least one branch"):
            tf.switch_case(tf.constant(0), [])
        with pytest.raises(ValueError, match="distinct ints"):
            tf.switch_case(tf.constant(0), [(0, lambda: x), (0, lambda: x)])
        with pytest.raises(TypeError, match="integer scalar"):
            tf.switch_case(tf.constant(0.5), [lambda: x])
        with pytest.raises(TypeError, match="not callable"):
            tf.switch_case(tf.constant(0), [x])
