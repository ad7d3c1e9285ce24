"""The remapper: replaces chains of ops with one fused op whose kernel skips the intermediates.

Like TensorFlow's grappler remapper, it runs on the step plan (never on the user's graph):

- Conv2D → BiasAdd [→ activation]  becomes  _FusedConv2D (NHWC or NCHW); in NCHW also
  Conv2D → BiasAdd → Add of a side input of the same shape (a residual) [→ Relu], fused_ops
  [BiasAdd, Add(, Relu)] with the side input as a second argument, as TensorFlow's remapper does;
  and a CPU NCHW 1×1 Conv2D reading Mul(x, s) of a per-image, per-channel s (a squeeze-excite
  gate) takes the Mul in: fused_ops [Mul, BiasAdd, ...], arguments (s, bias(, side));
- DepthwiseConv2dNative → BiasAdd [→ activation]  becomes  _FusedDepthwiseConv2dNative;
- MatMul → BiasAdd or Add/AddV2 of a vector [→ activation]  becomes  _FusedMatMul;
- the activation: Relu, Relu6, Elu, LeakyRelu, or (float32 and float64) the Sigmoid, Swish,
  HardSigmoid and HardSwish chains of imported models (see remap_activations);
- ReluGrad(MaxPoolGrad(x, y, g), x)  becomes  _FusedMaxPoolGrad (the gradient of a max pool over a
  Relu's output, through the Relu);
- the tanh-GELU chain of imported transformers (float32 and float64, see remap_gelu) becomes
  _FusedTanhGelu, and their layer normalization chain (remap_layer_norm) _FusedLayerNorm;
- then, over the fused convolutions, the squeeze of imported squeeze-excite blocks, Mean over
  the planes → 1×1 _FusedConv2D → 1×1 _FusedConv2D (NCHW), becomes _FusedSqueezeExcite
  (remap_squeeze_excite).

A chain fuses only when each intermediate value has that one consumer and is not fetched, the
ops share a device whose type has a kernel for the fused op, the dtype is a floating one, and no
intermediate is another op's control input (control inputs of the chain's ops move to the
fused node). The fused node takes the last op's name (what consumers and
traces see) and the first op's source (what errors point at). Fused kernels compute exactly what
the chain computes, so results are identical; except a float32 Sigmoid or Swish epilogue with
the compiled loops, within 4 ulp of the exact value (rill.exec.kernels._conv_loops.sigmoid32).
"""

from __future__ import annotations

from rill.exec.kernel_registry import find_kernel
from rill.exec.plan.ir import PlanGraph, PlanNode
from rill.exec.plan.remap_activations import activation_chain
from rill.exec.plan.remap_gelu import tanh_gelu_chain
from rill.exec.plan.remap_layer_norm import layer_norm_chain
from rill.exec.plan.remap_squeeze_excite import squeeze_excite
from rill.graph import dtypes
from rill.graph.op_def import get_op_def

__all__ = ["remap"]

