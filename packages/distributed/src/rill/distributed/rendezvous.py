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
    InternalError,
    OpError,
)

__all__ = ["RemoteRendezvous", "task_of_device"]

_SLICE = 0.05
_NO_BATCH: set = set()  # addresses that answered RecvTensors with UNIMPLEMENTED
_FALLBACK = object()


class _Batch:
    """One RecvTensors stream: its call, the messages read ahead for other keys, its error."""

    __slots__ = ("it", "address", "who", "timeout", "left", "arrived", "reading", "error")

    def __init__(self, it, address, who, timeout, n):
        self.it, self.address, self.who, self.timeout, self.left = it, address, who, timeout, n
        self.arrived: dict = {}
        self.reading = False
        self.error = None


def _first(keys):
    return next(iter(keys))


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
        self._batched: dict = {}  # key -> _Batch: pulled with one RecvTensors stream per task
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

    def delivered(self, key: str) -> bool:
        """Whether a value for `key` is in this task's table already (a remote sender's value
        that a staged step's caller delivered with the request)."""
        with self._cv:
            return key in self._table

    def recv(self, key: str, step=None) -> tuple[object, bool]:
        src = key.split(";", 1)[0]
        if task_of_device(src) == self._local or key in self._table:
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
        return self.take_ready((key,), deadline, check, alive)[0][1:]

    def take_ready(self, keys, deadline: float | None, check=None, alive=None) -> list:
        """Waits until one of `keys` is in the local table, then takes every one of them that
        is: [(key, value, is_dead), ...]."""
        with self._cv:
            self.waiters += 1
            try:
                while True:
                    if self._error is not None:
                        raise self._error
                    got = []
                    for key in keys:
                        item = self._table.pop(key, None)
                        if item is not None:
                            got.append((key, item[0], item[1]))
                    if got:
                        self.touched = time.monotonic()
                        return got
                    if check is not None:
                        check()
                    if alive is not None and not alive():
                        raise CancelledError(f"the receiver of {_first(keys)!r} went away")
                    # A send or an abort notifies: the slice only bounds how late a
                    # cancellation seen by `check` / `alive` is noticed.
                    wait = _SLICE
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise DeadlineExceededError(
                                f"timed out waiting for rendezvous key {_first(keys)!r} of step "
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
        they travel in parallel instead of one after another as the executor reaches them.

        Several keys from one rill task travel in one RecvTensors stream (one RPC instead of
        one per key); a single key, or a task that does not serve the stream (a TensorFlow
        worker), gets TensorFlow's RecvTensor per key."""
        groups: dict = {}
        for key in keys:
            groups.setdefault(task_of_device(key.split(";", 1)[0]), []).append(key)
        for (job, task), group in groups.items():
            address = None
            if len(group) > 1:
                try:
                    address = self._resolve(job, task)
                except Exception:  # noqa: BLE001 - reported by the pull itself
                    address = None
            if address is None or address in _NO_BATCH:
                for key in group:
                    self._prefetched[key] = self._start_pull(key.split(";", 1)[0], key, deadline)
                continue
            batch = self._start_batch(job, task, address, group, deadline)
            for key in group:
                self._batched[key] = batch

    def _start_batch(self, job, task, address, keys, deadline):
        call = self._channels.stream(address, RILL_WORKER_SERVICE, "RecvTensors",
                                     worker_pb2.RillRecvTensorsResponse)  # fmt: skip
        req = worker_pb2.RillRecvTensorsRequest(step_id=self.step_id, rendezvous_key=keys)
        timeout = None if deadline is None else max(0.001, deadline - time.monotonic())
        it = call(req, timeout=timeout)
        with self._cv:
            if self._error is not None:
                it.cancel()
                raise self._error
            self._calls.add(it)
        return _Batch(it, address, f"/job:{job}/replica:0/task:{task}", timeout, len(keys))

    def _from_batch(self, batch, key: str, step):
        """`key`'s value from its RecvTensors stream (None: pull it by itself). Whichever
        receiver needs a value that has not arrived reads the stream; the others wait to be
        handed theirs (the reader notifies)."""
        deadline = step.deadline if step is not None else None
        while True:
            with self._cv:
                while True:
                    if self._error is not None:
                        raise self._error
                    msg = batch.arrived.pop(key, None)
                    if msg is not None:
                        self._batched.pop(key, None)
                        break
                    if batch.error is _FALLBACK:
                        self._batched.pop(key, None)
                        return None
                    if batch.error is not None:
                        raise batch.error
                    if not batch.reading:
                        batch.reading = True
                        break
                    if step is not None:
                        step.check_cancelled()
                    wait = _SLICE  # bounds how late a cancellation seen by check is noticed
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise DeadlineExceededError(
                                f"timed out receiving {key!r} from {batch.who} at {batch.address}"
                            )
                        wait = min(wait, left)
                    self._cv.wait(wait)
            if msg is not None:
                break
            got = None
            try:
                got = self._read(batch)
            finally:
                with self._cv:
                    batch.reading = False
                    if got is not None:
                        for item in got.item:
                            batch.arrived[item.rendezvous_key] = item
                    self._cv.notify_all()
        if msg.is_dead:
            return (None, True)
        if msg.chunked:
            req = worker_pb2.RecvTensorRequest(step_id=self.step_id, rendezvous_key=key)
            return (self._stream(batch.address, batch.who, req, msg.tensor, batch.timeout), False)
        return (tensor_from_proto(msg.tensor), False)

    def _read(self, batch):
        """The stream's next message (None after an error, recorded in `batch.error`)."""
        try:
            msg = next(batch.it)
            batch.left -= len(msg.item)
            if batch.left <= 0:
                with self._cv:
                    self._calls.discard(batch.it)
            return msg
        except StopIteration:
            err = InternalError(f"{batch.who} at {batch.address} ended a RecvTensors stream "
                                f"of step {self.step_id} early")  # fmt: skip
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                _NO_BATCH.add(batch.address)  # not a rill task: pull key by key
                err = _FALLBACK
            elif e.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                err = DeadlineExceededError(
                    f"timed out receiving from {batch.who} at {batch.address}"
                )
            else:
                err = self._error or error_from_rpc(e, batch.who, batch.address)
        with self._cv:
            self._calls.discard(batch.it)
            batch.error = err
        return None

    def _pull(self, src: str, key: str, step):
        batch = self._batched.get(key)
        if batch is not None:
            got = self._from_batch(batch, key, step)
            if got is not None:
                return got
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
        call = self._channels.stream(address, RILL_WORKER_SERVICE, "RecvTensorChunks", None)
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
