"""import_onnx of GroupNormalization, RMSNormalization, RotaryEmbedding, SwiGLU, LpPool,
MaxUnpool and the two losses, beyond onnx's node cases: edge attributes, other dtypes, dynamic
shapes (the run-time shape paths), checked against numpy or onnx's ReferenceEvaluator; and bad
models refused with errors that name the node.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx_run import run_ort, run_ref, run_rill

from rill.graph.onnx import import_onnx
from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(7)
_ELEM = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.float16: TP.FLOAT16,
         np.int64: TP.INT64, np.int32: TP.INT32, np.bool_: TP.BOOL}  # fmt: skip


def one_node(op_type, feeds, opset, shapes=None, n_out=1, **attrs):
    """A one-node model over `feeds` (name → array; None for an omitted input), inputs shaped
    as `shapes` says (name → shape with None for dynamic dims; default: the array's)."""
    shapes = shapes or {}
    names = [k if v is not None else "" for k, v in feeds.items()]
    outs = [f"y{i}" for i in range(n_out)]
    node = oh.make_node(op_type, names, outs, name="the_node", **attrs)
    ins = [oh.make_tensor_value_info(k, _ELEM[v.dtype.type], shapes.get(k, v.shape))
           for k, v in feeds.items() if v is not None]  # fmt: skip
    g = oh.make_graph([node], "t", ins, [oh.make_empty_tensor_value_info(o) for o in outs])
    ops = [oh.make_opsetid("", opset)]
    return oh.make_model(g, opset_imports=ops, ir_version=oh.find_min_ir_version_for(ops))


def check(m, feeds, rtol=1e-5, atol=1e-6, want=None):
    got = run_rill(m, feeds)
    want = run_ref(m, feeds) if want is None else want
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        assert a.shape == b.shape, (a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return got


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- GroupNormalization ----------------------------------------------------------------------------


def group_norm_numpy(x, scale, bias, groups, eps=1e-5, per_group=False):
    n, c = x.shape[:2]
    xg = x.reshape(n, groups, -1)
    y = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)
    shape = [1, -1] + [1] * (x.ndim - 2)
    if per_group:
        y = y * scale.reshape(groups, 1) + bias.reshape(groups, 1)
        return y.reshape(x.shape)
    return y.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("dynamic", [False, True])
def test_group_normalization_one_group_all_groups_and_dynamic_shapes(groups, dynamic):
    x, s, b = rand(2, 6, 3, 4), rand(6), rand(6)
    feeds = {"x": x, "s": s, "b": b}
    shapes = {"x": [None, 6, None, None]} if dynamic else None
    m = one_node("GroupNormalization", feeds, 21, shapes, num_groups=groups, epsilon=1e-3)
    check(m, feeds, want=[group_norm_numpy(x, s, b, groups, 1e-3)], rtol=1e-4, atol=1e-5)


def test_group_normalization_float64_and_its_stash_type():
    x = rand(3, 4, 5, dtype=np.float64) * 50
    s, b = rand(4, dtype=np.float64), rand(4, dtype=np.float64)
    feeds = {"x": x, "s": s, "b": b}
    want = group_norm_numpy(x, s, b, 2)
    # stash_type FLOAT (the default) computes the statistics in float32, as the spec says ...
    (got,) = check(one_node("GroupNormalization", feeds, 21, num_groups=2), feeds, rtol=1e-5)
    assert got.dtype == np.float64 and 1e-12 < np.abs(got - want).max() < 1e-5
    # ... and stash_type DOUBLE in float64.
    m = one_node("GroupNormalization", feeds, 21, num_groups=2, stash_type=TP.DOUBLE)
    check(m, feeds, want=[want], rtol=1e-12, atol=1e-12)


def test_group_normalization_opset18_scales_per_group():
    x, s, b = rand(2, 6, 5), rand(3), rand(3)
    feeds = {"x": x, "s": s, "b": b}
    m = one_node("GroupNormalization", feeds, 18, num_groups=3)
    check(m, feeds, want=[group_norm_numpy(x, s, b, 3, per_group=True)], rtol=1e-4, atol=1e-5)


def test_group_normalization_channels_not_divisible_is_refused():
    feeds = {"x": rand(2, 6, 3), "s": rand(6), "b": rand(6)}
    with pytest.raises(OnnxImportError, match=r"node 'the_node' \(GroupNormalization.*6 channels"):
        import_onnx(one_node("GroupNormalization", feeds, 21, num_groups=4))


def test_group_normalization_scale_of_the_wrong_version_is_refused():
    feeds = {"x": rand(2, 6, 3), "s": rand(3), "b": rand(3)}
    with pytest.raises(OnnxImportError, match=r"the_node.*opset 21.*scale of the channel count"):
        import_onnx(one_node("GroupNormalization", feeds, 21, num_groups=3))


# -- RMSNormalization, SwiGLU ----------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_rms_normalization_float16_stashes_in_float32(axis):
    x = rand(3, 4, 5, dtype=np.float16)
    w = rand(*x.shape[axis % 3 :], dtype=np.float16)
    feeds = {"x": x, "w": w}
    m = one_node("RMSNormalization", feeds, 23, axis=axis)
    xs = x.astype(np.float32)
    axes = tuple(range(axis % 3, 3))
    want = (xs / np.sqrt((xs * xs).mean(axes, keepdims=True) + 1e-5)).astype(np.float16) * w
    check(m, feeds, want=[want], rtol=2e-3, atol=2e-3)


def test_rms_normalization_dynamic_shape():
    feeds = {"x": rand(2, 3, 8), "w": rand(8)}
    m = one_node("RMSNormalization", feeds, 23, {"x": [None, None, 8]}, epsilon=0.5)
    check(m, feeds)


def test_swiglu_float64_alpha():
    feeds = {"a": rand(3, 5, dtype=np.float64), "b": rand(3, 5, dtype=np.float64)}
    a, b = feeds["a"], feeds["b"]
    want = a / (1 + np.exp(-0.7 * a)) * b
    check(one_node("SwiGLU", feeds, 28, alpha=0.7), feeds, want=[want], rtol=1e-12)


# -- RotaryEmbedding -------------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot_dim", [0, 4])
def test_rotary_embedding_4d_with_position_ids(interleaved, rot_dim):
    half = (rot_dim or 8) // 2
    feeds = {"x": rand(2, 3, 5, 8), "cos": rand(20, half), "sin": rand(20, half),
             "pos": RNG.integers(0, 20, (2, 5)).astype(np.int64)}  # fmt: skip
    m = one_node("RotaryEmbedding", feeds, 23, interleaved=interleaved,
                 rotary_embedding_dim=rot_dim)  # fmt: skip
    check(m, feeds)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_3d_dynamic_without_position_ids(interleaved):
    feeds = {"x": rand(2, 5, 12), "cos": rand(2, 5, 1), "sin": rand(2, 5, 1)}
    shapes = {"x": [None, None, 12], "cos": [None, None, 1], "sin": [None, None, 1]}
    m = one_node("RotaryEmbedding", feeds, 23, shapes, interleaved=interleaved, num_heads=3,
                 rotary_embedding_dim=2)  # fmt: skip
    check(m, feeds)


def test_rotary_embedding_3d_without_num_heads_is_refused():
    feeds = {"x": rand(2, 5, 12), "cos": rand(2, 5, 2), "sin": rand(2, 5, 2)}
    with pytest.raises(OnnxImportError, match=r"'the_node' \(RotaryEmbedding.*num_heads"):
        import_onnx(one_node("RotaryEmbedding", feeds, 23))


def test_rotary_embedding_cache_width_mismatch_is_refused():
    feeds = {"x": rand(2, 3, 5, 8), "cos": rand(2, 5, 3), "sin": rand(2, 5, 3)}
    with pytest.raises(OnnxImportError, match=r"the_node.*caches' last dimension \(3\)"):
        import_onnx(one_node("RotaryEmbedding", feeds, 23))


# -- LpPool, MaxUnpool -----------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize(
    "geometry",
    [
        {"kernel_shape": [3, 3], "pads": [1, 2, 2, 1], "strides": [2, 1]},
        {"kernel_shape": [2, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1, "strides": [2, 2]},
        {"kernel_shape": [2, 2], "dilations": [2, 1], "pads": [0, 1, 1, 0]},
        {"kernel_shape": [3, 2], "auto_pad": "SAME_LOWER", "strides": [2, 1]},
    ],
)
def test_lp_pool_p_and_padding(p, geometry):
    # Against onnxruntime: onnx's reference scales a ceil_mode window that runs past the padded
    # input by kernel size / cells inside, where the Lp norm of the cells (and onnxruntime) does
    # not.
    feeds = {"x": rand(2, 3, 7, 6)}
    m = one_node("LpPool", feeds, 22, p=p, **geometry)
    check(m, feeds, rtol=1e-5, atol=1e-5, want=run_ort(m, feeds))


def test_lp_pool_ceil_mode_window_past_the_input_sums_only_its_cells():
    feeds = {"x": np.ones((1, 1, 1, 6), np.float32)}
    m = one_node("LpPool", feeds, 22, kernel_shape=[1, 3], pads=[0, 1, 0, 1], strides=[1, 2],
                 ceil_mode=1, p=1)  # fmt: skip
    check(m, feeds, want=[np.array([[[[2, 3, 3, 1]]]], np.float32)])


def test_lp_pool_1d_float64_and_dynamic_spatial_size():
    feeds = {"x": rand(1, 2, 9, dtype=np.float64)}
    m = one_node("LpPool", feeds, 22, {"x": [1, 2, None]}, kernel_shape=[3], pads=[2, 1], p=3)
    check(m, feeds, rtol=1e-10)


def test_lp_pool_nonpositive_p_is_refused():
    with pytest.raises(OnnxImportError, match=r"the_node.*LpPool p=0"):
        import_onnx(one_node("LpPool", {"x": rand(1, 1, 4, 4)}, 22, kernel_shape=[2, 2], p=0))


def test_max_unpool_inverts_max_pool_with_overlapping_windows_and_output_shape():
    x = rand(2, 3, 5, 5)
    pool = oh.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[3, 3], strides=[2, 2])
    unpool = oh.make_node("MaxUnpool", ["p", "i", "s"], ["y"], kernel_shape=[3, 3],
                          strides=[2, 2])  # fmt: skip
    g = oh.make_graph([pool, unpool], "t",
                      [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3, 5, 5]),
                       oh.make_tensor_value_info("s", TP.INT64, [4])],
                      [oh.make_empty_tensor_value_info("y")])  # fmt: skip
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 22)])
    for shape in ([2, 3, 5, 5], [2, 3, 6, 7]):
        feeds = {"x": x, "s": np.array(shape, np.int64)}
        (got,) = check(m, feeds)
        kept = got[:, :, :5, :5]
        assert ((kept == 0) | (kept == x)).all() and (kept == x).sum() > 0


