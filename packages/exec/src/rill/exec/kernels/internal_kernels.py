"""Kernels for rill.graph.ops.internal_ops: _Send and _Recv are registered in control_flow_kernels;
_JobDone tells the server hosting the device that the job is finished (rill.exec.lifecycle)."""

from __future__ import annotations

from rill.exec import lifecycle
from rill.exec.kernel_registry import register_kernel


@register_kernel("_JobDone", context=True)
def _job_done(reason, grace_secs, device):
    def compute(ctx):
        lifecycle.job_done(device.name, reason, float(grace_secs))

    return compute
