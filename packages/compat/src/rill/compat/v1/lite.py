"""`tf.lite` of TensorFlow 1.x (rill.mobile): the converter from a session, a frozen graph or a
SavedModel to a .tflite flatbuffer, and the interpreter that runs one."""

# ruff: noqa: F401 - a namespace of re-exports

from __future__ import annotations

from rill.mobile import Interpreter
from rill.mobile.convert import ConverterError, OpsSet, Optimize
from rill.mobile.convert import TFLiteConverter as _Converter
from rill.mobile.convert.converter import TargetSpec

__all__ = [
    "ConverterError",
    "Interpreter",
    "Optimize",
    "OpsSet",
    "RepresentativeDataset",
    "TFLiteConverter",
    "TargetSpec",
]


class RepresentativeDataset:
    """tf.lite.RepresentativeDataset: wraps a generator function of calibration input lists."""

    def __init__(self, input_gen):
        self.input_gen = input_gen

    def __call__(self):
        return self.input_gen()


class TFLiteConverter(_Converter):
    """TF1's tf.lite.TFLiteConverter: from_session, from_frozen_graph, and from_saved_model
    (the "serve" meta graph's serving signature, loaded into a session of its own)."""

    @classmethod
    def from_saved_model(cls, saved_model_dir, input_arrays=None, input_shapes=None,
                         output_arrays=None, tag_set=None, signature_key=None):  # fmt: skip
        import rill.graph as rg
        from rill.exec import Session
        from rill.train.saved_model import load, signature_constants, tag_constants

        graph = rg.Graph()
        sess = Session(graph=graph)
        meta = load(sess, list(tag_set or [tag_constants.SERVING]), saved_model_dir)
        key = signature_key or signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
        if key not in meta.signature_def:
            raise ConverterError(
                f"the SavedModel has no signature {key!r} (it has {sorted(meta.signature_def)})"
            )
        sig = meta.signature_def[key]
        inputs = input_arrays or [sig.inputs[k].name for k in sorted(sig.inputs)]
        outputs = output_arrays or [sig.outputs[k].name for k in sorted(sig.outputs)]
        with graph.as_default():
            ins = [graph.get_tensor_by_name(n if ":" in n else f"{n}:0") for n in inputs]
            for t in ins:
                shape = (input_shapes or {}).get(t.op.name)
                if shape is not None:
                    t.set_shape(shape)
            outs = [graph.get_tensor_by_name(n if ":" in n else f"{n}:0") for n in outputs]
        converter = cls.from_session(sess, ins, outs)
        converter._owned_session = sess  # kept open for convert(), closed with the converter
        return converter
