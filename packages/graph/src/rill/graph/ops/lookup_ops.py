"""Lookup tables (tf.lookup): HashTableV2 (initialized once) and MutableHashTableV2 as resources,
with LookupTableFindV2, LookupTableInsertV2, LookupTableImportV2, LookupTableExportV2, LookupTableSizeV2,
InitializeTableV2 and InitializeTableFromTextFileV2.

>>> import rill.graph as rg
>>> with rg.Graph().as_default():
...     t = hash_table(rg.string, rg.int64, name="vocab")
...     init = initialize_table(t, rg.constant([b"a", b"b"]), rg.constant([0, 1], rg.int64))
...     ids = lookup(t, rg.placeholder(rg.string, [None]), rg.constant(-1, rg.int64))
>>> t.dtype, ids.dtype, ids.shape
(rill.resource, rill.int64, TensorShape([None]))
"""

from __future__ import annotations

from rill.graph import dtypes
from rill.graph.graph import Operation, Tensor, convert_to_tensor, get_default_graph
from rill.graph.op_def import defop
from rill.graph.shapes import TensorShape

__all__ = ["hash_table", "mutable_hash_table", "lookup", "insert", "size", "initialize_table",
           "initialize_table_from_text_file"]  # fmt: skip

_TABLE_ATTRS = ["container: string = ''", "shared_name: string = ''",
                "use_node_name_sharing: bool = false", "key_dtype: type", "value_dtype: type"]  # fmt: skip


def _scalar(op):
    return [TensorShape([])]


def _check_handle(op):
    h = op._inputs[0].shape
    if h.rank not in (None, 0):
        raise ValueError(f"table_handle must be a scalar, got shape {h}")


def _find_shape(op):
    _check_handle(op)
    return [op._inputs[1].shape]


def _no_outputs(op):
    _check_handle(op)
    return []


defop("HashTableV2", outputs=["table_handle: resource"], attrs=_TABLE_ATTRS, shape=_scalar,
      stateful=True, doc="An immutable hash table, filled once by an initializer.")  # fmt: skip
defop("MutableHashTableV2", outputs=["table_handle: resource"], attrs=_TABLE_ATTRS,
      shape=_scalar, stateful=True, doc="A hash table that LookupTableInsertV2 updates.")  # fmt: skip
defop(
    "LookupTableFindV2",
    inputs=["table_handle: resource", "keys: Tin", "default_value: Tout"],
    outputs=["values: Tout"],
    attrs=["Tin: type", "Tout: type"],
    shape=_find_shape,
    stateful=True,
    doc="The value of each key, default_value for keys not in the table.",
)
defop(
    "LookupTableInsertV2",
    inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
    attrs=["Tin: type", "Tout: type"],
    shape=_no_outputs,
    stateful=True,
    doc="Adds or replaces key -> value pairs (mutable tables).",
)
defop(
    "LookupTableImportV2",
    inputs=["table_handle: resource", "keys: Tin", "values: Tout"],
    attrs=["Tin: type", "Tout: type"],
    shape=_no_outputs,
    stateful=True,
    doc="Replaces a table's contents with keys -> values (KeyValueTensorInitializer's op).",
)
defop(
    "LookupTableExportV2",
    inputs=["table_handle: resource"],
    outputs=["keys: Tkeys", "values: Tvalues"],
    attrs=["Tkeys: type", "Tvalues: type"],
    shape=lambda op: (_check_handle(op), [TensorShape([None]), TensorShape([None])])[1],
    stateful=True,
    doc="Every key and value of the table (in insertion order).",
)
defop(
    "LookupTableSizeV2",
    inputs=["table_handle: resource"],
    outputs=["size: int64"],
    shape=lambda op: (_check_handle(op), [TensorShape([])])[1],
    stateful=True,
    doc="The number of entries of the table.",
)
defop(
    "InitializeTableV2",
    inputs=["table_handle: resource", "keys: Tkey", "values: Tval"],
    attrs=["Tkey: type", "Tval: type"],
    shape=_no_outputs,
    stateful=True,
    doc="Fills a table with keys -> values (an immutable table only once).",
)
defop(
    "InitializeTableFromTextFileV2",
    inputs=["table_handle: resource", "filename: string"],
    attrs=["key_index: int >= -2", "value_index: int >= -2", "vocab_size: int >= -1 = -1",
           "delimiter: string = '\t'", "offset: int = 0"],
    shape=_no_outputs,
    stateful=True,
    doc="Fills a table from a text file: per line, the key and value are the fields key_index "
    "and value_index (-1: the line number, -2: the whole line).",
)  # fmt: skip


def _op(op_type, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def _table(op_type, key_dtype, value_dtype, shared_name, name) -> Tensor:
    attrs = {"key_dtype": dtypes.as_dtype(key_dtype), "value_dtype": dtypes.as_dtype(value_dtype),
             "shared_name": shared_name}  # fmt: skip
    return _op(op_type, [], attrs, name).outputs[0]


def hash_table(key_dtype, value_dtype, shared_name: str = "", name=None) -> Tensor:
    return _table("HashTableV2", key_dtype, value_dtype, shared_name, name)


def mutable_hash_table(key_dtype, value_dtype, shared_name: str = "", name=None) -> Tensor:
    return _table("MutableHashTableV2", key_dtype, value_dtype, shared_name, name)


def lookup(table, keys, default_value, name=None) -> Tensor:
    keys = convert_to_tensor(keys, name="keys")
    return _op("LookupTableFindV2", [table, keys, default_value], name=name).outputs[0]


def insert(table, keys, values, name=None) -> Operation:
    return _op("LookupTableInsertV2", [table, keys, values], name=name)


def size(table, name=None) -> Tensor:
    return _op("LookupTableSizeV2", [table], name=name).outputs[0]


def initialize_table(table, keys, values, name=None) -> Operation:
    return _op("InitializeTableV2", [table, keys, values], name=name)


def initialize_table_from_text_file(table, filename, key_index=-2, value_index=-1,
                                    vocab_size=-1, delimiter="\t", name=None) -> Operation:  # fmt: skip
    attrs = {"key_index": key_index, "value_index": value_index, "vocab_size": vocab_size,
             "delimiter": delimiter}  # fmt: skip
    filename = convert_to_tensor(filename, dtype=dtypes.string, name="filename")
    return _op("InitializeTableFromTextFileV2", [table, filename], attrs, name)
