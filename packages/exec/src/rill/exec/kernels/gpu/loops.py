"""TensorArrays and stacks on the GPU, and swap_memory (the control-flow paper §5.3).

The TensorArray and stack kernels are the CPU ones (they store whatever arrays they are given,
in the device's array module); here they are registered for GPU with their indices, sizes and
lengths in host memory.

A StackPushV2 with swap_memory=True (while_loop(swap_memory=True) sets it on the stacks that
keep forward values for the gradient loop) moves the pushed value to host memory while the loop
runs: the device-to-host copy is issued on the device's copy stream, after an event that marks
the value as computed, into pinned host memory, so it overlaps the loop's compute; the device
array is released once the copy has completed. StackPopV2 brings it back the same way (a
host-to-device copy on the copy stream, which the compute stream then waits for).
"""

from __future__ import annotations

from rill.exec.kernel_registry import kernel_registry, register_kernel
from rill.exec.kernels import stack_kernels, tensor_array_kernels  # noqa: F401 - CPU kernels first
from rill.exec.kernels.stack_kernels import _lookup
from rill.exec.memory_types import declare_host_memory
from rill.graph.errors import InvalidArgumentError

_TA_OPS = [
    "TensorArrayV3",
    "TensorArrayGradV3",
    "TensorArrayGradWithShape",
    "TensorArrayWriteV3",
    "TensorArrayReadV3",
    "TensorArrayGatherV3",
    "TensorArrayScatterV3",
    "TensorArrayConcatV3",
    "TensorArraySplitV3",
    "TensorArraySizeV3",
    "TensorArrayCloseV3",
    "StackV2",
    "StackCloseV2",
]

for _op in _TA_OPS:
    for _k in kernel_registry.lookup(_op, ("CPU",), ()) or ():
        register_kernel(_op, devices="GPU", constraints=_k.constraints or None,
                        expensive=_k.expensive, context=_k.context,
                        blocking=_k.blocking)(_k.factory)  # fmt: skip

for _op, _ins, _outs in (
    ("TensorArrayV3", ("size",), ()),
    ("TensorArrayGradWithShape", ("shape_to_prepend",), ()),
    ("TensorArrayWriteV3", ("index",), ()),
    ("TensorArrayReadV3", ("index",), ()),
    ("TensorArrayGatherV3", ("indices",), ()),
    ("TensorArrayScatterV3", ("indices",), ()),
    ("TensorArraySplitV3", ("lengths",), ()),
    ("TensorArrayConcatV3", (), ("lengths",)),
    ("TensorArraySizeV3", (), ("size",)),
    ("StackV2", ("max_size",), ()),
):
    declare_host_memory(_op, inputs=_ins, outputs=_outs)


class Swapped:
    """A stack element moved to host memory (see the module docstring)."""

    __slots__ = ("host", "done", "device_value")

    def __init__(self, host, done, device_value):
        self.host, self.done, self.device_value = host, done, device_value


@register_kernel("StackPushV2", devices="GPU", context=True)
def stack_push_v2(T, swap_memory, device):
    swap = bool(swap_memory) and hasattr(device, "swap_out")

    def compute(ctx, handle, elem):
        stack = _lookup(ctx, handle)
        if stack.elem_type is not T:
            raise InvalidArgumentError(
                f"Stack {stack.name} holds {stack.elem_type.name} elements, cannot push a "
                f"{T.name} value"
            )
        stack.push(device.swap_out(elem) if swap else elem)
        return elem

    return compute


@register_kernel("StackPopV2", devices="GPU", context=True)
def stack_pop_v2(elem_type, device):
    def compute(ctx, handle):
        stack = _lookup(ctx, handle)
        if stack.elem_type is not elem_type:
            raise InvalidArgumentError(
                f"Stack {stack.name} holds {stack.elem_type.name} elements, but the pop asks "
                f"for {elem_type.name}"
            )
        v = stack.pop()
        return device.swap_in(v) if isinstance(v, Swapped) else v

    return compute
