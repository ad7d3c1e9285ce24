"""Small TensorFlow ops that TF1 programs reach through top-level names: Rint, Cross,
UnravelIndex, EnsureShape, the file ops ReadFile / WriteFile, and the string ops StringStrip,
EncodeBase64 / DecodeBase64, StringToHashBucket (TensorFlow's legacy Hash64) and StringSplit
(TF1's split on any of the delimiter's characters, to a sparse result)."""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, as_shape, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = [
    "cross",
    "decode_base64",
    "encode_base64",
    "ensure_shape",
    "read_file",
    "rint",
    "string_split_v1",
    "string_strip",
    "string_to_hash_bucket",
    "unravel_index",
    "write_file",
]

_REAL = (
    "float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, uint32, uint64"
)


def _cross_shape(op):
    a, b = op._inputs[0].shape, op._inputs[1].shape
    if not a.is_compatible_with(b):
        raise ValueError(f"a and b must have the same shape, got {a} and {b}")
    s = a.merge_with(b)
    if s.rank is not None:
        if s.rank < 1 or (s.dims[-1] is not None and s.dims[-1] != 3):
            raise ValueError(f"the last dimension of a and b must be 3, got shape {s}")
    return [s]


def _unravel_shape(op):
    idx, dims = op._inputs[0].shape, op._inputs[1].shape
    n = dims.dims[0] if dims.rank == 1 else None
    if idx.rank is None:
        return [unknown_shape()]
    if idx.rank == 0:
        return [TensorShape([n])]
    return [TensorShape([n, idx.dims[0] if idx.rank == 1 else None])]


def _ensure_shape_shape(op):
    want, have = op.attrs["shape"], op._inputs[0].shape
    if not have.is_compatible_with(want):
        raise ValueError(f"input has shape {have}, which is not compatible with the expected "
                         f"shape {want}")  # fmt: skip
    return [have.merge_with(want)]


defop("Rint", inputs=["x: T"], outputs=["y: T"], attrs=["T: {bfloat16, float16, float32, float64}"],
      shape=shape_fns.unchanged,
      doc="x rounded to the nearest integer, halves to even. Elementwise.")  # fmt: skip
defop("Cross", inputs=["a: T", "b: T"], outputs=["product: T"], attrs=[f"T: {{{_REAL}}}"],
      shape=_cross_shape,
      doc="The cross product of the 3-vectors along the last dimension of a and b.")  # fmt: skip
defop("UnravelIndex", inputs=["indices: Tidx", "dims: Tidx"], outputs=["output: Tidx"],
      attrs=["Tidx: {int32, int64} = int32"], shape=_unravel_shape,
      doc="Flat indices into an array of shape dims as coordinates: [len(dims)] for a scalar, "
      "[len(dims), n] for n indices.")  # fmt: skip
defop("EnsureShape", inputs=["input: T"], outputs=["output: T"], attrs=["shape: shape", "T: type"],
      shape=_ensure_shape_shape,
      doc="input unchanged, after checking at run time that its shape matches shape.")  # fmt: skip
defop("ReadFile", inputs=["filename: string"], outputs=["contents: string"],
      shape=lambda op: [TensorShape([])], doc="The bytes of the named file.")  # fmt: skip
defop("WriteFile", inputs=["filename: string", "contents: string"], shape=None, stateful=True,
      doc="Writes contents to the named file, creating its directories.")  # fmt: skip
defop("StringStrip", inputs=["input: string"], outputs=["output: string"],
      shape=shape_fns.unchanged,
      doc="Each string without leading and trailing ASCII whitespace.")  # fmt: skip
defop("EncodeBase64", inputs=["input: string"], outputs=["output: string"],
      attrs=["pad: bool = false"], shape=shape_fns.unchanged,
      doc="Each string in web-safe base64 (- and _), '=' padding only when pad.")  # fmt: skip
defop("DecodeBase64", inputs=["input: string"], outputs=["output: string"],
      shape=shape_fns.unchanged,
      doc="Each web-safe base64 string decoded (padding optional).")  # fmt: skip
defop("StringToHashBucket", inputs=["string_tensor: string"], outputs=["output: int64"],
      attrs=["num_buckets: int >= 1"], shape=shape_fns.unchanged,
      doc="TensorFlow's Hash64 of each string modulo num_buckets (the legacy, unkeyed hash).")  # fmt: skip
