"""ONNX import rules: the recurrent layers LSTM, GRU and RNN.

Each direction becomes one `scan` over time (a while loop with TensorArrays, so the sequence
length may be unknown until run time). The input projection of every step is one MatMul over the
whole sequence before the loop; the loop does the recurrent MatMul and the gates.

- direction: forward, reverse (the sequence reversed within each batch entry's length, as
  ReverseSequence does, and the outputs reversed back) and bidirectional (both, stacked).
- sequence_lens: past an entry's length the state stops changing and Y is 0, so Y_h / Y_c are the
  state after the entry's last step (what onnxruntime and onnx's reference compute).
- layout 0 (X [T, B, I], Y [T, D, B, H], Y_h [D, B, H]) and 1 (X [B, T, I], Y [B, T, D, H],
  Y_h [B, D, H]); initial_h / initial_c; LSTM peepholes, clip (of every gate's input to its
  activation), input_forget (f = 1 - i); GRU linear_before_reset.
- activations: the ones ONNX lists for recurrent layers (Relu, Tanh, Sigmoid, Affine,
  LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus), names in any
  case, with activation_alpha / activation_beta taken in order by the ones that have them.

Weights whose shapes disagree with hidden_size, the direction or each other are refused with the
shapes found and expected.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.functional_ops import scan
from rill.graph.onnx import import_nn
from rill.graph.onnx.import_registry import register_onnx_import
from rill.graph.onnx.import_util import OnnxImportError, const, op, static

# name → (how many of activation_alpha, activation_beta it takes, their defaults).
_ACTIVATIONS = {
    "relu": ((), ()),
    "tanh": ((), ()),
    "sigmoid": ((), ()),
    "softsign": ((), ()),
    "softplus": ((), ()),
    "affine": ((1.0,), (0.0,)),
    "leakyrelu": ((0.01,), ()),
    "thresholdedrelu": ((1.0,), ()),
    "scaledtanh": ((1.0,), (1.0,)),
    "hardsigmoid": ((0.2,), (0.5,)),
    "elu": ((1.0,), ()),
}


def _c(x, v):
    return const(v, x.dtype)


def _activation(name: str, alpha, beta):
    """A function x -> activation(x) for one of ONNX's recurrent activations."""
    key = name.lower()

    def f(x):
        if key == "relu":
            return op("Relu", [x])
        if key == "tanh":
            return op("Tanh", [x])
        if key == "sigmoid":
            return op("Sigmoid", [x])
        if key == "softsign":
            return op("Softsign", [x])
        if key == "softplus":
            return op("Softplus", [x])
        if key == "affine":
            return op("AddV2", [op("Mul", [_c(x, alpha[0]), x]), _c(x, beta[0])])
        if key == "leakyrelu":
            return import_nn.leaky_relu(None, x, alpha=alpha[0])
        if key == "thresholdedrelu":
            return import_nn.thresholded_relu(None, x, alpha=alpha[0])
        if key == "scaledtanh":
            return op("Mul", [_c(x, alpha[0]), op("Tanh", [op("Mul", [_c(x, beta[0]), x])])])
        if key == "hardsigmoid":
            return import_nn.hard_sigmoid(None, x, alpha=alpha[0], beta=beta[0])
        return import_nn.elu(None, x, alpha=alpha[0])

    return f


def _activations(what, names, alphas, betas, defaults, num_dirs):
    """Per direction, the list of activation functions (each direction has len(defaults))."""
    per_dir = len(defaults)
    names = list(names) if names else list(defaults) * num_dirs
    if len(names) != per_dir * num_dirs:
        raise OnnxImportError(
            f"{what} takes {per_dir} activation(s) per direction ({num_dirs} direction(s)): "
            f"got {len(names)} ({names})"
        )
    alphas, betas = list(alphas or []), list(betas or [])
    fns = []
    for name in names:
        spec = _ACTIVATIONS.get(str(name).lower())
        if spec is None:
            raise OnnxImportError(
                f"{what}: activation {name!r} is not one of ONNX's recurrent activations "
                f"({', '.join(sorted(_ACTIVATIONS))})"
            )
        a = [alphas.pop(0) if alphas else d for d in spec[0]]
        b = [betas.pop(0) if betas else d for d in spec[1]]
        fns.append(_activation(str(name), a, b))
    return [fns[d * per_dir : (d + 1) * per_dir] for d in range(num_dirs)]


