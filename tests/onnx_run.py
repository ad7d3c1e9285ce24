"""Running a hand-built ONNX model three ways, for the ONNX import tests: through rill
(import_onnx, then a Session fetching every graph output), onnxruntime and onnx's
ReferenceEvaluator. Feeds of None (an omitted optional input) are left out."""

from __future__ import annotations

import numpy as np


def _given(feeds: dict) -> dict:
    return {k: v for k, v in feeds.items() if v is not None}


def run_rill(m, feeds: dict) -> list[np.ndarray]:
    from rill.exec import Session
    from rill.graph.onnx import import_onnx

    g, inputs, outputs = import_onnx(m)
    with Session(graph=g) as s:
        got = s.run([outputs[o.name] for o in m.graph.output],
                    {inputs[k]: v for k, v in _given(feeds).items()})  # fmt: skip
    return [np.asarray(v) for v in got]


def run_ort(m, feeds: dict) -> list:
    import onnxruntime as ort

    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, _given(feeds))


def run_ref(m, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(m).run(None, _given(feeds))
