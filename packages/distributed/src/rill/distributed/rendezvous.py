"""The remote rendezvous: exec's Rendezvous interface across tasks, one per step on each task.

A `_Send` stores its value (and deadness) in the sending task's table. A `_Recv` whose key names a
device of another task pulls it from that task with `RecvTensor` (the receiver pulls, as in
TensorFlow); one whose sender is local waits on the local table. Keys are exec's
(`src_device;incarnation;dst_device;edge_name;frame:iteration`), so every loop iteration has its
own slot and dead values cross tasks like live ones.

Every wait is bounded by the step's deadline and ends when the step is aborted (a failed
partition, CleanupGraph, Server.stop()); outgoing pulls are cancelled on abort.
"""

from __future__ import annotations

import threading
import time

import grpc

from rill.distributed.proto import worker_pb2
from rill.distributed.wire import (
    CHUNKS_OK,
    RILL_WORKER_SERVICE,
    WORKER_SERVICE,
    error_from_rpc,
    receive_chunks,
    tensor_from_proto,
)
from rill.exec.rendezvous import Rendezvous
from rill.graph.errors import (
    CancelledError,
    DeadlineExceededError,
    OpError,
)

__all__ = ["RemoteRendezvous", "task_of_device"]

_SLICE = 0.05


def task_of_device(device: str) -> tuple[str, int]:
    """("ps", 0) for "/job:ps/replica:0/task:0/device:CPU:0"."""
    job, task = None, 0
    for part in device.split("/"):
        if part.startswith("job:"):
            job = part[4:]
        elif part.startswith("task:"):
            task = int(part[5:])
    return job, task


class RemoteRendezvous(Rendezvous):
    """One step's rendezvous on one task.

    Args:
        step_id: the step (the same id on every task of the step).
        local_task: (job, task) of this task.
        resolve: (job, task) -> "host:port" of a peer task.
        channels: a ChannelCache for the pulls.
    """

    def __init__(self, step_id: int, local_task, resolve, channels):
        self.step_id = step_id
        self._local = local_task
        self._resolve = resolve
        self._channels = channels
        self._cv = threading.Condition()
        self._table: dict[str, tuple[object, bool]] = {}
        self._error: BaseException | None = None
        self._calls: set = set()
        self._prefetched: dict = {}
        self.steps: list = []  # the StepStates running here: an abort cancels their waits too
        self.waiters = 0  # pulls from other tasks waiting here
        self.running = 0  # RunGraph calls of this step running here
        self.touched = time.monotonic()

    # -- the interface exec's executors call ---------------------------------------------------

    def send(self, key: str, value, is_dead: bool) -> None:
        with self._cv:
            if self._error is not None:
                return
            if key in self._table:
                raise OpError(f"duplicate send for rendezvous key {key!r}")
            self._table[key] = (value, is_dead)
            self._cv.notify_all()

    def recv(self, key: str, step=None) -> tuple[object, bool]:
        src = key.split(";", 1)[0]
        if task_of_device(src) == self._local:
            deadline = step.deadline if step is not None else None
            return self.take(key, deadline, step.check_cancelled if step is not None else None)
        return self._pull(src, key, step)

    def abort(self, error: BaseException) -> None:
        with self._cv:
            if self._error is None:
                self._error = error if isinstance(error, OpError) else CancelledError(str(error))
            calls = list(self._calls)
            steps = list(self.steps)
            self._cv.notify_all()
        for c in calls:
            c.cancel()
        for st in steps:  # kernels waiting elsewhere (queues) see the step cancelled
            st.cancel(str(self._error.message if isinstance(self._error, OpError) else self._error))

    # -- serving and pulling -------------------------------------------------------------------

    @property
    def aborted(self) -> bool:
        return self._error is not None

    def idle(self) -> bool:
        with self._cv:
            return not self._table and not self.waiters and not self.running

    def take(self, key: str, deadline: float | None, check=None, alive=None):
        """Waits for `key` in the local table (until `deadline`, a time.monotonic() value)."""
        with self._cv:
            self.waiters += 1
            try:
                while True:
                    if self._error is not None:
                        raise self._error
                    item = self._table.pop(key, None)
                    if item is not None:
                        self.touched = time.monotonic()
                        return item
                    if check is not None:
                        check()
                    if alive is not None and not alive():
                        raise CancelledError(f"the receiver of {key!r} went away")
                    wait = _SLICE
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise DeadlineExceededError(
                                f"timed out waiting for rendezvous key {key!r} of step "
                                f"{self.step_id}"
                            )
                        wait = min(wait, left)
                    self._cv.wait(wait)
            finally:
                self.waiters -= 1

    def _start_pull(self, src: str, key: str, deadline):
        """Issues the RecvTensor for `key`: (future, request, address, task name, timeout)."""
        job, task = task_of_device(src)
        who = f"/job:{job}/replica:0/task:{task}"
        try:
            address = self._resolve(job, task)
        except Exception as e:  # noqa: BLE001 - an unknown task is the graph's fault
            raise OpError(f"cannot receive {key!r}: {e}") from None
        call = self._channels.unary(address, WORKER_SERVICE, "RecvTensor",
                                    worker_pb2.RecvTensorResponse)  # fmt: skip
        req = worker_pb2.RecvTensorRequest(step_id=self.step_id, rendezvous_key=key)
        req.transport_options.type_url = CHUNKS_OK
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        fut = call.future(req, timeout=timeout)
        with self._cv:
            if self._error is not None:
                fut.cancel()
                raise self._error
            self._calls.add(fut)
        return fut, req, address, who, timeout

    def prefetch(self, keys, deadline) -> None:
        """Starts the pulls of `keys` (a partition's root-frame _Recvs from other tasks) now, so
        they travel in parallel instead of one after another as the executor reaches them."""
        for key in keys:
            self._prefetched[key] = self._start_pull(key.split(";", 1)[0], key, deadline)

    def _pull(self, src: str, key: str, step):
        pending = self._prefetched.pop(key, None)
        if pending is None:
            deadline = step.deadline if step is not None else None
            pending = self._start_pull(src, key, deadline)
        fut, req, address, who, timeout = pending
        try:
            while True:
                try:
                    resp = fut.result(timeout=_SLICE)
                    break
                except grpc.FutureTimeoutError:
                    if self._error is not None:
                        fut.cancel()
                        raise self._error from None
                    if step is not None:
                        step.check_cancelled()
                except grpc.FutureCancelledError:
                    raise (self._error or CancelledError("the step was cancelled")) from None
                except grpc.RpcError as e:
                    if self._error is not None:
                        raise self._error from None
                    if e.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                        raise DeadlineExceededError(
                            f"timed out receiving {key!r} from {who} at {address}"
                        ) from None
                    raise error_from_rpc(e, who, address) from None
        finally:
            with self._cv:
                self._calls.discard(fut)
        if resp.is_dead:
            return None, True
        if resp.transport_options.type_url == CHUNKS_OK:
            return self._stream(address, who, req, resp.tensor, timeout), False
        return tensor_from_proto(resp.tensor), False

    def _stream(self, address, who, req, head, timeout):
        call = self._channels.stream(address, RILL_WORKER_SERVICE, "RecvTensorChunks",
                                     worker_pb2.RillTensorChunk)  # fmt: skip
        it = call(req, timeout=timeout)
        with self._cv:
            if self._error is not None:
                it.cancel()
                raise self._error
            self._calls.add(it)
        try:
            return receive_chunks(head, it)
        except grpc.RpcError as e:
            raise (self._error or error_from_rpc(e, who, address)) from None
        finally:
            with self._cv:
                self._calls.discard(it)
