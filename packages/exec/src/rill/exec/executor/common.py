"""Pieces both executors share: the per-partition kernel table and error attribution."""

from __future__ import annotations

import numpy as np

from rill.exec.executor import bands
from rill.exec.kernel_registry import find_kernel, instantiate
from rill.graph.errors import (
    InternalError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
)

__all__ = ["Kernel", "KernelTable", "run_error", "readonly", "owned"]


def readonly(v):
    """A read-only view of a numpy array (constants, variable values): consumers and callers
    can never write into state that outlives the step."""
    if isinstance(v, np.ndarray) and v.flags.writeable:
        v = v.view()
        v.flags.writeable = False
    return v


def owned(v):
    """A fetched value the caller may modify: read-only state is copied, the rest returned."""
    if type(v) is np.ndarray and not v.flags.writeable:
        return v.copy()
    return v


class Kernel:
    __slots__ = ("compute", "context", "expensive", "blocking")

    def __init__(self, compute, context: bool, expensive: bool, blocking: bool):
        self.compute = compute
        self.context = context
        self.expensive = expensive
        self.blocking = blocking


class KernelTable:
    """Kernels instantiated once per plan node (attrs parsed here, never per step).

    `shared` is the session's table of stateful kernels, keyed by (node name, op type, device):
    as TensorFlow's OpSegment does, every step plan of one session reuses the kernel of a
    stateful graph op, so a seeded random op continues one sequence whatever the step's
    fetches and feeds. Plan-made ops (names of internal types start with "_") stay per plan.
    """

    def __init__(self, shared: dict | None = None):
        self._kernels: dict[int, Kernel] = {}
        self._shared = shared

    def get(self, node) -> Kernel:
        k = self._kernels.get(id(node))
        if k is None and self._shared is not None and node.op is not None:
            if node.is_stateful and not node.type.startswith("_"):
                key = (node.name, node.type, node.device.name)
                k = self._shared.get(key)
                if k is None:
                    k = self._shared[key] = self._build(node)
                self._kernels[id(node)] = k
        if k is None:
            k = self._kernels[id(node)] = self._build(node)
        return k

    @staticmethod
    def _build(node) -> Kernel:
        kdef = find_kernel(node.type, node.device.device_type, node.attrs)
        if kdef is None:
            raise InvalidArgumentError(
                f"no {node.device.device_type} kernel registered for {node.type} "
                f"(node {node.name})",
                op=node.op,
            )
        device = node.device
        if device.device_type != "CPU":
            from rill.exec.memory_types import SHAPE_ONLY_OPS, all_host, runs_on_host

            if (
                node.type in SHAPE_ONLY_OPS
                or runs_on_host(node.type, node.attrs, node.out_shapes)
                or all_host(node)
            ):
                # int32 math, shapes made straight into host memory, ops whose every argument is
                # host memory (ConcatOffset, BroadcastGradientArgs): on the host
                kdef = find_kernel(node.type, "CPU", node.attrs) or kdef
                device = _host_device(node.device)
        try:
            op = node.op if node.op is not None else node
            compute = instantiate(kdef, op, device, node.attrs)
        except OpError as e:
            raise type(e)(e.message, op=node.op) from None
        if node.device.device_type != "CPU":
            from rill.exec.memory_types import device_boundary

            compute = device_boundary(compute, node, node.device, kdef.context)
        elif node.type in bands.OPS and not kdef.context:
            compute = bands.wrap(node.type, compute)  # large tensors in bands over the threads
        return Kernel(compute, kdef.context, kdef.expensive, kdef.blocking)


def _host_device(device):
    """A CPU stand-in for kernels an accelerator runs on the host (same resources)."""
    from rill.exec.device import CpuDevice

    host = CpuDevice(device.index, device.job, device.replica, device.task)
    host.resources = device.resources
    return host


def run_error(e: BaseException, node) -> BaseException:
    """The error to raise for exception `e` from `node`: an OpError naming the op."""
    op = getattr(node, "op", None) if node is not None else None
    if isinstance(e, OpError):
        if e.op is None and op is not None:
            err = type(e)(e.message, op=op)
            return err
        return e
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        return e
    where = f"{node.type} '{node.name}'" if node is not None else "a kernel"
    if isinstance(e, MemoryError):
        return ResourceExhaustedError(f"{where} ran out of memory: {e}", op=op)
    if isinstance(e, (ValueError, IndexError, TypeError, ZeroDivisionError, ArithmeticError)):
        return InvalidArgumentError(f"{where}: {type(e).__name__}: {e}", op=op)
    return InternalError(f"{where} failed: {type(e).__name__}: {e}", op=op)
