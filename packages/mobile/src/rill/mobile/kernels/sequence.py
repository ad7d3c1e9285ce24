"""UNIDIRECTIONAL_SEQUENCE_LSTM and UNIDIRECTIONAL_SEQUENCE_RNN, float32 and dynamic-range
(int8 weights, float activations).

BIDIRECTIONAL_SEQUENCE_LSTM (48 inputs: x, the forward LSTM's 17 weight tensors as inputs 1-17
of the unidirectional operator, the backward one's as 18-34, the forward output and cell state
variables 35-36, the backward ones 37-38, an auxiliary input and its weights 39-47, which are not
supported): two LSTMs, the backward one over the time-reversed sequence writing its outputs
back in order; with merge_outputs one output [..., fw units + bw units], else two.

UNIDIRECTIONAL_SEQUENCE_RNN (5 inputs: x, W [units, in], R [units, units], bias, the hidden
state variable [batch, units]): h_t = act(bias + W·x_t + R·h_{t−1}), as rnn_batch_step; the
hidden state is read at the start and written back at the end. Dynamic range as the LSTM below.

Inputs as in TFLite (24): the sequence x [batch, time, in] ([time, batch, in] with time_major),
the input-to-gate weights W_i, W_f, W_c, W_o [cell, in] (W_i omitted: CIFG, i = 1 − f),
the recurrent weights R_* [cell, out], optional peephole vectors, the gate biases, an optional
projection [out, cell] with bias, the output and cell state variables [batch, out], [batch,
cell] (read at the start and written back at the end, so the state carries over between invokes
as in TFLite), and optional layer-norm coefficients (not supported here).

Each step, as lstm_eval.cc: gate = bias + W·x_t + R·h (+ peephole ∘ c); i, f, o = σ(gate),
g = act(gate_c); c = f ∘ c + i ∘ g (clipped by cell_clip when > 0); h = o ∘ act(c), projected
(and clipped by proj_clip) when a projection is given. Dynamic range: x_t and h are quantized per
batch row at each step (asymmetric when the option says so, kernels/hybrid.py), the integer
products scaled by s_row · s_w in float32 and accumulated onto the bias, as LiteRT's hybrid
kernel does.
"""

from __future__ import annotations

import numpy as np

from rill.mobile import threads
from rill.mobile.errors import PrepareError
from rill.mobile.kernels.base import Kernel, register
from rill.mobile.kernels.hybrid import quantize_rows

__all__ = ["UnidirectionalSequenceLstm", "UnidirectionalSequenceRnn", "BidirectionalSequenceLstm"]

F32 = np.float32
_ACT = {0: lambda v: v, 1: lambda v: np.maximum(v, F32(0)), 3: lambda v: np.clip(v, 0, 6),
        4: np.tanh, 6: lambda v: F32(1) / (F32(1) + np.exp(-v))}  # fmt: skip


def _sigmoid(v):
    return (F32(1) / (F32(1) + np.exp(-v))).astype(F32)


