"""GPU registrations of kernels shared with the CPU.

- `OPS`: CPU kernels written against the array module `xp` whose code is correct on cupy as it
  is (checked by the op samples on the simulated and on a real GPU), registered for GPU too.
- `VIA_HOST`: ops whose GPU kernel runs the CPU kernel on host copies of its inputs and copies
  the result back (explicit, counted copies; for ops off the training hot paths).
- UnsortedSegmentSum, written for the device (cupyx.scatter_add).
"""

from __future__ import annotations

import inspect

import numpy as np

from rill.exec.kernel_registry import kernel_registry, register_kernel
from rill.exec.kernels import (  # noqa: F401 - the CPU kernels registered again here come first
    gather_kernels,
    math_kernels,
    reduction_kernels,
)
from rill.exec.kernels.array_kernels import fmt_shape, scalar_arg
from rill.exec.kernels.pool_kernels import _lowest
from rill.exec.kernels.reduction_kernels import _axes_reader
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

OPS = [
    "All",
    "Any",
    "ArgMax",
    "ArgMin",
    "Cast",
    "Cumsum",
    "DynamicStitch",
    "Mean",
    "Prod",
    "Sign",
    "Sum",
]
VIA_HOST = ("Range", "ScatterNd", "Unique")

for _op in (*OPS, *VIA_HOST):
    if not kernel_registry.lookup(_op, ("CPU",), ()):
        raise ImportError(f"rill.exec.kernels.gpu: no CPU kernel for {_op} to extend")

for _op in OPS:
    for _k in kernel_registry.lookup(_op, ("CPU",), ()) or ():
        register_kernel(_op, devices="GPU", constraints=_k.constraints or None,
                        expensive=_k.expensive, context=_k.context,
                        blocking=_k.blocking)(_k.factory)  # fmt: skip


def _via_host(kdef):
    """A GPU factory running `kdef` (a CPU kernel) on host copies of the inputs."""
    from rill.exec.device import CpuDevice

    def factory(**kw):
        device = kw.pop("device")
        cpu = CpuDevice(0)
        args = {n: (cpu.xp if n == "xp" else cpu if n == "device" else kw[n]) for n in kdef.params}
        compute = kdef.factory(**args)
        to_host, from_host = device.to_host, device.from_host

        def run(*inputs):
            out = compute(*(to_host(a) for a in inputs))
            if isinstance(out, (tuple, list)):
                return type(out)(from_host(np.asarray(o)) for o in out)
            return from_host(np.asarray(out)) if out is not None else None

        return run

    names = [n for n in kdef.params if n not in ("xp", "device")] + ["device"]
    kind = inspect.Parameter.KEYWORD_ONLY
    factory.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in names])
    return factory


for _op in VIA_HOST:
    for _k in kernel_registry.lookup(_op, ("CPU",), ()) or ():
        register_kernel(_op, devices="GPU", constraints=_k.constraints or None,
                        expensive=_k.expensive)(_via_host(_k))  # fmt: skip


_NUMERIC = {
    "T": (
        dtypes.float16,
        dtypes.float32,
        dtypes.float64,
        dtypes.complex64,
        dtypes.complex128,
        dtypes.int32,
        dtypes.int64,
    )  # fmt: skip
}


def scatter_add(xp, a, idx, v) -> None:
    """a[idx] += v with repeated indices accumulating (cupy.add.at; cupyx.scatter_add on a
    cupy without it)."""
    if getattr(xp, "is_simulated", False):
        xp.scatter_add(a, idx, v)
    elif hasattr(xp.add, "at"):
        xp.add.at(a, idx, v)
    else:
        import cupyx

        cupyx.scatter_add(a, idx, v)


@register_kernel("UnsortedSegmentSum", devices="GPU", constraints=_NUMERIC, expensive=True)
def unsorted_segment_sum(xp):
    def compute(data, segment_ids, num_segments):
        n = scalar_arg(num_segments, "num_segments")
        if n < 0:
            raise InvalidArgumentError(f"num_segments must be >= 0, got {n}")
        r = segment_ids.ndim
        if data.shape[:r] != segment_ids.shape:
            raise InvalidArgumentError(
                f"segment_ids of shape {fmt_shape(segment_ids.shape)} must be a prefix of data's "
                f"shape {fmt_shape(data.shape)}"
            )
        rest = data.shape[r:]
        ids = segment_ids.reshape(-1).astype(np.int64)
        too_big = ids >= n
        if ids.size and bool(too_big.any()):
            i = int(xp.argmax(too_big))
            where = ",".join(str(int(k)) for k in np.unravel_index(i, segment_ids.shape))
            raise InvalidArgumentError(
                f"segment_ids[{where}] = {int(ids[i])} is out of range [0, {n})"
            )
        # Slices with a negative id are dropped (as in TensorFlow): they go to a spare row.
        out = xp.zeros((n + 1,) + rest, data.dtype)
        ids = xp.where(ids < 0, n, ids)
        scatter_add(xp, out, ids, data.reshape((ids.size,) + rest))
        return out[:n]

    return compute


def _extreme(largest: bool):
    """Max/Min: cupy's amax/amin take no `initial`, so an empty reduction is filled here with
    the type's lowest (highest) value, as TensorFlow gives."""
    fn = "max" if largest else "min"

    def factory(keep_dims, xp):
        axes = _axes_reader()
        reduce = getattr(xp, fn)

        def compute(x, indices):
            ax = axes(indices, x.ndim)
            if any(x.shape[a] == 0 for a in ax) or (x.size == 0 and ax):
                shape = [1 if a in ax else d for a, d in enumerate(x.shape)]
                if not keep_dims:
                    shape = [d for a, d in enumerate(x.shape) if a not in ax]
                if x.dtype.kind in "iu":
                    info = np.iinfo(x.dtype)
                    fill = info.min if largest else info.max
                else:
                    fill = _lowest(x.dtype) if largest else np.inf
                return xp.full(shape, fill, x.dtype)
            return reduce(x, axis=ax, keepdims=keep_dims)

        return compute

    return factory


_REAL_NUMBERS = {
    "T": (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int8, dtypes.int16,
          dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
}  # fmt: skip
register_kernel("Max", devices="GPU", constraints=_REAL_NUMBERS)(_extreme(True))
register_kernel("Min", devices="GPU", constraints=_REAL_NUMBERS)(_extreme(False))
