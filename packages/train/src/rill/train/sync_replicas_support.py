"""SyncReplicasOptimizer's helpers: the chief's per-step record (`SyncStats`), its reports in
global step order, the packing of a replica's gradients for transfer, and the replica number
taken from a device."""

from __future__ import annotations

import re
import threading
import time

import numpy as np

from rill.autodiff import IndexedSlices
from rill.graph.ops.reshape_ops import concat, reshape, split

_TASK_RE = re.compile(r"/job:(?P<job>[^/]+).*?/task:(?P<task>\d+)")


class SyncStats:
    """What the chief's update loop has seen: global steps, contributors, stale drops."""

    def __init__(self):
        self.lock = threading.Lock()
        self.steps = 0
        self.dropped = 0
        self.contributions = None  # per replica, summed over steps
        self.last = None  # (global step, contributing replicas, stale dropped this step)
        self.history: list = []  # (global step, contributions per replica), the last 1000 steps

    def record(self, step: int, contributors: np.ndarray, dropped_total: int) -> tuple:
        with self.lock:
            new_drops = max(0, dropped_total - self.dropped)
            self.dropped = max(self.dropped, dropped_total)
            self.steps += 1
            counts = np.asarray(contributors, np.int64)
            self.contributions = (
                counts if self.contributions is None else self.contributions + counts
            )
            self.history.append((step, counts))
            del self.history[:-1000]
            who = [int(i) for i in np.flatnonzero(counts[:-1])]
            who += ["?"] * int(counts[-1])  # contributions of replicas with an unknown number
            self.last = (step, who, new_drops)
            return self.last


_UPDATES_IN_FLIGHT = 2
_REPORT_WAIT_S = 10.0
_HELD_MAX = 64


class _InOrder:
    """Hands the chief's update results to `report` in global step order (two updates in flight
    may return out of order); `last` is the global step before the first."""

    def __init__(self, last: int):
        self._lock = threading.Condition()
        self._last = last
        self._held: dict[int, dict] = {}

    def wait_for(self, step: int, alive, timeout: float = _REPORT_WAIT_S) -> None:
        """Waits (at most `timeout` s, and while alive() holds) until `step` is in."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while max([self._last, *self._held]) < step and alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._lock.wait(min(left, 0.1))

    def put(self, step: int, out: dict, report) -> None:
        with self._lock:
            if step <= self._last:  # later than steps already reported past a gap
                report(step, out)
                self._lock.notify_all()
                return
            self._held[step] = out
            while self._last + 1 in self._held:
                self._last += 1
                report(self._last, self._held.pop(self._last))
            # A missing step is normally one whose update has returned but whose loop has not
            # put it yet; the other loop may meanwhile finish several updates, so a gap waits
            # for that loop (each loop flushes when it ends, the last one to end) and is given
            # up only past _HELD_MAX held steps (the global step moved by something else).
            if len(self._held) >= _HELD_MAX:
                self.flush(report, locked=True)
            self._lock.notify_all()

    def flush(self, report, locked: bool = False) -> None:
        if not locked:
            with self._lock:
                return self.flush(report, locked=True)
        for step in sorted(self._held):
            report(step, self._held.pop(step))
            self._last = max(self._last, step)


def _packed(graph, grads_and_vars) -> list:
    """grads_and_vars with the dense gradients bound for one task sent as one tensor: flattened
    and joined where they are computed, split and reshaped beside their variables. The values are
    the same; a replica's step moves one tensor to each PS instead of one per variable (each
    transfer is an RPC of its own)."""
    groups: dict = {}
    for i, (g, v) in enumerate(grads_and_vars):
        if g is None or isinstance(g, IndexedSlices) or not v.shape.is_fully_defined():
            continue
        m = _TASK_RE.search(v.device or "")
        if m is None:
            continue  # no task: nothing to transfer
        groups.setdefault((m.group("job"), m.group("task"), g.dtype), []).append(i)
    out = list(grads_and_vars)
    for members in groups.values():
        if len(members) < 2:
            continue
        grads = [out[i][0] for i in members]
        shapes = [out[i][1].shape.as_list() for i in members]
        sizes = [int(np.prod(sh, dtype=np.int64)) for sh in shapes]
        with graph.name_scope("packed_gradients"):
            with graph.colocate_with(grads[0]):
                flat = concat([reshape(g, [-1]) for g in grads], 0)
            with graph.colocate_with(out[members[0]][1]):
                parts = split(flat, sizes, axis=0)
                for i, part, shape in zip(members, parts, shapes):
                    out[i] = (reshape(part, shape), out[i][1])
    return out


def _replica_from_devices(grads, total: int) -> int | None:
    for g in grads:
        dev = getattr(g, "device", "") or ""
        m = _TASK_RE.search(dev)
        if m and m.group("job") == "worker" and int(m.group("task")) < total:
            return int(m.group("task"))
    return None