defop("StringSplit", inputs=["input: string", "delimiter: string"],
      outputs=["indices: int64", "values: string", "shape: int64"],
      attrs=["skip_empty: bool = true"],
      shape=lambda op: [TensorShape([None, 2]), TensorShape([None]), TensorShape([2])],
      doc="Each string of a vector split at any character of delimiter (into characters for an "
      "empty delimiter), as a sparse [batch, longest] result.")  # fmt: skip


def _op(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def _s(x, name="input") -> Tensor:
    return convert_to_tensor(x, dtype=dtypes.string, name=name)


def rint(x, name=None) -> Tensor:
    """`tf.rint`: x rounded to the nearest integer, halves to even (2.5 -> 2, -1.5 -> -2)."""
    return _op("Rint", [convert_to_tensor(x, name="x")], name=name).outputs[0]


def cross(a, b, name=None) -> Tensor:
    """`tf.cross`: the pairwise cross product of 3-vectors in the last dimension."""
    a = convert_to_tensor(a, name="a")
    b = convert_to_tensor(b, dtype=a.dtype, name="b")
    return _op("Cross", [a, b], name=name).outputs[0]


def unravel_index(indices, dims, name=None) -> Tensor:
    """`tf.unravel_index`: np.unravel_index of flat indices, stacked (coordinates first)."""
    indices = convert_to_tensor(indices, name="indices")
    dims = convert_to_tensor(dims, dtype=indices.dtype, name="dims")
    return _op("UnravelIndex", [indices, dims], name=name).outputs[0]


def ensure_shape(x, shape, name=None) -> Tensor:
    """`tf.ensure_shape`: x, with its static shape refined to `shape` (None dims match
    anything) and checked again when it runs.

    Raises:
        ValueError: a static shape already incompatible with `shape`.
    """
    x = convert_to_tensor(x, name="x")
    return _op("EnsureShape", [x], {"shape": as_shape(shape)}, name).outputs[0]


def read_file(filename, name=None) -> Tensor:
    """`tf.read_file`: the contents of a file as a scalar string."""
    return _op("ReadFile", [_s(filename, "filename")], name=name).outputs[0]


def write_file(filename, contents, name=None):
    """`tf.write_file`: an op that writes the scalar string contents to filename."""
    return _op("WriteFile", [_s(filename, "filename"), _s(contents, "contents")], name=name)


def string_strip(input, name=None) -> Tensor:  # noqa: A002
    """`tf.string_strip`: each string without leading and trailing whitespace."""
    return _op("StringStrip", [_s(input)], name=name).outputs[0]


def encode_base64(input, pad=False, name=None) -> Tensor:  # noqa: A002
    """`tf.encode_base64`: web-safe base64, unpadded unless pad."""
    return _op("EncodeBase64", [_s(input)], {"pad": bool(pad)}, name).outputs[0]


def decode_base64(input, name=None) -> Tensor:  # noqa: A002
    """`tf.decode_base64`: the bytes of web-safe base64 strings."""
    return _op("DecodeBase64", [_s(input)], name=name).outputs[0]


def string_to_hash_bucket(string_tensor=None, num_buckets=None, name=None, input=None) -> Tensor:  # noqa: A002
    """`tf.string_to_hash_bucket`: TensorFlow's Hash64 of each string modulo num_buckets."""
    if string_tensor is not None and input is not None:
        raise ValueError("Cannot specify both 'input' and 'string_tensor'")
    x = input if input is not None else string_tensor
    if x is None or num_buckets is None:
        raise ValueError("string_to_hash_bucket needs string_tensor and num_buckets")
    return _op("StringToHashBucket", [_s(x, "string_tensor")], {"num_buckets": int(num_buckets)},
               name).outputs[0]  # fmt: skip


def string_split_v1(source, delimiter, skip_empty: bool = True, name=None):
    """The StringSplit op: (indices, values, dense_shape) of a vector of strings split at any
    character of the scalar delimiter."""
    source = _s(source, "source")
    if source.shape.rank not in (None, 1):
        raise ValueError(f"source must be a vector, got shape {source.shape}")
    delimiter = _s(delimiter, "delimiter")
    if constant_value(delimiter) is not None and constant_value(delimiter).ndim != 0:
        raise ValueError("delimiter must be a scalar")
    op = _op("StringSplit", [source, delimiter], {"skip_empty": bool(skip_empty)}, name)
    return tuple(op.outputs)