def test_max_unpool_dynamic_shape_with_pads():
    x = rand(1, 2, 3, 3)
    # Flat indices into the default [1, 2, 6, 6] output, in each channel's own plane.
    idx = np.stack([c * 36 + RNG.permutation(36)[:9].reshape(3, 3) for c in range(2)])
    feeds = {"x": x, "i": idx.reshape(1, 2, 3, 3).astype(np.int64)}
    m = one_node("MaxUnpool", feeds, 22, {"x": [None, 2, None, None]}, kernel_shape=[3, 3],
                 strides=[2, 2], pads=[1, 1, 0, 0])  # fmt: skip
    (got,) = check(m, feeds)
    assert got.shape == (1, 2, 6, 6)


# -- losses ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [None, 0, -1])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(reduction, ignore_index, weighted):
    # Against onnxruntime: with a negative ignore_index, mean reduction and no weights, onnx's
    # reference divides by every sample, where onnxruntime (and the node cases' data) divide by
    # the samples not ignored.
    labels = RNG.integers(0, 4, (3, 2, 5)).astype(np.int64)
    if ignore_index == -1:
        labels[0, 0, :3] = -1
    feeds = {"x": rand(3, 4, 2, 5), "t": labels, "w": rand(4) ** 2 if weighted else None}
    attrs = {} if ignore_index is None else {"ignore_index": ignore_index}
    m = one_node("NegativeLogLikelihoodLoss", feeds, 22, reduction=reduction, **attrs)
    check(m, feeds, want=run_ort(m, feeds))


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [None, 2, 9])
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_cross_entropy_loss_and_log_prob(reduction, ignore_index, weighted):
    labels = RNG.integers(0, 5, (4, 3)).astype(np.int32)
    if ignore_index == 9:
        labels[1] = 9
    feeds = {"x": rand(4, 5, 3), "t": labels, "w": rand(5) ** 2 if weighted else None}
    attrs = {} if ignore_index is None else {"ignore_index": ignore_index}
    m = one_node("SoftmaxCrossEntropyLoss", feeds, 13, n_out=2, reduction=reduction, **attrs)
    check(m, feeds, want=run_ort(m, feeds))


