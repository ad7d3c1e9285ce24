"""`QueueRunner` (TensorFlow-1's `tf.train.QueueRunner`): threads that run a queue's enqueue
ops until the input ends or a Coordinator asks them to stop, and `start_queue_runners`.

When every enqueue thread has ended because its input ran out (OutOfRangeError, or the queue
was closed), the runner closes the queue, so its consumers drain what is left and then get
OutOfRangeError. When the Coordinator asks to stop, the runner runs `cancel_op` (closing the
queue and cancelling pending enqueues), so no thread stays blocked on a full queue.
"""

from __future__ import annotations

import logging
import threading

from rill.graph.errors import CancelledError, OutOfRangeError
from rill.graph.graph import get_default_graph, get_default_session
from rill.train.variable_scope import GraphKeys

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]

_log = logging.getLogger("rill.train")


class QueueRunner:
    """Runs `enqueue_ops` (one thread each) for `queue`.

    Args:
        queue: the queue (a rill.graph QueueBase).
        enqueue_ops: the ops to run repeatedly; several ops run in parallel threads.
        close_op: run when every thread has ended (default: queue.close()).
        cancel_op: run when the Coordinator asks to stop (default:
            queue.close(cancel_pending_enqueues=True)).
        queue_closed_exception_types: errors that end a thread quietly (default:
            OutOfRangeError and CancelledError).
    """

    def __init__(self, queue=None, enqueue_ops=None, close_op=None, cancel_op=None,
                 queue_closed_exception_types=None):  # fmt: skip
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and at least one enqueue op")
        self._queue = queue
        self._enqueue_ops = list(enqueue_ops)
        self._close_op = close_op if close_op is not None else queue.close()
        self._cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        self._closed_types = tuple(
            queue_closed_exception_types or (OutOfRangeError, CancelledError)
        )
        self._lock = threading.Lock()
        self._runs_per_session: dict = {}
        self._exceptions: list = []

    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self) -> list:
        return list(self._enqueue_ops)

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def name(self) -> str:
        return self._queue.name

    @property
    def exceptions_raised(self) -> list:
        """The errors (other than the queue-closed ones) the threads hit."""
        return list(self._exceptions)

    def _run(self, sess, enqueue_op, coord) -> None:
        decremented = False
        try:
            while coord is None or not coord.should_stop():
                try:
                    sess.run(enqueue_op)
                except self._closed_types:
                    # The input ended: the last thread to end closes the queue.
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                    if last:
                        try:
                            sess.run(self._close_op)
                        except Exception as e:  # noqa: BLE001 - closing a closed session
                            _log.info("Ignored exception while closing the queue: %s", e)
                    return
        except Exception as e:  # noqa: BLE001 - handed to the Coordinator
            if coord is not None:
                coord.request_stop(e)
            else:
                _log.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess, coord) -> None:
        coord.wait_for_stop()
        try:
            sess.run(self._cancel_op)
        except Exception as e:  # noqa: BLE001 - the session may be closed already
            _log.info("Ignored exception while cancelling the queue: %s", e)

    def create_threads(self, sess, coord=None, daemon: bool = False, start: bool = False):
        """The threads that run the enqueue ops in `sess` (plus, with a Coordinator, one that
        cancels the queue when a stop is requested); started if `start`."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []  # already running in this session
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions = []
        threads = [
            threading.Thread(
                target=self._run,
                args=(sess, op, coord),
                daemon=daemon,
                name=f"QueueRunner-{self.name}-{i}",
            )  # fmt: skip
            for i, op in enumerate(self._enqueue_ops)
        ]
        if coord is not None:
            threads.append(
                threading.Thread(
                    target=self._close_on_stop,
                    args=(sess, coord),
                    daemon=True,
                    name=f"QueueRunner-{self.name}-cancel",
                )  # fmt: skip
            )
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if start:
                t.start()
        return threads


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Adds `qr` to the graph collection `collection` (`tf.train.add_queue_runner`)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(sess=None, coord=None, daemon: bool = True, start: bool = True,
                        collection: str = GraphKeys.QUEUE_RUNNERS) -> list:  # fmt: skip
    """Starts the threads of every QueueRunner in `collection` (`tf.train.start_queue_runners`).

    Raises:
        ValueError: no session given and none is the default.
    """
    sess = sess if sess is not None else get_default_session()
    if sess is None:
        raise ValueError(
            "Cannot start queue runners: no default session is registered. Use `with "
            "sess.as_default()` or pass an explicit session to start_queue_runners(sess=sess)"
        )
    threads = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
