"""Partitioning: one subgraph per device, cut edges replaced by _Send/_Recv pairs.

A loop whose body spans devices gets, in every partition holding part of it, a control-loop
state machine (the control-flow paper §4.4, Figure 6):

    enter  = Enter(dummy, frame)          # joins the frame in this partition
    merge  = Merge(enter, next)           # one activation per iteration
    pred   = _Recv(LoopCond)              # the predicate, sent by the partition that computes it
    switch = Switch(merge, pred)
    next   = NextIteration(Identity(switch:1))

Every _Recv of that partition inside the frame takes a control edge from `merge`, so it runs in
the right frame and iteration, and the loop runs exactly as many iterations in every partition
without a central coordinator. Untaken branches send dead values, which _Recv passes on.
"""

from __future__ import annotations

import numpy as np

from rill.exec.plan.ir import PlanGraph, PlanNode
from rill.graph import dtypes
from rill.graph.errors import InvalidArgumentError

__all__ = ["Partition", "control_flow_info", "partition"]


class Partition:
    def __init__(self, device):
        self.device = device
        self.nodes: list[PlanNode] = []
        self.feeds: list[tuple[int, PlanNode]] = []  # (feed index, _Arg node)
        self.fetches: list[tuple[int, PlanNode, int]] = []  # (fetch index, node, output)
        self.targets: list[PlanNode] = []

    def has_control_flow(self) -> bool:
        from rill.exec.plan.ir import CONTROL_FLOW_OPS

        return any(n.type in CONTROL_FLOW_OPS for n in self.nodes)


def control_flow_info(pg: PlanGraph) -> dict[str, tuple[str | None, PlanNode | None]]:
    """Assigns `frame` and `parent_frame` to every node; returns {frame: (parent, LoopCond)}.

    A node's frame is the frame of its inputs: Enter's output is in its `frame_name` frame,
    Exit's output in the parent frame. `frame` is where the node itself runs.
    """
    frames: dict[str, tuple[str | None, PlanNode | None]] = {"": (None, None)}
    out_frame: dict[PlanNode, str] = {}
    for n in pg.topo_order():
        srcs = [s for s, _ in n.inputs if not (n.type == "Merge" and s.type == "NextIteration")]
        srcs += n.control_inputs
        frame = out_frame[srcs[0]] if srcs else ""
        for s in srcs[1:]:
            f = out_frame[s]
            if f != frame:
                raise InvalidArgumentError(
                    f"node {n.name} ({n.type}) has inputs from two control-flow frames "
                    f"({frame or 'root'!r} via {srcs[0].name}, {f or 'root'!r} via {s.name}); "
                    "a value from outside a loop must enter it through Enter",
                    op=n.op,
                )
        n.frame = frame
        n.parent_frame = frames[frame][0]
        if n.type == "Enter":
            child = n.attrs["frame_name"]
            if child in frames and frames[child][0] != frame:
                raise InvalidArgumentError(
                    f"frame {child!r} is entered from two different parent frames", op=n.op
                )
            frames.setdefault(child, (frame, None))
            out_frame[n] = child
        elif n.type == "Exit":
            parent = frames[frame][0]
            if parent is None:
                raise InvalidArgumentError(f"Exit {n.name} is not inside a loop", op=n.op)
            out_frame[n] = parent
        else:
            out_frame[n] = frame
        if n.type == "LoopCond":
            frames[frame] = (frames[frame][0], n)
    return frames


def _out_frame(n: PlanNode, frames) -> str:
    if n.type == "Enter":
        return n.attrs["frame_name"]
    if n.type == "Exit":
        return frames[n.frame][0]
    return n.frame