def _dim(x, axis: int):
    """Dimension `axis` of x as an int32 scalar tensor (static when known)."""
    d = x.shape[axis] if x.shape.rank is not None else None
    if d is not None:
        return const(d, dtypes.int32)
    shp = op("Shape", [x], {"out_type": dtypes.int32})
    return op("StridedSlice", [shp, const([axis], dtypes.int32), const([axis + 1], dtypes.int32),
                               const([1], dtypes.int32)], {"shrink_axis_mask": 1})  # fmt: skip


def _zeros(x_tbi, hidden: int):
    """[B, H] zeros of x's dtype (B = dimension 1 of the time-major input)."""
    shape = op("Pack", [[_dim(x_tbi, 1), const(hidden, dtypes.int32)]], {"axis": 0})
    return op("Fill", [shape, _c(x_tbi, 0)])


def _take(t, d: int):
    """t[d] (t's first axis), folded when t is a constant."""
    v = static(t)
    if v is not None:
        return const(np.ascontiguousarray(v[d]), t.dtype)
    return op("GatherV2", [t, const(d, dtypes.int32), const(0, dtypes.int32)])


def _check_shape(what: str, name: str, t, want: list) -> None:
    if t is None or t.shape.rank is None:
        return
    got = t.shape.as_list()
    ok = len(got) == len(want) and all(g is None or w is None or g == w for g, w in zip(got, want))
    if not ok:
        shown = ["?" if w is None else w for w in want]
        raise OnnxImportError(f"{what}: {name} has shape {got}, expected {shown}")


