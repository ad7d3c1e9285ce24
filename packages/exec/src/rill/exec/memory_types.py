"""Memory types of kernel arguments on accelerator devices (TensorFlow's HostMemory).

On a GPU most tensors live in device memory, but some arguments are small host values a kernel
reads on the CPU to decide what to launch — shapes, axes, sizes, paddings, permutations — and
some outputs are such values (Shape, Size, Rank, BroadcastGradientArgs). As TensorFlow does, those
arguments are declared host memory: a GPU kernel receives them as numpy arrays and returns them as
numpy arrays. Resource handles, variants and strings always stay on the host.

`device_boundary` wraps a GPU kernel's compute with the copies its arguments need, decided once
when the kernel is built: a device input whose producer left a host value gets a host-to-device
copy, a host input whose producer left a device value a device-to-host copy (a constant's copy is
made once and reused), so a kernel never receives an array of the wrong module.
"""

from __future__ import annotations

import numpy as np

from rill.graph import dtypes
from rill.graph.errors import InternalError
from rill.graph.op_def import get_op_def, has_op

__all__ = [
    "HOST_INPUTS",
    "HOST_OUTPUTS",
    "host_memory",
    "declare_host_memory",
    "input_memory",
    "output_memory",
    "device_boundary",
    "runs_on_host",
    "SHAPE_ONLY_OPS",
    "const_value",
    "host_const",
    "all_host",
]

# op -> names of its inputs that are host memory on a GPU.
HOST_INPUTS: dict[str, frozenset] = {}
# op -> names of its outputs that are host memory on a GPU.
HOST_OUTPUTS: dict[str, frozenset] = {}

_ALWAYS_HOST = (dtypes.resource, dtypes.variant, dtypes.string)


def declare_host_memory(op_type: str, inputs=(), outputs=()) -> None:
    """Declares `op_type`'s arguments named in `inputs`/`outputs` host memory on GPUs."""
    if not has_op(op_type):
        raise KeyError(f"declare_host_memory: op {op_type!r} is not declared")
    od = get_op_def(op_type)
    names_in = {a.name for a in od.inputs}
    names_out = {a.name for a in od.outputs}
    bad = (set(inputs) - names_in) | (set(outputs) - names_out)
    if bad:
        raise KeyError(f"declare_host_memory: {op_type} has no argument(s) {sorted(bad)}")
    if inputs:
        HOST_INPUTS[op_type] = HOST_INPUTS.get(op_type, frozenset()) | frozenset(inputs)
    if outputs:
        HOST_OUTPUTS[op_type] = HOST_OUTPUTS.get(op_type, frozenset()) | frozenset(outputs)


def host_memory(op_type: str, inputs=(), outputs=()):
    """Decorator form of `declare_host_memory` for a kernel factory."""

    def deco(factory):
        declare_host_memory(op_type, inputs, outputs)
        return factory

    return deco


def _flatten(args, attrs: dict, host_names: frozenset) -> list[bool]:
    """One flag per flattened argument: True where it is host memory."""
    flags = []
    for a in args:
        if a.number_attr is not None:
            n = int(attrs.get(a.number_attr, 1))
            dts = [attrs.get(a.type_attr) if a.type_attr else a.type] * n
        elif a.type_list_attr is not None:
            dts = list(attrs.get(a.type_list_attr, ()))
        else:
            dts = [attrs.get(a.type_attr) if a.type_attr else a.type]
        for dt in dts:
            flags.append(a.name in host_names or dt in _ALWAYS_HOST)
    return flags


# Integer scalar arithmetic on a GPU runs on the host, all its arguments in host memory, as
# TensorFlow keeps int32 on the host: loop counters and bounds (i < n, i + 1) never cost a
# device round trip, and the loop predicate is a host value.
HOST_INT_OPS = frozenset(
    [
        "Add",
        "AddV2",
        "Sub",
        "Mul",
        "Maximum",
        "Minimum",
        "FloorDiv",
        "FloorMod",
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "Equal",
        "NotEqual",
    ]
)


