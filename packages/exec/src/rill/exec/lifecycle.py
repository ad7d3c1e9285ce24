"""Job completion: how a graph op tells the server hosting a device that the job is finished.

A server (rill.distributed) registers a listener for its task; the `_JobDone` kernel, run on a
device of that task, calls it. The listener decides what "finished" means for the server (tell
the other tasks, stop serving after a grace period). In a process with no server for the task (a
local Session) the op only logs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["job_done", "on_job_done", "task_of"]

_log = logging.getLogger("rill.exec.lifecycle")
_lock = threading.Lock()
_listeners: dict[str, Callable[[str, float], None]] = {}


def task_of(device_name: str) -> str:
    """ "/job:ps/replica:0/task:0" from "/job:ps/replica:0/task:0/device:CPU:0"."""
    head, sep, _ = device_name.partition("/device:")
    return head if sep else device_name


def on_job_done(task: str, listener: Callable[[str, float], None]) -> Callable[[], None]:
    """Registers `listener(reason, grace_secs)` for `task`; returns the function that removes it."""
    with _lock:
        _listeners[task] = listener

    def remove() -> None:
        with _lock:
            if _listeners.get(task) is listener:
                del _listeners[task]

    return remove


def job_done(device_name: str, reason: str, grace_secs: float) -> bool:
    """Tells the server of `device_name`'s task that the job is finished; False when no server
    listens for that task (a local session)."""
    task = task_of(device_name)
    with _lock:
        listener = _listeners.get(task)
    if listener is None:
        _log.info("job done (%s): no server hosts %s in this process", reason or "no reason", task)
        return False
    listener(reason, grace_secs)
    return True
