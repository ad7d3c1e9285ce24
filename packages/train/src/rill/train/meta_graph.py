"""Meta graphs: a graph with its Saver and its collections in one file (TensorFlow's
MetaGraphDef, wire-compatible), as TF1 programs write next to their checkpoints and read back
with `tf.train.import_meta_graph` to restore a model without the code that built it.

    saver.save(sess, "ckpt/model")                   # also writes ckpt/model.meta
    with rg.Graph().as_default():
        saver = import_meta_graph("ckpt/model.meta")
        with Session() as sess:
            saver.restore(sess, "ckpt/model")
            sess.run("logits:0", {"x:0": batch})

Collections travel as TensorFlow writes them: tensors and operations by name, resource
variables as VariableDef messages (rebuilt as Variables over the imported ops, so
`global_variables()` and the optimizer's `var_list` work after import), strings, integers and
floats as lists. Other Python objects in a collection (queue runners, hooks) are skipped with a
warning, as TensorFlow does. A TensorFlow-made meta graph imports too; its reference variables
(VariableV2) are restored through its Saver's own ops but are not rebuilt as Variable objects.
"""

from __future__ import annotations

import logging

from rill.graph.errors import GraphValueError
from rill.graph.graph import Operation, Tensor, get_default_graph
from rill.graph.graph_def import import_graph_def
from rill.graph.meta_graph_io import (
    parse_message,
    read_meta_graph_file,
    write_meta_graph_file,
)
from rill.graph.ops.state_ops import Variable
from rill.graph.proto import meta_graph_pb2

__all__ = ["export_meta_graph", "import_meta_graph", "read_meta_graph_file"]

_log = logging.getLogger("rill.train.meta_graph")

# Collections whose bytes are VariableDef messages (TensorFlow's proto-function registry).
VARIABLE_COLLECTIONS = (
    "variables",
    "trainable_variables",
    "local_variables",
    "model_variables",
    "moving_average_variables",
    "global_step",
    "metric_variables",
    "trainable_resource_variables",
    "concatenated_variables",
)
META_GRAPH_VERSION = "v1.0"


def _variable_def(v: Variable) -> meta_graph_pb2.VariableDef:
    d = meta_graph_pb2.VariableDef(
        variable_name=v.name,
        initializer_name=v.initializer.name,
        snapshot_name=v._graph_element.name,
        is_resource=True,
        trainable=v.trainable,
    )
    if v.initial_value is not None:
        d.initial_value_name = v.initial_value.name
    return d


def _collection_def(key: str, items: list) -> meta_graph_pb2.CollectionDef | None:
    c = meta_graph_pb2.CollectionDef()
    if all(isinstance(x, Variable) for x in items):
        c.bytes_list.value.extend(_variable_def(v).SerializeToString() for v in items)
    elif all(isinstance(x, (Tensor, Operation)) for x in items):
        c.node_list.value.extend(x.name for x in items)
    elif all(isinstance(x, bytes) for x in items):
        c.bytes_list.value.extend(items)
    elif all(isinstance(x, str) for x in items):
        c.bytes_list.value.extend(x.encode() for x in items)
    elif all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        c.int64_list.value.extend(items)
    elif all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        c.float_list.value.extend(float(x) for x in items)
    else:
        kinds = sorted({type(x).__name__ for x in items})
        _log.warning("collection %r holds %s: not written to the meta graph", key, kinds)
        return None
    return c


def export_meta_graph(
    filename=None,
    meta_info_def=None,
    graph_def=None,
    saver_def=None,
    collection_list=None,
    as_text: bool = False,
    graph=None,
    export_scope=None,
    clear_devices: bool = False,
    clear_extraneous_savers: bool = False,
    strip_default_attrs: bool = False,
    save_debug_info: bool = False,
    **kwargs,
) -> meta_graph_pb2.MetaGraphDef:
    """The MetaGraphDef of `graph` (default: the default graph) with `saver_def` and the
    collections `collection_list` (default: all); written to `filename` when given (binary, or
    the text form with as_text)."""
    if export_scope is not None:
        raise NotImplementedError("export_meta_graph(export_scope=...) is not supported")
    g = graph if graph is not None else get_default_graph()
    m = meta_graph_pb2.MetaGraphDef()
    if meta_info_def is not None:
        m.meta_info_def.CopyFrom(meta_info_def)
    m.meta_info_def.meta_graph_version = m.meta_info_def.meta_graph_version or META_GRAPH_VERSION
    m.meta_info_def.tensorflow_version = m.meta_info_def.tensorflow_version or "1.15.0"
    m.meta_info_def.tensorflow_git_version = "rill"
    gd = graph_def if graph_def is not None else g.as_graph_def()
    m.graph_def.CopyFrom(gd)
    if clear_devices:
        for node in m.graph_def.node:
            node.device = ""
    if saver_def is not None:
        m.saver_def.CopyFrom(_saver_def_proto(saver_def))
    keys = collection_list if collection_list is not None else g.get_all_collection_keys()
    for key in keys:
        items = g.get_collection(key)
        if not items:
            continue
        c = _collection_def(key, items)
        if c is not None:
            m.collection_def[key].CopyFrom(c)
    if filename is not None:
        write_meta_graph_file(m, filename, as_text=as_text)
    return m


