"""Where a model's state lives and what a step moves: per device (or per task), the variables
and their bytes, and — from a traced step — the bytes sent and received between devices.

    md = RunMetadata()
    sess.run(train_op, feeds, options=RunOptions(trace_level=RunOptions.FULL_TRACE,
                                                 output_partition_graphs=True),
             run_metadata=md)
    print(placement_report(graph, md))

Variables are placed where the step's partition graphs put their handles (the placer's
choice); without run metadata, where they were requested. The bytes moved are those of the
tensors each `_Recv` received in the traced step, counted as received by its device and sent by
the `_Send`'s device.
"""

from __future__ import annotations

import dataclasses

from rill.graph import dtypes
from rill.graph.device import DeviceSpec
from rill.graph.shapes import TensorShape

__all__ = ["DeviceUsage", "placement_report", "placement_summary"]


@dataclasses.dataclass
class DeviceUsage:
    """What one device (or task) holds and moved in the traced step."""

    device: str
    variables: list = dataclasses.field(default_factory=list)  # (name, bytes)
    sent_bytes: int = 0
    received_bytes: int = 0
    transfers_in: int = 0

    @property
    def variable_bytes(self) -> int:
        return sum(b for _, b in self.variables)


def _variable_bytes(op) -> int:
    shape, dtype = op.get_attr("shape"), op.get_attr("dtype")
    shape = shape if isinstance(shape, TensorShape) else TensorShape(shape)
    if shape.rank is None or not shape.is_fully_defined():
        return 0
    return shape.num_elements() * dtypes.as_dtype(dtype).size


def _key(device: str, by: str) -> str:
    if by == "device" or not device or device.startswith("("):
        return device
    spec = DeviceSpec.from_string(device)
    return DeviceSpec(spec.job, spec.replica, spec.task).to_string()


def placement_summary(graph, run_metadata=None, by: str = "device") -> dict[str, DeviceUsage]:
    """{device or task: DeviceUsage}, sorted by name.

    Args:
        graph: the graph whose variables (VarHandleOp ops) are counted.
        run_metadata: the RunMetadata of a step run with FULL_TRACE and
            output_partition_graphs (optional): gives the placed devices and the bytes moved.
        by: "device" or "task" (devices of one task added together).
    """
    if by not in ("device", "task"):
        raise ValueError(f'by must be "device" or "task", got {by!r}')
    placed: dict[str, str] = {}
    recv_from: dict[str, str] = {}
    if run_metadata is not None:
        for gd in run_metadata.partition_graphs:
            for node in gd.node:
                if node.op == "VarHandleOp":
                    placed[node.name] = node.device
                elif node.op == "_Recv":
                    recv_from[node.name] = node.attr["send_device"].s.decode()
    usage: dict[str, DeviceUsage] = {}

    def at(device: str) -> DeviceUsage:
        k = _key(device, by)
        if k not in usage:
            usage[k] = DeviceUsage(k)
        return usage[k]

    for op in graph.get_operations():
        if op.type == "VarHandleOp":
            device = placed.get(op.name) or op.device or "(not placed yet)"
            at(device).variables.append((op.name, _variable_bytes(op)))
    if run_metadata is not None:
        for dev in run_metadata.step_stats.dev_stats:
            for ns in dev.node_stats:
                sender = recv_from.get(ns.node_name)
                if sender is None:
                    continue
                nbytes = sum(o.tensor_description.allocation_description.requested_bytes
                             for o in ns.output)  # fmt: skip
                receiver = at(dev.device)
                if _key(sender, by) == receiver.device:
                    continue  # between devices of one task, when counting by task
                receiver.received_bytes += nbytes
                receiver.transfers_in += 1
                at(sender).sent_bytes += nbytes
    return dict(sorted(usage.items()))


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def placement_report(graph, run_metadata=None, by: str = "device", verbose: bool = False) -> str:
    """A table of placement_summary: per device (or task), the number of variables, their
    bytes, and the bytes sent and received in the traced step; `verbose` lists the variables.

    >>> import rill.graph as rg
    >>> g = rg.Graph()
    >>> with g.as_default():
    ...     with g.device("/job:ps/task:0"):
    ...         w = rg.Variable(rg.zeros([256, 4]), name="w")
    ...     with g.device("/job:ps/task:1"):
    ...         b = rg.Variable(rg.zeros([4]), name="b")
    >>> print(placement_report(g))
    device          variables  variable bytes  sent  received
    /job:ps/task:0          1         4.0 KiB     -         -
    /job:ps/task:1          1            16 B     -         -
    """
    summary = placement_summary(graph, run_metadata, by)
    traced = run_metadata is not None
    rows = [(by, "variables", "variable bytes", "sent", "received")]
    for k, u in summary.items():
        moved = (_size(u.sent_bytes), _size(u.received_bytes)) if traced else ("-", "-")
        rows.append((k, str(len(u.variables)), _size(u.variable_bytes), *moved))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if verbose and r is not rows[0]:
            lines += [f"    {name}: {_size(nbytes)}" for name, nbytes in summary[r[0]].variables]
    return "\n".join(lines)
