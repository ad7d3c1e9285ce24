"""ONNX export of TensorFlow ops that ONNX covers only through a composition or a close cousin:
MaxPoolWithArgmax (MaxPool's Indices re-indexed from NCHW to NHWC), StringLower / StringUpper
(StringNormalizer), (Static)RegexFullMatch, CumulativeLogsumexp (a shifted CumSum of exp in
float64), SparseToDense (ScatterND into a filled tensor), ListDiff (an Equal table and Compress),
ResizeArea at integer down-scaling factors (AveragePool), and the random ops
RandomStandardNormal, RandomUniform, TruncatedNormal (redrawn in a Loop) and Multinomial.

The random ops draw from the ONNX runtime's generator: the exported model's values follow the
same distribution as rill's but never equal them, seeded or not.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from rill.graph import dtypes
from rill.graph.onnx.exporter import onnx_dtype
from rill.graph.onnx.registry import register_onnx_export

NCHW = (0, 3, 1, 2)


def _i64(ctx, values) -> str:
    return ctx.initializer(np.asarray(values, dtype=np.int64).reshape(-1))


def _dim(ctx, nchw_name: str, x, axis: int) -> str:
    """The NHWC tensor x's size along `axis` as an int64 [1]: a constant when the shape is
    known, else read from x's NCHW value `nchw_name`."""
    d = x.shape.dims[axis] if x.shape.dims is not None else None
    if d is not None:
        return _i64(ctx, [d])
    at = NCHW.index(axis)
    return ctx.node("Gather", [ctx.node("Shape", [nchw_name]), _i64(ctx, [at])], axis=0)


# -- pooling -----------------------------------------------------------------------------------


@register_onnx_export("MaxPoolWithArgmax")
def max_pool_with_argmax(ctx, op):
    """ONNX MaxPool with its Indices output, in NCHW. ONNX numbers the input element
    ((b·C + c)·H + y)·W + x; TensorFlow numbers it (y·W + x)·C + c, plus b·H·W·C with
    include_batch_in_index. With i the ONNX index, hw = i mod H·W and bc = i div H·W:
    TensorFlow's index is hw·C + bc mod C (+ (bc - bc mod C)·H·W). Both scan a window row by
    row and keep the first maximum, so ties resolve alike."""
    from rill.graph.onnx.export_nn import _pads

    x = op._inputs[0]
    if x.shape.rank not in (None, 4):
        ctx.unsupported("MaxPoolWithArgmax takes a 4-D NHWC input")
    ksize, strides = list(op.attrs["ksize"]), list(op.attrs["strides"])
    if ksize[0] != 1 or ksize[3] != 1 or strides[0] != 1 or strides[3] != 1:
        ctx.unsupported("pooling across the batch or channel axis has no ONNX equivalent")
    kernel, stride = ksize[1:3], strides[1:3]
    pads = _pads(ctx, op, x, kernel, stride, [1, 1], (1, 2))
    xn = ctx.value(x, NCHW)
    _, idx = ctx.node("MaxPool", [xn], [op.outputs[0], None], layout=NCHW,
                      kernel_shape=kernel, strides=stride, **pads)  # fmt: skip
    h, w, c = (_dim(ctx, xn, x, a) for a in (1, 2, 3))
    hw = ctx.node("Mul", [h, w])
    pos = ctx.node("Mod", [idx, hw])
    bc = ctx.node("Div", [idx, hw])
    ch = ctx.node("Mod", [bc, c])
    arg = ctx.node("Add", [ctx.node("Mul", [pos, c]), ch])
    if op.attrs["include_batch_in_index"]:
        arg = ctx.node("Add", [arg, ctx.node("Mul", [ctx.node("Sub", [bc, ch]), hw])])
    if op.attrs["Targmax"] is dtypes.int64:
        ctx.node("Identity", [arg], op.outputs[1], layout=NCHW)
    else:
        ctx.node("Cast", [arg], op.outputs[1], layout=NCHW, to=TensorProto.INT32)


# -- strings -----------------------------------------------------------------------------------


# TensorFlow's encodings → the locale whose case mapping matches: without an encoding
# TensorFlow changes ASCII letters only, as the C locale does; with UTF-8 every letter, as
# C.UTF-8 does (a locale with no language's special rules, present wherever glibc or musl is).
_CASE_LOCALES = {"": "C", "utf-8": "C.UTF-8"}


