"""import_onnx of models at the old opsets (1-12) that the ONNX model zoo's classic models use
(ResNet, SqueezeNet, VGG, Inception, MobileNet, (Tiny-)YOLO, emotion FER+, MNIST,
super-resolution, ArcFace): each old form of an op, built at the opset that has it, against
onnxruntime. Below opset 13 the importer runs onnx's version converter, so these tests hold the
converter path and the rules for the deprecated ops that survive it (Upsample)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx_run import run_ort, run_rill

from rill.graph.onnx.importer import OnnxImportError

RNG = np.random.default_rng(7)
F32 = np.float32


def rand(*shape, dtype=F32):
    return RNG.standard_normal(shape).astype(dtype)


_ELEM = {np.dtype(F32): TP.FLOAT, np.dtype(np.int64): TP.INT64, np.dtype(np.int32): TP.INT32,
         np.dtype(np.bool_): TP.BOOL, np.dtype(np.float64): TP.DOUBLE}  # fmt: skip


def model(nodes, feeds, outs, opset, inits=None):
    """A model of `nodes` at ai.onnx `opset` (and the oldest IR version it allows): graph inputs
    `feeds` (name → value), initializers `inits`, outputs `outs` (name, or (name, elem type))."""
    inputs = [oh.make_tensor_value_info(k, _ELEM[v.dtype], v.shape) for k, v in feeds.items()]
    outputs = [oh.make_tensor_value_info(*((o, TP.FLOAT) if isinstance(o, str) else o), None)
               for o in outs]  # fmt: skip
    inits = [nh.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    ir = 3 if opset <= 8 else oh.find_min_ir_version_for([oh.make_opsetid("", opset)])
    if ir < 4:  # IR 3 lists every initializer among the graph inputs
        inputs += [oh.make_tensor_value_info(t.name, t.data_type, t.dims) for t in inits]
    g = oh.make_graph(nodes, "old", inputs, outputs, inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)], ir_version=ir)


def twin(m, opset, drop=(), **rename):
    """`m` at `opset` without the attributes `drop` and with attributes renamed (old → new): the
    same computation in a form onnxruntime runs (it has no kernels for some ops before opset 7)."""
    t = oh.make_model(m.graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=m.ir_version)
    for n in t.graph.node:
        keep = [a for a in n.attribute if a.name not in drop]
        for a in keep:
            a.name = rename.get(a.name, a.name)
        del n.attribute[:]
        n.attribute.extend(keep)
    return t


def one(op_type, opset, feeds, inits=None, outs=("y",), **attrs):
    """A model of one `op_type` node over `feeds` then `inits` (in that order)."""
    names = [*feeds, *(inits or {})]
    node = oh.make_node(op_type, names, list(o if isinstance(o, str) else o[0] for o in outs),
                        **attrs)  # fmt: skip
    return model([node], feeds, outs, opset, inits)


def check(m, feeds, ref=None, rtol=1e-4, atol=1e-5):
    """rill on `m` against onnxruntime on `ref` (default `m`)."""
    want = run_ort(m if ref is None else ref, feeds)
    got = run_rill(m, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def param(fn, *opsets):
    return [pytest.param(fn, v, id=f"{fn.__name__}-{v}") for v in opsets]


# --- normalization -----------------------------------------------------------------------------


def batchnorm(v, **attrs):
    x = {"x": rand(2, 3, 4, 5)}
    stats = {"s": rand(3), "b": rand(3), "m": rand(3), "var": np.abs(rand(3)) + 0.5}
    if v >= 7:
        attrs.setdefault("spatial", 1) if v < 9 else None
    elif v == 6:
        attrs["is_test"] = 1
    else:
        attrs.update(is_test=1, consumed_inputs=[0, 0, 0, 1, 1])
    m = one("BatchNormalization", v, x, stats, epsilon=1e-3, **attrs)
    return m, x, twin(m, 7, drop=("is_test", "consumed_inputs")) if v < 7 else m


def instancenorm(v):
    x = {"x": rand(2, 3, 4, 5)}
    return one("InstanceNormalization", v, x, {"s": rand(3), "b": rand(3)}, epsilon=1e-4), x


def lrn(v):
    x = {"x": rand(1, 6, 5, 5)}
    return one("LRN", v, x, size=3, alpha=1e-3, beta=0.75, bias=2.0), x


# --- resampling -------------------------------------------------------------------------------


def upsample(mode):
    def build(v):
        x = {"x": rand(1, 2, 3, 4)}
        scales = np.array([1, 1, 2, 3], F32)
        if v == 7:
            return one("Upsample", v, x, mode=mode, scales=scales.tolist()), x
        return one("Upsample", v, x, {"sc": scales}, mode=mode), x

    build.__name__ = f"upsample_{mode}"
    return build


def resize10(mode):
    def build(v):
        x = {"x": rand(1, 2, 3, 4)}
        return one("Resize", v, x, {"sc": np.array([1, 1, 2, 1.5], F32)}, mode=mode), x

    build.__name__ = f"resize10_{mode}"
    return build


def resize11(ctm, mode, **attrs):
    def build(v):
        x = {"x": rand(1, 2, 4, 5)}
        roi = np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9], F32)
        scales = np.array([1, 1, 1.75, 0.6], F32)
        if ctm != "tf_crop_and_resize":
            roi = np.zeros(0, F32)
        return one("Resize", v, x, {"roi": roi, "sc": scales}, mode=mode,
                   coordinate_transformation_mode=ctm, **attrs), x  # fmt: skip

    build.__name__ = f"resize11_{ctm}_{mode}"
    return build


def resize11_sizes(v):
    x = {"x": rand(1, 2, 4, 5)}
    inits = {"roi": np.zeros(0, F32), "sc": np.zeros(0, F32), "sz": np.array([1, 2, 7, 3])}
    return one("Resize", v, x, inits, mode="linear"), x


def yolo_upsample_concat(v):
    """YOLOv3's route: a 1x1 conv, nearest x2 upsampling, concatenation with an earlier map."""
    x = {"x": rand(1, 4, 3, 3), "skip": rand(1, 2, 6, 6)}
    w = {"w": rand(2, 4, 1, 1)}
    if v < 9:
        up = oh.make_node("Upsample", ["c"], ["u"], scales=[1.0, 1.0, 2.0, 2.0])
    elif v < 11:
        w["sc"] = np.array([1, 1, 2, 2], F32)
        up = oh.make_node("Upsample" if v == 9 else "Resize", ["c", "sc"], ["u"])
    else:
        w.update(roi=np.zeros(0, F32), sc=np.array([1, 1, 2, 2], F32))
        up = oh.make_node("Resize", ["c", "roi", "sc"], ["u"], nearest_mode="floor",
                          coordinate_transformation_mode="asymmetric")  # fmt: skip
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"]), up,
             oh.make_node("Concat", ["u", "skip"], ["y"], axis=1)]  # fmt: skip
    return model(nodes, x, ["y"], v, w), x