@register("UNIDIRECTIONAL_SEQUENCE_LSTM", max_version=4)
class UnidirectionalSequenceLstm(Kernel):
    def prepare(self, inputs, outputs):
        ins = list(inputs) + [None] * (24 - len(inputs))
        x = ins[0]
        if x is None or len(x.shape) != 3:
            raise self.fail(f"the input {x} must be 3-D")
        if any(t is not None for t in ins[20:24]):
            raise self.fail("layer-normalized LSTM is not supported")
        self.expect_dtype(x, [np.float32])
        self.time_major = bool(self.options.get("time_major", False))
        t_len, batch = (x.shape[0], x.shape[1]) if self.time_major else (x.shape[1], x.shape[0])
        act = int(self.options.get("fused_activation_function", 4))
        if act not in _ACT:
            raise self.fail(f"activation {act} is not supported")
        self.act = _ACT[act]
        self.cell_clip = float(self.options.get("cell_clip", 0.0) or 0.0)
        self.proj_clip = float(self.options.get("proj_clip", 0.0) or 0.0)
        self.asym = bool(self.options.get("asymmetric_quantize_inputs", False))

        def weight(i, what):
            t = ins[i]
            if t is None:
                return None
            data = self.expect_const(t, what)
            if t.dtype == np.int8:
                self.expect_quantized(t)
                return ("q", data.astype(np.float64), F32(t.scale))
            self.expect_dtype(t, [np.float32], what)
            return ("f", data.astype(F32), None)

        self.w_in = [weight(i, f"input-to-{g} weights") for i, g in zip(range(1, 5), "ifco")]
        self.w_rec = [weight(i, f"recurrent-to-{g} weights") for i, g in zip(range(5, 9), "ifco")]
        if any(w is None for w in self.w_in[1:] + self.w_rec[1:]):
            raise self.fail("needs the forget, cell and output gate weights")
        self.cifg = self.w_in[0] is None
        self.peep = [None if ins[i] is None else self.expect_const(ins[i], "peephole").astype(F32)
                     for i in (9, 10, 11)]  # fmt: skip
        self.bias = [None if ins[i] is None else self.expect_const(ins[i], "bias").astype(F32)
                     for i in range(12, 16)]  # fmt: skip
        self.proj = weight(16, "projection weights")
        self.proj_bias = (None if ins[17] is None
                          else self.expect_const(ins[17], "projection bias").astype(F32))  # fmt: skip
        if ins[18] is None or ins[19] is None:
            raise self.fail("needs the output and cell state tensors")
        n_cell = self.w_in[1][1].shape[0]
        n_out = self.w_rec[1][1].shape[1]
        self.dims = (t_len, batch, n_cell, n_out)
        shape = (t_len, batch, n_out) if self.time_major else (batch, t_len, n_out)
        return [shape]

    def _matmul(self, w, v, vq):
        """W · v for the batch rows of v: float, or the hybrid integer product."""
        kind, data, scale = w
        if kind == "f":
            return threads.matmul(v, data.T).astype(F32)
        q, sf, _ = vq
        acc = (q @ data.T).astype(F32)
        return (acc * (sf * scale)[:, None]).astype(F32)

    def bind(self, inputs, outputs, scratch):
        x, h_state, c_state = inputs[0], inputs[18], inputs[19]
        out = outputs[0]
        t_len, batch, n_cell, n_out = self.dims
        act, asym = self.act, self.asym
        w_in, w_rec, bias, peep = self.w_in, self.w_rec, self.bias, self.peep
        hybrid = any(w is not None and w[0] == "q" for w in w_in + w_rec)

        def gate(k, xt, xq, h, hq, c):
            g = np.broadcast_to(bias[k] if bias[k] is not None else F32(0), (batch, n_cell))
            g = (g + self._matmul(w_in[k], xt, xq)).astype(F32)
            g = (g + self._matmul(w_rec[k], h, hq)).astype(F32)
            if k != 2 and peep[[0, 1, None, 2][k]] is not None:
                g = (g + peep[[0, 1, None, 2][k]] * c).astype(F32)
            return g

        def run():
            h = np.array(h_state, F32).reshape(batch, n_out)
            c = np.array(c_state, F32).reshape(batch, n_cell)
            for t in range(t_len):
                xt = np.ascontiguousarray(x[t] if self.time_major else x[:, t], F32)
                xq = quantize_rows(xt, asym) if hybrid else None
                hq = quantize_rows(h, asym) if hybrid else None
                f = _sigmoid(gate(1, xt, xq, h, hq, c))
                i = (F32(1) - f) if self.cifg else _sigmoid(gate(0, xt, xq, h, hq, c))
                g = np.asarray(act(gate(2, xt, xq, h, hq, c)), F32)
                c = (f * c + i * g).astype(F32)
                if self.cell_clip > 0:
                    c = np.clip(c, -self.cell_clip, self.cell_clip).astype(F32)
                o = _sigmoid(gate(3, xt, xq, h, hq, c))
                h = (o * np.asarray(act(c), F32)).astype(F32)
                if self.proj is not None:
                    hq2 = quantize_rows(h, asym) if self.proj[0] == "q" else None
                    h = self._matmul(self.proj, h, hq2)
                    if self.proj_bias is not None:
                        h = (h + self.proj_bias).astype(F32)
                    if self.proj_clip > 0:
                        h = np.clip(h, -self.proj_clip, self.proj_clip).astype(F32)
                if self.time_major:
                    out[t] = h
                else:
                    out[:, t] = h
            np.copyto(h_state, h.reshape(h_state.shape))
            np.copyto(c_state, c.reshape(c_state.shape))

        return run