def _case(action: str):
    def rule(ctx, op):
        """StringNormalizer changes the case of a [C] tensor: the input is flattened around it.
        Its locale picks the mapping (see _CASE_LOCALES); onnxruntime refuses to load a model
        whose locale the machine lacks (C.UTF-8 on Windows). The runtime decodes UTF-8, so
        input that is not UTF-8 fails there even without an encoding. Case mappings that
        change a string's length (German ß upper-cased to SS) are Unicode's special cases,
        which rill applies and onnxruntime's per-character mapping does not. An empty input
        would come back as [""] (ONNX's "every word was a stopword")."""
        encoding = op.attrs["encoding"].lower()
        if encoding not in _CASE_LOCALES:
            ctx.unsupported(f"encoding {op.attrs['encoding']!r} (rill supports '' and 'utf-8')")
        name = ctx.value(op._inputs[0])
        flat = ctx.node("Reshape", [name, _i64(ctx, [-1])])
        changed = ctx.node("StringNormalizer", [flat], case_change_action=action,
                           is_case_sensitive=1, locale=_CASE_LOCALES[encoding])  # fmt: skip
        ctx.node("Reshape", [changed, ctx.node("Shape", [name])], op.outputs[0])

    return rule


register_onnx_export("StringLower")(_case("LOWER"))
register_onnx_export("StringUpper")(_case("UPPER"))


def _regex(ctx, op, pattern: str) -> None:
    if ctx.opset < 20:
        ctx.unsupported(f"ONNX has RegexFullMatch from opset 20 on, and this export targets "
                        f"opset {ctx.opset}; export with opset=20 or newer")  # fmt: skip
    ctx.node("RegexFullMatch", [ctx.value(op._inputs[0])], op.outputs[0], pattern=pattern)


@register_onnx_export("StaticRegexFullMatch")
def static_regex_full_match(ctx, op):
    """ONNX RegexFullMatch (opset 20): both take an RE2 pattern."""
    _regex(ctx, op, op.attrs["pattern"])


@register_onnx_export("RegexFullMatch")
def regex_full_match(ctx, op):
    """ONNX RegexFullMatch (opset 20); its pattern is an attr, so it must be known."""
    p = ctx.require_const(op._inputs[1], "pattern")
    if np.ndim(p) != 0:
        ctx.unsupported("the pattern must be a scalar string")
    p = p[()] if isinstance(p, np.ndarray) else p
    _regex(ctx, op, p.decode() if isinstance(p, bytes) else str(p))


# -- scans -------------------------------------------------------------------------------------


@register_onnx_export("CumulativeLogsumexp")
def cumulative_logsumexp(ctx, op):
    """m + log(cumsum(exp(x - m))), m the axis's (finite) maximum, in float64 as rill computes
    it. Exact to float64 rounding wherever a prefix's largest term is within about 700 of m;
    a prefix whose terms all lie more than ~745 below m underflows to -inf (rill's pairwise
    logaddexp does not)."""
    x, axis = op._inputs
    t = op.attrs["T"]
    name = ctx.value(x)
    if t is not dtypes.float64:
        name = ctx.node("Cast", [name], to=TensorProto.DOUBLE)
    ax = ctx.int64(axis)
    if ctx.opset >= 18:
        m = ctx.node("ReduceMax", [name, ctx.node("Reshape", [ax, _i64(ctx, [1])])], keepdims=1)
    else:
        a = int(ctx.require_const(axis, "axis"))
        m = ctx.node("ReduceMax", [name], axes=[a], keepdims=1)
    # An axis of only ±inf or NaN shifts by 0: exp and log then give rill's inf, -inf or NaN.
    bad = ctx.node("Or", [ctx.node("IsInf", [m]), ctx.node("IsNaN", [m])])
    zero = ctx.initializer(np.zeros((), np.float64))
    m = ctx.node("Where", [bad, zero, m])
    e = ctx.node("Exp", [ctx.node("Sub", [name, m])])
    s = ctx.node("CumSum", [e, ax], exclusive=int(op.attrs["exclusive"]),
                 reverse=int(op.attrs["reverse"]))  # fmt: skip
    out = ctx.node("Add", [m, ctx.node("Log", [s])])
    if t is dtypes.float64:
        ctx.node("Identity", [out], op.outputs[0])
    else:
        ctx.node("Cast", [out], op.outputs[0], to=onnx_dtype(t))


# -- sparse and sets ---------------------------------------------------------------------------