# --- shape and data movement ------------------------------------------------------------------


def dropout(v):
    x = {"x": rand(3, 4)}
    attrs = {"is_test": 1} if v < 7 else {}
    if v < 12:
        attrs["ratio"] = 0.3
    m = one("Dropout", v, x, **attrs)
    return m, x, twin(m, 7, drop=("is_test",)) if v < 7 else m


def pad(mode):
    def build(v):
        x = {"x": rand(1, 2, 4, 5)}
        pads = [0, 0, 1, 2, 0, 0, 2, 1]
        if v < 11:
            key = "paddings" if v == 1 else "pads"
            m = one("Pad", v, x, mode=mode, value=1.5, **{key: pads})
            return m, x, twin(m, 2, paddings="pads") if v < 2 else m
        return one("Pad", v, x, {"p": np.array(pads)}, mode=mode), x

    build.__name__ = f"pad_{mode}"
    return build


def slice_(v):
    x = {"x": rand(4, 5, 6)}
    if v < 10:
        return one("Slice", v, x, starts=[1, -4], ends=[3, 1000], axes=[0, 2]), x
    inits = {"st": np.array([1, -1]), "en": np.array([3, -6]), "ax": np.array([0, 2]),
             "step": np.array([1, -2])}  # fmt: skip
    return one("Slice", v, x, inits), x


def reshape(v):
    x = {"x": rand(2, 3, 4)}
    if v < 5:
        extra = {"consumed_inputs": [0]} if v == 1 else {}
        return one("Reshape", v, x, shape=[0, -1], **extra), x
    return one("Reshape", v, x, {"sh": np.array([0, -1])}), x


