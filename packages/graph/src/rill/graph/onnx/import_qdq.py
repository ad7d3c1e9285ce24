"""QDQ models as onnxruntime runs them: DequantizeLinear → op → QuantizeLinear groups rewritten
into the QLinear ops onnxruntime's CPU provider replaces them with, before import.

A QDQ model (what onnxruntime's `quantize_static` writes by default) means, by the ONNX spec,
dequantize, compute in float, quantize. onnxruntime's graph optimizer instead runs each group
of uint8 activations as one integer kernel (QLinearConv, QLinearAdd, ...), and those round
differently from the float path: a value whose float sum lies within rounding of half a step
lands one step away, and the difference grows through the layers (ResNet-18 ½ u8s8: a few
percent at the logits). Rewriting the same groups into the same QLinear ops gives onnxruntime's
results, since rill's QLinear rules compute them bit for bit.

The groups rewritten are those onnxruntime's QDQ selectors take on the CPU provider whose
QLinear rules rill computes exactly: Conv (→ QLinearConv; per-tensor or per-output-channel
weights, an int32 bias), Add and Mul (→ com.microsoft QLinearAdd / QLinearMul),
GlobalAveragePool, LeakyRelu and Softmax (→ the com.microsoft QLinear ops), Concat
(→ QLinearConcat) and MatMul with a QuantizeLinear after it (→ QLinearMatMul). Only uint8 activations: onnxruntime's x86 CPU
provider leaves int8-activation groups in float (so does this). Scales and zero points must be
constants and per tensor (the weights' per channel), the op's result must feed only the
QuantizeLinear, and no group inside a subgraph is touched. Everything else stays as the spec
defines it.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

__all__ = ["fuse_qdq"]

_MS = "com.microsoft"
_U8 = onnx.TensorProto.UINT8
_UNARY = {"GlobalAveragePool": "QLinearGlobalAveragePool", "LeakyRelu": "QLinearLeakyRelu",
          "Softmax": "QLinearSoftmax"}  # fmt: skip


def fuse_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its uint8 QDQ groups as QLinear ops (a copy), or `model` itself when it
    has none."""
    g = model.graph
    if not any(n.op_type == "QuantizeLinear" for n in g.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    consts = {t.name: t for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = n.attribute[0].t
    producer = {o: n for n in g.node for o in n.output}
    uses: dict[str, int] = {}
    for n in g.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    for o in g.output:
        uses[o.name] = uses.get(o.name, 0) + 1
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 13)
    ctx = _Ctx(consts, producer, uses, opset)
    replaced = False
    for i, q in enumerate(list(g.node)):
        if q.op_type != "QuantizeLinear":
            continue
        new = ctx.rewrite(q)
        if new is not None:
            g.node[i].CopyFrom(new)
            replaced = True
    if not replaced:
        return model
    if any(n.domain == _MS for n in g.node) and not any(o.domain == _MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(_MS, 1))
    return out


class _Ctx:
    def __init__(self, consts, producer, uses, opset):
        self.consts, self.producer, self.uses, self.opset = consts, producer, uses, opset

    def const(self, name: str):
        t = self.consts.get(name)
        return None if t is None else numpy_helper.to_array(t)

    def per_tensor(self, scale: str, zp: str | None) -> bool:
        s = self.const(scale)
        if s is None or s.size != 1:
            return False
        if zp:
            z = self.const(zp)
            return z is not None and z.size == 1
        return True

    def dq(self, name: str):
        """The ONNX DequantizeLinear producing `name`, with a zero point, else None (without
        one its input's type is not known here)."""
        dq = self.producer.get(name)
        if dq is None or dq.op_type != "DequantizeLinear" or dq.domain not in ("", "ai.onnx"):
            return None
        return dq if len(dq.input) >= 3 and dq.input[2] else None

    def u8_dq(self, name: str):
        """The DequantizeLinear producing `name` from a uint8 tensor with constant per-tensor
        scale and zero point, else None."""
        dq = self.dq(name)
        if dq is None:
            return None
        z = self.const(dq.input[2])
        if z is None or z.dtype.name != "uint8" or not self.per_tensor(dq.input[1], dq.input[2]):
            return None
        return dq

    def q_out(self, q):
        """(scale, zero point) of a uint8 per-tensor QuantizeLinear, else None."""
        if len(q.input) < 3 or not q.input[2] or q.domain not in ("", "ai.onnx"):
            return None
        z = self.const(q.input[2])
        if z is None or z.dtype.name != "uint8" or not self.per_tensor(q.input[1], q.input[2]):
            return None
        if any(a.name in ("saturate", "output_dtype") and helper.get_attribute_value(a) not in
               (1, 0, _U8) for a in q.attribute):  # fmt: skip
            return None
        return q.input[1], q.input[2]

    def rewrite(self, q):
        target = self.producer.get(q.input[0])
        yq = self.q_out(q)
        if target is None or yq is None or self.uses.get(q.input[0], 0) != 1:
            return None
        kind = target.op_type if target.domain in ("", "ai.onnx") else None
        attrs = {a.name: helper.get_attribute_value(a) for a in target.attribute}
        name = (target.name or q.output[0]) + "/qdq"
        if kind == "Conv":
            return self._conv(target, yq, q, attrs, name)
        if kind in ("Add", "Mul", "MatMul") and len(target.input) == 2:
            a, b = (self.u8_dq(i) for i in target.input)
            if kind == "MatMul":
                b = self.weight_dq(target.input[1], per_axis=1)
            if a is None or b is None:
                return None
            ins = [*a.input[:3], *b.input[:3], *yq]
            if kind in ("Add", "Mul"):
                return helper.make_node(f"QLinear{kind}", ins, [q.output[0]], name=name,
                                        domain=_MS)  # fmt: skip
            if self.const(b.input[0]) is None:
                return None  # onnxruntime's QLinearMatMul wants constant weights here
            return helper.make_node("QLinearMatMul", ins, [q.output[0]], name=name)
        if kind in _UNARY and len(target.input) == 1:
            x = self.u8_dq(target.input[0])
            if x is None:
                return None
            if kind == "Softmax":
                attrs = {"axis": attrs.get("axis", -1 if self.opset >= 13 else 1),
                         "opset": self.opset}  # fmt: skip
            return helper.make_node(_UNARY[kind], [*x.input[:3], *yq], [q.output[0]], name=name,
                                    domain=_MS, **attrs)  # fmt: skip
        if kind == "Concat":
            dqs = [self.u8_dq(i) for i in target.input]
            if not dqs or any(d is None for d in dqs):
                return None
            ins = [*yq] + [i for d in dqs for i in d.input[:3]]
            return helper.make_node("QLinearConcat", ins, [q.output[0]], name=name, domain=_MS,
                                    axis=attrs["axis"])  # fmt: skip
        return None

    def weight_dq(self, name: str, per_axis: int):
        """The DequantizeLinear of a constant int8 / uint8 weight, per tensor or along
        `per_axis` (Conv's output channels 0, MatMul's columns 1), else None."""
        dq = self.dq(name)
        if dq is None:
            return None
        w, s, z = (self.const(i) for i in dq.input[:3])
        if w is None or s is None or z is None or w.dtype.name not in ("int8", "uint8"):
            return None
        if s.size != 1:
            axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
            if axis % w.ndim != per_axis or s.ndim != 1 or s.size != w.shape[per_axis]:
                return None
        return dq

    def _conv(self, conv, yq, q, attrs, name):
        if len(conv.input) < 2:
            return None
        x = self.u8_dq(conv.input[0])
        w = self.weight_dq(conv.input[1], per_axis=0)
        if x is None or w is None:
            return None
        ins = [*x.input[:3], *w.input[:3], *yq]
        if len(conv.input) > 2 and conv.input[2]:
            b = self.producer.get(conv.input[2])
            if b is None or b.op_type != "DequantizeLinear":
                return None
            bias = self.const(b.input[0])
            if bias is None or bias.dtype.name != "int32":
                return None
            if len(b.input) > 2 and b.input[2]:
                bz = self.const(b.input[2])
                if bz is None or bz.any():
                    return None
            ins.append(b.input[0])
        return helper.make_node("QLinearConv", ins, [q.output[0]], name=name, **attrs)
