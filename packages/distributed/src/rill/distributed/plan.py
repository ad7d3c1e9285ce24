"""The master's step plans: one (feeds, fetches, targets) signature pruned, placed across the
cluster's devices and partitioned with rill.exec's plan pipeline, then cut into one partition
GraphDef per task.

Feeds become client-terminated `_Recv` nodes on the device of their first consumer, fetches
client-terminated `_Send` nodes after the fetched node; both keys are local to the task that
runs them, so the worker fills the feeds from `RunGraph.send` and returns the fetches in
`RunGraphResponse.recv`.
"""

from __future__ import annotations

from rill.exec.device import CpuDevice, Device
from rill.exec.plan.ir import prune
from rill.exec.plan.optimize import (
    eliminate_common_subexpressions,
    fold_constants,
    remove_dead_nodes,
)
from rill.exec.plan.partition import control_flow_info, partition
from rill.exec.plan.placer import place
from rill.exec.plan.remap import remap
from rill.exec.proto import config_pb2
from rill.exec.rendezvous import make_key
from rill.graph.device import DeviceSpec
from rill.graph.errors import InvalidArgumentError
from rill.graph.graph_def import _PRIVATE_ATTR_TYPES, GRAPH_DEF_VERSION, attr_to_proto
from rill.graph.proto import graph_pb2

__all__ = ["RemoteDevice", "TaskPart", "build_plan", "device_from_name", "local_devices"]


class RemoteDevice(Device):
    """A device of some task, as the master sees it (placement only; kernels run on workers)."""

    def __init__(self, device_type: str, index: int, job: str, task: int):
        self.device_type = device_type
        super().__init__(index, job=job, task=task)


def device_from_name(name: str, device_type: str) -> Device:
    spec = DeviceSpec.from_string(name)
    return RemoteDevice(device_type, spec.device_index or 0, spec.job, spec.task or 0)


class TaskPart:
    """The partition of one task: its GraphDef, where its feeds go and its fetches come from."""

    __slots__ = ("job", "task", "name", "graph_def", "feeds", "fetches", "handle", "address",
                 "dtypes")  # fmt: skip

    def __init__(self, job: str, task: int):
        self.job, self.task = job, task
        self.name = f"/job:{job}/replica:0/task:{task}"
        self.graph_def = graph_pb2.GraphDef()
        self.graph_def.versions.producer = GRAPH_DEF_VERSION
        self.feeds: list[tuple[int, str]] = []  # (feed index, rendezvous key)
        self.fetches: list[tuple[int, str]] = []  # (fetch index, rendezvous key)
        self.handle = ""
        self.address = ""
        self.dtypes: dict = {}  # node name -> its outputs' dtypes


def _attrs_into(nd, n) -> None:
    for k, v in n.attrs.items():
        a = n.op_def.attr(k) if n.op_def is not None else None
        nd.attr[k].CopyFrom(attr_to_proto(v, a.type if a else _PRIVATE_ATTR_TYPES.get(k)))


def build_plan(graph, feeds, fetches, targets, devices, config: config_pb2.ConfigProto):
    """{(job, task): TaskPart} for one step signature (feeds/fetches Tensors, targets ops)."""
    pg = prune(graph, feeds, fetches, targets)
    place(pg, devices, config.allow_soft_placement)
    consumers = pg.consumers()
    for arg in pg.feeds:
        uses = consumers.get(arg)
        if uses:
            arg.device = uses[0][0].device
    opt = config.graph_options.optimizer_options
    level1 = opt.opt_level == config_pb2.OptimizerOptions.L1
    if level1 or opt.do_common_subexpression_elimination:
        eliminate_common_subexpressions(pg)
    if level1 or opt.do_constant_folding:
        fold_constants(pg, CpuDevice(0), opt.max_folded_constant_in_bytes or (10 << 20))
    if not config.rill.disable_dead_code_elimination:
        remove_dead_nodes(pg)
    if not config.rill.disable_remapper:
        remap(pg)
    # Feed and fetch nodes get names a GraphDef reader accepts (no leading "_").
    for i, arg in enumerate(pg.feeds):
        arg.name = _unique(pg, f"rill_feed_{i}")
    frames = control_flow_info(pg)
    parts = partition(pg, frames)
    tasks: dict[tuple[str, int], TaskPart] = {}
    arg_index = {id(a): i for i, a in enumerate(pg.feeds)}
    for p in parts:
        dev = p.device
        tp = tasks.get((dev.job, dev.task))
        if tp is None:
            tp = tasks[(dev.job, dev.task)] = TaskPart(dev.job, dev.task)
        gd = tp.graph_def
        for n in p.nodes:
            if n.type == "_Arg":
                i = arg_index[id(n)]
                key_name = f"_feed_{i}"
                nd = gd.node.add(name=n.name, op="_Recv", device=dev.name)
                attrs = {
                    "tensor_type": n.attrs["T"],
                    "tensor_name": key_name,
                    "send_device": dev.name,
                    "send_device_incarnation": 1,
                    "recv_device": dev.name,
                    "client_terminated": True,
                }
                for k, v in attrs.items():
                    nd.attr[k].CopyFrom(attr_to_proto(v))
                nd.attr["tensor_type"].CopyFrom(attr_to_proto(n.attrs["T"], "type"))
                tp.feeds.append((i, make_key(dev.name, 1, dev.name, key_name)))
                continue
            nd = gd.node.add(name=n.name, op=n.type, device=n.device.name)
            tp.dtypes[n.name] = n.out_dtypes
            nd.input.extend(s.name if i == 0 else f"{s.name}:{i}" for s, i in n.inputs)
            nd.input.extend(f"^{c.name}" for c in n.control_inputs)
            _attrs_into(nd, n)
        for i, src, idx in p.fetches:
            key_name = f"_fetch_{i}"
            nd = gd.node.add(name=_unique(pg, f"rill_fetch_{i}"), op="_Send", device=dev.name)
            nd.input.append(src.name if idx == 0 else f"{src.name}:{idx}")
            nd.attr["T"].CopyFrom(attr_to_proto(src.out_dtypes[idx], "type"))
            for k, v in (("tensor_name", key_name), ("send_device", dev.name),
                         ("send_device_incarnation", 1), ("recv_device", dev.name),
                         ("client_terminated", True)):  # fmt: skip
                nd.attr[k].CopyFrom(attr_to_proto(v))
            tp.fetches.append((i, make_key(dev.name, 1, dev.name, key_name)))
    for (job, task), tp in tasks.items():
        if not tp.graph_def.node:
            raise InvalidArgumentError(f"empty partition for /job:{job}/task:{task}")
    return tasks


def _unique(pg, name: str) -> str:
    base, k = name, 0
    while name in pg._names:
        k += 1
        name = f"{base}_{k}"
    pg._names.add(name)
    return name


def local_devices(job: str, task: int, n_cpu: int) -> list:
    return [RemoteDevice("CPU", i, job, task) for i in range(n_cpu)]