def test_losses_with_dynamic_class_count():
    feeds = {"x": rand(3, 6), "t": np.array([5, 0, 2], np.int64), "w": rand(6) ** 2}
    shapes = {"x": [None, None], "t": [None], "w": [None]}
    check(one_node("SoftmaxCrossEntropyLoss", feeds, 13, shapes, n_out=2), feeds)
    check(one_node("NegativeLogLikelihoodLoss", feeds, 22, shapes, ignore_index=0), feeds)


def test_loss_bad_reduction_and_label_rank_are_refused():
    feeds = {"x": rand(3, 4, 2), "t": np.zeros((3, 2), np.int64)}
    with pytest.raises(OnnxImportError, match=r"the_node.*reduction 'avg'"):
        import_onnx(one_node("NegativeLogLikelihoodLoss", feeds, 22, reduction="avg"))
    feeds["t"] = np.zeros((3,), np.int64)
    with pytest.raises(OnnxImportError, match=r"the_node.*labels' shape"):
        import_onnx(one_node("SoftmaxCrossEntropyLoss", feeds, 13))


# -- Attention -------------------------------------------------------------------------------------


def test_attention_3d_gqa_causal_with_dynamic_lengths():
    feeds = {"q": rand(2, 5, 4 * 6), "k": rand(2, 7, 2 * 6), "v": rand(2, 7, 2 * 3)}
    shapes = {"q": [None, None, 24], "k": [None, None, 12], "v": [None, None, 6]}
    m = one_node("Attention", feeds, 23, shapes, is_causal=1, q_num_heads=4, kv_num_heads=2)
    check(m, feeds, rtol=1e-5, atol=1e-5)