class _Layer:
    """What LSTM, GRU and RNN share: shapes, directions, the time-major input, the outputs."""

    def __init__(self, n, kind: str, gates: int, x, w, r, b, seq_lens, hidden_size, direction,
                 layout):  # fmt: skip
        self.what = n.where() if n is not None else kind
        if direction not in ("forward", "reverse", "bidirectional"):
            raise OnnxImportError(f"{self.what}: unknown direction {direction!r}")
        self.dirs = 2 if direction == "bidirectional" else 1
        self.direction = direction
        self.layout = int(layout)
        if self.layout not in (0, 1):
            raise OnnxImportError(f"{self.what}: layout must be 0 or 1, got {layout}")
        if hidden_size is None:
            if r.shape.rank != 3 or r.shape[2] is None:
                raise OnnxImportError(f"{self.what}: no hidden_size and R's shape is not known")
            hidden_size = r.shape[2]
        self.hidden = h = int(hidden_size)
        if x.shape.rank is not None and x.shape.rank != 3:
            raise OnnxImportError(f"{self.what}: X must be 3-D, got shape {x.shape}")
        in_size = x.shape[2] if x.shape.rank == 3 else None
        d = self.dirs
        _check_shape(self.what, f"W (hidden_size {h}, {direction})", w, [d, gates * h, in_size])
        _check_shape(self.what, f"R (hidden_size {h}, {direction})", r, [d, gates * h, h])
        _check_shape(self.what, f"B (hidden_size {h}, {direction})", b, [d, 2 * gates * h])
        # Time-major input.
        self.x = op("Transpose", [x, const([1, 0, 2], dtypes.int32)]) if self.layout else x
        self.seq_lens = None
        if seq_lens is not None:
            self.seq_lens = op("Cast", [seq_lens], {"DstT": dtypes.int32})
            _check_shape(self.what, "sequence_lens", seq_lens, [x.shape[1 - self.layout]
                                                                if x.shape.rank == 3 else None])  # fmt: skip
        self.gates, self.w, self.r, self.b = gates, w, r, b

    def initial(self, t, name: str):
        """Per direction, the [B, H] initial state from t ([D, B, H], or [B, D, H] in layout 1)."""
        if t is None:
            return [_zeros(self.x, self.hidden) for _ in range(self.dirs)]
        want = [self.dirs, None, self.hidden] if not self.layout else [None, self.dirs, self.hidden]
        _check_shape(self.what, f"{name} (hidden_size {self.hidden})", t, want)
        if self.layout:
            t = op("Transpose", [t, const([1, 0, 2], dtypes.int32)])
        return [_take(t, d) for d in range(self.dirs)]

    def projected(self, d: int):
        """[T, B, gates·H]: X·Wᵀ + Wb (+ Rb where the gate allows), reversed for reverse."""
        x = self.x
        if self.reversed(d):
            x = self._reverse(x)
        gh = self.gates * self.hidden
        x2 = op("Reshape", [x, const([-1, self.x.shape[2] or -1], dtypes.int32)])
        if self.x.shape[2] is None:
            x2 = op("Reshape", [x, op("Pack", [[const(-1, dtypes.int32), _dim(x, 2)]],
                                      {"axis": 0})])  # fmt: skip
        xw = op("MatMul", [x2, _take(self.w, d)], {"transpose_b": True})
        if self.b is not None:
            xw = op("BiasAdd", [xw, self.input_bias(d)])
        shape = op("Pack", [[_dim(x, 0), _dim(x, 1), const(gh, dtypes.int32)]], {"axis": 0})
        return op("Reshape", [xw, shape])

    def input_bias(self, d: int):
        bd = _take(self.b, d)
        gh = self.gates * self.hidden
        return op("AddV2", [_slice1(bd, 0, gh), _slice1(bd, gh, 2 * gh)])

    def reversed(self, d: int) -> bool:
        return self.direction == "reverse" or (self.direction == "bidirectional" and d == 1)

    def _reverse(self, t):
        if self.seq_lens is None:
            return op("ReverseV2", [t, const([0], dtypes.int32)])
        return op("ReverseSequence", [t, self.seq_lens], {"seq_dim": 0, "batch_dim": 1})

    def mask(self):
        """[T, B, 1] bool: whether step t is within entry b's length (None without lengths)."""
        if self.seq_lens is None:
            return None
        steps = op("Range", [const(0, dtypes.int32), _dim(self.x, 0), const(1, dtypes.int32)])
        m = op("Less", [op("ExpandDims", [steps, const(1, dtypes.int32)]),
                        op("ExpandDims", [self.seq_lens, const(0, dtypes.int32)])])  # fmt: skip
        return op("ExpandDims", [m, const(2, dtypes.int32)])

    def run(self, d: int, step, states):
        """Scans `step(states, xw_t) -> new states` over time for direction d; returns
        (Y_d [T, B, H], final states)."""
        xw = self.projected(d)
        mask = self.mask()
        zeros = op("ZerosLike", [states[0]])

        def fn(acc, elem):
            prev = list(acc[:-1])
            if mask is None:
                new = step(prev, elem)
                return (*new, new[0])
            xw_t, m_t = elem
            new = step(prev, xw_t)
            kept = [op("SelectV2", [m_t, a, b]) for a, b in zip(new, prev)]
            return (*kept, op("SelectV2", [m_t, new[0], zeros]))

        elems = xw if mask is None else (xw, mask)
        out = scan(fn, elems, initializer=(*states, zeros), name="time")
        y = out[-1]
        finals = [op("StridedSlice", [s, const([-1], dtypes.int32), const([0], dtypes.int32),
                                      const([1], dtypes.int32)],
                     {"shrink_axis_mask": 1, "end_mask": 1}) for s in out[:-1]]  # fmt: skip
        # An empty sequence leaves the initial state.
        if self.x.shape[0] is None or self.x.shape[0] == 0:
            empty = op("Equal", [_dim(self.x, 0), const(0, dtypes.int32)])
            finals = [op("SelectV2", [empty, s0, f]) for s0, f in zip(states, finals)]
        if self.reversed(d):
            y = self._reverse(y)
        return y, finals

    def outputs(self, ys, finals_per_state):
        """ONNX's outputs from per-direction Y [T, B, H] and final states [B, H]."""
        y = op("Pack", [ys], {"axis": 1})  # [T, D, B, H]
        if self.layout:
            y = op("Transpose", [y, const([2, 0, 1, 3], dtypes.int32)])
        result = [y]
        for finals in finals_per_state:
            s = op("Pack", [finals], {"axis": 0})  # [D, B, H]
            if self.layout:
                s = op("Transpose", [s, const([1, 0, 2], dtypes.int32)])
            result.append(s)
        return result