_HOST_LOGIC_OPS = frozenset({"LogicalAnd", "LogicalOr", "LogicalNot"})

# Shape arithmetic on int32 runs on the host too (TensorFlow registers these ops' int32 GPU
# kernels with every argument in host memory): a gradient's shape computations (Mean's count:
# Shape -> GatherV2 -> Prod) then cost no device round trip and never synchronize the step.
# op -> the attr that holds the int32 data type.
HOST_INT32_SHAPE_OPS = {
    "GatherV2": "Tparams",
    "Prod": "T",
    "Sum": "T",
    "Max": "T",
    "Min": "T",
    "Pack": "T",
    "ConcatV2": "T",
    "StridedSlice": "T",
    "Slice": "T",
    "DynamicStitch": "T",
    "Fill": "T",
}

# Ops whose outputs are all shape values (host memory) computed from their inputs' shapes alone:
# on a GPU their host kernel runs (an input's device array is only looked at, never copied).
SHAPE_ONLY_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})


def runs_on_host(op_type: str, attrs: dict, out_shapes=None) -> bool:
    """Whether a GPU node of `op_type` computes on the host: int32 arithmetic, ranges and shape
    arithmetic (see above), and logic on scalar booleans (a loop predicate such as i < n and t < T)."""
    if op_type in HOST_INT_OPS:
        return attrs.get("T") is dtypes.int32
    attr = HOST_INT32_SHAPE_OPS.get(op_type)
    if attr is not None:
        return attrs.get(attr) is dtypes.int32
    if op_type == "Range":
        return attrs.get("Tidx") is dtypes.int32
    if op_type in _HOST_LOGIC_OPS and out_shapes:
        s = out_shapes[0]
        return s is not None and getattr(s, "rank", None) == 0
    return False


# Arguments that are host memory when their type attr is int32, as TensorFlow registers these
# ops' int32 GPU kernels (a stack of loop counters saved for a gradient loop stays on the host):
# op -> (type attr, inputs, outputs).
INT32_HOST_ARGS = {
    "StackPushV2": ("T", ("elem",), ("output",)),
    "StackPopV2": ("elem_type", (), ("elem",)),
}


def _int32_host(op_type: str, attrs: dict, which: int) -> frozenset:
    spec = INT32_HOST_ARGS.get(op_type)
    if spec is None or attrs.get(spec[0]) is not dtypes.int32:
        return frozenset()
    return frozenset(spec[which])


def input_memory(op_type: str, attrs: dict, out_shapes=None) -> list[bool]:
    if not has_op(op_type):
        return []
    if runs_on_host(op_type, attrs, out_shapes):
        return [True] * len(_flatten(get_op_def(op_type).inputs, attrs, frozenset()))
    names = HOST_INPUTS.get(op_type, frozenset()) | _int32_host(op_type, attrs, 1)
    return _flatten(get_op_def(op_type).inputs, attrs, names)


def output_memory(op_type: str, attrs: dict, out_shapes=None) -> list[bool]:
    if not has_op(op_type):
        return []
    if runs_on_host(op_type, attrs, out_shapes):
        return [True] * len(_flatten(get_op_def(op_type).outputs, attrs, frozenset()))
    names = HOST_OUTPUTS.get(op_type, frozenset()) | _int32_host(op_type, attrs, 2)
    return _flatten(get_op_def(op_type).outputs, attrs, names)


def all_host(node) -> bool:
    """Whether every input and output of `node` is host memory (it has at least one of each)."""
    ins = input_memory(node.type, node.attrs, node.out_shapes)
    outs = output_memory(node.type, node.attrs, node.out_shapes)
    return bool(ins) and bool(outs) and all(ins) and all(outs)


def host_const(dtype, device) -> bool:
    """Whether a constant of `dtype` on `device` stays in host memory: int32 on accelerators, as
    TensorFlow keeps it (a loop's counter and bound, shapes and axes are read on the host)."""
    return dtype is dtypes.int32 and device.device_type != "CPU"