def squeeze_unsqueeze(v):
    x = {"x": rand(2, 1, 3, 1)}
    axes = [1, -1] if v >= 11 else [1, 3]
    nodes = [oh.make_node("Squeeze", ["x"], ["s"], axes=axes),
             oh.make_node("Unsqueeze", ["s"], ["y"], axes=[0, 3])]  # fmt: skip
    return model(nodes, x, ["y"], v), x


def reduce(op, keepdims):
    def build(v):
        x = {"x": rand(2, 3, 4, 5)}
        return one(op, v, x, axes=[1, -1] if v >= 11 else [1, 3], keepdims=keepdims), x

    build.__name__ = f"{op}_keep{keepdims}"
    return build


def split(v):
    x = {"x": rand(2, 7)}
    outs = ("a", "b", "c")
    return one("Split", v, x, outs=outs, axis=1, split=[2, 4, 1]), x


def topk(v):
    x = {"x": rand(3, 6)}
    outs = ("v", ("i", TP.INT64))
    if v < 10:
        return one("TopK", v, x, outs=outs, k=3, axis=1), x
    extra = {"largest": 0} if v >= 11 else {}
    return one("TopK", v, x, {"k": np.array([3])}, outs=outs, **extra), x


def clip(v):
    x = {"x": rand(3, 4)}
    if v < 11:
        return one("Clip", v, x, min=-0.5, max=0.7), x
    return one("Clip", v, x, {"lo": np.array(-0.5, F32), "hi": np.array(0.7, F32)}), x


def gemm(v):
    x = {"x": rand(3, 4)}
    inits = {"w": rand(5, 4), "c": rand(5)}
    extra = {"broadcast": 1} if v < 7 else {}
    m = one("Gemm", v, x, inits, transB=1, alpha=0.5, beta=2.0, **extra)
    return m, x, twin(m, 7, drop=("broadcast",)) if v < 7 else m


def flatten(v):
    x = {"x": rand(2, 3, 4, 5)}
    return one("Flatten", v, x, axis=-2 if v >= 11 else 2), x


def concat(v):
    x = {"a": rand(2, 3), "b": rand(2, 2)}
    if v < 4:  # axis was optional, 1 by default
        return one("Concat", v, x), x, one("Concat", 4, x, axis=1)
    return one("Concat", v, x, axis=1), x


def cast(v):
    x = {"x": np.array([[1.7, -2.4], [3.5, 0.2]], F32)}
    ref = one("Cast", 6, x, outs=(("y", TP.INT32),), to=TP.INT32)
    if v < 6:
        return one("Cast", v, x, outs=(("y", TP.INT32),), to="INT32"), x, ref
    return ref, x


def dynamic_reshape(v):
    """PyTorch's flatten before the classifier at opset 9: Shape, Gather, Unsqueeze, Concat."""
    x = {"x": rand(2, 3, 2, 2)}
    nodes = [oh.make_node("Shape", ["x"], ["sh"]),
             oh.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
             oh.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
             oh.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             oh.make_node("Reshape", ["x", "target"], ["y"])]  # fmt: skip
    return model(nodes, x, ["y"], v, {"zero": np.array(0), "minus1": np.array([-1])}), x


# --- elementwise ------------------------------------------------------------------------------


def softmax(op, axis):
    def build(v):
        x = {"x": rand(2, 3, 4, 5)}
        attrs = {} if axis is None else {"axis": axis}
        return one(op, v, x, **attrs), x

    build.__name__ = f"{op}_axis{axis}"
    return build


def variadic(op):
    def build(v):
        shapes = [(2, 3), (2, 3), (2, 3)] if v < 8 else [(2, 3), (3,), (2, 1)]
        x = {f"x{i}": rand(*s) for i, s in enumerate(shapes)}
        return one(op, v, x), x

    build.__name__ = op
    return build


def legacy_broadcast(op):
    """Opset 1-6 binary ops: `broadcast=1` with `axis` aligns b with a's axes from axis on."""

    def build(v):
        x = {"x": rand(2, 3, 4, 5)}
        b = rand(3, 4) + 3
        m = one(op, v, x, {"b": b}, broadcast=1, axis=1)
        return m, x, one(op, 7, x, {"b": b[..., None]})

    build.__name__ = f"{op}_broadcast"
    return build


