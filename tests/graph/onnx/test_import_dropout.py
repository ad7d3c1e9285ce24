"""ONNX Dropout in training mode: a seeded draw is the one onnx's reference implementation makes
(numpy's RandomState(seed)) on every run; an unseeded one is new each run."""

import numpy as np
from onnx import TensorProto, helper

from rill.exec import Session
from rill.graph.onnx import import_onnx

F = TensorProto.FLOAT


def _model(shape, seed):
    attrs = {} if seed is None else {"seed": seed}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], **attrs)
    graph = helper.make_graph(
        [node], "dropout",
        [helper.make_tensor_value_info("x", F, shape),
         helper.make_tensor_value_info("r", F, []),
         helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", F, shape),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, shape)],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _run(model, feeds, times=2):
    graph, inputs, outputs = import_onnx(model)
    with Session(graph=graph) as sess:
        fd = {inputs[k]: v for k, v in feeds.items()}
        return [sess.run([outputs["y"], outputs["mask"]], fd) for _ in range(times)]


def test_a_seeded_draw_is_numpys_for_that_seed_on_every_run():
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    r = np.float32(0.3)
    runs = _run(_model([4, 6], seed=7), {"x": x, "r": r, "t": np.bool_(True)})
    want_mask = np.random.RandomState(7).uniform(0.0, 1.0, x.shape) >= r
    for y, mask in runs:
        np.testing.assert_array_equal(mask, want_mask)
        np.testing.assert_allclose(y, want_mask * x * (np.float32(1) / (1 - r)), rtol=1e-6)


def test_an_unseeded_draw_changes_between_runs_and_drops_about_the_ratio():
    x = np.ones((100, 100), np.float32)
    (y1, m1), (y2, m2) = _run(_model([100, 100], seed=None),
                              {"x": x, "r": np.float32(0.25), "t": np.bool_(True)})  # fmt: skip
    assert not np.array_equal(m1, m2)
    assert 0.22 < 1 - m1.mean() < 0.28
    np.testing.assert_allclose(y1[m1], 1 / 0.75, rtol=1e-6)
    assert (y1[~m1] == 0).all()


def test_inference_mode_is_the_identity_with_a_full_mask():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    ((y, mask),) = _run(_model([2, 3], seed=3), {"x": x, "r": np.float32(0.5),
                                                 "t": np.bool_(False)}, times=1)  # fmt: skip
    np.testing.assert_array_equal(y, x)
    assert mask.all()
