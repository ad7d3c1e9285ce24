"""Internal ops that graph partitioning inserts: _Send and _Recv (names start with "_")."""

from __future__ import annotations

from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__: list[str] = []

_COMM_ATTRS = [
    "tensor_name: string",
    "send_device: string",
    "send_device_incarnation: int",
    "recv_device: string",
    "client_terminated: bool = false",
]

defop(
    "_Send",
    inputs=["tensor: T"],
    attrs=["T: type", *_COMM_ATTRS],
    shape=None,
    stateful=True,
    doc="Sends tensor (with its deadness) to the matching _Recv under rendezvous key tensor_name.",
)


defop(
    "_Recv",
    outputs=["tensor: tensor_type"],
    attrs=["tensor_type: type", *_COMM_ATTRS],
    shape=lambda op: TensorShape(None),
    stateful=True,
    doc="Receives the tensor sent by the matching _Send.",
)

defop(
    "_Arg",
    outputs=["output: T"],
    attrs=["T: type", "index: int >= 0"],
    shape=lambda op: TensorShape(None),
    stateful=True,
    doc="Argument `index` of a step: a fed value.",
)

defop(
    "_Retval",
    inputs=["input: T"],
    attrs=["T: type", "index: int >= 0"],
    shape=None,
    stateful=True,
    doc="Result `index` of a step: a fetched value.",
)


defop(
    "_JobDone",
    attrs=["reason: string = ''", "grace_secs: float = 2.0"],
    stateful=True,
    doc="rill's own: tells every task of the cluster that the job is finished (each stops "
    "serving after grace_secs). Run by the chief when training ends.",
)