def conv_bias_add(v):
    """The Caffe2-era zoo models' bias add after a Relu: broadcast=1, axis=1 (or a [C,1,1] bias
    aligned at the end, opset 7's broadcasting)."""
    x = {"x": rand(1, 3, 5, 5)}
    w, b = rand(4, 3, 3, 3), rand(4)
    convs = [oh.make_node("Conv", ["x", "w"], ["c"]), oh.make_node("Relu", ["c"], ["r"])]
    ref = model([*convs, oh.make_node("Add", ["r", "b"], ["y"])], x, ["y"], 7,
                {"w": w, "b": b[:, None, None]})  # fmt: skip
    if v >= 7:
        return ref, x
    add = oh.make_node("Add", ["r", "b"], ["y"], broadcast=1, axis=1)
    return model([*convs, add], x, ["y"], v, {"w": w, "b": b}), x, ref


def prelu(slope_shape):
    def build(v):
        x = {"x": rand(2, 3, 4, 5)}
        m = one("PRelu", v, x, {"slope": rand(*slope_shape)})
        return m, x, twin(m, 7) if v < 7 else m

    build.__name__ = f"prelu_{'x'.join(map(str, slope_shape))}"
    return build


def leaky_relu(v):
    x = {"x": rand(3, 4)}
    m = one("LeakyRelu", v, x, alpha=0.2, **({"consumed_inputs": [0]} if v < 6 else {}))
    return m, x, twin(m, 6, drop=("consumed_inputs",)) if v < 6 else m


# --- convolution and pooling ------------------------------------------------------------------


def conv_same(v):
    """MNIST's convolutions: auto_pad SAME_UPPER, a bias input."""
    x = {"x": rand(1, 1, 7, 7)}
    inits = {"w": rand(4, 1, 5, 5), "b": rand(4)}
    return one("Conv", v, x, inits, auto_pad="SAME_UPPER", strides=[2, 2]), x


def conv_transpose(v):
    """The super-resolution model's upscaling and a strided ConvTranspose with output padding."""
    x = {"x": rand(1, 3, 4, 4)}
    inits = {"w": rand(3, 2, 3, 3), "b": rand(2)}
    return one("ConvTranspose", v, x, inits, strides=[2, 2], pads=[1, 1, 1, 1],
               output_padding=[1, 1]), x  # fmt: skip


def maxpool(v):
    x = {"x": rand(1, 2, 6, 7)}
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    outs = ("y",)
    if v >= 8:
        attrs["storage_order"] = 1
        outs = ("y", ("i", TP.INT64))
    if v >= 10:
        attrs["ceil_mode"] = 1
    return one("MaxPool", v, x, outs=outs, **attrs), x


def avgpool(count_include_pad):
    def build(v):
        x = {"x": rand(1, 2, 6, 7)}
        attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1]}
        if v >= 7:
            attrs["count_include_pad"] = count_include_pad
        if v >= 10:
            attrs["ceil_mode"] = 1
        return one("AveragePool", v, x, **attrs), x

    build.__name__ = f"avgpool_cip{count_include_pad}"
    return build


def image_scaler(v):
    """Tiny-YOLOv2's input scaling, an experimental op the version converter has no schema for."""
    x = {"x": rand(1, 3, 4, 5)}
    return one("ImageScaler", v, x, scale=0.5, bias=[1.0, 2.0, -3.0]), x


def global_pools(v):
    x = {"x": rand(2, 3, 4, 5)}
    nodes = [oh.make_node("GlobalAveragePool", ["x"], ["a"]),
             oh.make_node("GlobalMaxPool", ["x"], ["b"])]  # fmt: skip
    return model(nodes, x, ["a", "b"], v), x


