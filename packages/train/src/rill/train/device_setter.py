"""Placement of variables on parameter-server tasks (TensorFlow-1's `tf.train.replica_device_setter`).

`replica_device_setter(...)` returns a device function for `Graph.device`: every op that holds
state (a variable handle, a hash table, an accumulator: `STANDARD_PS_OPS`) goes to a task of the
parameter-server job chosen by a strategy, every other op to the worker device. A device set
inside the scope wins field by field (`merge_devices`), as in TensorFlow.

Strategies are callables `op -> task index`:

- round robin (the default): tasks in turn, whatever the variable's size;
- `GreedyLoadBalancingStrategy(num_tasks, load_fn)`: the task with the least load so far, where
  `load_fn(op)` is the op's cost — `byte_size_load_fn`, the bytes of the variable, balances
  memory, and is what a model with one large embedding and many small layers should use.

`local_device_setter(n)` (rill) applies the same strategies to the devices of one process
(`/device:CPU:0..n-1`), so that a sharded model is placed and partitioned on one machine.

>>> import rill.graph as rg
>>> g = rg.Graph()
>>> with g.as_default(), g.device(replica_device_setter(ps_tasks=2)):
...     a = rg.Variable(1.0, name="a")
...     b = rg.Variable(2.0, name="b")
...     c = a + b
>>> a.device, b.device, c.op.device
('/job:ps/task:0', '/job:ps/task:1', '/job:worker')
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rill.graph.device import DeviceSpec

__all__ = [
    "STANDARD_PS_OPS",
    "GreedyLoadBalancingStrategy",
    "byte_size_load_fn",
    "local_device_setter",
    "replica_device_setter",
]

# The op types that own state and so live on a parameter server (TensorFlow's list).
STANDARD_PS_OPS = (
    "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable", "MutableHashTableV2",
    "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
    "MutableDenseHashTableV2", "VarHandleOp", "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp", "ResourceConditionalAccumulator",
    "DecisionTree", "TensorForest",
)  # fmt: skip

_log = logging.getLogger("rill.train")


class _RoundRobinStrategy:
    """Tasks 0, 1, ..., n-1, 0, ... in creation order."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op) -> int:
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """Places each op on the task with the least load so far (ties: the lowest index).

    Args:
        num_tasks: the number of parameter-server tasks.
        load_fn: `op -> float`, the load the op adds to its task (e.g. `byte_size_load_fn`).

    >>> import rill.graph as rg
    >>> g = rg.Graph()
    >>> greedy = GreedyLoadBalancingStrategy(2, byte_size_load_fn)
    >>> with g.as_default(), g.device(replica_device_setter(ps_tasks=2, ps_strategy=greedy)):
    ...     big = rg.Variable(rg.zeros([1000]), name="big")
    ...     small = [rg.Variable(0.0, name=f"s{i}") for i in range(3)]
    >>> big.device, [v.device for v in small], greedy.loads
    ('/job:ps/task:0', ['/job:ps/task:1', '/job:ps/task:1', '/job:ps/task:1'], [4000, 12])
    """

    def __init__(self, num_tasks: int, load_fn: Callable):
        if num_tasks < 1:
            raise ValueError(f"GreedyLoadBalancingStrategy needs num_tasks >= 1, got {num_tasks}")
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._loads = [0] * num_tasks

    @property
    def loads(self) -> list:
        """The load placed on each task so far."""
        return list(self._loads)

    def __call__(self, op) -> int:
        task = min(range(self._num_tasks), key=lambda i: (self._loads[i], i))
        self._loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op) -> int:
    """The bytes of the single output of a variable op (its declared `shape` attr when the
    output's static shape is not fully known).

    Raises:
        ValueError: the op has several outputs or its size is not known.
    """
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op.name} must have a single output to measure its size")
    out = op.outputs[0]
    shape, dtype = out.shape, out.dtype
    if op.type == "VarHandleOp":  # the output is a handle: the variable is its attrs
        shape, dtype = op.get_attr("shape"), op.get_attr("dtype")
    elif not shape.is_fully_defined() and "shape" in op.attrs:
        shape = op.get_attr("shape")
    if shape.rank is None or not shape.is_fully_defined():
        raise ValueError(
            f"Op {op.name} ({op.type}) has shape {shape}, not fully defined: its size in bytes "
            "is not known (give the variable a full shape, or use another load_fn)"
        )
    return shape.num_elements() * dtype.size


