"""Devices: where kernels run. A device exposes its array module (`xp`) and host copies.

>>> d = CpuDevice(0)
>>> d.name, d.xp.__name__
('/job:localhost/replica:0/task:0/device:CPU:0', 'numpy')
"""

from __future__ import annotations

import functools
import threading

import numpy as np

__all__ = ["Device", "CpuDevice", "GpuDevice", "gpu_available", "gpu_devices"]


class Device:
    device_type = "?"

    def __init__(self, index: int, job: str = "localhost", replica: int = 0, task: int = 0):
        self.index = index
        self.job, self.replica, self.task = job, replica, task
        self.name = f"/job:{job}/replica:{replica}/task:{task}/device:{self.device_type}:{index}"
        self.short_name = f"/device:{self.device_type}:{index}"
        self.resources = None  # set by the session: this device's ResourceMgr

    xp = np
    graph_backend = None  # captures straight-line steps (rill.exec.step_graphs), where offered

    def to_host(self, value):
        return value

    def from_host(self, value):
        return value

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class CpuDevice(Device):
    device_type = "CPU"
    xp = np


class GpuDevice(Device):
    """An NVIDIA GPU through cupy. Kernels written against `xp` run here unchanged.

    `to_host` copies a cupy array into a numpy array; `from_host` copies numpy arrays and scalars
    of the dtypes cupy has (bool, integers, floats up to float64, complex) to the device and
    leaves everything else (strings, objects, bfloat16, resource handles) on the host.
    """

    device_type = "GPU"
    simulated = False
    memory_limit = None

    def __init__(self, index: int, **kw):
        import cupy

        super().__init__(index, **kw)
        self.xp = cupy
        self._cupy = cupy
        self._ndarray = cupy.ndarray
        with cupy.cuda.Device(index):
            self.copy_stream = cupy.cuda.Stream(non_blocking=True)  # swap_memory's copies
        self._in_flight: list = []  # (event, arrays kept alive until the event completes)
        from rill.exec import capture_gemm
        from rill.exec.step_graphs import CupyGraphs

        self.graph_backend = CupyGraphs(self)  # steps as CUDA graphs
        capture_gemm.install(cupy)  # products a capture can record (before any kernel is built)
        self._swap_lock = threading.Lock()
        self.swapped_bytes = 0  # bytes moved to the host by swap_out (a counter for tests)

    def to_host(self, value):
        if type(value) is self._ndarray:
            return self._cupy.asnumpy(value)
        return value

    def from_host(self, value):
        if type(value) is np.ndarray or isinstance(value, np.generic):
            if value.dtype.kind in "OSUV" or not value.dtype.isbuiltin:
                return value  # no device form: stays on the host
            if self.index:
                with self._cupy.cuda.Device(self.index):
                    return self._cupy.asarray(value)
            return self._cupy.asarray(value)
        return value

    def scope(self):
        """A context making this GPU cupy's current device (kernels of GPU:1 allocate there)."""
        return self._cupy.cuda.Device(self.index)

    # -- swap_memory: device <-> pinned host copies on the copy stream ----------------------------

    def _keep_until(self, event, *arrays) -> None:
        with self._swap_lock:
            self._in_flight = [(e, a) for e, a in self._in_flight if not e.done]
            self._in_flight.append((event, arrays))

    def swap_out(self, value):
        """A Swapped copy of device array `value` in pinned host memory, copied on the copy
        stream once the compute stream has produced it (the caller does not wait)."""
        from rill.exec.kernels.gpu.loops import Swapped

        cp = self._cupy
        if type(value) is not self._ndarray:
            return value
        import cupyx

        ready = cp.cuda.Event(disable_timing=True)
        ready.record()
        s = self.copy_stream
        s.wait_event(ready)
        host = cupyx.empty_pinned(value.shape, value.dtype)
        value.get(stream=s, out=host, blocking=False)
        done = cp.cuda.Event(disable_timing=True)
        done.record(s)
        self._keep_until(done, value, host)  # the device array lives until its copy is done
        self.swapped_bytes += value.nbytes
        return Swapped(host, done, None)

    def swap_in(self, swapped):
        """The device array back from a Swapped value: copied on the copy stream; the compute
        stream waits for the copy before any later kernel reads it."""
        cp = self._cupy
        s = self.copy_stream
        s.wait_event(swapped.done)
        dev = cp.empty(swapped.host.shape, swapped.host.dtype)
        dev.set(swapped.host, stream=s)
        done = cp.cuda.Event(disable_timing=True)
        done.record(s)
        cp.cuda.get_current_stream().wait_event(done)
        self._keep_until(done, swapped.host)
        return dev


@functools.lru_cache(maxsize=1)
def gpu_available() -> int:
    """The number of usable CUDA devices (0 without cupy or a driver)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - any failure to reach CUDA means no GPU here
        return 0


def gpu_devices(count: int | None = None) -> list:
    """The GPU devices a new session gets: `count` of them (all there are when None), simulated
    ones inside `rill.exec.simgpu.simulated_gpus`."""
    from rill.exec.simgpu import SimGpuDevice, simulated_config

    sim = simulated_config()
    if sim is not None:
        n, limit, graphs = sim
        n = n if count is None else min(count, n)
        return [SimGpuDevice(i, memory_limit=limit, graphs=graphs) for i in range(n)]
    have = gpu_available()
    n = have if count is None else min(count, have)
    return [GpuDevice(i) for i in range(n)]
