"""Copies between devices at a partition boundary.

A _Send on one device and its _Recv on another meet in the step's rendezvous; when the two
devices differ in kind (a CPU and a GPU), the value the _Recv hands its kernels is a copy in the
receiving device's memory, made when the receiver takes it — as TensorFlow's intra-process
rendezvous copies between devices. The sender never blocks on the copy. Traced steps record each
copy as a MEMCPYHtoD / MEMCPYDtoH entry of the receiving device, so a timeline shows them.
"""

from __future__ import annotations

import time

from rill.exec.rendezvous import LocalRendezvous

__all__ = ["DeviceCopier", "CopyingRendezvous", "copy_feeds"]


class _CopyRecord:
    """What a trace record needs of a node: a name, a type and the device it ran on."""

    __slots__ = ("name", "type", "device", "op")

    def __init__(self, name: str, type_: str, device):
        self.name, self.type, self.device, self.op = name, type_, device, None


class DeviceCopier:
    """Per (send device, recv device) names: the copy a value needs, or None for none."""

    def __init__(self, devices):
        self._by_name = {d.name: d for d in devices}
        self._plans: dict = {}

    def plan(self, key: str):
        parts = key.split(";", 4)
        pair = (parts[0], parts[2])
        p = self._plans.get(pair)
        if p is None:
            src, dst = self._by_name.get(pair[0]), self._by_name.get(pair[1])
            if src is None or dst is None or src.device_type == dst.device_type == "CPU":
                p = ()
            elif src.device_type == "CPU":
                p = (dst.from_host, "MEMCPYHtoD", dst)
            elif dst.device_type == "CPU":
                p = (src.to_host, "MEMCPYDtoH", dst)
            else:
                p = (lambda v, s=src, d=dst: d.from_host(s.to_host(v)), "MEMCPYDtoD", dst)
            self._plans[pair] = p
        return p, parts[3]


class CopyingRendezvous(LocalRendezvous):
    """A LocalRendezvous whose recv copies values between device kinds (see the module doc)."""

    def __init__(self, copier: DeviceCopier):
        super().__init__()
        self._copier = copier

    def recv(self, key: str, step=None):
        value, dead = super().recv(key, step)
        if dead or value is None:
            return value, dead
        plan, tensor_name = self._copier.plan(key)
        if not plan:
            return value, dead
        copy, label, dst = plan
        if step is not None and getattr(step, "tracing", False):
            t0 = time.perf_counter_ns()
            out = copy(value)
            step.trace(_CopyRecord(f"{tensor_name}/{label}", label, dst), t0,
                       time.perf_counter_ns(), out)  # fmt: skip
            return out, dead
        return copy(value), dead


def copy_feeds(feeds: list, copies, step) -> None:
    """Copies the fed values placed on accelerators there (in place in `feeds`): (index,
    device, name) per such feed, one host-to-device copy each per step; traced as MEMCPYHtoD."""
    tracing = getattr(step, "tracing", False)
    for i, dev, name in copies:
        if tracing:
            t0 = time.perf_counter_ns()
            feeds[i] = dev.from_host(feeds[i])
            step.trace(_CopyRecord(f"{name}/MEMCPYHtoD", "MEMCPYHtoD", dev), t0,
                       time.perf_counter_ns(), feeds[i])  # fmt: skip
        else:
            feeds[i] = dev.from_host(feeds[i])