@register("UNIDIRECTIONAL_SEQUENCE_RNN", max_version=3)
class UnidirectionalSequenceRnn(Kernel):
    def prepare(self, inputs, outputs):
        ins = list(inputs) + [None] * (5 - len(inputs))
        x, w, r, b, h = ins[:5]
        if x is None or len(x.shape) != 3:
            raise self.fail(f"the input {x} must be 3-D")
        if w is None or r is None or b is None or h is None:
            raise self.fail("needs the input and recurrent weights, the bias and the hidden state")
        self.expect_dtype(x, [np.float32])
        self.time_major = bool(self.options.get("time_major", False))
        t_len, batch = (x.shape[0], x.shape[1]) if self.time_major else (x.shape[1], x.shape[0])
        act = int(self.options.get("fused_activation_function", 0))
        if act not in _ACT:
            raise self.fail(f"activation {act} is not supported")
        self.act = _ACT[act]
        self.asym = bool(self.options.get("asymmetric_quantize_inputs", False))
        units = w.shape[0]
        if len(w.shape) != 2 or w.shape[1] != x.shape[2] or tuple(r.shape) != (units, units):
            raise self.fail(f"weights {w} and {r} do not fit the input {x}")
        if tuple(b.shape) != (units,) or int(np.prod(h.shape)) != batch * units:
            raise self.fail(f"bias {b} or hidden state {h} does not fit {units} units")

        def weight(t, what):
            data = self.expect_const(t, what)
            if t.dtype == np.int8:
                self.expect_quantized(t)
                return ("q", data.astype(np.float64), F32(t.scale))
            self.expect_dtype(t, [np.float32], what)
            return ("f", data.astype(F32), None)

        self.w, self.r = weight(w, "input weights"), weight(r, "recurrent weights")
        self.bias = self.expect_const(b, "bias").astype(F32)
        self.dims = (t_len, batch, units)
        return [(t_len, batch, units) if self.time_major else (batch, t_len, units)]

    def bind(self, inputs, outputs, scratch):
        x, h_state, out = inputs[0], inputs[4], outputs[0]
        t_len, batch, units = self.dims
        act, asym, w, r, bias = self.act, self.asym, self.w, self.r, self.bias
        hybrid = w[0] == "q" or r[0] == "q"
        matmul = UnidirectionalSequenceLstm._matmul

        def run():
            h = np.array(h_state, F32).reshape(batch, units)
            for t in range(t_len):
                xt = np.ascontiguousarray(x[t] if self.time_major else x[:, t], F32)
                xq = quantize_rows(xt, asym) if hybrid else None
                hq = quantize_rows(h, asym) if hybrid else None
                g = (np.broadcast_to(bias, (batch, units)) + matmul(self, w, xt, xq)).astype(F32)
                g = (g + matmul(self, r, h, hq)).astype(F32)
                h = np.asarray(act(g), F32)
                if self.time_major:
                    out[t] = h
                else:
                    out[:, t] = h
            np.copyto(h_state, h.reshape(h_state.shape))

        return run


@register("BIDIRECTIONAL_SEQUENCE_LSTM", max_version=3)
class BidirectionalSequenceLstm(Kernel):
    foldable = False  # it writes its state variables

    def _halves(self, ins):
        fw = [ins[0], *ins[1:18], ins[35], ins[36], None, None, None, None]
        bw = [ins[0], *ins[18:35], ins[37], ins[38], None, None, None, None]
        return fw, bw

    def prepare(self, inputs, outputs):
        ins = list(inputs) + [None] * (48 - len(inputs))
        if any(t is not None for t in ins[39:48]):
            raise self.fail("auxiliary inputs are not supported")
        self.merge = bool(self.options.get("merge_outputs", False))
        if len(outputs) != (1 if self.merge else 2):
            raise self.fail(f"has {len(outputs)} outputs; merge_outputs={self.merge} needs "
                            f"{1 if self.merge else 2}")  # fmt: skip
        self.subs = [UnidirectionalSequenceLstm(self.op), UnidirectionalSequenceLstm(self.op)]
        shapes = []
        for sub, half, what in zip(self.subs, self._halves(ins), ("forward", "backward")):
            sub.begin_prepare()
            try:
                shapes.append(sub.prepare(half, outputs[:1])[0])
            except PrepareError as e:  # name the direction too
                raise self.fail(f"{what} LSTM: {str(e).split('): ', 1)[-1]}") from None
        if self.merge:
            fw, bw = shapes
            return [(*fw[:-1], fw[-1] + bw[-1])]
        return shapes

    def bind(self, inputs, outputs, scratch):
        ins = list(inputs) + [None] * (48 - len(inputs))
        axis = 0 if self.subs[0].time_major else 1
        fw_in, bw_in = self._halves(ins)
        bw_in = [np.flip(ins[0], axis), *bw_in[1:]]  # the backward pass reads time reversed
        if self.merge:
            n_fw = self.subs[0].dims[3]
            outs = [outputs[0][..., :n_fw], outputs[0][..., n_fw:]]
        else:
            outs = list(outputs)
        outs[1] = np.flip(outs[1], axis)  # ... and writes its step t at T − 1 − t
        runs = [sub.bind(half, [o], []) for sub, half, o in zip(self.subs, (fw_in, bw_in), outs)]

        def run():
            for r in runs:
                r()

        return run