# Floating types only (the fused ops' own type sets narrow this further per op).
_FLOATS = frozenset({dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64})
_CONV_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def remap(pg: PlanGraph) -> int:
    """Fuses the chains above in place. Returns how many fused nodes were made."""
    consumers = pg.consumers()
    fetched = {s for s, _ in pg.fetches} | set(pg.targets)
    controlled = {c for n in pg.nodes for c in n.control_inputs}
    removed: dict[PlanNode, PlanNode] = {}  # intermediate -> the fused node replacing it

    def free(n: PlanNode) -> bool:
        """Whether n's value may disappear into a fused op."""
        return n not in fetched and n not in controlled and n not in removed

    def sole_consumer(n: PlanNode):
        """The one consumer of n's only output, when n may disappear into it."""
        uses = consumers[n]
        if len(uses) != 1 or not free(n) or uses[0][1] != 0:
            return None
        return uses[0][0]

    def act_chain(b: PlanNode):
        return activation_chain(b, consumers, free) if free(b) else None

    def kernel_ok(n: PlanNode, fused_type: str, attrs: dict) -> bool:
        """Whether the fused op allows this dtype and the device has a kernel for it."""
        allowed = {a.name: a.allowed for a in get_op_def(fused_type).attrs}["T"]
        if allowed is not None and attrs["T"] not in allowed:
            return False
        dev = n.device
        return dev is not None and find_kernel(fused_type, dev.device_type, attrs) is not None

    def fuse(last: PlanNode, fused_type: str, attrs: dict, inputs, head: PlanNode, gone) -> int:
        """Turns `last` into the fused op (see _become); the ops in `gone` disappear into it."""
        _become(last, fused_type, attrs, inputs, head, gone)
        for m in gone:
            removed[m] = last
        return 1

    fused = 0
    for n in list(pg.nodes):
        if n in removed:
            continue
        if n.type in _PRODUCTS and n.attrs.get("T") in _FLOATS:
            chain = _bias_chain(n, sole_consumer, act_chain)
            if chain is None:
                continue
            bias_node, bias_input, act, act_nodes = chain
            last = act_nodes[-1] if act_nodes else bias_node
            if n.type in ("Conv2D", "DepthwiseConv2dNative"):
                fmt = n.attrs["data_format"]
                if fmt not in ("NHWC", "NCHW") or bias_node.attrs.get("data_format", "NHWC") != fmt:
                    continue
                fused_type = _PRODUCTS[n.type]
                attrs = {k: n.attrs[k] for k in _CONV_ATTRS}
                if n.type == "Conv2D":
                    attrs.update(
                        use_cudnn_on_gpu=n.attrs.get("use_cudnn_on_gpu", True),
                        TArgs=[n.attrs["T"]],
                        num_host_args=0,
                        filter_format="HWIO",
                    )
            else:
                fused_type = "_FusedMatMul"
                attrs = {k: n.attrs[k] for k in ("transpose_a", "transpose_b")}
            attrs.update(
                T=n.attrs["T"],
                num_args=1,
                fused_ops=["BiasAdd", *([act] if act else [])],
                epsilon=0.0001,
                leakyrelu_alpha=float(act_nodes[0].attrs.get("alpha", 0.2)) if act else 0.2,
            )
            if any(m.device is not n.device for m in (bias_node, last)):
                continue
            extra_inputs = []
            gone = (n, bias_node, *act_nodes[:-1]) if act else (n,)
            side = None if act else _residual(n, bias_node, sole_consumer)
            if side is not None and any(m in removed for m in side[::2] if m is not None):
                side = None  # the Add (or Relu) is already another chain's
            if side is not None:
                # NCHW Conv2D → BiasAdd → Add(·, side) [→ Relu], TensorFlow's fused_ops
                # [BiasAdd, Add(, Relu)] with the side input as the second argument.
                add, side_edge, relu = side
                last = relu or add
                gone = (n, bias_node, add) if relu else (n, bias_node)
                attrs.update(num_args=2, TArgs=[n.attrs["T"]] * 2,
                             fused_ops=["BiasAdd", "Add", *(["Relu"] if relu else [])])  # fmt: skip
                extra_inputs = [side_edge]
            inputs = [*n.inputs, bias_input, *extra_inputs]
            scaled = _input_scale(n, sole_consumer)
            if scaled is not None and scaled[0] not in removed:
                # NCHW 1×1 Conv2D whose input is Mul(x, s) with s [n, c, 1, 1] (a squeeze-excite
                # gate): fused_ops [Mul, BiasAdd, ...], args (s, bias(, side)); the kernel forms
                # x·s one image at a time inside its input pass.
                mul, x_edge, s_edge = scaled
                args = attrs["num_args"] + 1
                attrs.update(num_args=args, TArgs=[n.attrs["T"]] * args,
                             fused_ops=["Mul", *attrs["fused_ops"]])  # fmt: skip
                inputs = [x_edge, n.inputs[1], s_edge, bias_input, *extra_inputs]
                gone = (mul, *gone)
            if not kernel_ok(n, fused_type, attrs):
                continue
            fused += fuse(last, fused_type, attrs, inputs, n, gone)
        elif n.type == "MaxPoolGrad" and n.attrs.get("T") in _FLOATS:
            rg = sole_consumer(n)
            if rg is None or rg.type != "ReluGrad" or rg.inputs[0] != (n, 0):
                continue
            if rg.inputs[1] != n.inputs[0] or rg.device is not n.device:
                continue
            attrs = dict(n.attrs)
            if not kernel_ok(n, "_FusedMaxPoolGrad", attrs):
                continue
            fused += fuse(rg, "_FusedMaxPoolGrad", attrs, list(n.inputs), n, (n,))
        elif n.type == "Tanh":
            found = tanh_gelu_chain(n, consumers, free)
            if found is None:
                continue
            x_edge, coefficients, chain = found
            attrs = {"T": n.attrs["T"], "coefficients": coefficients}
            if not kernel_ok(n, "_FusedTanhGelu", attrs):
                continue
            fused += fuse(chain[-1], "_FusedTanhGelu", attrs, [x_edge], chain[0], chain[:-1])
        elif n.type == "Rsqrt":
            found = layer_norm_chain(n, consumers, free)
            if found is None:
                continue
            x_edge, scale_edge, offset_edge, eps, chain = found
            attrs = {"T": n.attrs["T"], "epsilon": eps}
            if not kernel_ok(n, "_FusedLayerNorm", attrs):
                continue
            fused += fuse(chain[-1], "_FusedLayerNorm", attrs, [x_edge, scale_edge, offset_edge],
                          chain[0], chain[:-1])  # fmt: skip
    if removed:
        # No op has an intermediate as a control input: drop them.
        pg.nodes = [n for n in pg.nodes if n not in removed]
        pg.renumber()
    # The squeeze of squeeze-excite blocks reads the fused convolutions made above.
    gone_se: set[PlanNode] = set()

    def fuse_se(last: PlanNode, attrs: dict, inputs, head: PlanNode, gone) -> bool:
        if not kernel_ok(last, "_FusedSqueezeExcite", attrs):
            return False
        _become(last, "_FusedSqueezeExcite", attrs, inputs, head, gone)
        gone_se.update(gone)
        return True

    made = squeeze_excite(pg, lambda n: n in fetched or n in controlled, fuse_se)
    if made:
        pg.nodes = [n for n in pg.nodes if n not in gone_se]
        pg.renumber()
    return fused + made


