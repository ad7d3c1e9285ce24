"""Devices: where kernels run. A device exposes its array module (`xp`) and host copies.

>>> d = CpuDevice(0)
>>> d.name, d.xp.__name__
('/job:localhost/replica:0/task:0/device:CPU:0', 'numpy')
"""

from __future__ import annotations

import functools

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

    def to_host(self, value):
        if type(value) is self._ndarray:
            return self._cupy.asnumpy(value)
        return value

    def from_host(self, value):
        if type(value) is np.ndarray or isinstance(value, np.generic):
            if value.dtype.kind in "OSUV" or not value.dtype.isbuiltin:
                return value  # no device form: stays on the host
            return self._cupy.asarray(value)
        return value


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
        n, limit = sim
        n = n if count is None else min(count, n)
        return [SimGpuDevice(i, memory_limit=limit) for i in range(n)]
    have = gpu_available()
    n = have if count is None else min(count, have)
    return [GpuDevice(i) for i in range(n)]
