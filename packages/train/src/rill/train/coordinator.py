"""`Coordinator` (TensorFlow-1's `tf.train.Coordinator`): lets threads ask each other to stop,
carries the first error a thread hit to the thread that joins them, and bounds the join.

>>> import threading
>>> coord = Coordinator()
>>> def worker():
...     with coord.stop_on_exception():
...         while not coord.should_stop():
...             coord.request_stop()
>>> t = threading.Thread(target=worker); t.start()
>>> coord.join([t], stop_grace_period_secs=5)
>>> coord.should_stop()
True
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

from rill.graph.errors import OutOfRangeError

__all__ = ["Coordinator"]

_log = logging.getLogger("rill.train")


class Coordinator:
    """A stop flag shared by threads, the first exception reported to it, and `join`.

    Args:
        clean_stop_exception_types: exceptions that stop the threads without being an error
            (default: OutOfRangeError, what a closed input queue raises at the end of the data).
    """

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info = None
        self._registered: set = set()
        self._joined = False

    def request_stop(self, ex=None) -> None:
        """Asks every thread to stop; an exception (or exc_info triple) given here is kept,
        unless it is a clean-stop type or one was already reported, and `join` re-raises it."""
        with self._lock:
            if ex is not None and self._exc_info is None:
                if isinstance(ex, tuple):
                    info = ex
                else:
                    info = (type(ex), ex, ex.__traceback__)
                if not issubclass(info[0], self._clean_stop_exception_types):
                    self._exc_info = info
                    _log.info("Error reported to Coordinator: %s", info[1])
            self._stop_event.set()

    def clear_stop(self) -> None:
        """Clears the stop request and any reported exception (to start threads again)."""
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """Reports any exception raised inside to `request_stop` (the thread then returns)."""
        try:
            yield
        except BaseException:  # noqa: BLE001 - every error is reported, clean stops included
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Waits until a stop is requested or `timeout` seconds pass; True if stopped."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._registered.add(thread)

    def join(self, threads=None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:  # fmt: skip
        """Waits for `threads` (and the registered ones) to end once a stop is requested,
        giving them `stop_grace_period_secs` after the request; then re-raises the exception a
        thread reported.

        Raises:
            RuntimeError: threads still running after the grace period (unless
                ignore_live_threads), naming them.
        """
        with self._lock:
            pending = set(threads or ()) | self._registered
        # Wait for all to end, or for a stop request (threads may end without asking to stop).
        while any(t.is_alive() for t in pending) and not self.wait_for_stop(0.1):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in pending:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in pending if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered.clear()
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])
        if alive and not ignore_live_threads:
            raise RuntimeError(
                f"Coordinator stopped with threads still running after {stop_grace_period_secs}"
                f" s: {' '.join(alive)}"
            )

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Re-raises the exception a thread reported, if any."""
        with self._lock:
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])