def const_value(node, device):
    """A Const node's value as kernels on `device` receive it."""
    value = node.attrs["value"]
    if host_const(node.out_dtypes[0], device):
        return value
    return device.from_host(value)


def _producer_on_host(src, idx: int, device) -> bool:
    """Whether output `idx` of plan node `src` is a host value when it reaches a kernel on
    `device`: a value from another device arrives through a _Recv (device memory); one made on
    `device` is host memory where its op declares so."""
    if src.device is not device:
        return False
    if src.type == "Const":
        return host_const(src.out_dtypes[0], device)
    if src.type in ("_Arg", "_Recv"):
        return False
    flags = output_memory(src.type, src.attrs, src.out_shapes)
    return idx < len(flags) and flags[idx]


def _in_scope(compute, device):
    scope = device.scope

    def run(*args):
        with scope():
            return compute(*args)

    return run


def device_boundary(compute, node, device, context: bool):
    """`compute` wrapped with the host/device copies its arguments need on `device` (a GPU)."""
    in_host = input_memory(node.type, node.attrs, node.out_shapes)
    out_host = output_memory(node.type, node.attrs, node.out_shapes)
    to_dev: list[int] = []
    to_host: list[int] = []
    const_src: set = set()
    for i, (src, idx) in enumerate(node.inputs):
        if src.out_dtypes[idx] in _ALWAYS_HOST:
            continue
        want_host = i < len(in_host) and in_host[i]
        if want_host:
            if not _producer_on_host(src, idx, device):
                to_host.append(i)
                if src.type == "Const":
                    const_src.add(i)
        else:
            # Checked every call: a host value may also arrive through Merge/Enter/Identity.
            to_dev.append(i)
            if src.type == "Const":
                const_src.add(i)  # an int32 constant kept on the host: copied once, then reused
    host_outs = [i for i, h in enumerate(out_host) if h]
    dev_outs = [i for i, h in enumerate(out_host) if not h]
    strict = getattr(device, "simulated", False)
    from_host, to_host_fn = device.from_host, device.to_host
    xp_array = device.xp.ndarray
    off = 1 if context else 0
    cache: dict[int, tuple] = {}
    limit = getattr(device, "memory_limit", None)
    name = node.name

    def fix_out(out):
        single = not isinstance(out, (tuple, list))
        outs = [out] if single else list(out)
        for i in host_outs:
            if i < len(outs) and type(outs[i]) is xp_array:
                outs[i] = to_host_fn(outs[i])
        for i in dev_outs:
            if i < len(outs):
                v = outs[i]
                if type(v) is np.ndarray or isinstance(v, np.generic):
                    if v.dtype.kind in "OSUV" or not v.dtype.isbuiltin:
                        continue
                    if strict:
                        raise InternalError(
                            f"GPU kernel {node.type} '{name}' returned a host "
                            f"{type(v).__name__} for its device output {i}"
                        )
                    outs[i] = from_host(v)
        return outs[0] if single else type(out)(outs) if isinstance(out, tuple) else outs

    check_outs = bool(host_outs) or strict
    if getattr(device, "index", 0) and hasattr(device, "scope"):
        compute = _in_scope(compute, device)  # a second GPU: cupy allocates on the current one
    if not (to_dev or to_host or check_outs or limit):
        return compute
    xp_generic = np.generic

    def copied(i, v, copy):
        """copy(v), made once where input i is a constant (the same object at every call)."""
        if i not in const_src:
            return copy(v)
        hit = cache.get(i)
        if hit is None or hit[0] is not v:
            hit = cache[i] = (v, copy(v))
        return hit[1]

    def run(*args):
        args = list(args)
        for i in to_dev:
            v = args[i + off]
            if type(v) is np.ndarray or isinstance(v, xp_generic):
                args[i + off] = copied(i, v, from_host)
        for i in to_host:
            v = args[i + off]
            if type(v) is xp_array:
                args[i + off] = copied(i, v, to_host_fn)
        if limit:
            with device.running():
                out = compute(*args)
        else:
            out = compute(*args)
        if check_outs and out is not None:
            out = fix_out(out)
        return out

    return run