def _slice1(t, begin: int, end: int):
    """t[begin:end] of a 1-D tensor."""
    return op("StridedSlice", [t, const([begin], dtypes.int32), const([end], dtypes.int32),
                               const([1], dtypes.int32)])  # fmt: skip


def _split(t, k: int):
    return op("Split", [const(1, dtypes.int32), t], {"num_split": k})


def _clip(x, clip):
    if clip is None:
        return x
    return op("Maximum", [op("Minimum", [x, _c(x, clip)]), _c(x, -clip)])


@register_onnx_import("LSTM")
def lstm(n, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *,
         activation_alpha=None, activation_beta=None, activations=None, clip=None,
         direction="forward", hidden_size=None, input_forget=0, layout=0):  # fmt: skip
    layer = _Layer(n, "LSTM", 4, x, w, r, b, sequence_lens, hidden_size, direction, layout)
    h = layer.hidden
    acts = _activations(layer.what, activations, activation_alpha, activation_beta,
                        ("Sigmoid", "Tanh", "Tanh"), layer.dirs)  # fmt: skip
    _check_shape(layer.what, f"P (hidden_size {h}, {direction})", p, [layer.dirs, 3 * h])
    h0s, c0s = layer.initial(initial_h, "initial_h"), layer.initial(initial_c, "initial_c")
    ys, hs, cs = [], [], []
    for d in range(layer.dirs):
        f, g, hact = acts[d]
        rd = _take(r, d)
        peep = None
        if p is not None:
            pd = _take(p, d)
            peep = [_slice1(pd, k * h, (k + 1) * h) for k in range(3)]  # i, o, f

        def step(states, xw_t, rd=rd, peep=peep, f=f, g=g, hact=hact):
            h_prev, c_prev = states
            gates = op("AddV2", [xw_t, op("MatMul", [h_prev, rd], {"transpose_b": True})])
            gi, go, gf, gc = _split(gates, 4)
            if peep is not None:
                gi = op("AddV2", [gi, op("Mul", [peep[0], c_prev])])
                gf = op("AddV2", [gf, op("Mul", [peep[2], c_prev])])
            i = f(_clip(gi, clip))
            ft = op("Sub", [_c(i, 1), i]) if input_forget else f(_clip(gf, clip))
            c = op("AddV2", [op("Mul", [ft, c_prev]), op("Mul", [i, g(_clip(gc, clip))])])
            if peep is not None:
                go = op("AddV2", [go, op("Mul", [peep[1], c])])
            o = f(_clip(go, clip))
            return [op("Mul", [o, hact(c)]), c]

        y, (hf, cf) = layer.run(d, step, [h0s[d], c0s[d]])
        ys.append(y)
        hs.append(hf)
        cs.append(cf)
    return layer.outputs(ys, [hs, cs])