@register_onnx_export("SparseToDense")
def sparse_to_dense(ctx, op):
    """ScatterND of the values into default_value expanded to output_shape. validate_indices
    is not checked (ONNX cannot raise), and where an index repeats ONNX leaves the result
    undefined; TensorFlow refuses repeats when validating."""
    indices, shape, values, default = op._inputs
    rank = indices.shape.rank
    if rank is None:
        ctx.unsupported("sparse_indices' rank must be known")
    idx = ctx.int64(indices)
    if rank < 2:
        idx = ctx.node("Reshape", [idx, _i64(ctx, [-1, 1])])
    dense = ctx.node("Expand", [ctx.value(default), ctx.int64(shape)])
    n = ctx.node("Slice", [ctx.node("Shape", [idx]), _i64(ctx, [0]), _i64(ctx, [1])])
    vals = ctx.node("Expand", [ctx.value(values), n])
    ctx.node("ScatterND", [dense, idx, vals], op.outputs[0])


@register_onnx_export("ListDiff")
def list_diff(ctx, op):
    """x[i] is kept when no y[j] equals it: an [n, m] Equal table, summed over j, and
    Compress of x and of 0..n-1 by the zero sums (kept in x's order)."""
    x, y = op._inputs
    if x.dtype is dtypes.string and ctx.opset < 19:
        ctx.unsupported("ONNX's Equal compares strings from opset 19 on; export with opset=19 "
                        "or newer")  # fmt: skip
    xn, yn = ctx.value(x), ctx.value(y)
    eq = ctx.node("Equal", [ctx.node("Unsqueeze", [xn, _i64(ctx, [1])]),
                            ctx.node("Unsqueeze", [yn, _i64(ctx, [0])])])  # fmt: skip
    hits = ctx.node("ReduceSum", [ctx.node("Cast", [eq], to=TensorProto.INT64), _i64(ctx, [1])],
                    keepdims=0)  # fmt: skip
    keep = ctx.node("Equal", [hits, ctx.initializer(np.zeros((), np.int64))])
    ctx.node("Compress", [xn, keep], op.outputs[0], axis=0)
    n = ctx.node("Squeeze", [ctx.node("Shape", [xn]), _i64(ctx, [0])])
    pos = ctx.node("Range", [ctx.initializer(np.zeros((), np.int64)), n,
                             ctx.initializer(np.ones((), np.int64))])  # fmt: skip
    if op.attrs["out_idx"] is dtypes.int64:
        ctx.node("Compress", [pos, keep], op.outputs[1], axis=0)
    else:
        kept = ctx.node("Compress", [pos, keep], axis=0)
        ctx.node("Cast", [kept], op.outputs[1], to=TensorProto.INT32)


# -- images ------------------------------------------------------------------------------------