# Products the remapper fuses, and their fused ops.
_PRODUCTS = {"Conv2D": "_FusedConv2D", "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative",
             "MatMul": "_FusedMatMul"}  # fmt: skip


def _bias_chain(n: PlanNode, sole_consumer, act_chain):
    """(bias node, the bias input edge, activation name or None, the activation's nodes)
    following product n."""
    b = sole_consumer(n)
    if b is None or b.device is not n.device:
        return None
    if b.type == "BiasAdd":
        if b.inputs[0] != (n, 0):
            return None
        bias = b.inputs[1]
    elif b.type in ("Add", "AddV2") and n.type == "MatMul":
        other = [e for e in b.inputs if e != (n, 0)]
        if len(other) != 1 or not _is_bias_for(other[0], n):
            return None
        bias = other[0]
    else:
        return None
    found = act_chain(b)
    if found is None:
        return b, bias, None, []
    return b, bias, found[0], found[1]


def _residual(conv: PlanNode, bias_node: PlanNode, sole_consumer):
    """(Add node, side input edge, Relu node or None) when an NCHW Conv2D's BiasAdd feeds only an
    Add/AddV2 of a side input of exactly the convolution's (static, fully known) shape and dtype
    — a residual connection — optionally followed by a Relu; else None."""
    if conv.type != "Conv2D" or conv.attrs.get("data_format") != "NCHW":
        return None
    add = sole_consumer(bias_node)
    if add is None or add.type not in ("Add", "AddV2") or add.device is not conv.device:
        return None
    others = [e for e in add.inputs if e != (bias_node, 0)]
    if len(add.inputs) != 2 or len(others) != 1:
        return None
    src, idx = others[0]
    out = conv.out_shapes[0] if conv.out_shapes else None
    shape = src.out_shapes[idx] if src.out_shapes else None
    if out is None or shape is None or not out.is_fully_defined():
        return None
    if not shape.is_fully_defined() or shape.as_list() != out.as_list():
        return None
    if src.out_dtypes[idx] != conv.out_dtypes[0]:
        return None
    relu = sole_consumer(add)
    if relu is not None and (
        relu.type != "Relu" or relu.inputs[0] != (add, 0) or relu.device is not conv.device
    ):
        relu = None
    return add, others[0], relu


