"""String ops: StringJoin, StringSplitV2, Substr, RegexReplace, StaticRegexReplace,
StringToHashBucketStrong, AsString, StringToNumber, StringLength, StringLower, StringUpper,
ReduceJoin, DecodeRaw and DecodeCSV. Strings are bytes (numpy object arrays at run time).

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     s = rg.placeholder(rg.string, [None])
...     j = string_join([s, rg.constant(b"!")], separator="-")
...     n = string_to_number(s, rg.int32)
>>> j.shape, n.dtype
(TensorShape([None]), rill.int32)
"""

from __future__ import annotations

from rill.graph import dtypes, shape_fns
from rill.graph.graph import Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape, broadcast_shapes, unknown_shape
from rill.graph.tensor_util import constant_value

__all__ = [
    "string_join", "string_split_v2", "substr", "regex_replace", "string_to_hash_bucket_strong",
    "as_string", "string_to_number", "string_length", "string_lower", "string_upper",
    "reduce_join", "decode_raw", "decode_csv",
]  # fmt: skip

_UNIT = "unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'"


def _broadcast_all(op):
    out = TensorShape([])
    for t in op._inputs:
        try:
            out = broadcast_shapes(out, t.shape)
        except ValueError:
            raise ValueError(
                f"inputs must be scalars or broadcast to one shape, got "
                f"{', '.join(str(x.shape) for x in op._inputs)}"
            ) from None
    return [out]


defop("StringJoin", inputs=["inputs: N * string"], outputs=["output: string"],
      attrs=["N: int >= 0", "separator: string = ''"], shape=_broadcast_all,
      doc="The inputs joined elementwise with separator (scalars broadcast).")  # fmt: skip


def _split_shape(op):
    return [TensorShape([None, 2]), TensorShape([None]), TensorShape([2])]


defop("StringSplitV2", inputs=["input: string", "sep: string"],
      outputs=["indices: int64", "values: string", "shape: int64"],
      attrs=["maxsplit: int = -1"], shape=_split_shape,
      doc="Each string of a vector split on sep (on runs of whitespace when sep is empty), as a "
      "sparse matrix: row i holds the pieces of input[i].")  # fmt: skip
defop("Substr", inputs=["input: string", "pos: T", "len: T"], outputs=["output: string"],
      attrs=["T: {int32, int64}", _UNIT], shape=_broadcast_all,
      doc="input[pos : pos + len] in bytes or UTF-8 characters; a negative pos counts from the "
      "end.")  # fmt: skip
defop("RegexReplace", inputs=["input: string", "pattern: string", "rewrite: string"],
      outputs=["output: string"], attrs=["replace_global: bool = true"],
      shape=lambda op: [op._inputs[0].shape],
      doc="Matches of pattern replaced by rewrite (\\1 for groups); all or only the first.")  # fmt: skip
defop("StaticRegexReplace", inputs=["input: string"], outputs=["output: string"],
      attrs=["pattern: string", "rewrite: string", "replace_global: bool = true"],
      shape=shape_fns.unchanged, doc="RegexReplace with the pattern and rewrite as attrs.")  # fmt: skip
defop("RegexFullMatch", inputs=["input: string", "pattern: string"], outputs=["output: bool"],
      shape=lambda op: [op._inputs[0].shape],
      doc="Whether each whole string matches the (scalar) regular expression.")  # fmt: skip
defop("StaticRegexFullMatch", inputs=["input: string"], outputs=["output: bool"],
      attrs=["pattern: string"], shape=shape_fns.unchanged,
      doc="RegexFullMatch with the pattern as an attr (TensorFlow's Saver builds one).")  # fmt: skip
defop("StringToHashBucketStrong", inputs=["input: string"], outputs=["output: int64"],
      attrs=["num_buckets: int >= 1", "key: list(int)"], shape=shape_fns.unchanged,
      doc="SipHash-2-4 of each string under the 128-bit key, modulo num_buckets.")  # fmt: skip
defop("AsString", inputs=["input: T"], outputs=["output: string"],
      attrs=["T: {float32, float64, int32, uint8, int16, int8, int64, bfloat16, uint16, float16, "
             "uint32, uint64, complex64, complex128, bool, variant, string}",
             "precision: int = -1", "scientific: bool = false", "shortest: bool = false",
             "width: int = -1", "fill: string = ''"],
      shape=shape_fns.unchanged, doc="Each element formatted as text (printf-style).")  # fmt: skip
defop("StringToNumber", inputs=["string_tensor: string"], outputs=["output: out_type"],
      attrs=["out_type: {float32, float64, int32, int64, uint32, uint64} = float32"],
      shape=shape_fns.unchanged, doc="Each string parsed as a number of out_type.")  # fmt: skip
defop("StringLength", inputs=["input: string"], outputs=["output: int32"], attrs=[_UNIT],
      shape=shape_fns.unchanged, doc="The length of each string in bytes or UTF-8 characters.")  # fmt: skip
defop("StringLower", inputs=["input: string"], outputs=["output: string"],
      attrs=["encoding: string = ''"], shape=shape_fns.unchanged,
      doc="Each string in lower case (ASCII letters, or all of UTF-8 with encoding 'utf-8').")  # fmt: skip
defop("StringUpper", inputs=["input: string"], outputs=["output: string"],
      attrs=["encoding: string = ''"], shape=shape_fns.unchanged,
      doc="Each string in upper case (ASCII letters, or all of UTF-8 with encoding 'utf-8').")  # fmt: skip