@register_onnx_export("ResizeArea")
def resize_area(ctx, op):
    """At an integer down-scaling factor k (each side) without align_corners, every output
    pixel is the mean of a k×k block of input pixels: AveragePool with kernel = stride = k.
    Other sizes weigh partial pixels, which no ONNX op does; they are refused."""
    images, size = op._inputs
    if op.attrs["align_corners"]:
        ctx.unsupported("align_corners=True has no ONNX equivalent (only integer down-scaling "
                        "without align_corners exports)")  # fmt: skip
    out_hw = [int(v) for v in ctx.require_const(size, "size").reshape(-1)]
    dims = images.shape.dims
    if dims is None or len(dims) != 4 or None in dims[1:3]:
        ctx.unsupported("the input's height and width must be known")
    factors = []
    for n, m in zip(dims[1:3], out_hw):
        if m <= 0 or n % m:
            ctx.unsupported(f"only integer down-scaling factors export (AveragePool); {n} → {m} "
                            "is not one")  # fmt: skip
        factors.append(n // m)
    x = ctx.value(images, NCHW)
    if op.attrs["T"] is not dtypes.float32:
        x = ctx.node("Cast", [x], to=TensorProto.FLOAT)
    ctx.node("AveragePool", [x], op.outputs[0], layout=NCHW, kernel_shape=factors,
             strides=factors, pads=[0, 0, 0, 0])  # fmt: skip


# -- random ------------------------------------------------------------------------------------

_RANDOM_TYPES = {
    dtypes.float16: TensorProto.FLOAT16,
    dtypes.float32: TensorProto.FLOAT,
    dtypes.float64: TensorProto.DOUBLE,
}


def _seed(op) -> dict:
    """An op-level seed makes the ONNX model draw the same values run after run (not rill's)."""
    s, s2 = int(op.attrs["seed"]), int(op.attrs["seed2"])
    return {"seed": float((s * 1_000_003 + s2) % (1 << 24))} if s or s2 else {}


def _random_dtype(ctx, op) -> int:
    t = op.attrs["dtype"]
    if t not in _RANDOM_TYPES:
        ctx.unsupported(f"ONNX's random ops draw float16, float32 or float64, not {t.name}")
    return _RANDOM_TYPES[t]


def _template(ctx, op, to: int) -> str:
    """A tensor of the output's shape and type for the *Like random ops to copy."""
    zeros = numpy_helper.from_array(np.zeros(1, helper.tensor_dtype_to_np_dtype(to)))
    return ctx.node("ConstantOfShape", [ctx.int64(op._inputs[0])], value=zeros)


@register_onnx_export("RandomStandardNormal")
def random_standard_normal(ctx, op):
    """RandomNormalLike (mean 0, scale 1) of the shape; values differ from rill's generator."""
    to = _random_dtype(ctx, op)
    ctx.node("RandomNormalLike", [_template(ctx, op, to)], op.outputs[0], dtype=to, **_seed(op))


@register_onnx_export("RandomUniform")
def random_uniform(ctx, op):
    """RandomUniformLike in [0, 1) of the shape; values differ from rill's generator."""
    to = _random_dtype(ctx, op)
    ctx.node("RandomUniformLike", [_template(ctx, op, to)], op.outputs[0], dtype=to,
             low=0.0, high=1.0, **_seed(op))  # fmt: skip


@register_onnx_export("TruncatedNormal")
def truncated_normal(ctx, op):
    """Standard normal values, those beyond 2 redrawn until none is: a Loop whose body
    replaces the out-of-range values with fresh RandomNormalLike ones (TensorFlow's rejection,
    so the same distribution; each round keeps 95.4% of what it redraws). Values differ from
    rill's generator."""
    to = _random_dtype(ctx, op)
    seed = _seed(op)
    first = ctx.node("RandomNormalLike", [_template(ctx, op, to)], dtype=to, **seed)
    np_t = helper.tensor_dtype_to_np_dtype(to)
    two = ctx.initializer(np.array(2, np_t))

    def out_of_range(emit, v):
        """(|v| > 2, whether any element is): the mask and the Loop's condition."""
        far = emit("Greater", [emit("Abs", [v]), two])
        count = emit("ReduceSum", [emit("Cast", [far], to=TensorProto.INT64)], keepdims=0)
        return far, emit("Cast", [count], to=TensorProto.BOOL)

    _, go = out_of_range(ctx.node, first)

    fresh = ctx.model.fresh
    body_nodes: list = []

    def bnode(op_type, inputs, **attrs):
        out = fresh(f"{op.name}/loop/{op_type}")
        body_nodes.append(helper.make_node(op_type, inputs, [out],
                                           name=fresh(f"{op.name}/loop/{op_type}", nodes=True),
                                           **attrs))  # fmt: skip
        return out

    it, cond_in, v_in = fresh(f"{op.name}/loop/i"), fresh(f"{op.name}/loop/c"), fresh(
        f"{op.name}/loop/v")  # fmt: skip
    # A seeded redraw gets its own seed: with the first draw's it would repeat that draw.
    body_seed = {"seed": seed["seed"] + 1.0} if seed else {}
    redraw = bnode("RandomNormalLike", [v_in], dtype=to, **body_seed)
    far, _ = out_of_range(bnode, v_in)
    v_out = bnode("Where", [far, redraw, v_in])
    _, cond_out = out_of_range(bnode, v_out)
    body = helper.make_graph(
        body_nodes, f"{op.name}/redraw",
        [helper.make_tensor_value_info(it, TensorProto.INT64, []),
         helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []),
         helper.make_tensor_value_info(v_in, to, None)],
        [helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
         helper.make_tensor_value_info(v_out, to, None)],
    )  # fmt: skip
    ctx.node("Loop", ["", go, first], op.outputs[0], body=body)


@register_onnx_export("Multinomial")
def multinomial(ctx, op):
    """ONNX Multinomial: num_samples draws per row of unnormalized log-probabilities. Its
    sample_size is an attr, so num_samples must be known. Values differ from rill's generator."""
    logits, num = op._inputs
    n = int(ctx.require_const(num, "num_samples"))
    t = op.attrs["T"]
    x = ctx.value(logits)
    if t not in (dtypes.float32, dtypes.float64, dtypes.float16):
        ctx.unsupported(f"ONNX's Multinomial takes float logits, not {t.name}")
    if t is not dtypes.float32:
        # onnxruntime's Multinomial takes float32 only.
        x = ctx.node("Cast", [x], to=TensorProto.FLOAT)
    ctx.node("Multinomial", [x], op.outputs[0], sample_size=n,
             dtype=onnx_dtype(op.attrs["output_dtype"]), **_seed(op))  # fmt: skip