@register_onnx_import("GRU")
def gru(n, x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0, linear_before_reset=0):  # fmt: skip
    layer = _Layer(n, "GRU", 3, x, w, r, b, sequence_lens, hidden_size, direction, layout)
    h = layer.hidden
    acts = _activations(layer.what, activations, activation_alpha, activation_beta,
                        ("Sigmoid", "Tanh"), layer.dirs)  # fmt: skip
    h0s = layer.initial(initial_h, "initial_h")
    if linear_before_reset and b is not None:
        layer.input_bias = lambda d: _gru_input_bias(layer, d)
    ys, hs = [], []
    for d in range(layer.dirs):
        f, g = acts[d]
        rd = _take(r, d)
        r_zr = op("StridedSlice", [rd, const([0, 0], dtypes.int32), const([2 * h, h], dtypes.int32),
                                   const([1, 1], dtypes.int32)])  # fmt: skip
        r_h = op("StridedSlice", [rd, const([2 * h, 0], dtypes.int32),
                                  const([3 * h, h], dtypes.int32), const([1, 1], dtypes.int32)])  # fmt: skip
        rb_h = None
        if b is not None and linear_before_reset:
            rb_h = _slice1(_take(b, d), 5 * h, 6 * h)

        def step(states, xw_t, r_zr=r_zr, r_h=r_h, rb_h=rb_h, f=f, g=g):
            (h_prev,) = states
            x_z, x_r, x_h = _split(xw_t, 3)
            hr = op("MatMul", [h_prev, r_zr], {"transpose_b": True})
            h_z, h_r = _split(hr, 2)
            z = f(_clip(op("AddV2", [x_z, h_z]), clip))
            rt = f(_clip(op("AddV2", [x_r, h_r]), clip))
            if linear_before_reset:
                hh = op("MatMul", [h_prev, r_h], {"transpose_b": True})
                if rb_h is not None:
                    hh = op("BiasAdd", [hh, rb_h])
                pre = op("AddV2", [x_h, op("Mul", [rt, hh])])
            else:
                hh = op("MatMul", [op("Mul", [rt, h_prev]), r_h], {"transpose_b": True})
                pre = op("AddV2", [x_h, hh])
            ht = g(_clip(pre, clip))
            one_minus_z = op("Sub", [_c(z, 1), z])
            return [op("AddV2", [op("Mul", [one_minus_z, ht]), op("Mul", [z, h_prev])])]

        y, (hf,) = layer.run(d, step, [h0s[d]])
        ys.append(y)
        hs.append(hf)
    return layer.outputs(ys, [hs])


def _gru_input_bias(layer: _Layer, d: int):
    """Wb + Rb for z and r, Wb only for h (Rb_h sits inside the reset gate's product)."""
    h = layer.hidden
    bd = _take(layer.b, d)
    wb = _slice1(bd, 0, 3 * h)
    rb = op("ConcatV2", [[_slice1(bd, 3 * h, 5 * h), op("ZerosLike", [_slice1(bd, 5 * h, 6 * h)])],
                         const(0, dtypes.int32)])  # fmt: skip
    return op("AddV2", [wb, rb])


@register_onnx_import("RNN")
def rnn(n, x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None,
        activation_beta=None, activations=None, clip=None, direction="forward",
        hidden_size=None, layout=0):  # fmt: skip
    layer = _Layer(n, "RNN", 1, x, w, r, b, sequence_lens, hidden_size, direction, layout)
    acts = _activations(layer.what, activations, activation_alpha, activation_beta, ("Tanh",),
                        layer.dirs)  # fmt: skip
    h0s = layer.initial(initial_h, "initial_h")
    ys, hs = [], []
    for d in range(layer.dirs):
        (f,) = acts[d]
        rd = _take(r, d)

        def step(states, xw_t, rd=rd, f=f):
            (h_prev,) = states
            pre = op("AddV2", [xw_t, op("MatMul", [h_prev, rd], {"transpose_b": True})])
            return [f(_clip(pre, clip))]

        y, (hf,) = layer.run(d, step, [h0s[d]])
        ys.append(y)
        hs.append(hf)
    return layer.outputs(ys, [hs])
