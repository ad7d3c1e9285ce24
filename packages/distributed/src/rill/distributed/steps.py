"""What the master's step runners share: the in-process call's context, task filters, and how
task failures become the step's error."""

from __future__ import annotations

import time

from rill.distributed.wire import error_from_status
from rill.graph.device import DeviceSpec
from rill.graph.errors import AbortedError, CancelledError, OpError, UnavailableError

__all__ = ["InProcess", "device_matches", "first_error", "task_error", "task_matches"]


class InProcess:
    """A fake gRPC context for the in-process worker call: just the time left."""

    def __init__(self, deadline):
        self.deadline = deadline

    def time_remaining(self):
        return 1e18 if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def is_active(self):
        return True


def task_matches(spec: DeviceSpec, job: str, task: int) -> bool:
    return (spec.job is None or spec.job == job) and (spec.task is None or spec.task == task)


def device_matches(spec: DeviceSpec, d) -> bool:
    return (
        task_matches(spec, d.job, d.task)
        and (spec.device_type is None or spec.device_type == d.device_type)
        and (spec.device_index is None or spec.device_index == d.index)
    )


def task_error(resp, tp) -> OpError:
    msg = resp.status_error_message
    if tp.name not in msg:
        msg = f"{msg}\n(on {tp.name})"
    return error_from_status(resp.status_code, msg)


def first_error(errors: list) -> OpError:
    real = [e for e in errors if not isinstance(e, (CancelledError, AbortedError))]
    if real:
        # A task that died is the cause; the others only failed to reach it.
        unavailable = [e for e in real if isinstance(e, UnavailableError)]
        return (unavailable or real)[0]
    return errors[0]