class _Builder:
    def __init__(self, pg: PlanGraph, frames):
        self.pg = pg
        self.frames = frames
        self.counter = 0
        self.sends: dict = {}  # (src, idx, dst device name) -> recv node

    def _new(self, name, type_, attrs, inputs, controls, out_dtypes, device, frame, op=None):
        n = PlanNode(name, type_, attrs, inputs, controls, out_dtypes, op=op)
        n.device = device
        n.frame = frame
        n.parent_frame = self.frames[frame][0] if frame in self.frames else None
        return self.pg.add(n)

    def edge(self, src: PlanNode, idx: int, dst_device) -> PlanNode:
        """The _Recv on dst_device carrying output `idx` of `src` (made once per device)."""
        key = (src.id, idx, dst_device.name)
        recv = self.sends.get(key)
        if recv is not None:
            return recv
        self.counter += 1
        dtype = src.out_dtypes[idx]
        tname = f"edge_{self.counter}_{src.name}:{idx}"
        frame = _out_frame(src, self.frames)
        attrs = {
            "tensor_name": tname,
            "send_device": src.device.name,
            "send_device_incarnation": 1,
            "recv_device": dst_device.name,
            "client_terminated": False,
        }
        self._new(f"{src.name}/_send_{self.counter}", "_Send", {"T": dtype, **attrs},
                  [(src, idx)], [], [], src.device, frame, op=src.op)  # fmt: skip
        recv = self._new(f"{src.name}/_recv_{self.counter}", "_Recv",
                         {"tensor_type": dtype, **attrs}, [], [], [dtype], dst_device, frame,
                         op=src.op)  # fmt: skip
        recv.out_shapes = [src.out_shapes[idx]] if src.out_shapes else None
        self.sends[key] = recv
        return recv

    def control_edge(self, src: PlanNode, dst_device) -> PlanNode:
        """A _Recv on dst_device that completes after `src` ran (a dummy tensor crosses)."""
        key = (src.id, "ctrl", dst_device.name)
        recv = self.sends.get(key)
        if recv is not None:
            return recv
        frame = _out_frame(src, self.frames) if src.type != "Exit" else src.frame
        dummy = self._new(f"{src.name}/_ctrl_dummy", "Const",
                          {"value": np.zeros((), np.float32), "dtype": dtypes.float32},
                          [], [src], [dtypes.float32], src.device, frame, op=src.op)  # fmt: skip
        dummy.out_shapes = None
        recv = self.edge(dummy, 0, dst_device)
        self.sends[key] = recv
        return recv


def partition(pg: PlanGraph, frames) -> list[Partition]:
    """Splits a placed PlanGraph into per-device partitions (mutates pg's node list)."""
    b = _Builder(pg, frames)
    original = list(pg.nodes)
    for n in original:
        new_inputs = []
        for src, idx in n.inputs:
            if src.device is not n.device:
                new_inputs.append((b.edge(src, idx, n.device), 0))
            else:
                new_inputs.append((src, idx))
        n.inputs = new_inputs
        new_ctrl = []
        for c in n.control_inputs:
            new_ctrl.append(b.control_edge(c, n.device) if c.device is not n.device else c)
        n.control_inputs = new_ctrl
    _add_control_loops(pg, b, frames)
    # One global order, restricted to each partition, so that a partition never waits on a
    # _Recv whose _Send its peer would only reach after waiting on this partition.
    # A graph registered on a distributed worker also holds _Recvs whose _Send runs on another
    # task (or is the client's feed): only pairs present here constrain the order.
    sends = {n.attrs["tensor_name"]: n for n in pg.nodes if n.type == "_Send"}
    pairs = [
        (sends[n.attrs["tensor_name"]], n)
        for n in pg.nodes
        if n.type == "_Recv" and n.attrs["tensor_name"] in sends
    ]
    pg.nodes = pg.topo_order(pairs)
    pg.renumber()
    parts: dict[str, Partition] = {}
    for n in pg.nodes:
        parts.setdefault(n.device.name, Partition(n.device)).nodes.append(n)
    for i, a in enumerate(pg.feeds):
        parts.setdefault(a.device.name, Partition(a.device)).feeds.append((i, a))
    for i, (src, idx) in enumerate(pg.fetches):
        parts[src.device.name].fetches.append((i, src, idx))
    for t in pg.targets:
        parts[t.device.name].targets.append(t)
    return list(parts.values())