class _ReplicaDeviceChooser:
    """The device function: state ops to a chosen PS task (or device), the rest to the worker."""

    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy,
                 field="task"):  # fmt: skip
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = frozenset(ps_ops)
        self._ps_strategy = ps_strategy
        self._field = field

    def device_function(self, op) -> str:
        current = DeviceSpec.from_string(op.device or "")
        if not self._merge_devices and not current.is_empty:
            return current.to_string()
        if self._ps_tasks and self._ps_device and op.type in self._ps_ops:
            ps = DeviceSpec.from_string(self._ps_device)
            if self._field == "task":
                # Only choose a task when the op is not pinned to another job.
                if ps.job and (current.job is None or current.job == ps.job):
                    ps = DeviceSpec(ps.job, ps.replica, self._ps_strategy(op),
                                    ps.device_type, ps.device_index)  # fmt: skip
            elif current.device_index is None:
                ps = DeviceSpec(ps.job, ps.replica, ps.task, ps.device_type or "CPU",
                                self._ps_strategy(op))  # fmt: skip
            return ps.merged(current).to_string()
        return DeviceSpec.from_string(self._worker_device or "").merged(current).to_string()


def _cluster_dict(cluster) -> dict:
    if hasattr(cluster, "as_dict"):
        cluster = cluster.as_dict()
    if not isinstance(cluster, dict):
        raise TypeError(
            "cluster must be a dict {job: [addresses] or {index: address}} or have as_dict() "
            f"(a ClusterSpec), got {type(cluster).__name__}"
        )
    return cluster


def replica_device_setter(
    ps_tasks: int = 0,
    ps_device: str = "/job:ps",
    worker_device: str = "/job:worker",
    merge_devices: bool = True,
    cluster=None,
    ps_ops=None,
    ps_strategy: Callable | None = None,
):
    """A device function placing variables on PS tasks and every other op on the worker.

    Args:
        ps_tasks: the number of PS tasks (ignored when `cluster` is given).
        ps_device: the PS job's device ("/job:ps"); the chosen task fills its task field.
        worker_device: the device of ops that are not variables ("/job:worker").
        merge_devices: a device set on the op (by an inner scope) wins field by field; when
            False an op with any device keeps it unchanged.
        cluster: a dict `{job: [addresses]}` or anything with `as_dict()` (a ClusterSpec): the
            number of PS tasks is the size of ps_device's job in it.
        ps_ops: the op types placed on PS tasks (default `STANDARD_PS_OPS`).
        ps_strategy: `op -> task index` (default: round robin; see
            `GreedyLoadBalancingStrategy`).

    Returns:
        The device function, or None when there is no PS task (then `g.device(None)` is the
        caller's choice, as in TensorFlow).

    Raises:
        TypeError: ps_strategy is not callable or cluster is not a cluster.
    """
    if cluster is not None:
        jobs = _cluster_dict(cluster)
        ps_job = DeviceSpec.from_string(ps_device).job
        if not jobs.get(ps_job):
            return None
        ps_tasks = len(jobs[ps_job])
    if ps_tasks == 0:
        return None
    if not merge_devices:
        _log.warning(
            "replica_device_setter(merge_devices=False): ops with a device keep it unchanged"
        )
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError(f"ps_strategy must be callable, got {ps_strategy!r}")
    chooser = _ReplicaDeviceChooser(
        ps_tasks, ps_device, worker_device, merge_devices, ps_ops or STANDARD_PS_OPS, ps_strategy
    )
    return chooser.device_function


def local_device_setter(
    num_devices: int,
    device_type: str = "CPU",
    worker_device: str | None = None,
    ps_ops=None,
    ps_strategy: Callable | None = None,
):
    """(rill) `replica_device_setter` over the devices of one process: variables go to
    `/device:<device_type>:<i>` with i chosen by the strategy (round robin by default), other ops
    to `worker_device` (default: wherever the placer puts them).

    >>> import rill.graph as rg
    >>> g = rg.Graph()
    >>> with g.as_default(), g.device(local_device_setter(3)):
    ...     vs = [rg.Variable(0.0, name=f"v{i}") for i in range(4)]
    >>> [v.device for v in vs]
    ['/device:CPU:0', '/device:CPU:1', '/device:CPU:2', '/device:CPU:0']
    """
    if num_devices < 1:
        raise ValueError(f"local_device_setter needs num_devices >= 1, got {num_devices}")
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(num_devices)
    if not callable(ps_strategy):
        raise TypeError(f"ps_strategy must be callable, got {ps_strategy!r}")
    chooser = _ReplicaDeviceChooser(
        num_devices, f"/device:{device_type}", worker_device, True, ps_ops or STANDARD_PS_OPS,
        ps_strategy, field="device_index",
    )  # fmt: skip
    return chooser.device_function
