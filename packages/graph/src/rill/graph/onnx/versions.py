"""Which ai.onnx opset rill's exporter writes by default.

A model is only useful if the runtime that reads it loads it: onnxruntime refuses opsets (and IR
versions) newer than its release, and the onnx package usually runs ahead of it (onnx 1.23 ships
opset 28 / IR 14, onnxruntime 1.31 loads up to opset 26 / IR 13). So the default is

- the newest opset the installed onnxruntime loads, found once per process by loading a one-node
  model at each opset from the newest the installed onnx ships downwards; else
- CONSERVATIVE_OPSET (21, IR 10): loaded by every onnxruntime since 1.20 (November 2024), and
  by the other runtimes that track onnxruntime's releases.

Loading an opset is not having a kernel for every op at it: onnxruntime 1.32 loads opset 24 but
has no kernel for the opset-22 versions of the random ops (RandomUniform, RandomNormal, their
-Like forms, Bernoulli, Multinomial), so a model holding one (a dropout whose keep_prob is fed)
fails to load. For the ops in PROBED, a defaulted opset steps down to the newest one whose
one-node model of each such op the installed onnxruntime loads (`kernel_opset`).

`export_onnx(..., opset=N)` always overrides it.
"""

from __future__ import annotations

import functools

import onnx
from onnx import TensorProto, helper

__all__ = ["CONSERVATIVE_OPSET", "PROBED", "default_opset", "kernel_opset", "runtime_max_opset"]

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


# Ops whose kernels have lagged the opsets onnxruntime loads: (inputs, attributes, output type).
_F = TensorProto.FLOAT
PROBED = {
    "RandomUniformLike": (1, {}, _F),
    "RandomNormalLike": (1, {}, _F),
    "RandomUniform": (0, {"shape": [2, 3]}, _F),
    "RandomNormal": (0, {"shape": [2, 3]}, _F),
    "Bernoulli": (1, {}, _F),
    "Multinomial": (1, {"sample_size": 2}, TensorProto.INT32),
}


def _kernel_probe(op_type: str, opset: int) -> bytes:
    count, attrs, out_type = PROBED[op_type]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])][:count]
    y = helper.make_tensor_value_info("y", out_type, None)
    node = helper.make_node(op_type, [i.name for i in ins], ["y"], **attrs)
    ids = [helper.make_opsetid("", opset)]
    m = helper.make_model(helper.make_graph([node], "probe", ins, [y]), opset_imports=ids)
    m.ir_version = helper.find_min_ir_version_for(ids)
    return m.SerializeToString()


@functools.cache
def _runtime_has_kernel(op_type: str, opset: int) -> bool:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        ort.InferenceSession(_kernel_probe(op_type, opset), opts,
                             providers=["CPUExecutionProvider"])  # fmt: skip
    except Exception:  # noqa: BLE001 - any refusal means "no kernel at this opset"
        return False
    return True


def kernel_opset(op_types, opset: int, floor: int = 13) -> int:
    """The newest opset (floor..opset) at which the installed onnxruntime has a kernel for each
    of `op_types` that PROBED names; `opset` itself where none is probed, no onnxruntime is
    installed, or no opset in the range has them all."""
    probed = sorted(set(op_types) & PROBED.keys())
    if not probed:
        return opset
    try:
        import onnxruntime  # noqa: F401 - optional
    except ImportError:
        return opset
    for o in range(opset, floor - 1, -1):
        if all(_runtime_has_kernel(t, o) for t in probed):
            return o
    return opset