def _add_control_loops(pg: PlanGraph, b: _Builder, frames) -> None:
    # Which partitions hold nodes of which frame.
    by_frame: dict[str, set] = {}
    devices = {}
    for n in pg.nodes:
        if n.frame:
            by_frame.setdefault(n.frame, set()).add(n.device.name)
            devices[n.device.name] = n.device
    # A device that runs part of an inner loop takes part in every enclosing loop too.
    for f, devs in list(by_frame.items()):
        g = frames[f][0]
        while g:
            by_frame.setdefault(g, set()).update(devs)
            g = frames[g][0]
    spanning = {f for f, devs in by_frame.items() if len(devs) > 1}
    if not spanning:
        return

    # Outer frames first, so an inner control loop can enter from its outer one.
    def depth(f):
        d = 0
        while f:
            f = frames[f][0]
            d += 1
        return d

    pivots: dict[tuple[str, str], PlanNode] = {}  # (frame, device) -> control-loop Merge
    for frame in sorted(spanning, key=depth):
        parent, loop_cond = frames[frame]
        if loop_cond is None:
            raise InvalidArgumentError(
                f"frame {frame!r} spans devices {sorted(by_frame[frame])} but has no LoopCond"
            )
        enters = [n for n in pg.nodes if n.type == "Enter" and n.attrs["frame_name"] == frame]
        par_iters = enters[0].attrs["parallel_iterations"] if enters else 10
        for dev_name in sorted(by_frame[frame]):
            dev = devices[dev_name]
            tag = f"{frame}/_cloop_{dev.device_type}_{dev.index}"
            ctrl = []
            if parent:
                outer = pivots.get((parent, dev_name))
                if outer is None:
                    outer_nodes = [n for n in pg.nodes if n.frame == parent and n.device is dev]
                    if not outer_nodes:
                        raise InvalidArgumentError(
                            f"cannot build the control loop of {frame!r} on {dev_name}"
                        )
                    outer = outer_nodes[0]
                ctrl = [outer]
            dummy = b._new(f"{tag}/dummy", "Const",
                           {"value": np.zeros((), np.float32), "dtype": dtypes.float32},
                           [], ctrl, [dtypes.float32], dev, parent or "")  # fmt: skip
            enter = b._new(f"{tag}/enter", "Enter",
                           {"T": dtypes.float32, "frame_name": frame, "is_constant": False,
                            "parallel_iterations": par_iters},
                           [(dummy, 0)], [], [dtypes.float32], dev, parent or "")  # fmt: skip
            merge = b._new(f"{tag}/merge", "Merge", {"T": dtypes.float32, "N": 2},
                           [(enter, 0), (enter, 0)], [], [dtypes.float32, dtypes.int32],
                           dev, frame)  # fmt: skip
            if loop_cond.device is dev:
                pred = (loop_cond, 0)
            else:
                recv = b.edge(loop_cond, 0, dev)
                recv.control_inputs.append(merge)
                pred = (recv, 0)
            switch = b._new(f"{tag}/switch", "Switch", {"T": dtypes.float32},
                            [(merge, 0), pred], [], [dtypes.float32, dtypes.float32],
                            dev, frame)  # fmt: skip
            ident = b._new(f"{tag}/pivot", "Identity", {"T": dtypes.float32},
                           [(switch, 1)], [], [dtypes.float32], dev, frame)  # fmt: skip
            nxt = b._new(f"{tag}/next", "NextIteration", {"T": dtypes.float32},
                         [(ident, 0)], [], [dtypes.float32], dev, frame)  # fmt: skip
            merge.inputs[1] = (nxt, 0)
            pivots[(frame, dev_name)] = merge
        # Every _Recv inside the frame runs once per iteration, after its partition's merge.
        for n in pg.nodes:
            if n.type == "_Recv" and n.frame == frame and not n.control_inputs:
                n.control_inputs.append(pivots[(frame, n.device.name)])
    pg.renumber()