CASES = [
    *param(batchnorm, 1, 6, 7, 8, 9),
    *param(instancenorm, 6),
    *param(lrn, 1),
    *param(upsample("nearest"), 7, 9),
    *param(upsample("linear"), 7, 9),
    *param(resize10("nearest"), 10),
    *param(resize10("linear"), 10),
    *param(resize11("half_pixel", "linear"), 11),
    *param(resize11("align_corners", "linear"), 11),
    *param(resize11("asymmetric", "nearest", nearest_mode="round_prefer_ceil"), 11),
    *param(resize11("pytorch_half_pixel", "linear"), 11),
    *param(resize11("tf_half_pixel_for_nn", "nearest"), 11),
    *param(resize11("tf_crop_and_resize", "linear", extrapolation_value=-1.0), 11),
    *param(resize11("tf_crop_and_resize", "nearest"), 11),
    *param(resize11("half_pixel", "cubic", cubic_coeff_a=-0.5), 11),
    *param(resize11_sizes, 11),
    *param(yolo_upsample_concat, 8, 9, 10, 11),
    *param(dropout, 6, 7, 10, 12),
    *param(pad("constant"), 2, 11),
    *param(pad("reflect"), 2, 11),
    *param(pad("edge"), 2, 11),
    *param(slice_, 1, 9, 10),
    *param(reshape, 1, 4, 5),
    *param(squeeze_unsqueeze, 1, 11),
    *param(reduce("ReduceMean", 1), 1, 11),
    *param(reduce("ReduceSum", 0), 1, 11),
    *param(reduce("ReduceMax", 0), 11),
    *param(split, 2, 11),
    *param(topk, 1, 10, 11),
    *param(clip, 6, 11),
    *param(gemm, 6, 7, 9, 11),
    *param(flatten, 1, 9, 11),
    *param(concat, 1, 4),
    *param(cast, 6),
    *param(dynamic_reshape, 9),
    *param(softmax("Softmax", None), 1, 11),
    *param(softmax("Softmax", 2), 1, 11),
    *param(softmax("Softmax", -1), 11),
    *param(softmax("LogSoftmax", None), 1),
    *param(softmax("LogSoftmax", 1), 1, 11),
    *param(softmax("LogSoftmax", 2), 11),
    *param(softmax("Hardmax", None), 1, 11),
    *param(softmax("Hardmax", 1), 1, 11),
    *param(softmax("Hardmax", 2), 11),
    *param(variadic("Sum"), 6, 8),
    *param(variadic("Max"), 6, 8),
    *param(variadic("Min"), 6, 8),
    *param(variadic("Mean"), 6, 8),
    *param(legacy_broadcast("Add"), 1, 6),
    *param(conv_bias_add, 1, 6, 7),
    *param(legacy_broadcast("Mul"), 6),
    *param(legacy_broadcast("Sub"), 6),
    *param(legacy_broadcast("Div"), 6),
    *param(prelu((3, 1, 1)), 7, 9),
    *param(prelu((5,)), 7),
    *param(prelu((3, 1, 1)), 6),
    *param(leaky_relu, 1, 6),
    *param(conv_same, 1, 11),
    *param(conv_transpose, 1, 11),
    *param(maxpool, 1, 8, 10, 12),
    *param(avgpool(0), 7, 10),
    *param(avgpool(1), 7, 10, 11),
    *param(global_pools, 1),
    *param(image_scaler, 1, 7, 8, 9),
]


@pytest.mark.parametrize("build, opset", CASES)
def test_old_form_matches_onnxruntime(build, opset):
    m, feeds, *ref = build(opset)
    check(m, feeds, *ref)


IR3_CASES = [*param(batchnorm, 7), *param(conv_transpose, 1), *param(legacy_broadcast("Add"), 6)]


@pytest.mark.parametrize("build, opset", IR3_CASES)
def test_ir3_initializers_not_among_inputs(build, opset):
    """IR 3 lists initializers among the graph inputs; models that do not still import."""
    m, feeds, *ref = build(opset)
    inits = {t.name for t in m.graph.initializer}
    kept = [i for i in m.graph.input if i.name not in inits]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    check(m, feeds, ref[0] if ref else None)


@pytest.mark.parametrize("build, opset, op_type", [(pad("constant"), 1, "Pad"), (cast, 1, "Cast")])
def test_forms_the_version_converter_cannot_upgrade(build, opset, op_type):
    """Opset-1 Pad (`paddings`) and opset 1-5 Cast (`to` a string): onnx's converter has no
    adapter for them; the refusal names the op and says to re-export."""
    m, feeds, ref = build(opset)
    with pytest.raises(OnnxImportError, match=rf"{op_type} \(opset {opset}\).*re-export"):
        run_rill(m, feeds)
