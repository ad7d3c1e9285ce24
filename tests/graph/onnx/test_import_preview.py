"""import_onnx of ai.onnx.preview's FlexAttention beyond onnx's node suite: query and key/value
heads and sequence lengths known only at run time (grouped query attention), modifier
subgraphs with initializers of their own, double inputs; against onnx's
ReferenceEvaluator. Bad input is refused naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ref, run_rill

from rill.graph.onnx.import_util import OnnxImportError

RNG = np.random.default_rng(20261127)


def vi(name, elem=TP.FLOAT, shape=None):
    return oh.make_tensor_value_info(name, elem, shape)


def flex_model(elem=TP.FLOAT, shapes=(None, None, None), inits=(), name="flex", **attrs):
    node = oh.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview",
                        name=name, **attrs)  # fmt: skip
    g = oh.make_graph([node], "t", [vi(k, elem, s) for k, s in zip("QKV", shapes)],
                      [vi("Y", elem, None)], list(inits))  # fmt: skip
    ops = [oh.make_opsetid("", 26), oh.make_opsetid("ai.onnx.preview", 1)]
    return oh.make_model(g, opset_imports=ops, ir_version=13)


def feeds(b, hq, hkv, lq, s, e, ev, dtype=np.float32):
    return {"Q": RNG.standard_normal((b, hq, lq, e)).astype(dtype),
            "K": RNG.standard_normal((b, hkv, s, e)).astype(dtype),
            "V": RNG.standard_normal((b, hkv, s, ev)).astype(dtype)}  # fmt: skip


def test_grouped_heads_and_lengths_known_only_at_run_time():
    m = flex_model(shapes=(["b", "hq", "l", 8], ["b", "hk", "s", 8], ["b", "hk", "s", 5]))
    for hq, hkv in ((4, 2), (6, 3), (3, 3)):
        f = feeds(2, hq, hkv, 3, 7, 8, 5)
        got, want = run_rill(m, f)[0], run_ref(m, f)[0]
        assert got.shape == (2, hq, 3, 5)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_modifiers_with_their_own_initializers():
    """score_mod adds a causal mask and prob_mod scales by a per-head weight, each an
    initializer of its subgraph."""
    mask = np.triu(np.full((4, 4), -np.inf, np.float32), 1)
    weight = np.array([1.0, 0.5], np.float32).reshape(1, 2, 1, 1)
    score_mod = oh.make_graph([oh.make_node("Add", ["s", "mask"], ["s2"])], "score_mod",
                              [vi("s", shape=None)], [vi("s2", shape=None)],
                              [nh.from_array(mask, "mask")])  # fmt: skip
    prob_mod = oh.make_graph([oh.make_node("Mul", ["p", "weight"], ["p2"])], "prob_mod",
                             [vi("p", shape=None)], [vi("p2", shape=None)],
                             [nh.from_array(weight, "weight")])  # fmt: skip
    m = flex_model(shapes=([1, 2, 4, 8], [1, 2, 4, 8], [1, 2, 4, 8]), score_mod=score_mod,
                   prob_mod=prob_mod, scale=0.3)  # fmt: skip
    f = feeds(1, 2, 2, 4, 4, 8, 8)
    got = run_rill(m, f)[0]
    np.testing.assert_allclose(got, run_ref(m, f)[0], rtol=1e-5, atol=1e-6)
    # the first query attends to the first key only
    np.testing.assert_allclose(got[0, 1, 0], 0.5 * f["V"][0, 1, 0], rtol=1e-6)


def test_double_inputs_compute_in_double():
    m = flex_model(elem=TP.DOUBLE, shapes=([1, 2, 3, 4], [1, 1, 5, 4], [1, 1, 5, 4]))
    f = feeds(1, 2, 1, 3, 5, 4, 4, np.float64)
    got = run_rill(m, f)[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, run_ref(m, f)[0], rtol=1e-12)


def test_query_heads_not_a_multiple_of_key_heads_are_refused():
    m = flex_model(shapes=([1, 3, 2, 4], [1, 2, 2, 4], [1, 2, 2, 4]), name="fa")
    with pytest.raises(OnnxImportError, match=r"'fa'.*3 query heads are not a multiple of 2"):
        run_rill(m, feeds(1, 3, 2, 2, 2, 4, 4))


def test_a_modifier_changing_the_type_is_refused():
    score_mod = oh.make_graph([oh.make_node("Cast", ["s"], ["s2"], to=TP.DOUBLE)], "score_mod",
                              [vi("s", shape=None)], [vi("s2", TP.DOUBLE, None)])  # fmt: skip
    m = flex_model(shapes=([1, 1, 2, 4], [1, 1, 2, 4], [1, 1, 2, 4]), score_mod=score_mod)
    with pytest.raises(OnnxImportError, match=r"score_mod turns float32 scores into float64"):
        run_rill(m, feeds(1, 1, 1, 2, 2, 4, 4))
