"""What a stateful kernel sees while it runs: OpKernelContext.

Kernels registered with `context=True` are called as `compute(ctx, *inputs)`.

- `ctx.resources`: the device's ResourceMgr (variables, queues, ... outliving steps and shared
  by concurrent steps, as the paper's §3.2 requires).
- `ctx.step_resources`: a per-step container (TensorArrays, stacks) dropped when the step ends.
- `ctx.step_id`, `ctx.node` (the Operation), `ctx.device`.
- `ctx.frame_id`, `ctx.iter_id`: the loop frame and iteration of this invocation.
- `ctx.rendezvous`: for Send/Recv.
- `ctx.check_cancelled()`: raises CancelledError / DeadlineExceededError when the step was
  cancelled or ran past its deadline. A kernel that waits (queues) waits in short slices and
  calls it between them, so a closed session or a timed-out step never hangs.
"""

from __future__ import annotations

import threading
import time

from rill.graph.errors import CancelledError, DeadlineExceededError

__all__ = ["OpKernelContext", "StepState"]


class StepState:
    """Per-step state shared by every kernel invocation of one Session.run."""

    __slots__ = (
        "step_id",
        "deadline",
        "_cancelled",
        "_reason",
        "step_resources",
        "rendezvous",
        "tracing",
        "records",
    )

    def __init__(self, step_id: int, deadline: float | None = None, rendezvous=None,
                 tracing: bool = False):  # fmt: skip
        self.step_id = step_id
        self.deadline = deadline  # time.monotonic() value, or None
        self._cancelled = False  # a plain flag: set once, read by waiting kernels between waits
        self._reason = ""
        self.step_resources: dict = {}
        self.rendezvous = rendezvous
        self.tracing = tracing
        self.records: list = []  # (node, thread id, start ns, end ns, outputs) when tracing

    def trace(self, node, start_ns: int, end_ns: int, outputs, thread: int | None = None) -> None:
        """Records one kernel execution on `thread` (the caller's by default; list.append is
        atomic, so threads may call this)."""
        self.records.append(
            (node, thread or threading.get_ident(), start_ns, end_ns, _describe(outputs))
        )

    def cancel(self, reason: str = "the step was cancelled") -> None:
        if not self._cancelled:
            self._reason = reason
            self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def check_cancelled(self) -> None:
        if self._cancelled:
            raise CancelledError(self._reason)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineExceededError("the step ran past its timeout (RunOptions.timeout_in_ms)")


class OpKernelContext:
    __slots__ = ("step", "node", "device", "resources", "frame_id", "iter_id")

    def __init__(self, step: StepState, node, device, resources, frame_id=0, iter_id=0):
        self.step = step
        self.node = node
        self.device = device
        self.resources = resources
        self.frame_id = frame_id
        self.iter_id = iter_id

    @property
    def step_id(self) -> int:
        return self.step.step_id

    @property
    def step_resources(self) -> dict:
        return self.step.step_resources

    @property
    def rendezvous(self):
        return self.step.rendezvous

    def check_cancelled(self) -> None:
        self.step.check_cancelled()

    @property
    def cancelled(self) -> bool:
        return self.step.cancelled


def _describe(outputs) -> list:
    """(dtype, shape, nbytes) of each array output, None for the rest: a trace must not keep the
    step's values alive (that would change its memory and defeat in-place updates)."""
    if outputs is None:
        return []
    if not isinstance(outputs, (tuple, list)):
        outputs = [outputs]
    out = []
    for v in outputs:
        if hasattr(v, "shape") and hasattr(v, "dtype") and hasattr(v, "nbytes"):
            out.append((v.dtype, tuple(v.shape), int(v.nbytes)))
        else:
            out.append(None)
    return out
