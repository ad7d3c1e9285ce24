"""Host-memory arguments of GPU kernels, as TensorFlow declares them with HostMemory(...):
small values a kernel reads on the host (shapes, axes, sizes, paddings, permutations) and the
shape-valued outputs of Shape/Size/Rank and friends."""

from __future__ import annotations

from rill.exec.memory_types import declare_host_memory

_INPUTS = {
    "BroadcastGradientArgs": ("s0", "s1"),
    "BroadcastTo": ("shape",),
    "ConcatOffset": ("concat_dim", "shape"),
    "ConcatV2": ("axis",),
    "ExpandDims": ("dim",),
    "Fill": ("dims",),
    "GatherV2": ("axis",),
    "MirrorPad": ("paddings",),
    "MirrorPadGrad": ("paddings",),
    "OneHot": ("depth",),
    "Pad": ("paddings",),
    "PadV2": ("paddings",),
    "Reshape": ("shape",),
    "ReverseV2": ("axis",),
    "Slice": ("begin", "size"),
    "Split": ("split_dim",),
    "SplitV": ("size_splits", "split_dim"),
    "StridedSlice": ("begin", "end", "strides"),
    "StridedSliceGrad": ("shape", "begin", "end", "strides"),
    "Tile": ("multiples",),
    "Transpose": ("perm",),
    "Sum": ("reduction_indices",),
    "Prod": ("reduction_indices",),
    "Mean": ("reduction_indices",),
    "Max": ("reduction_indices",),
    "Min": ("reduction_indices",),
    "All": ("reduction_indices",),
    "Any": ("reduction_indices",),
    "ArgMax": ("dimension",),
    "ArgMin": ("dimension",),
    "Cumsum": ("axis",),
    "Range": ("start", "limit", "delta"),
    "ScatterNd": ("shape",),
    "UnsortedSegmentSum": ("num_segments",),
    "Conv2DBackpropInput": ("input_sizes",),
    "Conv2DBackpropFilter": ("filter_sizes",),
    "AvgPoolGrad": ("orig_input_shape",),
    "RandomUniform": ("shape",),
    "RandomStandardNormal": ("shape",),
    "TruncatedNormal": ("shape",),
    "RandomUniformInt": ("shape", "minval", "maxval"),
    # TensorArrays and stacks: sizes and positions are read on the host.
    "TensorArrayV3": ("size",),
    "TensorArrayReadV3": ("index",),
    "TensorArrayWriteV3": ("index",),
    "TensorArrayGatherV3": ("indices",),
    "TensorArrayScatterV3": ("indices",),
    "TensorArraySplitV3": ("lengths",),
    "StackV2": ("max_size",),
}
_OUTPUTS = {
    "Shape": ("output",),
    "ShapeN": ("output",),
    "Size": ("output",),
    "Rank": ("output",),
    "BroadcastGradientArgs": ("r0", "r1"),
    "ConcatOffset": ("offset",),
    "TensorArraySizeV3": ("size",),
    "TensorArrayConcatV3": ("lengths",),
}

for _op, _names in _INPUTS.items():
    declare_host_memory(_op, inputs=_names)
for _op, _names in _OUTPUTS.items():
    declare_host_memory(_op, outputs=_names)