def _reduce_join_shape(op):
    s = op._inputs[0].shape
    axes = constant_value(op._inputs[1])
    if s.rank is None or axes is None:
        return [unknown_shape()]
    axes = {int(a) % s.rank if s.rank else 0 for a in list(axes.reshape(-1))}
    if op.attrs["keep_dims"]:
        return [TensorShape([1 if i in axes else d for i, d in enumerate(s.dims)])]
    return [TensorShape([d for i, d in enumerate(s.dims) if i not in axes])]


defop("ReduceJoin", inputs=["inputs: string", "reduction_indices: int32"],
      outputs=["output: string"], attrs=["keep_dims: bool = false", "separator: string = ''"],
      shape=_reduce_join_shape, doc="The strings joined with separator along the given axes.")  # fmt: skip
defop("DecodeRaw", inputs=["bytes: string"], outputs=["output: out_type"],
      attrs=["out_type: {float16, float32, float64, int32, uint16, uint8, int16, int8, int64, "
             "complex64, complex128, bool, bfloat16}", "little_endian: bool = true"],
      shape=lambda op: [op._inputs[0].shape.concatenate([None])
                        if op._inputs[0].shape.rank is not None else unknown_shape()],
      doc="The bytes of each string reinterpreted as a vector of out_type (all strings must "
      "have one length).")  # fmt: skip
defop("DecodeCSV", inputs=["records: string", "record_defaults: OUT_TYPE"],
      outputs=["output: OUT_TYPE"],
      attrs=["OUT_TYPE: list({float32, float64, int32, int64, string}) >= 1",
             "field_delim: string = ','", "use_quote_delim: bool = true", "na_value: string = ''",
             "select_cols: list(int) = []"],
      shape=lambda op: [op._inputs[0].shape] * len(op.attrs["OUT_TYPE"]),
      doc="Each CSV record split into its columns, parsed as OUT_TYPE; an empty field (or "
      "na_value) takes the column's default, and a column without a default is required.")  # fmt: skip


# -- builders -------------------------------------------------------------------------------------


def _op(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def _s(x, name="input"):
    return convert_to_tensor(x, dtype=dtypes.string, name=name)


def string_join(inputs, separator: str = "", name=None) -> Tensor:
    return _op("StringJoin", [[_s(x, f"input_{i}") for i, x in enumerate(inputs)]],
               {"separator": separator}, name).outputs[0]  # fmt: skip


def string_split_v2(input, sep=b"", maxsplit: int = -1, name=None):  # noqa: A002
    op = _op("StringSplitV2", [_s(input), _s(sep, "sep")], {"maxsplit": maxsplit}, name)
    return tuple(op.outputs)


def substr(input, pos, len, unit: str = "BYTE", name=None) -> Tensor:  # noqa: A002
    return _op("Substr", [_s(input), pos, len], {"unit": unit}, name).outputs[0]


def regex_replace(input, pattern: str, rewrite: str, replace_global: bool = True, name=None):  # noqa: A002
    attrs = {"pattern": pattern, "rewrite": rewrite, "replace_global": replace_global}
    return _op("StaticRegexReplace", [_s(input)], attrs, name).outputs[0]


def string_to_hash_bucket_strong(input, num_buckets: int, key, name=None) -> Tensor:  # noqa: A002
    attrs = {"num_buckets": int(num_buckets), "key": tuple(int(k) for k in key)}
    return _op("StringToHashBucketStrong", [_s(input)], attrs, name).outputs[0]


def as_string(input, precision=-1, scientific=False, shortest=False, width=-1, fill="",  # noqa: A002
              name=None) -> Tensor:  # fmt: skip
    attrs = {"precision": precision, "scientific": scientific, "shortest": shortest,
             "width": width, "fill": fill}  # fmt: skip
    return _op("AsString", [input], attrs, name).outputs[0]


def string_to_number(string_tensor, out_type=dtypes.float32, name=None) -> Tensor:
    return _op("StringToNumber", [_s(string_tensor)],
               {"out_type": dtypes.as_dtype(out_type)}, name).outputs[0]  # fmt: skip


def string_length(input, unit: str = "BYTE", name=None) -> Tensor:  # noqa: A002
    return _op("StringLength", [_s(input)], {"unit": unit}, name).outputs[0]


def string_lower(input, encoding: str = "", name=None) -> Tensor:  # noqa: A002
    return _op("StringLower", [_s(input)], {"encoding": encoding}, name).outputs[0]


def string_upper(input, encoding: str = "", name=None) -> Tensor:  # noqa: A002
    return _op("StringUpper", [_s(input)], {"encoding": encoding}, name).outputs[0]


def reduce_join(inputs, axis, keepdims: bool = False, separator: str = "", name=None) -> Tensor:
    axis = convert_to_tensor(axis, dtype=dtypes.int32, name="reduction_indices")
    attrs = {"keep_dims": keepdims, "separator": separator}
    return _op("ReduceJoin", [_s(inputs, "inputs"), axis], attrs, name).outputs[0]


def decode_raw(input_bytes, out_type, little_endian: bool = True, name=None) -> Tensor:
    attrs = {"out_type": dtypes.as_dtype(out_type), "little_endian": little_endian}
    return _op("DecodeRaw", [_s(input_bytes, "bytes")], attrs, name).outputs[0]


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, na_value="",
               select_cols=None, name=None) -> list:  # fmt: skip
    defaults = [convert_to_tensor(d, name=f"record_default_{i}")
                for i, d in enumerate(record_defaults)]  # fmt: skip
    attrs = {"field_delim": field_delim, "use_quote_delim": use_quote_delim,
             "na_value": na_value, "select_cols": tuple(select_cols or ())}  # fmt: skip
    return list(_op("DecodeCSV", [_s(records, "records"), defaults], attrs, name).outputs)
