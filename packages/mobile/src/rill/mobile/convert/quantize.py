"""Post-training quantization of a float `ModelIR`: dynamic range, or full int8 with calibration.

Conventions (those of TensorFlow's converter, reference/formats.md §3):

- Activations: int8, per-tensor, asymmetric. The calibrated range is stretched to include 0,
  scale = (max − min)/255, zero point = −128 − min/scale rounded (half away from zero) and
  clamped to [−128, 127].
- Weights of CONV_2D / FULLY_CONNECTED (dim 0) and DEPTHWISE_CONV_2D (dim 3): int8, symmetric
  per-channel, scale_c = max|w_c|/127, values in [−127, 127].
- Bias: int32, zero point 0, scale_c = s_in · s_w[c] (computed in float32, as stored).
- SOFTMAX and LOGISTIC outputs are fixed at (1/256, −128), TANH at (1/128, 0).
- Ops that move values without arithmetic (pooling, reshapes, concatenation, padding,
  transposes, slices, gathers) keep their inputs' parameters: such tensors are unified and share
  the union of their ranges (int8 CONCATENATION in TFLite requires equal parameters).
- Other float constants (an Add's operand, a Gather's table) are per-tensor asymmetric.

Float fallback: ops named in `float_fallback` (by any rill op they implement) stay float; a
DEQUANTIZE feeds them from int8 producers and a QUANTIZE feeds int8 consumers from them. The
model's inputs and outputs stay float (with QUANTIZE / DEQUANTIZE at the edges) unless int8 I/O
is asked for.

Dynamic range: the weights of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED are stored as int8
(per-channel, symmetric) and a DEQUANTIZE operator turns them back into float32 for the float
kernel. Both LiteRT and rill's interpreter run that; activations stay float.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import numpy as np

from rill.mobile.convert.ir import ModelIR, OpIR, QuantParams, TensorIR
from rill.mobile.convert.registry import ConverterError

WEIGHT_AXIS = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "DEPTHWISE_CONV_2D": 3}
FIXED_OUTPUT = {
    "SOFTMAX": (1.0 / 256.0, -128),
    "LOGISTIC": (1.0 / 256.0, -128),
    "TANH": (1.0 / 128.0, 0),
}
# Ops whose int8 output has the parameters of input 0 (all inputs, for CONCATENATION).
SHARED_PARAMS = {
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "RESHAPE",
    "SQUEEZE",
    "EXPAND_DIMS",
    "TRANSPOSE",
    "PAD",
    "STRIDED_SLICE",
    "GATHER",
    "CONCATENATION",
    "MAXIMUM",
    "MINIMUM",
    "SELECT",
    "SELECT_V2",
    "REDUCE_MAX",
    "REDUCE_MIN",
    "TILE",
    "SLICE",
    "REVERSE_V2",
    "PACK",
    "UNPACK",
    "SPLIT",
    "SPLIT_V",
    "GATHER_ND",
    "BROADCAST_TO",
    "MIRROR_PAD",
    "PADV2",
}
# Which inputs share the output's parameters (default: input 0 alone).
SHARED_INPUTS = {
    "CONCATENATION": None,  # all
    "PACK": None,
    "MAXIMUM": None,
    "MINIMUM": None,
    "SELECT": (1, 2),
    "SELECT_V2": (1, 2),
    "SPLIT": (1,),
    "PADV2": (0, 2),
}
# Ops left in float inside an int8 model (DEQUANTIZE before, QUANTIZE after), because the
# reference kernels have no int8 version or rill's interpreter does not reproduce it exactly.
FLOAT_ONLY = {"NEG", "SQUARE", "FLOOR", "ROUND", "ELU", "DIV", "POW", "FLOOR_DIV", "FLOOR_MOD",
              "REDUCE_PROD", "SUM", "LOG_SOFTMAX", "CAST", "SHAPE", "TOPK_V2", "CUMSUM", "ONE_HOT",
              "FILL", "RANGE", "ZEROS_LIKE", "TRANSPOSE_CONV"}  # fmt: skip


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def activation_params(lo: float, hi: float) -> QuantParams:
    """Per-tensor asymmetric int8 parameters for values in [lo, hi].

    >>> p = activation_params(0.0, 1.0)
    >>> bool(p.scale[0] == np.float32(1 / 255)), int(p.zero_point[0])
    (True, -128)
    """
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise ConverterError(f"calibration range [{lo}, {hi}] is not finite")
    if hi - lo < 1e-12:
        hi = lo + 1.0  # an all-zero tensor: any scale represents it exactly
    scale = np.float32((hi - lo) / 255.0)
    zp = int(np.clip(_round_half_away(-128.0 - lo / float(scale)), -128, 127))
    return QuantParams.per_tensor(float(scale), zp)


def quantize_values(x: np.ndarray, q: QuantParams, dtype=np.int8) -> np.ndarray:
    """round(x / scale) + zero_point, clamped to `dtype` (per-channel along `q.axis`)."""
    x = np.asarray(x, dtype=np.float64)
    shape = [1] * x.ndim
    if q.per_channel:
        shape[q.axis] = -1
    scale = q.scale.astype(np.float64).reshape(shape) if x.ndim else q.scale[0]
    zp = q.zero_point.reshape(shape) if x.ndim else q.zero_point[0]
    info = np.iinfo(dtype)
    return np.clip(_round_half_away(x / scale) + zp, info.min, info.max).astype(dtype)


def weight_params(w: np.ndarray, axis: int) -> QuantParams:
    """Symmetric per-channel int8 parameters: scale_c = max|w_c| / 127, zero point 0."""
    reduce_axes = tuple(i for i in range(w.ndim) if i != axis)
    peak = np.max(np.abs(w), axis=reduce_axes) if w.size else np.zeros(w.shape[axis])
    scale = (peak.astype(np.float32) / np.float32(127.0)).astype(np.float32)
    # An all-zero channel quantizes to zeros under any scale; 1.0 keeps the kernels' math finite.
    scale[scale == 0] = 1.0
    return QuantParams(scale, np.zeros(scale.shape, np.int64), axis)


def quantize_weights(w: np.ndarray, axis: int) -> tuple[np.ndarray, QuantParams]:
    q = weight_params(w, axis)
    return np.clip(quantize_values(w, q), -127, 127).astype(np.int8), q


# -- calibration ---------------------------------------------------------------------------------


def samples(dataset, input_names: list[str]) -> Iterable[list[np.ndarray]]:
    """Normalizes a representative dataset to lists of arrays, one per input.

    `dataset` is a callable returning an iterable (tf.lite's `representative_dataset`) or an
    iterable. Each item is a list/tuple (one array per input), a dict keyed by input name (with
    or without ":0"), or a single array when there is one input.
    """
    items = dataset() if callable(dataset) else dataset
    for item in items:
        if isinstance(item, dict):
            by_name = {k.removesuffix(":0"): v for k, v in item.items()}
            missing = [n for n in input_names if n.removesuffix(":0") not in by_name]
            if missing:
                raise ConverterError(
                    f"representative sample has keys {sorted(item)}; missing {missing}"
                )
            yield [np.asarray(by_name[n.removesuffix(":0")]) for n in input_names]
        elif isinstance(item, list | tuple):
            if len(item) != len(input_names):
                raise ConverterError(
                    f"representative sample has {len(item)} arrays; the model has "
                    f"{len(input_names)} inputs ({', '.join(input_names)})"
                )
            yield [np.asarray(v) for v in item]
        else:
            if len(input_names) != 1:
                raise ConverterError(
                    f"representative sample is one array; the model has {len(input_names)} "
                    "inputs: yield a list or a dict"
                )
            yield [np.asarray(item)]


def calibrate(ig, model: ModelIR, dataset, session=None) -> dict[str, tuple[float, float]]:
    """Runs the float graph in rill on every sample: {rill tensor name: (min, max)}."""
    sources = sorted(
        {t.source for t in model.tensors if t.source and not t.is_const and t.dtype == np.float32}
    )
    graph = ig.graph
    fetches = [graph.get_tensor_by_name(s) for s in sources]
    if session is None:
        from rill.exec import Session

        session = Session(graph=graph)
    constants = ig.feeds()
    ranges: dict[str, list[float]] = {}
    count = 0
    names = [t.name for t in ig.inputs]
    for sample in samples(dataset, names):
        feeds = dict(constants)
        for t, v in zip(ig.inputs, sample):
            feeds[t] = np.asarray(v, dtype=t.dtype.np)
        values = session.run(fetches, feeds)
        for name, v in zip(sources, values):
            v = np.asarray(v)
            if v.size == 0:
                continue
            lo, hi = float(np.min(v)), float(np.max(v))
            if name in ranges:
                r = ranges[name]
                r[0], r[1] = min(r[0], lo), max(r[1], hi)
            else:
                ranges[name] = [lo, hi]
        count += 1
    if count == 0:
        raise ConverterError("the representative dataset yielded no samples")
    return {k: (v[0], v[1]) for k, v in ranges.items()}


# -- full integer --------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, i: int) -> int:
        root = i
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(i, i) != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _is_float_activation(t: TensorIR) -> bool:
    return not t.is_const and t.dtype == np.float32


def _quantized_ops(model: ModelIR, fallback: set[str]) -> set[int]:
    out = set()
    for k, op in enumerate(model.ops):
        if fallback.intersection(op.fused or (op.layer,)) or op.code in FLOAT_ONLY:
            continue
        if any(model.tensors[o].dtype == np.float32 for o in op.outputs):
            out.add(k)
    return out


def _activation_params(model, ranges, quantized) -> dict[int, QuantParams]:
    """Parameters for every float tensor a quantized op touches (shared groups unified)."""
    uf = _UnionFind()
    fixed: dict[int, tuple[float, int]] = {}
    for k, op in enumerate(model.ops):
        if k not in quantized:
            continue
        if op.code in FIXED_OUTPUT:
            fixed[op.outputs[0]] = FIXED_OUTPUT[op.code]
        if op.code in SHARED_PARAMS:
            which = SHARED_INPUTS.get(op.code, (0,))
            members = op.inputs if which is None else [op.inputs[j] for j in which]
            for i in members:
                if i >= 0 and model.tensors[i].dtype == np.float32:
                    for o in op.outputs:
                        uf.union(i, o)
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(model.tensors):
        if t.dtype == np.float32:
            groups.setdefault(uf.find(i), []).append(i)
    params: dict[int, QuantParams] = {}
    for members in groups.values():
        fix = next((fixed[m] for m in members if m in fixed), None)
        if fix is not None:
            p = QuantParams.per_tensor(*fix)
        else:
            lo, hi, seen = 0.0, 0.0, False
            for m in members:
                t = model.tensors[m]
                r = None
                if t.is_const and t.data.size:
                    r = (float(np.min(t.data)), float(np.max(t.data)))
                elif not t.is_const and t.source in ranges:
                    r = ranges[t.source]
                if r is not None:
                    lo, hi, seen = min(lo, r[0]), max(hi, r[1]), True
            if not seen:
                continue
            p = activation_params(lo, hi)
        for m in members:
            params[m] = p
    return params


def quantize_full(
    model: ModelIR,
    ranges: dict[str, tuple[float, float]],
    int8_io: bool = False,
    float_fallback: Iterable[str] = (),
) -> ModelIR:
    """The int8 version of float `model`, given calibrated ranges of its rill tensors."""
    fallback = set(float_fallback)
    quantized = _quantized_ops(model, fallback)
    params = _activation_params(model, ranges, quantized)
    out = ModelIR(
        tensors=[copy.copy(t) for t in model.tensors],
        inputs=list(model.inputs),
        outputs=list(model.outputs),
        input_names=list(model.input_names),
        output_names=list(model.output_names),
        description=model.description,
    )
    tensors = out.tensors

    def need(i: int) -> QuantParams:
        if i not in params:
            t = tensors[i]
            raise ConverterError(
                f"no calibration range for tensor {t.name!r} (rill tensor {t.source}); the "
                "representative dataset must reach every quantized layer"
            )
        return params[i]

    home: dict[int, str] = {}  # tensor -> "q" (int8) or "f" (float32), where it is produced
    for i in model.inputs:
        if tensors[i].dtype == np.float32:
            home[i] = "q" if int8_io else "f"
            if int8_io:
                tensors[i].dtype, tensors[i].quant = np.dtype(np.int8), need(i)
    converted: dict[tuple[int, str], int] = {}

    def as_domain(i: int, domain: str) -> int:
        if home.get(i, "f") == domain or tensors[i].dtype not in (np.float32, np.int8):
            return i
        key = (i, domain)
        if key not in converted:
            src = tensors[i]
            if domain == "q":
                t = TensorIR(
                    out.unique_name(f"{src.name}/quantize"),
                    np.dtype(np.int8),
                    src.shape,
                    src.signature,
                    quant=need(i),
                    source=src.source,
                )
                code = "QUANTIZE"
            else:
                t = TensorIR(
                    out.unique_name(f"{src.name}/dequantize"),
                    np.dtype(np.float32),
                    src.shape,
                    src.signature,
                    source=src.source,
                )
                code = "DEQUANTIZE"
            j = out.add_tensor(t)
            out.add_op(OpIR(code, [i], [j], layer=src.source or src.name))
            converted[key] = j
        return converted[key]

    const_cache: dict[tuple, int] = {}

    def quantized_const(op: OpIR, slot: int, i: int) -> int:
        t = tensors[i]
        if op.code in WEIGHT_AXIS and slot == 1:
            key = (i, "weights", WEIGHT_AXIS[op.code])
            make = lambda: quantize_weights(t.data, WEIGHT_AXIS[op.code])  # noqa: E731
        elif op.code in WEIGHT_AXIS and slot == 2:
            key = (i, "bias", op.inputs[0], op.inputs[1])
            make = lambda: _bias(tensors, op, t, need)  # noqa: E731
        else:
            p = params.get(i) or activation_params(np.min(t.data), np.max(t.data))
            key = (i, "values", float(p.scale[0]), int(p.zero_point[0]))
            make = lambda: (quantize_values(t.data, p), p)  # noqa: E731
        if key not in const_cache:
            data, q = make()
            j = out.add_const(data, out.unique_name(f"{t.name}/{data.dtype.name}"), q)
            out.tensors[j].source = t.source
            const_cache[key] = j
        return const_cache[key]

    for k, op in enumerate(model.ops):
        new = copy.copy(op)
        if k not in quantized:
            new.inputs = [as_domain(i, "f") if home.get(i) == "q" else i for i in op.inputs]
            home.update((o, "f") for o in op.outputs)
            out.add_op(new)
            continue
        ins = []
        for slot, i in enumerate(op.inputs):
            t = tensors[i] if i >= 0 else None
            if t is None or t.dtype not in (np.float32, np.int8):
                ins.append(i)
            elif t.is_const:
                ins.append(quantized_const(op, slot, i) if t.dtype == np.float32 else i)
            else:
                ins.append(as_domain(i, "q"))
        new.inputs = ins
        for o in op.outputs:
            if tensors[o].dtype == np.float32:
                tensors[o].dtype, tensors[o].quant = np.dtype(np.int8), need(o)
                home[o] = "q"
        out.add_op(new)

    want = "q" if int8_io else "f"
    for pos, i in enumerate(model.outputs):
        if tensors[i].dtype not in (np.float32, np.int8) or home.get(i, "f") == want:
            continue
        j = as_domain(i, want)
        out.outputs[pos] = j
        if j in out.outputs[:pos]:
            continue  # the same tensor listed twice: renamed already
        # The edge tensor the user sees keeps the clean name; the internal one is renamed.
        clean = tensors[i].name
        tensors[i].name = out.unique_name(f"{clean}/{'int8' if want == 'f' else 'float'}")
        tensors[j].name = clean
    return out


def _bias(tensors, op: OpIR, t: TensorIR, need) -> tuple[np.ndarray, QuantParams]:
    s_in = need(op.inputs[0]).scale[0]
    w = tensors[op.inputs[1]]
    s_w = weight_params(w.data, WEIGHT_AXIS[op.code]).scale
    scale = (np.float32(s_in) * s_w.astype(np.float32)).astype(np.float32)
    q = QuantParams(scale, np.zeros(scale.shape, np.int64), 0)
    return quantize_values(t.data, q, np.int32), q


# -- dynamic range -------------------------------------------------------------------------------


def quantize_dynamic(model: ModelIR, float_fallback: Iterable[str] = ()) -> ModelIR:
    """Int8 weights for CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, dequantized at run time."""
    fallback = set(float_fallback)
    out = ModelIR(
        tensors=list(model.tensors),
        inputs=list(model.inputs),
        outputs=list(model.outputs),
        input_names=list(model.input_names),
        output_names=list(model.output_names),
        description=model.description,
    )
    done: dict[int, int] = {}
    for op in model.ops:
        new = copy.copy(op)
        if op.code in WEIGHT_AXIS and not fallback.intersection(op.fused or (op.layer,)):
            i = op.inputs[1]
            w = model.tensors[i]
            if w.is_const and w.dtype == np.float32:
                if i not in done:
                    data, q = quantize_weights(w.data, WEIGHT_AXIS[op.code])
                    qi = out.add_const(data, out.unique_name(f"{w.name}/int8"), q)
                    fi = out.add_tensor(
                        TensorIR(
                            out.unique_name(f"{w.name}/dequantize"), np.dtype(np.float32), w.shape
                        )
                    )
                    out.add_op(OpIR("DEQUANTIZE", [qi], [fi], layer=op.layer))
                    done[i] = fi
                new.inputs = list(op.inputs)
                new.inputs[1] = done[i]
        out.add_op(new)
    return _drop_unused(out)


def _drop_unused(model: ModelIR) -> ModelIR:
    """Removes tensors no operator or model edge refers to (float weights that were replaced)."""
    used = set(model.inputs) | set(model.outputs)
    for op in model.ops:
        used.update(i for i in op.inputs if i >= 0)
        used.update(op.outputs)
    keep = [i for i in range(len(model.tensors)) if i in used]
    remap = {old: new for new, old in enumerate(keep)}
    model.tensors = [model.tensors[i] for i in keep]
    for op in model.ops:
        op.inputs = [remap[i] if i >= 0 else i for i in op.inputs]
        op.outputs = [remap[i] for i in op.outputs]
    model.inputs = [remap[i] for i in model.inputs]
    model.outputs = [remap[i] for i in model.outputs]
    return model


def finish(model: ModelIR) -> ModelIR:
    """The last step of either quantization: float constants nothing reads any more are dropped."""
    return _drop_unused(model)
