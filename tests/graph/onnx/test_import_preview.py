"""import_onnx of ai.onnx.preview's FlexAttention beyond onnx's node suite: query and key/value
heads and sequence lengths known only at run time (grouped query attention), modifier
subgraphs with initializers of their own, double inputs; and of ai.onnx.preview.training's
optimizer steps over several tensors at a first and a later step; against onnx's
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


# -- ai.onnx.preview.training ---------------------------------------------------------------------

_STATES = {"Adagrad": ["H"], "Momentum": ["V"], "Adam": ["V", "H"]}
_ATTRS = {
    "Adagrad": {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01},
    "Momentum": {"alpha": 0.9, "beta": 0.5, "mode": "standard", "norm_coefficient": 0.02},
    "Adam": {"alpha": 0.8, "beta": 0.95, "epsilon": 1e-5, "norm_coefficient": 0.01,
             "norm_coefficient_post": 0.05},
}  # fmt: skip


def optimizer_model(op_type, tensors, **attrs):
    groups = ["X", "G", *_STATES[op_type]]
    names = [f"{g}{i}" for g in groups for i in range(tensors)]
    outs = [f"{g}{i}_new" for g in ["X", *_STATES[op_type]] for i in range(tensors)]
    node = oh.make_node(op_type, ["R", "T", *names], outs, domain="ai.onnx.preview.training",
                        name="opt", **attrs)  # fmt: skip
    ins = [vi("R", shape=[]), vi("T", TP.INT64, [])] + [vi(k, shape=None) for k in names]
    g = oh.make_graph([node], "t", ins, [vi(o, shape=None) for o in outs])
    ops = [oh.make_opsetid("", 17), oh.make_opsetid("ai.onnx.preview.training", 1)]
    return oh.make_model(g, opset_imports=ops, ir_version=8), names


@pytest.mark.parametrize("step", [0, 3])
@pytest.mark.parametrize("op_type", ["Adagrad", "Momentum", "Momentum-nesterov", "Adam"])
def test_optimizer_steps_over_two_tensors(op_type, step):
    op_type, _, mode = op_type.partition("-")
    attrs = dict(_ATTRS[op_type], **({"mode": mode} if mode else {}))
    m, names = optimizer_model(op_type, 2, **attrs)
    f = {"R": np.array(0.1, np.float32), "T": np.array(step, np.int64)}
    for k in names:
        shape = (3, 4) if k.endswith("0") else (5,)
        v = RNG.standard_normal(shape).astype(np.float32)
        f[k] = np.abs(v) if k.startswith("H") else v
    got, want = run_rill(m, f), run_ref(m, f)
    assert len(got) == len(want) == len(names) - 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_an_optimizer_with_a_state_missing_is_refused_naming_the_node():
    m, _ = optimizer_model("Adam", 1, **_ATTRS["Adam"])
    del m.graph.node[0].input[-1]
    m.graph.input.pop()
    with pytest.raises(OnnxImportError, match=r"'opt'.*Adam takes R, T and 4 tensors"):
        run_rill(m, {})
