"""The kernel registry: rules keyed by (op, device type), built once per node at plan time.

A kernel is a *factory* taking the op's attrs by keyword (plus optional special parameters) and
returning a `compute` callable. The factory runs once when a step plan is built, so attr parsing,
validation and precomputation happen there; `compute` runs every step.

    @register_kernel("MatMul", devices=("CPU", "GPU"), expensive=True)
    def matmul(transpose_a, transpose_b, xp):
        def compute(a, b):
            return xp.matmul(a.T if transpose_a else a, b.T if transpose_b else b)
        return compute

- Factory keyword parameters must be attrs of the op or one of the special names:
  `xp` (the device's array module: numpy on CPU, cupy on GPU), `node` (the Operation),
  `device` (the Device). A parameter that is neither fails at import time.
- `compute(*inputs)` receives one array per flattened input (a list argument `N * T` arrives as
  N positional arrays) and returns the output for a one-output op, a tuple/list for several, and
  None for none. Outputs must have the op's declared dtypes.
- `context=True`: compute is called as `compute(ctx, *inputs)` with an OpKernelContext
  (resources, step id, rendezvous, frame/iteration) — for stateful kernels.
- `expensive=True`: the executor may run it on its thread pool (numpy releases the GIL).
- `blocking=True`: it may wait on another step or partition (queues, Recv); it runs on a thread
  of its own so it never starves the pool.
- `constraints={"T": (float32, float64)}` restricts the kernel to those attr values.
- Kernels raise rill.graph.errors.OpError subclasses (InvalidArgumentError, ...) with a message;
  the executor adds the op's name, printed line and source line.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rill.graph.op_def import OpDefError, RuleRegistry, get_op_def

__all__ = ["KernelDef", "register_kernel", "find_kernel", "kernel_registry", "SPECIAL_PARAMS"]

SPECIAL_PARAMS = frozenset({"xp", "node", "device"})

kernel_registry = RuleRegistry("kernel")


@dataclass(frozen=True)
class KernelDef:
    op_type: str
    device_type: str
    factory: Callable
    params: tuple[str, ...]
    constraints: dict = field(default_factory=dict)
    expensive: bool = False
    context: bool = False
    blocking: bool = False

    def matches(self, attrs: dict) -> bool:
        for k, allowed in self.constraints.items():
            if attrs.get(k) not in allowed:
                return False
        return True


def register_kernel(
    op_type: str,
    devices: str | Iterable[str] = "CPU",
    *,
    constraints: dict | None = None,
    expensive: bool = False,
    context: bool = False,
    blocking: bool = False,
):
    """Decorator registering a kernel factory for `op_type` on each device type in `devices`."""
    devs = (devices,) if isinstance(devices, str) else tuple(devices)

    def deco(factory):
        op_def = get_op_def(op_type) if _declared(op_type) else None
        if op_def is None:
            kernel_registry.register(op_type, None)  # raises the registry's "undeclared" error
        sig = inspect.signature(factory)
        params = []
        attr_names = {a.name for a in op_def.attrs}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                raise OpDefError(f"kernel for {op_type}: factory must not take *args/**kwargs")
            if p.name not in attr_names and p.name not in SPECIAL_PARAMS:
                raise OpDefError(
                    f"kernel for {op_type}: factory parameter {p.name!r} is not an attr of the op "
                    f"(attrs: {sorted(attr_names)}) nor one of {sorted(SPECIAL_PARAMS)}"
                )
            params.append(p.name)
        cons = {}
        for k, v in (constraints or {}).items():
            if k not in attr_names:
                raise OpDefError(f"kernel for {op_type}: constraint on unknown attr {k!r}")
            from rill.graph.dtypes import as_dtype

            cons[k] = tuple(as_dtype(t) if not isinstance(t, (bool, int, str)) else t for t in v)
        for d in devs:
            kdef = KernelDef(op_type, d, factory, tuple(params), cons, expensive, context, blocking)
            existing = kernel_registry.lookup(op_type, (d,))
            if existing is None:
                kernel_registry.register(op_type, [kdef], (d,))
            else:
                existing.append(kdef)
        return factory

    return deco


def _declared(op_type: str) -> bool:
    from rill.graph.op_def import has_op

    return has_op(op_type)


def find_kernel(op_type: str, device_type: str, attrs: dict) -> KernelDef | None:
    """The first kernel registered for (op, device type) whose constraints accept `attrs`.

    A GPU has no kernels for strings, bfloat16 or the narrow (float8, int4) types, whatever a
    registration claims: cupy has no such arrays. Such a node is placed on the CPU.
    """
    kdefs = kernel_registry.lookup(op_type, (device_type,), ()) or ()
    if kdefs and device_type == "GPU" and _has_host_only_dtype(attrs):
        return None
    for kdef in kdefs:
        if kdef.matches(attrs):
            return kdef
    return None


def _host_only(dt) -> bool:
    from rill.graph.dtypes import DType, resource, string, variant

    if not isinstance(dt, DType) or dt is resource or dt is variant:
        return False
    if dt is string:
        return True
    np_dt = dt.np
    return np_dt.kind not in "biufc" or not np_dt.isbuiltin


def _has_host_only_dtype(attrs: dict) -> bool:
    for v in attrs.values():
        if isinstance(v, (list, tuple)):
            if any(_host_only(x) for x in v):
                return True
        elif _host_only(v):
            return True
    return False


def has_kernel(op_type: str, device_type: str) -> bool:
    return bool(kernel_registry.lookup(op_type, (device_type,)))


def instantiate(kdef: KernelDef, op, device, attrs: dict | None = None) -> Callable:
    """Builds the compute callable for `op` on `device` (calls the factory once). `attrs`, when
    given, are the node's own (a planner-made node may differ from the op it stands in for)."""
    if attrs is None:
        attrs = op.attrs
    kw = {}
    for name in kdef.params:
        if name == "xp":
            kw[name] = device.xp
        elif name == "node":
            kw[name] = op
        elif name == "device":
            kw[name] = device
        else:
            kw[name] = attrs[name]
    return kdef.factory(**kw)