def _saver_def_proto(sd) -> meta_graph_pb2.SaverDef:
    if isinstance(sd, meta_graph_pb2.SaverDef):
        return sd
    return meta_graph_pb2.SaverDef(
        filename_tensor_name=sd.filename_tensor_name,
        save_tensor_name=sd.save_tensor_name,
        restore_op_name=sd.restore_op_name,
        max_to_keep=sd.max_to_keep,
        sharded=sd.sharded,
        keep_checkpoint_every_n_hours=sd.keep_checkpoint_every_n_hours,
        version=sd.version,
    )


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False, import_scope=None, **kwargs):
    """Imports a meta graph's graph and collections into the default graph and returns a Saver
    built from its SaverDef (None when it has none), as TensorFlow's import_meta_graph."""
    if isinstance(meta_graph_or_file, meta_graph_pb2.MetaGraphDef):
        m = meta_graph_or_file
    else:
        m = read_meta_graph_file(meta_graph_or_file)
    g = get_default_graph()
    gd = m.graph_def
    if clear_devices:
        gd = type(gd)()
        gd.CopyFrom(m.graph_def)
        for node in gd.node:
            node.device = ""
    import_graph_def(gd, name=import_scope or "")
    prefix = f"{import_scope}/" if import_scope else ""

    def element(name: str):
        return g.as_graph_element(prefix + name.lstrip("^"))

    variables: dict[str, Variable] = {}
    for key in sorted(m.collection_def):
        c = m.collection_def[key]
        kind = c.WhichOneof("kind")
        try:
            if kind == "node_list":
                for name in c.node_list.value:
                    g.add_to_collection(key, element(name))
            elif kind == "bytes_list" and key in VARIABLE_COLLECTIONS:
                for raw in c.bytes_list.value:
                    d = parse_message(meta_graph_pb2.VariableDef, raw, f"collection {key!r}")
                    v = _variable(d, element, variables)
                    if v is not None:
                        g.add_to_collection(key, v)
            elif kind == "bytes_list":
                for raw in c.bytes_list.value:
                    g.add_to_collection(key, raw)
            elif kind == "int64_list":
                for x in c.int64_list.value:
                    g.add_to_collection(key, int(x))
            elif kind == "float_list":
                for x in c.float_list.value:
                    g.add_to_collection(key, float(x))
        except GraphValueError:
            raise
        except (KeyError, ValueError) as e:
            raise GraphValueError(f"meta graph collection {key!r}: {e}") from None
    if not m.HasField("saver_def") or not m.saver_def.restore_op_name:
        return None
    from rill.train.saver import Saver  # the Saver module imports this one

    sd = meta_graph_pb2.SaverDef()
    sd.CopyFrom(m.saver_def)
    for field in ("filename_tensor_name", "save_tensor_name", "restore_op_name"):
        setattr(sd, field, prefix + getattr(sd, field))
    return Saver(saver_def=sd)


def _variable(d, element, seen: dict):
    if d.variable_name in seen:
        return seen[d.variable_name]
    handle = element(d.variable_name)
    if not isinstance(handle, Tensor) or handle.op.type != "VarHandleOp":
        # A reference variable (VariableV2, TensorFlow's TF1 default): its Saver's ops restore
        # it, but rill has no Python object for it.
        seen[d.variable_name] = None
        return None
    v = Variable._from_existing(
        handle,
        element(d.initializer_name),
        element(d.snapshot_name),
        element(d.initial_value_name) if d.initial_value_name else None,
        trainable=d.trainable,
    )
    seen[d.variable_name] = v
    return v
