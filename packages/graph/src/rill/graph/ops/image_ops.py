"""Image-layout ops: SpaceToDepth and DepthToSpace (blocks of pixels moved into channels and
back), NHWC or NCHW.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     x = rg.placeholder(rg.float32, [None, 4, 6, 3])
...     d = space_to_depth(x, 2)
...     s = depth_to_space(d, 2)
>>> d.shape, s.shape
(TensorShape([None, 2, 3, 12]), TensorShape([None, 4, 6, 3]))
"""

from __future__ import annotations

from rill.graph.graph import Tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, unknown_shape

__all__ = ["space_to_depth", "depth_to_space"]

_FORMAT = 'data_format: {"NHWC", "NCHW", "NCHW_VECT_C"} = "NHWC"'


def _blocks_shape(to_depth: bool):
    def shape(op):
        s = op._inputs[0].shape
        if s.rank is None:
            return [unknown_shape()]
        if s.rank != 4:
            raise ValueError(f"input must have rank 4, got shape {s}")
        b, fmt = op.attrs["block_size"], op.attrs["data_format"]
        if fmt == "NCHW_VECT_C":
            raise ValueError("data_format NCHW_VECT_C is not supported")
        n, h, w, c = (s[0], s[1], s[2], s[3]) if fmt == "NHWC" else (s[0], s[2], s[3], s[1])
        if to_depth:
            for what, d in (("height", h), ("width", w)):
                if d is not None and d % b:
                    raise ValueError(f"{what} {d} is not divisible by block_size {b}")
            h, w, c = (None if h is None else h // b, None if w is None else w // b,
                       None if c is None else c * b * b)  # fmt: skip
        else:
            if c is not None and c % (b * b):
                raise ValueError(f"depth {c} is not divisible by block_size² = {b * b}")
            h, w, c = (None if h is None else h * b, None if w is None else w * b,
                       None if c is None else c // (b * b))  # fmt: skip
        return [TensorShape([n, h, w, c] if fmt == "NHWC" else [n, c, h, w])]

    return shape


defop(
    "SpaceToDepth",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "block_size: int >= 2", _FORMAT],
    shape=_blocks_shape(True),
    doc="Each block_size × block_size block of pixels becomes one pixel with its values as "
    "channels (row-major within the block, then the channels).",
)
defop(
    "DepthToSpace",
    inputs=["input: T"],
    outputs=["output: T"],
    attrs=["T: type", "block_size: int >= 2", _FORMAT],
    shape=_blocks_shape(False),
    doc="The inverse of SpaceToDepth.",
)


def space_to_depth(input, block_size: int, data_format: str = "NHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"block_size": int(block_size), "data_format": data_format}
    return (
        get_default_graph()
        .create_op("SpaceToDepth", [input], attrs, name=name or "SpaceToDepth")
        .outputs[0]
    )


def depth_to_space(input, block_size: int, data_format: str = "NHWC", name=None) -> Tensor:  # noqa: A002
    attrs = {"block_size": int(block_size), "data_format": data_format}
    return (
        get_default_graph()
        .create_op("DepthToSpace", [input], attrs, name=name or "DepthToSpace")
        .outputs[0]
    )
