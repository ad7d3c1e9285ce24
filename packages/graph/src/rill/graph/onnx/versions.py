"""Which ai.onnx opset rill's exporter writes by default.

A model is only useful if the runtime that reads it loads it: onnxruntime refuses opsets (and IR
versions) newer than its release, and the onnx package usually runs ahead of it (onnx 1.23 ships
opset 28 / IR 14, onnxruntime 1.31 loads up to opset 26 / IR 13). So the default is

- the newest opset the installed onnxruntime loads, found once per process by loading a one-node
  model at each opset from the newest the installed onnx ships downwards; else
- CONSERVATIVE_OPSET (21, IR 10): loaded by every onnxruntime since 1.20 (November 2024), and
  by the other runtimes that track onnxruntime's releases.

`export_onnx(..., opset=N)` always overrides it.
"""

from __future__ import annotations

import functools

import onnx
from onnx import TensorProto, helper

__all__ = ["CONSERVATIVE_OPSET", "default_opset", "runtime_max_opset"]

CONSERVATIVE_OPSET = 21


def _probe_model(opset: int) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    ids = [helper.make_opsetid("", opset)]
    m = helper.make_model(g, opset_imports=ids)
    m.ir_version = helper.find_min_ir_version_for(ids)
    return m.SerializeToString()


@functools.cache
def runtime_max_opset(floor: int = 13) -> int | None:
    """The newest ai.onnx opset (≥ floor) the installed onnxruntime loads; None without one."""
    try:
        import onnxruntime as ort  # optional: only asked which opsets it loads
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # the refusals are expected; keep them off stderr
    for opset in range(onnx.defs.onnx_opset_version(), floor - 1, -1):
        try:
            ort.InferenceSession(_probe_model(opset), opts, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - any refusal means "not this opset"
            continue
        return opset
    return None


def default_opset(floor: int = 13) -> int:
    """The opset export_onnx writes when none is asked for (see the module docstring)."""
    newest = onnx.defs.onnx_opset_version()
    found = runtime_max_opset(floor)
    if found is not None:
        return found
    return max(floor, min(CONSERVATIVE_OPSET, newest))