def _input_scale(conv: PlanNode, sole_consumer):
    """(Mul node, x edge, s edge) when a CPU NCHW Conv2D with a static 1×1 filter, stride 1 and
    no padding reads only Mul(x, s) (or Mul(s, x)), where s has the static shape [n, c, 1, 1] of
    x's batch and channels and x the Mul's full static shape and dtype; else None."""
    if conv.type != "Conv2D" or conv.attrs.get("data_format") != "NCHW":
        return None
    if conv.device is None or conv.device.device_type != "CPU":
        return None
    if (
        list(conv.attrs.get("strides", ())) != [1, 1, 1, 1]
        or conv.attrs.get("padding") == "EXPLICIT"
    ):
        return None
    if list(conv.attrs.get("dilations", [1, 1, 1, 1])) != [1, 1, 1, 1]:
        return None
    mul, idx = conv.inputs[0]
    if idx != 0 or mul.type != "Mul" or mul.device is not conv.device or len(mul.inputs) != 2:
        return None
    if sole_consumer(mul) is not conv:
        return None
    (wsrc, widx) = conv.inputs[1]
    wshape = wsrc.out_shapes[widx] if wsrc.out_shapes else None
    if wshape is None or not wshape.is_fully_defined() or wshape.as_list()[:2] != [1, 1]:
        return None
    out = mul.out_shapes[0] if mul.out_shapes else None
    if out is None or not out.is_fully_defined() or out.rank != 4:
        return None
    n, c = out.as_list()[:2]
    shapes = []
    for src, i in mul.inputs:
        shape = src.out_shapes[i] if src.out_shapes else None
        if shape is None or not shape.is_fully_defined() or src.out_dtypes[i] != mul.out_dtypes[0]:
            return None
        shapes.append(shape.as_list())
    for j in (0, 1):
        if shapes[j] == out.as_list() and shapes[1 - j] == [n, c, 1, 1]:
            return mul, mul.inputs[j], mul.inputs[1 - j]
    return None


def _is_bias_for(edge, product: PlanNode) -> bool:
    """Whether `edge` is a vector as long as the product's last dimension (statically)."""
    src, idx = edge
    shapes = src.out_shapes
    out = product.out_shapes
    if not shapes or not out or src.out_dtypes[idx] != product.out_dtypes[0]:
        return False
    bshape, pshape = shapes[idx], out[0]
    if bshape is None or pshape is None or bshape.rank != 1 or pshape.rank != 2:
        return False
    b, p = bshape.dims[0], pshape.dims[1]
    return b is not None and p is not None and b == p


def _become(node: PlanNode, fused_type: str, attrs: dict, inputs, head: PlanNode, gone) -> None:
    """Turns `node` (the chain's last op) into the fused op, reading the chain's inputs and
    taking over the control inputs of the ops that disappear (`gone`)."""
    node.type = fused_type
    node.op_def = get_op_def(fused_type)
    node.attrs = attrs
    node.inputs = list(inputs)
    controls = [c for m in (*gone, node) for c in m.control_inputs]
    node.control_inputs = list(dict.fromkeys(controls))
    node.op = head.op if head.op is not None else node.op