def test_attention_with_past_short_float_mask_and_every_output():
    feeds = {"q": rand(1, 2, 3, 4), "k": rand(1, 2, 3, 4), "v": rand(1, 2, 3, 5),
             "mask": rand(3, 4), "pk": rand(1, 2, 2, 4), "pv": rand(1, 2, 2, 5)}  # fmt: skip
    # The mask covers 4 of the 5 keys; opset 24 pads it with −inf.
    m = one_node("Attention", feeds, 24, n_out=4, qk_matmul_output_mode=2, softcap=1.5)
    got = check(m, feeds, rtol=1e-5, atol=1e-5)
    assert np.isneginf(got[3][..., 4]).all()


def test_attention_fully_masked_rows_are_zero():
    mask = np.ones((3, 4), bool)
    mask[1] = False
    feeds = {"q": rand(1, 1, 3, 2), "k": rand(1, 1, 4, 2), "v": rand(1, 1, 4, 2), "mask": mask}
    m = one_node("Attention", feeds, 23, n_out=4, qk_matmul_output_mode=3)
    y, _, _, probs = check(m, feeds, rtol=1e-5, atol=1e-6)
    assert (y[0, 0, 1] == 0).all() and (probs[0, 0, 1] == 0).all()


def test_attention_heads_not_a_multiple_is_refused():
    feeds = {"q": rand(1, 3, 2, 4), "k": rand(1, 2, 2, 4), "v": rand(1, 2, 2, 4)}
    with pytest.raises(OnnxImportError, match=r"'the_node' \(Attention.*3 query heads"):
        import_onnx(one_node("Attention", feeds, 23))
