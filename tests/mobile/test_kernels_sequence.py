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


def _lstm_weights(rng, n_in, units, hybrid):
    """Inputs 1-17 of an LSTM (no peepholes, no projection): 4 input, 4 recurrent weights,
    3 absent peepholes, 4 biases, absent projection weights and bias."""

    def weight(shape):
        data = rng.uniform(-0.5, 0.5, shape).astype(np.float32)
        if not hybrid:
            return T(shape, np.float32, data)
        scale = float(np.abs(data).max() / 127)
        return quant(shape, np.int8, scale, 0, np.round(data / scale).astype(np.int8))

    ws = [weight((units, n_in)) for _ in range(4)] + [weight((units, units)) for _ in range(4)]
    bias = [T((units,), np.float32, rng.uniform(-0.3, 0.3, units).astype(np.float32))
            for _ in range(4)]  # fmt: skip
    return ws + [None] * 3 + bias + [None, None]


BATCH, T_LEN, N_IN, UNITS = 2, 4, 5, 6  # LiteRT needs equal forward and backward sizes


def _bilstm(time_major, merge, hybrid, seed=7):
    rng = np.random.default_rng(seed)
    x_shape = (T_LEN, BATCH, N_IN) if time_major else (BATCH, T_LEN, N_IN)
    state = [T((BATCH, UNITS), variable=True) for _ in range(4)]
    slots = ([T(x_shape)] + _lstm_weights(rng, N_IN, UNITS, hybrid)
             + _lstm_weights(rng, N_IN, UNITS, hybrid) + state + [None] * 9)  # fmt: skip
    lead = (T_LEN, BATCH) if time_major else (BATCH, T_LEN)
    outs = [T((*lead, 2 * UNITS))] if merge else [T((*lead, UNITS)), T((*lead, UNITS))]
    tensors = [t for t in slots if t is not None] + outs
    idx, k = [], 0
    for t in slots:
        idx.append(-1 if t is None else k)
        k += t is not None
    out_idx = list(range(k, k + len(outs)))
    opts = {"fused_activation_function": TANH, "merge_outputs": merge, "time_major": time_major}
    op = Op("BIDIRECTIONAL_SEQUENCE_LSTM", idx, out_idx, opts, version=3 if hybrid else 1)
    return build(tensors, [op], [0], out_idx)


def _run_all(interp, xs):
    interp.allocate_tensors()
    got = []
    for x in xs:
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        got += [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    return got


def _ref(model):
    return LiteRT(model_content=model, experimental_op_resolver_type=OpResolverType.BUILTIN_REF)


def _close(got, want):
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()),
                                   err_msg=f"output {j}")  # fmt: skip


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("hybrid", [False, True])
def test_bidirectional_sequence_lstm_matches_litert_reference(time_major, merge, hybrid):
    model = _bilstm(time_major, merge, hybrid)
    x_shape = (T_LEN, BATCH, N_IN) if time_major else (BATCH, T_LEN, N_IN)
    xs = [RNG.standard_normal(x_shape).astype(np.float32) for _ in range(2)]
    got = _run_all(Interpreter(model_content=model), xs)
    if merge and not time_major:
        # LiteRT 2.21's reference kernel writes batch rows after the first of a merged
        # batch-major output at the wrong place (its first row agrees): compare with its
        # time-major run of the same weights on the transposed input instead.
        want = _run_all(_ref(_bilstm(True, True, hybrid)), [x.transpose(1, 0, 2) for x in xs])
        want = [w.transpose(1, 0, 2) for w in want]
    else:
        want = _run_all(_ref(model), xs)
    _close(got, want)
    assert not np.allclose(got[0], got[len(got) // 2])  # the state carries over
