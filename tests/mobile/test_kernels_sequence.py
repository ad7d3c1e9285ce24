"""UNIDIRECTIONAL_SEQUENCE_RNN against LiteRT's reference kernels, on hand-built models (TensorFlow
2.21's converter writes Keras recurrent layers as WHILE loops and never emits this operator):
float32 and dynamic-range weights (symmetric and asymmetric input quantization), batch- and
time-major, two invokes in a row so that the hidden state variable carries over."""

from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT
from ai_edge_litert.interpreter import OpResolverType
from mobile.tflite_builder import Op, T, build, quant

from rill.mobile.interpreter import Interpreter

RNG = np.random.default_rng(31)
TANH, RELU = 4, 1


def _model(batch, t_len, n_in, units, time_major, act, hybrid, asym):
    w = RNG.uniform(-0.5, 0.5, (units, n_in)).astype(np.float32)
    r = RNG.uniform(-0.5, 0.5, (units, units)).astype(np.float32)

    def weight(data):
        if not hybrid:
            return T(data.shape, np.float32, data)
        scale = float(np.abs(data).max() / 127)
        return quant(data.shape, np.int8, scale, 0, np.round(data / scale).astype(np.int8))

    x_shape = (t_len, batch, n_in) if time_major else (batch, t_len, n_in)
    o_shape = (t_len, batch, units) if time_major else (batch, t_len, units)
    tensors = [T(x_shape), weight(w), weight(r),
               T((units,), np.float32, RNG.uniform(-0.2, 0.2, units).astype(np.float32)),
               T((batch, units), variable=True), T(o_shape)]  # fmt: skip
    opts = {"time_major": time_major, "fused_activation_function": act}
    if hybrid:
        opts["asymmetric_quantize_inputs"] = asym
    op = Op("UNIDIRECTIONAL_SEQUENCE_RNN", [0, 1, 2, 3, 4], [5], opts, version=3 if asym else 2)
    return build(tensors, [op], [0], [5]), x_shape


def _run_twice(interp, xs):
    interp.allocate_tensors()
    outs = []
    for x in xs:
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        outs.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    return outs


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("act", [TANH, RELU])
@pytest.mark.parametrize("kind", ["float", "hybrid", "hybrid_asym"])
def test_unidirectional_sequence_rnn_matches_litert_reference(time_major, act, kind):
    model, x_shape = _model(3, 5, 6, 8, time_major, act, kind != "float", kind == "hybrid_asym")
    xs = [RNG.standard_normal(x_shape).astype(np.float32) + 0.3 for _ in range(2)]
    want = _run_twice(LiteRT(model_content=model,
                             experimental_op_resolver_type=OpResolverType.BUILTIN_REF), xs)  # fmt: skip
    got = _run_twice(Interpreter(model_content=model), xs)
    for g, w in zip(got, want):
        atol = 1e-5 * float(np.abs(w).max())
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
    assert not np.allclose(got[0], got[1])  # the second run starts from the first's state


def test_unidirectional_sequence_rnn_refuses_mismatched_weights():
    from rill.mobile.errors import PrepareError

    tensors = [T((2, 3, 4)), T((5, 3), np.float32, np.zeros((5, 3), np.float32)),
               T((5, 5), np.float32, np.zeros((5, 5), np.float32)),
               T((5,), np.float32, np.zeros(5, np.float32)), T((2, 5), variable=True),
               T((2, 3, 5))]  # fmt: skip
    model = build(tensors, [Op("UNIDIRECTIONAL_SEQUENCE_RNN", [0, 1, 2, 3, 4], [5], {})], [0], [5])
    interp = Interpreter(model_content=model)
    with pytest.raises(PrepareError, match="operator #0 UNIDIRECTIONAL_SEQUENCE_RNN.*do not fit"):
        interp.allocate_tensors()
